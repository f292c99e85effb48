"""Load mode keeps counters, not runs: ``run_plan`` holds no ``Run`` and pulls its plan
lazily, and ``Recording`` keeps no trace trees, only the tally load mode prints.

How flat memory stays over 1,000 and 20,000 runs is measured by
``benchmarks/load_memory.py``, which prints figures; this checks the mechanisms, and that
the benchmark still runs.
"""

from __future__ import annotations

import gc
import itertools
import subprocess
import sys
import threading
import weakref
from collections import Counter
from pathlib import Path

import pytest
from opentelemetry import metrics
from opentelemetry.sdk.trace import TracerProvider

from tracedagent import Stop
from tracedagent._cli._demo import SCENARIOS, Recording, Scenario, build_agent, run_plan
from tracedagent._traces._otlp_json import OtlpJsonWriter
from tracedagent._core._run import Run

ROOT = Path(__file__).resolve().parent.parent


def make_agent(scenario: Scenario, provider: TracerProvider | None = None):
    return build_agent(scenario, pace=0, tracer_provider=provider or TracerProvider(),
                       meter_provider=metrics.NoOpMeterProvider())


@pytest.mark.parametrize("concurrency", [1, 4])
def test_run_plan_keeps_no_run_and_reports_each_in_plan_order(concurrency):
    lock = threading.Lock()
    refs: list[weakref.ref[Run]] = []
    alive: list[int] = []
    seen: dict[int, str] = {}

    def finished(index: int, run: Run) -> None:
        with lock:
            refs.append(weakref.ref(run))
            seen[index] = run.stop.value
            gc.collect()
            alive.append(sum(ref() is not None for ref in refs))

    count = run_plan(itertools.islice(itertools.cycle(SCENARIOS), 40), concurrency=concurrency,
                     make_agent=make_agent, on_finished=finished)
    assert count == 40
    assert seen == {i: SCENARIOS[i % len(SCENARIOS)].stops_with.value for i in range(40)}
    assert max(alive) <= concurrency, f"{max(alive)} runs alive at once: finished runs are kept"


@pytest.mark.parametrize("concurrency", [1, 4])
def test_run_plan_takes_the_plan_lazily(concurrency):
    """A plan of 20,000 scenarios is never held at once: it is read as runs finish."""
    lock = threading.Lock()
    taken = finished = 0
    ahead: list[int] = []

    def plan():
        nonlocal taken
        for scenario in itertools.islice(itertools.cycle(SCENARIOS), 60):
            with lock:
                taken += 1
                ahead.append(taken - finished)
            yield scenario

    def done(index: int, run: Run) -> None:
        nonlocal finished
        with lock:
            finished += 1

    assert run_plan(plan(), concurrency=concurrency, make_agent=make_agent, on_finished=done) == 60
    assert max(ahead) <= 2 * concurrency + 1, max(ahead)


def test_a_failure_in_a_runs_thread_is_raised_and_ends_the_plan():
    taken = 0

    def plan():
        nonlocal taken
        for scenario in itertools.islice(itertools.cycle(SCENARIOS), 1000):
            taken += 1
            yield scenario

    def explode(index: int, run: Run) -> None:
        if index == 5:
            raise RuntimeError("on_finished failed")

    with pytest.raises(RuntimeError, match="on_finished failed"):
        run_plan(plan(), concurrency=4, make_agent=make_agent, on_finished=explode)
    assert taken < 1000


def test_recording_in_load_mode_keeps_no_trees_and_counts_every_run(tmp_path):
    writer = OtlpJsonWriter(tmp_path / "load.otlp.json")
    recording = Recording(writer, keep_trees=False)
    provider = TracerProvider()
    provider.add_span_processor(recording)
    runs = 45
    run_plan(itertools.islice(itertools.cycle(SCENARIOS), runs), concurrency=3,
             make_agent=lambda scenario: make_agent(scenario, provider))
    writer.close()
    assert recording.error is None
    assert recording.trees == {}
    agents = [agent for i in range(runs) for agent in SCENARIOS[i % len(SCENARIOS)].agents()]
    assert dict(recording.tally.runs) == dict(Counter(agent.stops_with.value for agent in agents))
    assert recording.tally.agents["answered"] == {a.name for a in agents if a.stops_with is Stop.ANSWERED}


def test_the_load_memory_benchmark_runs_and_prints_its_figures():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "load_memory.py"), "--runs", "20", "60"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for figure in ("peak RSS", "tracemalloc peak", "60 runs / 20 runs = ", "bytes per extra run"):
        assert figure in done.stdout, done.stdout
