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
from temporalio.client import Client, WorkflowExecutionStatus  # noqa: E402

from tracedagent._core._payloads import payload_size  # noqa: E402
from tracedagent.temporal import ActivitySettings, result_of, run_on_temporal, start_on_temporal, worker  # noqa: E402


def recording() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@tool
def dump_log(megabytes: int) -> str:
    """The whole log."""
    return "x" * (megabytes * 1024 * 1024)


async def test_a_tool_result_over_the_payload_limit_is_the_calls_named_error_and_the_run_goes_on():
    require_temporal()
    client, (provider, exporter) = await Client.connect(TEMPORAL), recording()
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


@tool
def read_page(page: int) -> str:
    """One page of the log."""
    return f"page {page}: " + "y" * 40_000


async def test_a_conversation_growing_past_the_payload_limit_ends_payload_limit_with_its_run_never_terminated():
    """Each result fits, the conversation does not: the next model request is not sent, the run
    stops ``payload_limit`` with its ``Run`` (its result cut to fit), every span ended, the
    workflow completed (before: terminated by the server, no ``Run``, spans never ended)."""
    require_temporal()
    client, (provider, exporter) = await Client.connect(TEMPORAL), recording()
    name, queue = f"agent-{uuid.uuid4().hex[:8]}", f"q-{uuid.uuid4().hex}"
    limit = 100_000  # a small server limit, as ``limit.blobSize.error`` would set it
    agent = Agent(FakeModel([tool_call("read_page", {"page": i}, id=f"p{i}") for i in range(10)], by_step=True),
                  [read_page], name=name, tracer_provider=provider)
    async with worker(client, [agent], task_queue=queue, settings=ActivitySettings(max_payload=limit)):
        handle = await start_on_temporal(client, name, "read the whole log", task_queue=queue)
        run = await result_of(handle)
        data = await handle.result()
    assert run.stop is Stop.PAYLOAD_LIMIT and type(run.error).__name__ == "PayloadTooLarge"
    assert run.trajectory() == ["read_page"] * 3 and run.step_count == 4  # 3 pages fit in a request, 4 do not
    assert "100,000 bytes" in run.output
    assert (await handle.describe()).status is WorkflowExecutionStatus.COMPLETED
    # The result held the conversation twice: it went, then the pages' contents (markers now).
    assert payload_size(data) <= limit and data["cut"] == ["messages", "contents"] and run.messages == []
    assert run.steps[0].tool_results[0].content == f"[cut: {payload_size(read_page.fn(0)):,} bytes]"
    spans = exporter.get_finished_spans()
    (root,) = [s for s in spans if s.name == f"invoke_agent {name}"]
    assert root.attributes[N.STOP_REASON] == "payload_limit" and root.status.status_code is StatusCode.ERROR
    assert [s.name for s in spans].count("step") == 4, "every step span ended, the unsent request's too"
    assert sum(s.name.startswith("chat") for s in spans) == 3, "three requests sent, the fourth not"
