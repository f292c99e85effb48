"""What content capture costs on a huge tool result, and whether it blocks the event loop.

One run: a tool returns a result of ``--mb`` megabytes (a string, as a tool returning text
does), the model answers. Each figure is the best of ``--repeats`` runs with content capture
off and on, with the SDK recording every span in memory; the ratio is on/off in the same
process. Then, under ``arun``, a heartbeat task ticks every millisecond while the same run
goes on beside it (its model not reading the conversation): the longest gap between two ticks is the longest the event loop was
blocked, with capture off and on (the difference is capture's).

    python benchmarks/capture_cost.py [--mb 20] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracedagent import Agent, tool  # noqa: E402
from tracedagent.testing import FakeModel, Recorder, tool_call  # noqa: E402


def build(size: int, capture: bool, rec: Recorder, estimate: bool = True) -> Agent:
    result = "row,value\n" * (size // 10)  # built once: the tool's own cost is not measured

    @tool
    def dump(table: str) -> str:
        """Dumps a table."""
        return result

    # The model estimates its usage from the conversation it is sent, as a real provider reads
    # (and an SDK serialises) the 20 MB the tool returned: the run's cost without capture.
    # (The heartbeat turns that off: a model reading 20 MB in the event loop would block it itself.)
    model = FakeModel([tool_call("dump", {"table": "t"}), "done"], estimate_usage=estimate)
    return Agent(model, [dump], capture_content=capture, **rec.providers)


def best_of(size: int, capture: bool, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        rec = Recorder()
        agent = build(size, capture, rec)
        start = time.perf_counter()
        run = agent.run("dump it")
        times.append(time.perf_counter() - start)
        assert run.ok, run.output
    return min(times)


async def longest_gap(size: int, capture: bool) -> float:
    agent = build(size, capture, Recorder(), estimate=False)
    gaps = [0.0]
    done = False

    async def heartbeat() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.01)
    run = await agent.arun("dump it")
    done = True
    await beat
    assert run.ok, run.output
    return max(gaps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    size = int(args.mb * 1_000_000)
    off = best_of(size, False, args.repeats)
    on = best_of(size, True, args.repeats)
    print(f"run with a {args.mb:g} MB tool result, best of {args.repeats}:")
    print(f"  capture off  {off * 1000:9.2f} ms")
    print(f"  capture on   {on * 1000:9.2f} ms")
    print(f"  on/off = {on / off:.2f}")
    gap_off = asyncio.run(longest_gap(size, False))
    gap_on = asyncio.run(longest_gap(size, True))
    print("longest event-loop block under arun (1 ms heartbeat):")
    print(f"  capture off  {gap_off * 1000:9.2f} ms")
    print(f"  capture on   {gap_on * 1000:9.2f} ms")


if __name__ == "__main__":
    main()
