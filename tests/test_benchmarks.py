"""The benchmarks still run and print their figures. Nothing here times anything: the figures
are for people to read (README, "Benchmarks"), not for a test to assert."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def test_the_overhead_benchmark_runs_and_prints_every_figure():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "overhead.py"), "--runs", "2", "--repeats", "4"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for figure in ("(a) no SDK", "(b) SDK", "(c) floor", "(d)", "(e) floor", "(b)/(c) = ", "(e)/(c) = ",
                   "(b)/(e) = ", "(d)/(b) = ", "(f) (b) through arun", "(f)/(c) = ", "(f)/(b) = "):
        assert figure in done.stdout, done.stdout


def test_the_overhead_benchmark_refuses_turns_the_default_queue_cannot_hold():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "overhead.py"), "--runs", "100"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "default queue" in done.stderr
