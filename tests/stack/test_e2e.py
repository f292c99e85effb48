"""End to end through the real stack: SDK → OTLP → Collector → Jaeger and Prometheus → Alertmanager."""

from __future__ import annotations

import json
import uuid

import pytest

from scenarios import OUTPUT_TYPES, RETURNED_STOPS, SCENARIOS, TOOLS
from tracedagent import Agent, Run, Stop
from tracedagent.testing import FakeModel, tool_call

from ._stack import (ALERTMANAGER, PROMETHEUS, eventually, get_json, jaeger_trace, jaeger_traces, kill,
                     prom_query, restart)


def run_agent(telemetry, stop: Stop, agent: str) -> Run:
    script, budget, _ = SCENARIOS[stop]
    return Agent(FakeModel(script()), TOOLS, budget=budget, name=agent, output_type=OUTPUT_TYPES.get(stop),
                 tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider).run("help")


def tags(span: dict) -> dict:
    """A Jaeger span's tags as a dict; string arrays come back JSON-encoded."""
    out = {}
    for tag in span["tags"]:
        value = tag["value"]
        if isinstance(value, str) and value.startswith("["):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        out[tag["key"]] = value
    return out


def wait_for_trace(run: Run, spans: int) -> dict:
    return eventually(f"trace {run.trace_id} with {spans} spans in Jaeger",
                      lambda: (t := jaeger_trace(run.trace_id)) and len(t["spans"]) >= spans and t)


def expected_span_count(run: Run) -> int:
    steps = run.step_count  # a step is a model call attempted: the failed call's step is counted
    chats = steps
    tools = sum(len(s.tool_results) for s in run.steps)
    return 1 + steps + chats + tools


@pytest.fixture(scope="module")
def runs_by_stop(telemetry):
    agent = f"e2e-{uuid.uuid4().hex[:6]}"
    runs = {stop: run_agent(telemetry, stop, agent) for stop in sorted(RETURNED_STOPS)}
    telemetry.force_flush(timeout=10)
    return agent, runs


@pytest.mark.parametrize("stop", sorted(RETURNED_STOPS))
def test_each_stop_reason_arrives_in_jaeger_as_an_intact_tree(runs_by_stop, stop):
    _, runs = runs_by_stop
    run = runs[stop]
    assert run.stop is stop and run.trace_id
    trace = wait_for_trace(run, expected_span_count(run))
    spans = {s["spanID"]: s for s in trace["spans"]}
    assert len(spans) == expected_span_count(run)

    [root] = [s for s in spans.values() if not s["references"]]
    assert root["operationName"].startswith("invoke_agent ")
    parent = {s["spanID"]: s["references"][0]["spanID"] for s in spans.values() if s["references"]}
    assert all(p in spans for p in parent.values()), "every parent reference resolves inside the trace"
    by_name = lambda prefix: [s for s in spans.values() if s["operationName"].startswith(prefix)]  # noqa: E731
    assert all(parent[s["spanID"]] == root["spanID"] for s in by_name("step"))
    step_ids = {s["spanID"] for s in by_name("step")}
    assert all(parent[s["spanID"]] in step_ids for s in by_name("chat ") + by_name("execute_tool "))

    root_tags = tags(root)
    assert root_tags["tracedagent.stop_reason"] == stop.value
    assert root_tags["tracedagent.steps"] == run.step_count
    assert root_tags["gen_ai.usage.input_tokens"] == run.input_tokens
    assert root_tags["gen_ai.usage.output_tokens"] == run.output_tokens
    priced = SCENARIOS[stop][1].price_per_1k_input > 0
    assert root_tags.get("tracedagent.cost_usd") == (pytest.approx(run.cost) if priced else None)
    for key, expected in (("tracedagent.tools.requested", run.requested_tools()),
                          ("tracedagent.tools.executed", run.trajectory()),
                          ("tracedagent.tools.blocked", run.blocked_tools())):
        assert list(root_tags.get(key) or []) == expected, key
    if stop in (Stop.ANSWERED, Stop.APPROVAL_REQUIRED):  # a pause for a person is not a failure (#27)
        assert root_tags.get("error") in (None, False)
    else:
        assert root_tags.get("error") is True, "Jaeger marks the failed run red"
        assert root_tags["error.type"] == stop.value


def test_jaeger_finds_runs_by_stop_reason_tag(runs_by_stop, service_name):
    _, runs = runs_by_stop
    found = eventually("a tag search for fatal_tool_error", lambda: jaeger_traces(
        service_name, {"tracedagent.stop_reason": "fatal_tool_error"}))
    assert runs[Stop.TOOL_FATAL].trace_id in {t["traceID"] for t in found}


def test_prometheus_counts_runs_by_stop_reason_exactly(runs_by_stop, service_name):
    agent, runs = runs_by_stop
    query = f'sum by (tracedagent_stop_reason) (tracedagent_runs_total{{gen_ai_agent_name="{agent}"}})'

    def counts():
        result = {r["metric"]["tracedagent_stop_reason"]: float(r["value"][1]) for r in prom_query(query)}
        return result if len(result) == len(RETURNED_STOPS) else None

    assert eventually("every stop reason in Prometheus", counts) == {stop.value: 1.0 for stop in RETURNED_STOPS}


def test_a_fatal_tool_error_fires_an_alert_that_reaches_alertmanager(telemetry):
    agent = f"e2e-alert-{uuid.uuid4().hex[:6]}"
    run_agent(telemetry, Stop.TOOL_FATAL, agent)
    telemetry.force_flush(timeout=10)

    def firing_in_prometheus():
        alerts = get_json(f"{PROMETHEUS}/api/v1/alerts")["data"]["alerts"]
        return [a for a in alerts if a["labels"].get("alertname") == "TracedagentFatalToolError"
                and a["labels"].get("gen_ai_agent_name") == agent and a["state"] == "firing"]

    eventually("TracedagentFatalToolError firing in Prometheus", firing_in_prometheus, timeout=90)

    def in_alertmanager():
        alerts = get_json(f"{ALERTMANAGER}/api/v2/alerts")
        return [a for a in alerts if a["labels"].get("alertname") == "TracedagentFatalToolError"
                and a["labels"].get("gen_ai_agent_name") == agent]

    [alert] = eventually("the alert in Alertmanager", in_alertmanager, timeout=60)
    assert alert["labels"]["severity"] == "critical"


def test_runs_survive_a_collector_crash_and_later_runs_arrive(telemetry):
    agent = f"e2e-crash-{uuid.uuid4().hex[:6]}"
    script = lambda: [tool_call("search_help", {"q": "x"}), "done"]  # noqa: E731
    reference = Agent(FakeModel(script()), TOOLS).run("help")
    kill("otelcol")
    try:
        during = [Agent(FakeModel(script()), TOOLS, name=agent, tracer_provider=telemetry.tracer_provider,
                        meter_provider=telemetry.meter_provider).run("help") for _ in range(5)]
        telemetry.force_flush(timeout=5)  # exports fail here; nothing may escape
    finally:
        restart("otelcol")
    for run in during:
        assert (run.stop, run.output, run.trajectory()) == (reference.stop, reference.output, reference.trajectory())

    after = Agent(FakeModel(script()), TOOLS, name=agent, tracer_provider=telemetry.tracer_provider,
                  meter_provider=telemetry.meter_provider).run("help")

    def arrived():
        telemetry.force_flush(timeout=5)
        return jaeger_trace(after.trace_id)

    eventually("a run after the collector restarted to reach Jaeger", arrived, timeout=60)


def test_traces_survive_a_jaeger_restart(runs_by_stop):
    _, runs = runs_by_stop
    run = runs[Stop.ANSWERED]
    wait_for_trace(run, expected_span_count(run))
    kill("jaeger")
    restart("jaeger")
    trace = eventually("the earlier trace after the restart", lambda: jaeger_trace(run.trace_id))
    assert len(trace["spans"]) == expected_span_count(run)
