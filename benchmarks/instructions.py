"""Instructions per step of overhead.py's measures, counted by valgrind: figures a busy machine cannot move.

Wall-clock figures on a shared machine drift by a fifth from one tenth of a second to the
next; an instruction count does not drift at all, which makes it the tool for telling
whether a change to the hot path helped (a gain of a few hundred instructions a step shows).
It is not the whole cost, and the second column says why: mispredicted branches, counted by
valgrind's branch simulator. The interpreter's dispatch mispredicts more often on the varied
code of an agent's step than on the floor's tight loop of OTel calls, and each one costs tens
of instructions' time, so the wall-clock ratio (b)/(c) of overhead.py, the benchmark of
record, runs well above the instruction ratio. A change that lowers both columns helps.

Each measure runs under ``valgrind --tool=cachegrind`` twice, with LOW and HIGH runs after a
warm-up; the difference, divided by the steps between them, is the count per step with the
interpreter's start-up taken out. Hash seeds are fixed and the span processor's export
thread is kept asleep, so that two runs of the same code give the same count.
Needs valgrind (``apt-get install valgrind``). Run: python benchmarks/instructions.py [b c e a f g]
(f) and (g) are (b) and (a) through ``arun``: (f)/(b) and (g)/(a) are the async driver's price.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

LOW, HIGH = 10, 40

# One measure of overhead.py, run in a child process under valgrind.
CHILD = r"""
import gc, sys
sys.path.insert(0, {here!r})
import overhead as o
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import NoOpTracerProvider

sdk = TracerProvider()  # a queue no measure fills, and an export thread that never wakes
sdk.add_span_processor(BatchSpanProcessor(o.DiscardingExporter(), max_queue_size=1 << 20,
                                          max_export_batch_size=1 << 19, schedule_delay_millis=10**9))
measure = {{"a": lambda n: o.agent_runs(NoOpTracerProvider(), NoOpMeterProvider(), n),
            "b": lambda n: o.agent_runs(sdk, NoOpMeterProvider(), n),
            "c": lambda n: o.floor_runs(sdk, n),
            "e": lambda n: o.floor_with_loop_runs(sdk, n),
            "f": lambda n: o.agent_aruns(sdk, NoOpMeterProvider(), n),
            "g": lambda n: o.agent_aruns(NoOpTracerProvider(), NoOpMeterProvider(), n)}}[{name!r}]
measure(5)
gc.collect()
gc.disable()
measure({runs})
"""


def counts(name: str, runs: int) -> tuple[int, int]:
    """Instructions and mispredicted branches of one measure's process."""
    code = CHILD.format(here=os.path.dirname(os.path.abspath(__file__)), name=name, runs=runs)
    done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--branch-sim=yes",
                           "--cachegrind-out-file=/dev/null", sys.executable, "-c", code],
                          capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    found = [re.search(pattern + r":\s+([\d,]+)", done.stderr) for pattern in (r"I\s+refs", r"Mispredicts")]
    if done.returncode != 0 or None in found:
        raise SystemExit(f"valgrind failed for ({name}):\n{done.stderr[-2000:]}")
    instructions, mispredicts = (int(match.group(1).replace(",", "")) for match in found)  # type: ignore[union-attr]
    return instructions, mispredicts


def main() -> None:
    names = sys.argv[1:] or ["b", "c", "e"]
    from overhead import STEPS

    per_step = {}
    for name in names:
        high, low = counts(name, HIGH), counts(name, LOW)
        per_step[name] = [(h - l) / ((HIGH - LOW) * STEPS) for h, l in zip(high, low)]
        instructions, mispredicts = per_step[name]
        print(f"  ({name}) {instructions:>10,.0f} instructions/step  {mispredicts:>8,.0f} mispredicted branches/step",
              flush=True)
    for x, y in (("b", "c"), ("e", "c"), ("b", "e"), ("f", "b"), ("g", "a")):
        if x in per_step and y in per_step:
            (xi, xm), (yi, ym) = per_step[x], per_step[y]
            print(f"  ({x})/({y}) = {xi / yi:.3f}   ({x})-({y}) = {xi - yi:,.0f} instructions;   "
                  f"mispredicted: {xm / ym:.3f}, {xm - ym:+,.0f}")


if __name__ == "__main__":
    main()
