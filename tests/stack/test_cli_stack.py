"""The `tracedagent` command against the real stack: demo → collector → Jaeger and Prometheus,
then `traces`, `trace` and `doctor` reading back what arrived.

Each demo gets its own service name, so what Jaeger and Prometheus hold for it is exactly
what that demo sent, however many other sessions share the stack.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tracedagent import Stop
from tracedagent._core import _names as N
from tracedagent._cli._demo import SCENARIOS

from ._stack import (ALERTMANAGER, HEALTH, JAEGER, OTLP_GRPC, OTLP_HTTP, PROMETHEUS, eventually, jaeger_trace,
                     jaeger_traces, prom_query, tracedagent)

FINAL_LINE = re.compile(r"^(\d+) runs in [\d.]+ s \([\d.]+ runs/s\); (\d+) spans written to \S+; (\d+) exported to \S+$",
                        re.M)
LISTING_ROW = re.compile(r"^([0-9a-f]{32}) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d (\S+)\s+(\S+) ", re.M)


def rendered(text: str) -> list[str]:
    """The summary table and span trees of an output, durations blanked (Jaeger keeps microseconds)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    return [re.sub(r"\b\d+(\.\d+)? m?s\b", "T", line.rstrip()) for line in lines[start:] if line.strip()]


def spans_in_file(path: Path, trace_id: str) -> int:
    """Spans of one trace in the demo's OTLP/JSON file, read without tracedagent's reader."""
    document = json.loads(path.read_text())
    return sum(1 for resource_spans in document["resourceSpans"] for scope_spans in resource_spans["scopeSpans"]
               for span in scope_spans["spans"] if span["traceId"] == trace_id)


def resumptions_in_file(path: Path) -> dict[str, str]:
    """The trace of each resumed run in the demo's OTLP/JSON file, by the paused trace it came from
    (``tracedagent.resumed_from`` on its run span): the demo links only the paused run (#27)."""
    document = json.loads(path.read_text())
    return {attribute["value"]["stringValue"]: span["traceId"]
            for resource_spans in document["resourceSpans"] for scope_spans in resource_spans["scopeSpans"]
            for span in scope_spans["spans"] for attribute in span.get("attributes", [])
            if attribute["key"] == N.RESUMED_FROM}


@dataclass
class Demo:
    service: str
    out: Path
    result: subprocess.CompletedProcess[str]
    trace_ids: dict[str, str]
    """Scenario name to the trace id of its Jaeger link."""


# The two protocols, each the way a user would pick it: the flag for gRPC (the default
# protocol), the standard variables for HTTP.
WAYS = {
    "grpc": (["--otlp", OTLP_GRPC], {}),
    "http": ([], {N.ENV_OTLP_ENDPOINT: OTLP_HTTP, N.ENV_OTLP_PROTOCOL: N.PROTOCOL_HTTP}),
}


@pytest.fixture(scope="module", params=sorted(WAYS))
def demo(request, stack_up, tmp_path_factory) -> Demo:
    args, env = WAYS[request.param]
    service = f"tracedagent-cli-{request.param}-{uuid.uuid4().hex[:8]}"
    out = tmp_path_factory.mktemp("demo") / "runs.otlp.json"
    # A little pace keeps sibling spans' start times apart in Jaeger's microseconds.
    result = tracedagent("demo", *args, "--service", service, "--out", out, "--pace", "0.1", "--jaeger", JAEGER,
                         env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    trace_ids = dict(re.findall(rf"^  (\S+)\s+{re.escape(JAEGER)}/trace/([0-9a-f]{{32}})$", result.stdout, re.M))
    assert sorted(trace_ids) == sorted(s.name for s in SCENARIOS), result.stdout
    return Demo(service=service, out=out, result=result, trace_ids=trace_ids)


def test_every_printed_trace_is_in_jaeger_whole_with_its_stop_reason(demo):
    for scenario in SCENARIOS:
        trace_id = demo.trace_ids[scenario.name]
        expected = spans_in_file(demo.out, trace_id)
        trace = eventually(f"{scenario.name}'s trace {trace_id} with {expected} spans in Jaeger",
                           lambda: (t := jaeger_trace(trace_id)) and len(t["spans"]) >= expected and t)
        assert len(trace["spans"]) == expected, scenario.name
        [root] = [s for s in trace["spans"] if not s["references"]]
        tags = {t["key"]: t["value"] for t in root["tags"]}
        assert tags[N.STOP_REASON] == scenario.stops_with.value
        assert tags[N.GEN_AI_AGENT_NAME] == scenario.name
        assert trace["processes"][root["processID"]]["serviceName"] == demo.service
    _, written, exported = FINAL_LINE.search(demo.result.stdout).groups()
    assert written == exported
    assert f"exported to {OTLP_HTTP}/v1/traces" in demo.result.stdout or f"exported to {OTLP_GRPC}" in demo.result.stdout
    assert sum(len(t["spans"]) for t in jaeger_traces(demo.service)) == int(exported)


def test_traces_lists_exactly_those_runs_with_their_stop_reasons(demo):
    # One row per run: a team's sub-agents are runs in their parent's trace.
    resumed = resumptions_in_file(demo.out)
    expected = {(demo.trace_ids[s.name], a.name, a.stops_with.value) for s in SCENARIOS for a in s.agents()[:-1]}
    expected |= {(resumed[demo.trace_ids[s.name]] if s.decisions else demo.trace_ids[s.name], a.name,
                  a.stops_with.value) for s in SCENARIOS for a in s.agents()[-1:]}  # a resumed run is the last

    def listed():
        result = tracedagent("traces", "--service", demo.service, "--limit", 100, "--full-ids")
        assert result.returncode == 0, result.stderr
        rows = set(LISTING_ROW.findall(result.stdout))
        return rows if len(rows) >= len(expected) else None

    assert eventually(f"the runs of {demo.service} listed", listed) == expected


def test_traces_filters_by_stop_reason(demo):
    result = tracedagent("traces", "--service", demo.service, "--stop", "step_budget_exhausted", "--full-ids")
    assert result.returncode == 0, result.stderr
    assert set(LISTING_ROW.findall(result.stdout)) == {
        (demo.trace_ids[s.name], a.name, "step_budget_exhausted")
        for s in SCENARIOS for a in s.agents() if a.stops_with is Stop.STEP_BUDGET}


def test_trace_renders_what_show_renders_from_the_demo_file(demo):
    for scenario in SCENARIOS:
        trace_id = demo.trace_ids[scenario.name]
        from_jaeger = tracedagent("trace", trace_id)
        from_file = tracedagent("show", demo.out, "--trace", trace_id)
        assert from_jaeger.returncode == 0 and from_file.returncode == 0, from_jaeger.stderr + from_file.stderr
        assert rendered(from_jaeger.stdout) == rendered(from_file.stdout), scenario.name
        assert f"invoke_agent {scenario.name}" in from_jaeger.stdout


def test_prometheus_counts_the_runs_of_each_stop_reason(demo):
    query = f'sum by (tracedagent_stop_reason) (tracedagent_runs_total{{job="{demo.service}"}})'
    expected = {stop: float(count) for stop, count in
                Counter(a.stops_with.value for s in SCENARIOS for a in s.agents()).items()}

    def counts():
        found = {r["metric"]["tracedagent_stop_reason"]: float(r["value"][1]) for r in prom_query(query)}
        return found if len(found) == len(expected) else None

    assert eventually(f"tracedagent_runs_total of {demo.service} in Prometheus", counts) == expected


def test_load_mode_exports_every_span_and_jaeger_holds_them_all(stack_up, tmp_path):
    service = f"tracedagent-cli-load-{uuid.uuid4().hex[:8]}"
    result = tracedagent("demo", "--runs", 30, "--concurrency", 4, "--otlp", OTLP_GRPC, "--service", service,
                         "--out", tmp_path / "load.otlp.json", "--pace", "0.1")
    assert result.returncode == 0, result.stderr
    runs, written, exported = FINAL_LINE.search(result.stdout).groups()
    assert runs == "30" and written == exported

    def held():
        traces = jaeger_traces(service)
        return traces if sum(len(t["spans"]) for t in traces) >= int(exported) else None

    traces = eventually(f"{exported} spans of {service} in Jaeger", held)
    scenarios = [SCENARIOS[i % len(SCENARIOS)] for i in range(30)]
    assert len(traces) == 30 + sum(1 for s in scenarios if s.decisions), "a resumed run is a trace of its own"
    assert sum(len(t["spans"]) for t in traces) == int(exported)


# --- doctor ----------------------------------------------------------------------------------

def doctor(*args: Any) -> subprocess.CompletedProcess[str]:
    return tracedagent("doctor", "--collector-health", HEALTH["otelcol"], "--jaeger", JAEGER,
                       "--prometheus", PROMETHEUS, "--alertmanager", ALERTMANAGER, *args)


def test_doctor_finds_the_whole_stack_reachable(stack_up):
    # Other sessions sharing the stack may be restarting a service; a healthy stack answers within a minute.
    result = eventually("doctor to exit 0", lambda: (r := doctor()).returncode == 0 and r)
    rows = re.findall(r"^│ (\S.*?)\s+│ \S+\s+│ (reachable|unreachable)\s+│", result.stdout, re.M)
    assert [name for name, _ in rows] == ["collector OTLP gRPC (traces, metrics)", "collector OTLP/HTTP (traces)",
                                          "collector OTLP/HTTP (metrics)", "collector health", "Jaeger query API",
                                          "Prometheus", "Alertmanager"]
    assert {status for _, status in rows} == {"reachable"}
    assert "All 7 endpoints are reachable" in result.stdout


def test_doctor_names_a_protocol_mixup_at_the_real_collector(stack_up):
    grpc_at_http = doctor("--otlp", OTLP_HTTP)
    http_at_grpc = doctor("--otlp", OTLP_GRPC, "--protocol", N.PROTOCOL_HTTP)
    assert grpc_at_http.returncode == http_at_grpc.returncode == 1
    assert "answers HTTP/1.x, not gRPC" in grpc_at_http.stdout and "--protocol http/protobuf" in grpc_at_http.stdout
    assert "closed the connection without an HTTP answer" in http_at_grpc.stdout
    assert "--protocol grpc" in http_at_grpc.stdout
