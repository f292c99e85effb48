"""What streaming costs: the driver's cost per chunk, and a streamed run's cost per step.

1. Per chunk: one model turn of --chunks text chunks (strings made beforehand), read three ways
   in the same process, taking turns within each repeat:
     bare     - the model's own ``stream`` generator iterated with nothing done per chunk;
     stream   - the same generator read through ``Agent.stream`` (one ``text_delta`` event a chunk);
     astream  - the same through ``Agent.astream`` (the model's ``astream``: an async generator,
                so its bare figure is an ``async for`` over it).
   The figure is (driver - bare) / chunks, the median over repeats with the middle half: what
   the driver adds per chunk (target <= 1 us). Tracing is on (an SDK TracerProvider whose
   processor drops spans): spans are per call, never per chunk, so it changes nothing here.
   Then the allocations: with every event kept, the memory blocks the driver left allocated per
   chunk (``sys.getallocatedblocks``; the event itself is one), and with none kept, net blocks
   per chunk after the turn (0: nothing grows per chunk but the list of the turn's text).

2. Per step: the 10-step agent of overhead.py (zero-latency FakeModel, a tool call a step, each
   turn's text in 4 chunks) through run and stream, and arun and astream, untraced; us per
   step and stream/run, astream/arun.

With --instructions, part 1 is also counted by valgrind (cachegrind): instructions per chunk
of each way, from two turns of different lengths in processes of their own (start-up taken
out), figures a busy machine cannot move.

Run: python benchmarks/streaming.py [--instructions]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import statistics
import subprocess
import sys
import time
from typing import Any, AsyncIterator, Callable, Iterator

from opentelemetry.sdk.trace import TracerProvider

from tracedagent import Agent, Budget, Completion, ToolCall, TurnEnd, Usage, tool
from tracedagent.testing import FakeModel


class Chunks:
    """A model whose one turn is ``chunks``, made beforehand (so that reading them allocates nothing)."""

    provider_name = "bench"

    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks
        self.end = TurnEnd(usage=Usage(input_tokens=1, output_tokens=1), finish_reason="stop")

    def complete(self, *args: Any, **kwargs: Any) -> Completion:
        raise AssertionError("streamed")

    def stream(self, messages: Any, tools: Any = None, max_output_tokens: Any = None,
               temperature: Any = None) -> Iterator[Any]:
        yield from self.chunks
        yield self.end

    async def astream(self, messages: Any, tools: Any = None, max_output_tokens: Any = None,
                      temperature: Any = None) -> AsyncIterator[Any]:
        for chunk in self.chunks:
            yield chunk
        yield self.end


def _bare(model: Chunks) -> None:
    for _ in model.stream([]):
        pass


async def _abare(model: Chunks) -> None:
    async for _ in model.astream([]):
        pass


def _stream(agent: Agent, keep: list | None = None) -> None:
    with agent.stream("go") as stream:
        if keep is None:
            for _ in stream:
                pass
        else:
            keep.extend(stream)


async def _astream(agent: Agent) -> None:
    async with agent.astream("go") as stream:
        async for _ in stream:
            pass


def _timed(fn: Callable[[], Any]) -> float:
    gc.collect()
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _summary(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{statistics.median(values):.3f} us (middle half {q[0]:.3f}-{q[2]:.3f})"


def per_chunk(chunks: int, repeats: int) -> None:
    model = Chunks([f"c{i % 10}" for i in range(chunks)])
    provider = TracerProvider()  # no processor: spans are made and dropped
    agent = Agent(model, tracer_provider=provider)
    loop = asyncio.new_event_loop()
    sync, asynchronous = [], []
    try:
        for _ in range(repeats):
            bare = _timed(lambda: _bare(model))
            streamed = _timed(lambda: _stream(agent))
            abare = _timed(lambda: loop.run_until_complete(_abare(model)))
            astreamed = _timed(lambda: loop.run_until_complete(_astream(agent)))
            sync.append((streamed - bare) / chunks * 1e6)
            asynchronous.append((astreamed - abare) / chunks * 1e6)
    finally:
        loop.close()
    print(f"1. The driver's cost per chunk ({chunks:,} chunks a turn, {repeats} repeats):")
    print(f"   stream   adds {_summary(sync)} per chunk over iterating the chunks bare")
    print(f"   astream  adds {_summary(asynchronous)} per chunk over an async for over them")
    kept: list = []
    gc.collect()
    gc.disable()
    try:
        before = sys.getallocatedblocks()
        _stream(agent, kept)
        with_events = (sys.getallocatedblocks() - before) / chunks
        kept.clear()
        before = sys.getallocatedblocks()
        _stream(agent)
        net = (sys.getallocatedblocks() - before) / chunks
    finally:
        gc.enable()
    print(f"   blocks left allocated per chunk, every event kept: {with_events:.3f} (the event is 1)")
    print(f"   net blocks per chunk, no event kept: {net:.4f}")


STEPS = 10


@tool
def lookup(q: str) -> str:
    """Looks something up."""
    return "found"


@tool
async def alookup(q: str) -> str:
    """Looks something up."""
    return "found"


def _script() -> list[Any]:
    text = "Let me look that up for you."  # 4 chunks of 8 characters
    return [Completion(text=text, tool_calls=[ToolCall(f"c{i}", "lookup", {"q": f"q{i}"})],
                       usage=Usage(input_tokens=10, output_tokens=5), finish_reason="tool_calls")
            for i in range(STEPS - 1)] + [Completion(text="Done.", usage=Usage(input_tokens=10, output_tokens=2))]


def per_step(runs: int, repeats: int) -> None:
    def agent(asynchronous: bool) -> Agent:
        return Agent(FakeModel(_script(), chunk_size=8), [alookup if asynchronous else lookup],
                     budget=Budget(max_steps=STEPS))

    loop = asyncio.new_event_loop()
    figures: dict[str, list[float]] = {"run": [], "stream": [], "arun": [], "astream": []}

    async def arun_n() -> None:
        for _ in range(runs):
            await agent(True).arun("go")

    async def astream_n() -> None:
        for _ in range(runs):
            await _astream(agent(True))

    try:
        for _ in range(repeats):
            figures["run"].append(_timed(lambda: [agent(False).run("go") for _ in range(runs)]))
            figures["stream"].append(_timed(lambda: [_stream(agent(False)) for _ in range(runs)]))
            figures["arun"].append(_timed(lambda: loop.run_until_complete(arun_n())))
            figures["astream"].append(_timed(lambda: loop.run_until_complete(astream_n())))
    finally:
        loop.close()
    per = {k: [v / (runs * STEPS) * 1e6 for v in values] for k, values in figures.items()}
    print(f"2. A run's cost per step ({STEPS} steps, {runs} runs a turn, {repeats} repeats, untraced):")
    for name in figures:
        print(f"   {name:<8} {statistics.median(per[name]):8.1f} us/step")
    for a, b in (("stream", "run"), ("astream", "arun")):
        ratios = [x / y for x, y in zip(per[a], per[b])]
        print(f"   {a}/{b} = {_summary(ratios).replace(' us', '')}")


CHILD = r"""
import asyncio, gc, sys
sys.path.insert(0, {here!r})
import streaming as s
from opentelemetry.sdk.trace import TracerProvider
from tracedagent import Agent
model = s.Chunks([f"c{{i % 10}}" for i in range({chunks})])
agent = Agent(model, tracer_provider=TracerProvider())
loop = asyncio.new_event_loop()
way = {{"bare": lambda: s._bare(model), "stream": lambda: s._stream(agent),
        "abare": lambda: loop.run_until_complete(s._abare(model)),
        "astream": lambda: loop.run_until_complete(s._astream(agent))}}[{way!r}]
gc.collect()
gc.disable()
way()
"""


def instructions(way: str, chunks: int) -> int:
    code = CHILD.format(here=os.path.dirname(os.path.abspath(__file__)), chunks=chunks, way=way)
    done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                           sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind failed for {way}:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def per_chunk_instructions(low: int = 2_000, high: int = 12_000) -> None:
    per = {way: (instructions(way, high) - instructions(way, low)) / (high - low)
           for way in ("bare", "stream", "abare", "astream")}
    print("   instructions per chunk (valgrind):")
    for driver, bare in (("stream", "bare"), ("astream", "abare")):
        print(f"   {driver:<8} {per[driver]:8,.0f}, bare {per[bare]:6,.0f}: the driver adds "
              f"{per[driver] - per[bare]:,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--instructions", action="store_true", help="also count part 1 with valgrind")
    args = parser.parse_args()
    per_chunk(args.chunks, args.repeats)
    if args.instructions:
        per_chunk_instructions()
    per_step(args.runs, args.repeats)


if __name__ == "__main__":
    main()
