"""The benchmarks still run and print their figures. Nothing here times anything: the figures
are for people to read (README, "Benchmarks"), not for a test to assert."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
PEERS = ("tracedagent", "pydantic-ai", "openai-agents", "smolagents")
BENCH_EXTRA = ("pydantic_ai", "agents", "smolagents", "openinference.instrumentation.openai_agents",
               "openinference.instrumentation.smolagents", "matplotlib")


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:  # a parent package is missing
        return True


def test_the_overhead_benchmark_runs_and_prints_every_figure():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "overhead.py"), "--runs", "2", "--repeats", "4"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for figure in ("(a) no SDK", "(b) SDK", "(c) floor", "(d)", "(e) floor", "(b)/(c) = ", "(e)/(c) = ",
                   "(b)/(e) = ", "(d)/(b) = ", "(f) (b) through arun", "(f)/(c) = ", "(f)/(b) = "):
        assert figure in done.stdout, done.stdout


def test_the_overhead_benchmark_prints_the_async_drivers_rows():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "overhead.py"), "--runs", "2", "--repeats", "3"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for figure in ("(g) (a) through arun", "(g)/(a) = ", "cheapest of the 3 turns", "arun untraced (g)",
                   "cheapest (f)/(b) = ", "cheapest (g)/(a) = ", "cheapest (b)/(c) = "):
        assert figure in done.stdout, done.stdout


def test_the_overhead_benchmark_refuses_turns_the_default_queue_cannot_hold():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "overhead.py"), "--runs", "100"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "default queue" in done.stderr


def _numbers(line: str) -> list[str]:
    return re.findall(r"\d+(?:\.\d+)?", line)


def _row(section: str, label: str) -> list[str]:
    """The figures on the one line of ``section`` that starts with ``label``."""
    lines = [line for line in section.splitlines() if line.split(None, 1)[:1] == [label]]
    assert len(lines) == 1, section
    return _numbers(lines[0].split(None, 1)[1])


@pytest.mark.skipif(any(_missing(module) for module in BENCH_EXTRA),
                    reason="the bench group is not installed: pip install -e . --group bench")
def test_the_peers_benchmark_runs_and_prints_every_figure(tmp_path):
    plot = tmp_path / "peers.png"
    done = subprocess.run([sys.executable, str(BENCHMARKS / "peers.py"), "--quick", "--plot", str(plot)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    sections = re.split(r"^(?=\d\. )", done.stdout, flags=re.M)[1:]
    assert [section[:2] for section in sections] == ["1.", "2.", "3.", "4."], done.stdout
    timing, weights, growth, export = sections

    # 1: µs/step untraced, traced, traced with content, what tracing adds; a peer adds its
    # three ratios to tracedagent, each a median and the two ends of the middle half
    for library in PEERS:
        assert len(_row(timing, library)) == (4 if library == "tracedagent" else 4 + 3 * 3), timing
    assert "none dropped" in timing
    # 2: spans, attribute bytes and OTLP bytes, content off and on
    for library in PEERS:
        assert len(_row(weights, library)) == 6, weights
    # 3: --quick grows to 1, 10 and 100 steps: µs/step traced (the row named), untraced and
    # bytes/step; a library that stopped early says where (tracedagent never stops)
    lines = growth.splitlines() + [""]
    for library in ("tracedagent", "tracedagent/replay", *PEERS[1:]):
        at = next(i for i, line in enumerate(lines) if line.split()[:1] == [library])
        traced, untraced, bytes_per_step, after = lines[at:at + 4]
        sizes = len(_numbers(traced.split(None, 1)[1]))
        assert len(_numbers(untraced)) == len(_numbers(bytes_per_step)) == sizes, growth
        if library.startswith("tracedagent"):
            assert sizes == 3, growth
        else:
            assert sizes == 3 or (sizes == 2 and "stopped after 10 steps" in after), growth
    # 4: with the stack up (`make test` requires it), the throughput figures; else why not
    if os.environ.get("TRACEDAGENT_REQUIRE_STACK") or "skipped:" not in export:
        assert re.search(r"nothing dropped up to \d+ runs/s, \d+ spans/s", export), export
        assert re.search(r"(spans were first dropped at \d+ runs/s|nothing was dropped at any load)", export), export
    else:
        assert "no collector at" in export, export

    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_capture_cost_benchmark_runs_and_prints_every_figure():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "capture_cost.py"), "--mb", "1", "--repeats", "1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for figure in ("capture off", "capture on", "on/off = ", "longest event-loop block"):
        assert figure in done.stdout, done.stdout


def test_the_streaming_benchmark_runs_and_prints_every_figure():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "streaming.py"), "--chunks", "2000", "--runs", "2",
                           "--repeats", "2"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for figure in ("stream   adds", "astream  adds", "every event kept: 1.0", "no event kept", "run ", "stream ",
                   "arun ", "astream ", "stream/run = ", "astream/arun = "):
        assert figure in done.stdout, done.stdout


def test_the_plugin_load_benchmark_runs_and_prints_every_figure():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "plugin_load.py"), "--repeat", "2", "--sessions", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for figure in ("plugin load        median", "target < 20 ms", "first fixture use", "modules it pulled in: none",
                   "plugin loaded", "-p no:tracedagent", "the plugin's share of a session"):
        assert figure in done.stdout, done.stdout


def test_the_validation_benchmark_prints_both_validators_and_their_ratio():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "validation.py"), "--repeats", "1", "--number", "50"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for figure in ("three plain arguments, pydantic", "three plain arguments, hand validator",
                   "Enum + model + date, pydantic", "pydantic / hand validator (three plain arguments) = "):
        assert figure in done.stdout, done.stdout
