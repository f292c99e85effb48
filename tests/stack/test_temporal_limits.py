"""Temporal's payload limit on the real dev server (workers in this process): a tool result
larger than the limit is the call's ``PayloadTooLarge`` error, the model told so and the tool
span not ok, and the run goes on to its answer (before, the server refused the activity's
result, the model was told "activity failed" and the span said ok)."""

from __future__ import annotations

import uuid

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tracedagent import Agent, Stop, ToolOutcome, tool
from tracedagent._core import _names as N
from tracedagent.testing import FakeModel, tool_call

from ._temporal import TEMPORAL, require_temporal

pytest.importorskip("temporalio")  # the test group installs it: never skipped in CI
from temporalio.client import Client  # noqa: E402

from tracedagent.temporal import run_on_temporal, worker  # noqa: E402


@tool
def dump_log(megabytes: int) -> str:
    """The whole log."""
    return "x" * (megabytes * 1024 * 1024)


async def test_a_tool_result_over_the_payload_limit_is_the_calls_named_error_and_the_run_goes_on():
    require_temporal()
    client = await Client.connect(TEMPORAL)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    name, queue = f"agent-{uuid.uuid4().hex[:8]}", f"q-{uuid.uuid4().hex}"
    agent = Agent(FakeModel([tool_call("dump_log", {"megabytes": 3}, id="d1"), "the log is too large"]), [dump_log],
                  name=name, tracer_provider=provider)
    async with worker(client, [agent], task_queue=queue):
        run = await run_on_temporal(client, name, "show me the log", task_queue=queue, tracer_provider=provider)
    assert run.stop is Stop.ANSWERED and run.output == "the log is too large"
    (result,) = run.steps[0].tool_results
    assert (result.outcome, result.error_type) == (ToolOutcome.ERROR, "PayloadTooLarge")
    told = next(m["content"] for m in run.messages if m["role"] == "tool")
    assert "PayloadTooLarge" in told and "2,097,152" in told and len(told) < 400
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool dump_log"]
    assert span.status.status_code is StatusCode.ERROR and span.attributes[N.ERROR_TYPE] == "PayloadTooLarge"
    assert span.attributes[N.TEMPORAL_ATTEMPT] == 1, "checked before returning: no failed attempt, no retry"
