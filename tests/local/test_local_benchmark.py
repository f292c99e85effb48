"""benchmarks/local_model.py still runs and prints its figures (nothing times anything here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ._local import missing_or_fail

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "local_model.py"


def test_the_local_model_benchmark_prints_the_share_of_a_real_call():
    missing_or_fail()
    done = subprocess.run([sys.executable, str(BENCHMARK), "--calls", "1", "--runs", "3"], capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    for figure in ("tracedagent per step", "of which the loop without an SDK", "short answer", "a tool call",
                   "tracedagent's step = "):
        assert figure in done.stdout, done.stdout
