"""The `tracedagent` command, run as a person runs it: a subprocess, real files, and a real
HTTP server on 127.0.0.1 that answers like Jaeger's query API.

The Jaeger answers come from ``tests/data/demo-jaeger.json``: what Jaeger 2.12's own
``/api/transform`` (the code behind the UI's "Upload JSON") made of
``tests/data/demo-otlp.json``, a file this command wrote. So the Jaeger path is checked
against Jaeger's real conversion, and the OTLP file against Jaeger's real parser.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from _fake_servers import RoutedServer, closed_port
from jaeger_v3 import NOT_FOUND, as_api_v3
from tracedagent import Stop
from tracedagent._core import _names as N
from tracedagent._cli._demo import SCENARIOS, build_agent, run_scenario

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
STARTED = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"


def tracedagent(*args: Any, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m tracedagent ARGS`` from the repository root, without any collector configured
    but what ``env`` adds."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}, **(env or {})}
    env["COLUMNS"] = "200"
    return subprocess.run([sys.executable, "-m", "tracedagent", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def assert_fails_cleanly(result: subprocess.CompletedProcess[str], message: str, *, status: int = 1) -> None:
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    assert message in result.stderr, result.stderr
    if status == 1:  # our own errors are one line; click's usage errors add a usage header
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


# --- the raw OTLP/JSON, read without tracedagent's own decoder -----------------------

def raw_spans(path: Path) -> list[dict[str, Any]]:
    document = json.loads(path.read_text())
    return [dict(span, _service=resource_spans["resource"]["attributes"])
            for resource_spans in document["resourceSpans"]
            for scope_spans in resource_spans["scopeSpans"] for span in scope_spans["spans"]]


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    def value(v: dict[str, Any]) -> Any:
        (kind, inner), = v.items()
        if kind == "arrayValue":
            return [value(x) for x in inner.get("values", [])]
        return int(inner) if kind == "intValue" else inner
    return {a["key"]: value(a["value"]) for a in span.get("attributes", [])}


def traces_by_agent(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Spans grouped per trace, keyed by the agent name on the trace's run span (a resumed
    run's trace by the name and ``(resumed)``)."""
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for span in raw_spans(path):
        by_trace.setdefault(span["traceId"], []).append(span)
    keyed = {}
    for spans in by_trace.values():
        (run,) = [attributes(s) for s in spans if not s.get("parentSpanId")]  # a team's top run
        keyed[run[N.GEN_AI_AGENT_NAME] + (" (resumed)" if N.RESUMED_FROM in run else "")] = spans
    return keyed


def resumed(scenarios=SCENARIOS) -> list[str]:
    """The scenarios whose run the demo resumes: each has a second trace."""
    return [s.name for s in scenarios if s.decisions]


def run_span(spans: list[dict[str, Any]]) -> dict[str, Any]:
    (run,) = [attributes(s) for s in spans if not s.get("parentSpanId")]
    return run


def independent_span_counts() -> dict[str, int]:
    """Each scenario run in this process with a plain SDK exporter: spans per run."""
    counts = {}
    for scenario in SCENARIOS:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        run_scenario(build_agent(scenario, pace=0, tracer_provider=provider,
                                 meter_provider=metrics.NoOpMeterProvider()), scenario)
        spans = exporter.get_finished_spans()
        for span in spans:  # the scenario's run first, then its resumption's trace, if any
            name = scenario.name + (" (resumed)" if span.context.trace_id != spans[0].context.trace_id else "")
            counts[name] = counts.get(name, 0) + 1
    return counts


# --- demo ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def flat_out_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("demo") / "runs.otlp.json"
    result = tracedagent("demo", "--pace", "0", "--out", out)
    assert result.returncode == 0, result.stderr
    return result, out


def test_flat_out_the_deadline_scenario_still_shows_the_deadline_cut_a_call():
    [scenario] = [s for s in SCENARIOS if s.stops_with is Stop.TIME_BUDGET]
    run = run_scenario(build_agent(scenario, pace=0), scenario)
    assert run.stop is Stop.TIME_BUDGET and run.step_count == 1
    assert [r.outcome.value for r in run.steps[0].tool_results] == ["timeout"]


def test_demo_shows_every_stop_reason_in_its_summary(flat_out_demo):
    result, _ = flat_out_demo
    # Every stop a Run can carry: cancelled too (a stream's reader that leaves; docs/streaming.md).
    from scenarios import TEMPORAL_ONLY_STOPS  # payload_limit: the demo runs no Temporal, no payload limit
    assert {s.stops_with for s in SCENARIOS} == set(Stop) - TEMPORAL_ONLY_STOPS, "a stop reason has no scenario"
    for scenario in SCENARIOS:
        row = re.search(rf"│ {re.escape(scenario.name)}\s+│ (\S+)\s+│\s+(\d+) │", result.stdout)
        assert row, f"no summary row for {scenario.name}"
        assert row.group(1) == scenario.stops_with.value
    trees = [line for line in result.stdout.splitlines() if line.startswith("invoke_agent ")]
    assert len(trees) == len(SCENARIOS) + len(resumed())  # one span tree per run (a team's is one tree)
    paused = trees.index(next(t for t in trees if t.startswith("invoke_agent refund-approval ")))
    assert "waiting for approval: refund" in trees[paused] and "resumed from trace " in trees[paused + 1]
    # per tool, successes out of requests: three inventory checks ran and failed, the refund was denied
    assert re.search(r"┃ tools\s+┃\n.*┃ succeeded/requested\s+┃", result.stdout)
    assert re.search(r"│ no-progress .*│ check_inventory 0/3\s+│", result.stdout)
    assert re.search(r"│ prompt-injection .*│ read_ticket 1/1, refund 0/1\s+│", result.stdout)


def test_demo_file_is_spec_shaped_otlp_json(flat_out_demo):
    _, out = flat_out_demo
    spans = raw_spans(out)
    assert spans
    for span in spans:
        assert HEX32.match(span["traceId"]) and HEX16.match(span["spanId"]), "OTLP/JSON ids are hex, not base64"
        assert "parentSpanId" not in span or HEX16.match(span["parentSpanId"])
        assert span["kind"] in (1, 3), "enums are integers: INTERNAL or CLIENT"
        assert span.get("status", {}).get("code", 0) in (0, 2)
        assert int(span["endTimeUnixNano"]) >= int(span["startTimeUnixNano"]) > 1_600_000_000 * 10**9
        for attribute in span.get("attributes", []):
            assert len(attribute["value"]) == 1 and next(iter(attribute["value"])).endswith("Value")
        service = {a["key"]: a["value"] for a in span["_service"]}
        assert service["service.name"] == {"stringValue": N.DEFAULT_SERVICE_NAME}


def test_demo_file_holds_one_trace_per_run_with_every_span(flat_out_demo):
    _, out = flat_out_demo
    traces = traces_by_agent(out)
    assert sorted(traces) == sorted([s.name for s in SCENARIOS] + [f"{name} (resumed)" for name in resumed()])
    expected = independent_span_counts()
    assert {agent: len(spans) for agent, spans in traces.items()} == expected
    for spans in traces.values():
        ids = {s["spanId"] for s in spans}
        assert len(ids) == len(spans)
        assert sum(1 for s in spans if not s.get("parentSpanId")) == 1
        assert all(s["parentSpanId"] in ids for s in spans if s.get("parentSpanId"))


def test_demo_stop_reasons_and_tools_are_on_the_run_spans(flat_out_demo):
    _, out = flat_out_demo
    traces = traces_by_agent(out)
    for scenario in SCENARIOS:
        assert run_span(traces[scenario.name])[N.STOP_REASON] == scenario.stops_with.value
    injection = run_span(traces["prompt-injection"])
    assert "refund" in injection[N.TOOLS_REQUESTED]
    assert "refund" not in injection[N.TOOLS_EXECUTED]
    (refund,) = [attributes(s) for s in traces["prompt-injection"]
                 if attributes(s).get(N.GEN_AI_TOOL_NAME) == "refund"]
    assert refund[N.TOOL_OUTCOME] == "denied"


def test_show_renders_the_file_exactly_as_the_demo_did(flat_out_demo):
    result, out = flat_out_demo
    shown = tracedagent("show", out)
    assert shown.returncode == 0, shown.stderr

    def body(text: str) -> list[str]:  # the table and the trees, without titles and footers
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("┏"))
        end = next((i for i, line in enumerate(lines) if re.match(r"\d+ runs in ", line)), len(lines))
        return [line.rstrip() for line in lines[start:end] if line.strip()]

    assert body(shown.stdout) == body(result.stdout)
    assert len(body(shown.stdout)) > 3 * len(SCENARIOS)


def test_demo_at_its_own_pace_looks_like_real_agents_and_stays_short(tmp_path):
    out = tmp_path / "paced.otlp.json"
    result = tracedagent("demo", "--out", out)
    assert result.returncode == 0, result.stderr
    # Short by design, not by a clock: the scripted latencies of every run add up to seconds.
    scripted = sum(min(len(a.script) * (a.model_latency + a.tool_latency), a.budget.max_seconds or float("inf"))
                   for s in SCENARIOS for a in s.agents())
    assert scripted < 10, f"the scenarios script {scripted:.1f} s of latency"
    for scenario in SCENARIOS:
        for span in traces_by_agent(out)[scenario.name]:
            a = attributes(span)
            seconds = (int(span["endTimeUnixNano"]) - int(span["startTimeUnixNano"])) / 1e9
            if a.get(N.GEN_AI_OPERATION_NAME) == N.OP_CHAT:
                assert seconds >= scenario.model_latency
            if a.get(N.TOOL_OUTCOME) in ("ok", "error", "fatal"):  # the tool ran (denied calls never do)
                assert seconds >= scenario.tool_latency


def test_load_mode_runs_the_scenarios_round_robin(tmp_path):
    out = tmp_path / "load.otlp.json"
    result = tracedagent("demo", "--runs", 20, "--concurrency", 4, "--pace", 0, "--out", out)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^20 runs in [\d.]+ s \([\d.]+ runs/s\); \d+ spans written", result.stdout, re.M)
    expected = Counter(agent.stops_with.value for i in range(20) for agent in SCENARIOS[i % len(SCENARIOS)].agents())
    for stop, count in expected.items():
        assert re.search(rf"│ {stop}\s+│\s+{count} │", result.stdout), (stop, count, result.stdout)
    document = json.loads(out.read_text())
    assert len({s["traceId"] for s in raw_spans(out)}) == 20 + len(resumed(SCENARIOS[i % len(SCENARIOS)] for i in range(20)))
    spans = int(re.search(r"(\d+) spans written", result.stdout).group(1))
    assert spans == sum(len(ss["spans"]) for rs in document["resourceSpans"] for ss in rs["scopeSpans"])


def test_prices_from_the_command_line_price_the_scenarios_without_their_own(tmp_path):
    out = tmp_path / "priced.otlp.json"
    result = tracedagent("demo", "--only", "help-desk", "--only", "big-spender", "--pace", 0,
                         "--price-in", "0.5", "--price-out", "1.5", "--out", out)
    assert result.returncode == 0, result.stderr
    traces = traces_by_agent(out)
    desk = run_span(traces["help-desk"])
    in_tokens, out_tokens = desk[N.GEN_AI_USAGE_INPUT_TOKENS], desk[N.GEN_AI_USAGE_OUTPUT_TOKENS]
    assert desk[N.COST_USD] == pytest.approx((in_tokens * 0.5 + out_tokens * 1.5) / 1000)
    spender = run_span(traces["big-spender"])  # states its own (illustrative) prices, and keeps them
    budget = next(s for s in SCENARIOS if s.name == "big-spender").budget
    assert spender[N.COST_USD] == pytest.approx(budget.cost_of(spender[N.GEN_AI_USAGE_INPUT_TOKENS],
                                                               spender[N.GEN_AI_USAGE_OUTPUT_TOKENS]))
    assert spender[N.STOP_REASON] == Stop.COST_BUDGET.value


def test_demo_lists_its_scenarios():
    result = tracedagent("demo", "--list")
    assert result.returncode == 0
    for scenario in SCENARIOS:
        assert re.search(rf"{re.escape(scenario.name)}\s+│ {scenario.stops_with.value}", result.stdout)


def test_demo_cannot_write_its_file(tmp_path):
    assert_fails_cleanly(tracedagent("demo", "--pace", 0, "--out", tmp_path / "missing" / "x.json"),
                         "cannot write")


# --- show: inputs that are not OTLP --------------------------------------------------

@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("", "the file is empty"),
    ("<html>not json</html>", "not JSON"),
    ('{"data": [{"traceID": "ab", "spans": []}]}', "looks like Jaeger's own JSON"),
    ("[1, 2, 3]", 'expected an object with a "resourceSpans" list'),
    ('{"resourceSpans": []}', "without a single span"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz", "spanId": "00f067aa0ba902b7", '
     '"name": "s", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}]}]}]}', "traceId is not a 16-byte id"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", '
     '"spanId": "00f067aa0ba902b7", "name": "s", "startTimeUnixNano": "1"}]}]}]}', "has no endTimeUnixNano"),
])
def test_show_rejects_what_is_not_otlp_json(tmp_path, content, message):
    path = tmp_path / "input.json"
    if content is not None:
        path.write_text(content)
    assert_fails_cleanly(tracedagent("show", path), message)


def test_show_renders_foreign_spans_without_guessing(tmp_path):
    """Another producer's span may use our attribute names for other types: shown, not crashed on."""
    span = {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7", "name": "invoke_agent x",
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": 1700000001500000000,
            "attributes": [{"key": N.GEN_AI_OPERATION_NAME, "value": {"stringValue": N.OP_INVOKE_AGENT}},
                           {"key": N.STEPS, "value": {"stringValue": "many"}},
                           {"key": N.COST_USD, "value": {"boolValue": True}}]}
    path = tmp_path / "foreign.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    result = tracedagent("show", path)
    assert result.returncode == 0, result.stderr
    assert "invoke_agent x  1.50 s  ?  0 steps" in result.stdout


def test_show_rejects_a_directory(tmp_path):
    assert_fails_cleanly(tracedagent("show", tmp_path), "is a directory")


def test_show_reads_json_lines_and_base64_ids(tmp_path):
    """The OpenTelemetry file exporter writes JSON Lines; protobuf's own JSON mapping, base64 ids."""
    document = json.loads((DATA / "demo-otlp.json").read_text())
    lines = []
    for resource_spans in document["resourceSpans"]:
        for span in (s for ss in resource_spans["scopeSpans"] for s in ss["spans"]):
            for key in ("traceId", "spanId", "parentSpanId"):
                if span.get(key):
                    span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
        lines.append(json.dumps({"resourceSpans": [resource_spans]}))
    path = tmp_path / "lines.jsonl"
    path.write_text("\n".join(lines) + "\n")
    as_lines, as_document = tracedagent("show", path), tracedagent("show", DATA / "demo-otlp.json")
    assert as_lines.returncode == 0, as_lines.stderr
    assert as_lines.stdout.splitlines()[1:] == as_document.stdout.splitlines()[1:]  # all but the title


# --- traces / trace against an HTTP server shaped like Jaeger ------------------------

@pytest.fixture
def jaeger():
    server = RoutedServer()
    yield server
    server.close()


def jaeger_fixture() -> list[dict[str, Any]]:
    return json.loads((DATA / "demo-jaeger.json").read_text())["data"]


def rendered(text: str) -> list[str]:
    """The summary table and span trees of an output, durations blanked (Jaeger keeps microseconds)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    return [re.sub(r"\b\d+(\.\d+)? m?s\b", "T", line.rstrip()) for line in lines[start:] if line.strip()]


def test_trace_renders_jaeger_json_as_show_renders_the_otlp_file(jaeger):
    for trace in jaeger_fixture():
        jaeger.answer(f"/api/v3/traces/{trace['traceID']}", as_api_v3(trace))
        from_jaeger = tracedagent("trace", trace["traceID"], "--jaeger", jaeger.url)
        assert from_jaeger.returncode == 0, from_jaeger.stderr
        from_file = tracedagent("show", DATA / "demo-otlp.json", "--trace", trace["traceID"])
        assert rendered(from_jaeger.stdout) == rendered(from_file.stdout)
        assert "stopped here" in from_jaeger.stdout or "answered" in from_jaeger.stdout


def test_traces_lists_runs_and_asks_jaeger_with_the_filters(jaeger):
    traces = jaeger_fixture()
    jaeger.answer("/api/traces", {"data": traces, "total": 0, "limit": 0, "offset": 0, "errors": None})
    result = tracedagent("traces", "--jaeger", jaeger.url, "--since", "2h", "--limit", 5)
    assert result.returncode == 0, result.stderr
    for trace in traces:
        (run,) = [s for s in trace["spans"] if not s["references"]]
        tags = {t["key"]: t["value"] for t in run["tags"]}
        row = re.search(rf"^{trace['traceID'][:16]} {STARTED} (\S+)\s+(\S+)\s+(\d+) ", result.stdout, re.M)
        assert row, trace["traceID"]
        assert row.groups() == (tags[N.GEN_AI_AGENT_NAME], tags[N.STOP_REASON], str(tags[N.STEPS]))
    (request,) = jaeger.requests
    query = dict(urllib.parse.parse_qsl(request.query))
    assert request.path == "/api/traces"
    assert query["service"] == N.DEFAULT_SERVICE_NAME and query["limit"] == "5" and "tags" not in query
    assert int(query["end"]) - int(query["start"]) == pytest.approx(2 * 3600 * 1e6, abs=1e6)
    assert abs(int(query["end"]) / 1e6 - time.time()) < 60


def test_traces_filters_by_stop_reason(jaeger):
    jaeger.answer("/api/traces", {"data": jaeger_fixture(), "errors": None})
    result = tracedagent("traces", "--jaeger", jaeger.url, "--stop", "model_error", "--service", "shop")
    assert result.returncode == 0, result.stderr
    query = dict(urllib.parse.parse_qsl(jaeger.requests[0].query))
    assert query["service"] == "shop"
    assert json.loads(query["tags"]) == {N.STOP_REASON: "model_error"}
    assert "model_error" in result.stdout and "answered" not in result.stdout


def test_traces_lists_a_conversations_runs_oldest_first(jaeger):
    traces = jaeger_fixture()
    runs = [next(s for s in trace["spans"] if not s["references"]) for trace in traces]
    first, second = sorted(runs[:2], key=lambda s: s["startTime"])
    for span in (second, first):  # tagged out of order: the listing sorts by start
        span["tags"].append({"key": N.GEN_AI_CONVERSATION_ID, "type": "string", "value": "chat-381"})
    jaeger.answer("/api/traces", {"data": traces, "errors": None})
    result = tracedagent("traces", "--jaeger", jaeger.url, "--conversation", "chat-381", "--full-ids")
    assert result.returncode == 0, result.stderr
    query = dict(urllib.parse.parse_qsl(jaeger.requests[0].query))
    assert json.loads(query["tags"]) == {N.GEN_AI_CONVERSATION_ID: "chat-381"}
    listed = re.findall(r"^([0-9a-f]{32}) ", result.stdout, re.M)
    assert listed == [first["traceID"], second["traceID"]]


def test_traces_says_when_nothing_matched(jaeger):
    jaeger.answer("/api/traces", {"data": [], "total": 0, "limit": 0, "offset": 0, "errors": None})
    result = tracedagent("traces", "--jaeger", jaeger.url)
    assert result.returncode == 0
    assert "No runs of service 'tracedagent' in the last 1h" in result.stdout


def test_an_unreachable_jaeger_is_one_line():
    url = f"http://127.0.0.1:{closed_port()}"
    assert_fails_cleanly(tracedagent("traces", "--jaeger", url), f"cannot reach Jaeger at {url}")
    assert_fails_cleanly(tracedagent("trace", "4bf92f3577b34da6a3ce929d0e0e4736", "--jaeger", url),
                         "cannot reach Jaeger")


def test_jaeger_credentials_in_the_url_are_sent_as_basic_auth_and_never_printed(jaeger):
    password = "hunter22-jaeger"
    jaeger.answer("/api/traces", {"data": [], "errors": None})
    with_credentials = jaeger.url.replace("http://", f"http://reader:{password}@")
    result = tracedagent("traces", "--jaeger", with_credentials)
    assert result.returncode == 0, result.stderr
    (request,) = jaeger.requests
    assert base64.b64decode(request.headers["authorization"].removeprefix("Basic ")).decode() == f"reader:{password}"
    assert f"at {jaeger.url}." in result.stdout and password not in result.stdout
    unreachable = f"http://reader:{password}@127.0.0.1:{closed_port()}"
    assert_fails_cleanly(tracedagent("traces", "--jaeger", unreachable), "cannot reach Jaeger at http://127.0.0.1:")
    assert password not in tracedagent("traces", "--jaeger", unreachable).stderr


def test_a_jaeger_url_that_is_not_one():
    assert_fails_cleanly(tracedagent("traces", "--jaeger", "localhost:16686"), "not a usable Jaeger URL")


def test_a_trace_jaeger_does_not_have(jaeger):
    missing = "4bf92f3577b34da6a3ce929d0e0e4736"
    jaeger.answer(f"/api/v3/traces/{missing}", NOT_FOUND, status=404)
    assert_fails_cleanly(tracedagent("trace", missing, "--jaeger", jaeger.url),
                         f"trace {missing} not found in Jaeger at {jaeger.url}")


def test_jaeger_errors_are_passed_on(jaeger):
    jaeger.answer("/api/traces", {"data": None, "errors": [{"code": 400, "msg": "parameter 'service' is required"}]},
                  status=400)
    assert_fails_cleanly(tracedagent("traces", "--jaeger", jaeger.url),
                         "answered HTTP 400: parameter 'service' is required")


def test_something_that_is_not_jaeger(jaeger):
    jaeger.answer("/api/traces", b"<html>Grafana</html>", content_type="text/html")
    assert_fails_cleanly(tracedagent("traces", "--jaeger", jaeger.url), "not JSON")


@pytest.mark.parametrize("args, message", [
    (("trace", "not-a-trace-id"), "is not a trace id"),
    (("show", DATA / "demo-otlp.json", "--trace", "not-a-trace-id"), "Invalid value for '--trace': 'not-a-trace-id' is not"),
    (("show", "no-such-file.json", "--trace", "zz"), "Invalid value for '--trace'"),
    (("traces", "--since", "yesterday"), "is not a time span"),
    (("traces", "--stop", "tired"), "Invalid value for '--stop'"),
    (("demo", "--otlp", "http://[::1"), "Invalid value for '--otlp': not a usable URL"),
    (("demo", "--otlp", "http://h:99999"), "Invalid value for '--otlp': not a usable URL (its port"),
    (("doctor", "--otlp", "http://[::1"), "Invalid value for '--otlp': not a usable URL"),
    (("doctor", "--otlp", "http://h:99999"), "Invalid value for '--otlp': not a usable URL (its port"),
    (("doctor", "--prometheus", "http://h:99999"), "Invalid value for '--prometheus': not a usable URL"),
    (("traces", "--jaeger", "http://[::1"), "Invalid value for '--jaeger': not a usable URL"),
])
def test_bad_arguments_are_usage_errors(args, message):
    assert_fails_cleanly(tracedagent(*args), message, status=2)


@pytest.mark.parametrize("command", ["demo", "doctor"])
@pytest.mark.parametrize("variable", [N.ENV_OTLP_ENDPOINT, N.ENV_OTLP_METRICS_ENDPOINT])
@pytest.mark.parametrize("value", ["http://[::1", "http://user:s3cr3t-key@h:99999"])
def test_an_endpoint_variable_that_is_not_a_url_is_one_line_naming_it(command, variable, value):
    env = {N.ENV_OTLP_ENDPOINT: "http://127.0.0.1:1", variable: value}  # the metrics one alone names no collector
    result = tracedagent(command, "--timeout" if command == "doctor" else "--pace", "0.1" if command == "doctor" else "0",
                         env=env)
    assert_fails_cleanly(result, f"Error: {variable} is not a usable URL")
    assert "s3cr3t" not in result.stderr


# --- the demo's own lines, streamed text, a pipe -----------------------------------------

def test_the_cancelled_scenario_is_a_stream_left_mid_answer_with_every_span_ended():
    [scenario] = [s for s in SCENARIOS if s.stops_with is Stop.CANCELLED]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    chunks: list[str] = []
    run = run_scenario(build_agent(scenario, pace=0, tracer_provider=provider), scenario, chunks.append)
    assert run.stop is Stop.CANCELLED and chunks  # it left after the first chunk of text
    spans = exporter.get_finished_spans()  # ended, hence exported
    [root] = [s for s in spans if s.parent is None]
    assert root.attributes[N.STOP_REASON] == "cancelled"
    assert {s.name.split()[0] for s in spans} == {"invoke_agent", "step", "chat"}  # cut off in its first answer


def test_on_a_terminal_the_streamed_answer_is_shown_and_a_pipe_gets_the_trees_only(monkeypatch, flat_out_demo):
    """Was: `live-answer` streamed its text to nobody. A terminal sees it arrive (and keeps the
    whole text once the run ends); piped output is unchanged."""
    import io

    from click.testing import CliRunner
    from rich.console import Console

    from tracedagent._cli import _main

    screen = io.StringIO()
    monkeypatch.setattr(_main, "_console", Console(file=screen, force_terminal=True, width=120, highlight=False,
                                                   markup=False, emoji=False))
    out = flat_out_demo[1].with_name("terminal.otlp.json")
    result = CliRunner().invoke(_main.cli, ["demo", "--only", "live-answer", "--only", "walked-away",
                                            "--pace", "0", "--out", str(out)])
    assert result.exit_code == 0, repr(result.exception)
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())
    [live] = [s for s in SCENARIOS if s.name == "live-answer"]
    assert f"live-answer streamed: {live.script[-1]}" in shown
    assert re.search(r"walked-away streamed: \S.* \[cancelled\]", shown)
    assert "streamed:" not in flat_out_demo[0].stdout


def test_piped_output_keeps_a_long_path_whole_and_says_1_run(tmp_path):
    """Was: rich wrapped the command's own lines at 120 columns on a pipe, cutting a path or a
    URL in two; and "1 runs"."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    out = deep / "one-run.otlp.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP") and k != "COLUMNS"}
    done = subprocess.run([sys.executable, "-m", "tracedagent", "demo", "--only", "help-desk", "--pace", "0",
                           "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    [last] = [line for line in done.stdout.splitlines() if "spans written to" in line]
    assert last.startswith("1 run in ") and last.endswith(f"spans written to {out}")
    assert f"`tracedagent show {out}`" in done.stdout
