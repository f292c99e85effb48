"""The async driver's two new endings through the real stack: a cancelled run and a run cut by
its time budget are found in Jaeger by their stop reasons, and Prometheus counts them."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from scenarios import TOOLS
from tracedagent import Agent, Budget, Stop
from tracedagent.testing import FakeModel

from ._stack import eventually, jaeger_trace, jaeger_traces, prom_query
from .test_e2e import tags


@pytest.fixture(scope="module")
def agent_name() -> str:
    return f"e2e-async-{uuid.uuid4().hex[:6]}"


def agent(telemetry, name: str, **options) -> Agent:
    """An agent whose model never answers in time: a call is in flight when the run is cut."""
    return Agent(FakeModel(["too late"], latency=60), TOOLS, name=name, **telemetry.providers, **options)


def spans_by_name(trace: dict) -> dict[str, dict]:
    return {s["operationName"]: s for s in trace["spans"]}


def in_jaeger(service_name: str, name: str, stop: Stop) -> dict:
    """The one trace of agent ``name`` that a search by its stop reason finds, once complete."""
    def found():
        traces = jaeger_traces(service_name, {"tracedagent.stop_reason": stop.value, "gen_ai.agent.name": name})
        return len(traces) == 1 and len(traces[0]["spans"]) == 3 and traces[0]
    return eventually(f"the {stop.value} run of {name} in Jaeger", found)


async def test_a_cancelled_run_is_found_in_jaeger_and_counted_in_prometheus(telemetry, service_name, agent_name):
    name = f"{agent_name}-cancelled"
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(agent(telemetry, name).arun("help"), 0.1)
    telemetry.force_flush(timeout=10)

    spans = spans_by_name(in_jaeger(service_name, name, Stop.CANCELLED))
    run = tags(spans[f"invoke_agent {name}"])
    assert run["tracedagent.stop_reason"] == "cancelled" and run["error.type"] == "cancelled"
    assert run.get("error") is True, "Jaeger marks the cancelled run red"
    assert tags(spans["chat fake-model"])["error.type"] == "cancelled", "the call in flight ended cancelled"
    assert tags(spans["step"])["error.type"] == "cancelled"

    query = (f'tracedagent_runs_total{{tracedagent_stop_reason="cancelled", '
             f'gen_ai_agent_name="{name}"}}')
    [series] = eventually("the cancelled run counted in Prometheus", lambda: prom_query(query))
    assert float(series["value"][1]) == 1.0


async def test_a_time_budget_run_is_found_in_jaeger_with_its_stop_reason(telemetry, service_name, agent_name):
    name = f"{agent_name}-deadline"
    run = await agent(telemetry, name, budget=Budget(max_seconds=0.1)).arun("help")
    assert run.stop is Stop.TIME_BUDGET
    telemetry.force_flush(timeout=10)

    found = in_jaeger(service_name, name, Stop.TIME_BUDGET)
    assert found["traceID"] == run.trace_id
    assert len(jaeger_trace(run.trace_id)["spans"]) == 3
    spans = spans_by_name(found)
    root = tags(spans[f"invoke_agent {name}"])
    assert root["tracedagent.stop_reason"] == "time_budget_exhausted" and root.get("error") is True
    assert root["tracedagent.steps"] == run.step_count == 1
    assert tags(spans["chat fake-model"])["error.type"] == "timeout", "the call the deadline cut"

    query = (f'tracedagent_runs_total{{tracedagent_stop_reason="time_budget_exhausted", '
             f'gen_ai_agent_name="{name}"}}')
    [series] = eventually("the time-budget run counted in Prometheus", lambda: prom_query(query))
    assert float(series["value"][1]) == 1.0
