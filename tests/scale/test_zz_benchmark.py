"""The scale benchmark still runs against the scale stack and prints every figure the sizing
table in docs/scale.md comes from. Nothing here checks a figure's size: they are for reading.
(Named to run last: it stops and restarts the ingester.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

from ._scale import ROOT


def test_the_scale_benchmark_runs_and_prints_every_figure(scale_up):
    command = [sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--runs", "400", "--drain", "200", "--within", "540"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as exc:
        # --within: the benchmark bounds its own waits and fails with what it waited for; this is the backstop.
        progress = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        pytest.fail(f"benchmarks/scale.py ran over 600 s; its progress:\n{progress}")
    assert done.returncode == 0, done.stderr
    for figure in ("spans/s offered", "gateway accepted", "CPU ms/1k spans", "store on its own",
                   "RSS idle MiB", "bytes per held span", "sizing (", "num_traces", "OTEL_BSP_MAX_QUEUE_SIZE"):
        assert figure in done.stdout, done.stdout
    gateway_row = next(line for line in done.stdout.splitlines() if line.startswith("gateway "))
    assert int(gateway_row.split()[1]) > 0, "the gateway's counters were read"
