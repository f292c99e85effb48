"""Talking to the scale stack (``make stack-scale-up``): its ports, its Jaeger, its processes.

The scale stack listens on its own ports (docs/scale.md), so it runs beside the main stack.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import urllib.request
from pathlib import Path

from stack._stack import eventually
from stack._stack import jaeger_trace as stack_jaeger_trace
from stack.test_e2e import run_agent, tags
from tracedagent import Run, Stop

__all__ = ["OTLP_GRPC", "SAMPLER_TAG", "ANSWERED_PERCENT", "DECISION_WAIT", "scale", "unhealthy",
           "GATEWAY_METRICS", "SAMPLER_METRICS", "jaeger_trace", "complete", "settle", "metric_sum", "produce", "eventually",
           "expected_span_count", "run_agent", "tags"]

ROOT = Path(__file__).resolve().parents[2]
OTLP_GRPC = "http://127.0.0.1:24317"
JAEGER = "http://127.0.0.1:24686"
GATEWAY_METRICS = "http://127.0.0.1:24889/metrics"
SAMPLER_METRICS = ("http://127.0.0.1:24881/metrics", "http://127.0.0.1:24882/metrics")
SAMPLER_TAG = "tracedagent.scale.sampler"
"""Span attribute each sampler writes with its name (collector/scale/sampler.yaml)."""
ANSWERED_PERCENT = float(os.environ.get("SCALE_ANSWERED_PERCENT", "10"))
"""The share of answered runs the samplers keep: what `make test-scale` started them with."""
DECISION_WAIT = 10.0
"""Seconds a sampler waits after a trace's first span (sampler.yaml's default)."""


def scale(*args: str) -> str:
    """Run scripts/scale.sh; its stderr (the progress lines) comes back for messages."""
    done = subprocess.run([str(ROOT / "scripts" / "scale.sh"), *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 or args == ("status",), f"scale.sh {' '.join(args)} failed:\n{done.stderr}"
    return done.stdout if args == ("status",) else done.stderr


def unhealthy() -> list[str]:
    """Services `scale.sh status` does not report healthy."""
    lines = scale("status").splitlines()[1:]
    return [line.split()[0] for line in lines if line.split()[2] != "ok"]


def expected_span_count(run: Run) -> int:
    """The run span, then per step (``step_count`` includes a failed model call) a step span and
    a chat span, and one span per tool call that was dispatched."""
    return 1 + 2 * run.step_count + sum(len(step.tool_results) for step in run.steps)


def jaeger_trace(trace_id: str) -> dict | None:
    """The trace from the scale tier's Jaeger query service, or None."""
    return stack_jaeger_trace(trace_id, JAEGER)


def complete(run: Run) -> bool:
    """The run's trace is in Jaeger with exactly the spans the run made."""
    trace = jaeger_trace(run.trace_id)
    return trace is not None and len(trace["spans"]) == expected_span_count(run)


def complete_now(run: Run) -> bool:
    """``complete``, with a query that fails (Jaeger reconnecting to Cassandra) read as "not yet"."""
    try:
        return complete(run)
    except OSError:
        return False


def settle(runs: list[Run], timeout: float) -> list[Run]:
    """Wait until every run is complete in Jaeger or ``timeout`` passes; the ones still not."""
    pending = list(runs)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        pending = [run for run in pending if not complete_now(run)]
        if pending:
            time.sleep(1)
    return pending


def metric_sum(url: str, name: str, **labels: str) -> float:
    """Sum of a Prometheus text-format metric's samples whose labels include ``labels``."""
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"{re.escape(name)}(?:{{(.*)}})? (\S+)$", line)
        if match and all(f'{k}="{v}"' in (match.group(1) or "") for k, v in labels.items()):
            total += float(match.group(2))
    return total


def produce(telemetry, stops: list[Stop], agent: str, flush_every: int = 100) -> list[Run]:
    """One run per entry of ``stops`` (tests/scenarios.py's script for that stop), flushed to
    the gateway every ``flush_every`` runs so the SDK's span queue never overflows."""
    runs = []
    for i, stop in enumerate(stops, 1):
        runs.append(run_agent(telemetry, stop, agent))
        assert runs[-1].stop is stop
        if i % flush_every == 0:
            assert telemetry.force_flush(timeout=30)
    assert telemetry.force_flush(timeout=30)
    return runs
