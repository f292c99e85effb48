"""`tracedagent demo` sending to a collector, against real OTLP receivers on 127.0.0.1
(``otlp_receivers``): both protocols, the variables, a collector that is not there, and
credentials that must not be printed. ``tests/stack/test_cli_stack.py`` does the same
against the real stack, through to Jaeger and Prometheus.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _fake_servers import closed_port
from otlp_receivers import GrpcReceiver, HttpReceiver
from tracedagent._core import _names as N
from tracedagent._cli._demo import SCENARIOS

ROOT = Path(__file__).resolve().parent.parent
FINAL_LINE = re.compile(r"^(\d+) runs in [\d.]+ s \([\d.]+ runs/s\); (\d+) spans written to \S+; (\d+) exported to (\S+)$",
                        re.M)


def demo(*args: Any, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    clean.update(COLUMNS="200", **(env or {}))
    return subprocess.run([sys.executable, "-m", "tracedagent", "demo", "--pace", "0", *map(str, args)], cwd=ROOT,
                          env=clean, capture_output=True, text=True, timeout=60)


def printed_trace_ids(stdout: str) -> dict[str, str]:
    """Scenario name to trace id, from the "Each run in Jaeger" links."""
    return dict(re.findall(r"^  (\S+)\s+\S+/trace/([0-9a-f]{32})$", stdout, re.M))


@pytest.mark.parametrize("how", ["grpc flag", "http flags", "http variables"])
def test_demo_delivers_every_span_and_metric_to_the_collector(tmp_path, how):
    http = how.startswith("http")
    with (HttpReceiver() if http else GrpcReceiver()) as receiver:
        if how == "http variables":
            result = demo("--out", tmp_path / "x.json", "--service", "shop",
                          env={N.ENV_OTLP_ENDPOINT: receiver.endpoint, N.ENV_OTLP_PROTOCOL: N.PROTOCOL_HTTP})
        else:
            result = demo("--out", tmp_path / "x.json", "--service", "shop", "--otlp", receiver.endpoint,
                          *(["--protocol", N.PROTOCOL_HTTP] if http else []))
        assert result.returncode == 0, result.stderr
        spans = receiver.spans()
        metrics = receiver.metric_names()
    runs, written, exported, where = FINAL_LINE.search(result.stdout).groups()
    assert int(runs) == len(SCENARIOS)
    assert int(written) == int(exported) == len(spans), "the final line counts what the collector accepted"
    assert where == (f"{receiver.endpoint}/v1/traces" if http else receiver.endpoint)
    assert {s.resource["service.name"] for s in spans} == {"shop"}
    assert {N.METRIC_RUNS, N.METRIC_TOOL_CALLS} <= metrics
    links = printed_trace_ids(result.stdout)
    assert sorted(links) == sorted(s.name for s in SCENARIOS)
    run_spans = {s.attributes[N.GEN_AI_AGENT_NAME]: s for s in spans if s.attributes.get(N.GEN_AI_OPERATION_NAME)
                 == N.OP_INVOKE_AGENT}
    assert {name: span.attributes[N.STOP_REASON] for name, span in run_spans.items()} == \
        {a.name: a.stops_with.value for s in SCENARIOS for a in s.agents()}
    assert "stack-up" not in result.stderr, "no outage was reported"


def test_a_collector_that_is_not_there_fails_the_demo_after_the_runs(tmp_path):
    port = closed_port()
    out = tmp_path / "x.json"
    result = demo("--out", out, "--otlp", f"http://127.0.0.1:{port}")
    assert result.returncode == 1
    trees = [line for line in result.stdout.splitlines() if line.startswith("invoke_agent ")]
    resumed = sum(bool(s.decisions) for s in SCENARIOS)  # a resumed run's tree follows its paused run's
    assert out.exists() and len(trees) == len(SCENARIOS) + resumed, "the runs and the file are intact"
    runs, written, exported, _ = FINAL_LINE.search(result.stdout).groups()
    assert exported == "0"
    assert f"Error: only 0 of {written} spans reached the collector at http://127.0.0.1:{port} (grpc)" in result.stderr
    assert "tracedagent doctor" in result.stderr


def test_grpc_to_an_http_port_is_not_reported_as_sent(tmp_path):
    with HttpReceiver() as receiver:
        result = demo("--out", tmp_path / "x.json", "--otlp", receiver.endpoint)
    assert result.returncode == 1
    assert FINAL_LINE.search(result.stdout).group(3) == "0"
    assert "spans reached the collector" in result.stderr


def test_credentials_in_the_endpoint_are_used_but_not_printed(tmp_path):
    password = "pa55-w0rd-value"
    with HttpReceiver() as receiver:
        endpoint = receiver.endpoint.replace("http://", f"http://agent:{password}@")
        result = demo("--out", tmp_path / "x.json", "--otlp", endpoint, "--protocol", N.PROTOCOL_HTTP)
        assert receiver.spans()
    assert result.returncode == 0, result.stderr
    assert password not in result.stdout + result.stderr
    assert FINAL_LINE.search(result.stdout).group(4) == f"{receiver.endpoint}/v1/traces"


def test_protocol_without_a_collector_is_a_usage_error(tmp_path):
    result = demo("--out", tmp_path / "x.json", "--protocol", N.PROTOCOL_HTTP)
    assert result.returncode == 2
    assert "--protocol needs a collector" in result.stderr


def test_spans_exported_counts_what_the_collector_accepted():
    """The count behind the demo's last line, through the library's own handle."""
    from tracedagent import Agent, configure
    from tracedagent.testing import FakeModel

    with GrpcReceiver() as receiver:
        telemetry = configure(endpoint=receiver.endpoint, metrics=False, set_global=False)
        Agent(FakeModel(["done"]), [], **telemetry.providers).run("hi")
        telemetry.shutdown(timeout=5)
        assert telemetry.spans_exported == len(receiver.spans()) == 3  # run, step, chat
    nobody = f"http://127.0.0.1:{closed_port()}"
    telemetry = configure(endpoint=nobody, metrics=False, set_global=False, export_timeout=0.5)
    Agent(FakeModel(["done"]), [], **telemetry.providers).run("hi")
    telemetry.shutdown(timeout=2)
    assert telemetry.spans_exported == 0
