"""The approval pause on the real Temporal dev server, workers in processes of their own, spans
through the real Collector into Jaeger: a run waits for a person's decisions in its workflow
(no process holds it), its worker exits, a second worker takes the decisions and finishes it
in the same trace; a denial reaches the model; bad decisions are rejected and nothing runs."""

from __future__ import annotations

import asyncio
import collections
import json
import time
import uuid

import pytest

from tracedagent._core import _names as N

from ._stack import eventually, jaeger_trace
from ._temporal import TEMPORAL, require_temporal
from .test_temporal_workers import spans_by_name, tags, workers  # noqa: F401  (the fixture)

pytest.importorskip("temporalio")  # the test group installs it: never skipped in CI
from temporalio.client import Client, WorkflowUpdateFailedError  # noqa: E402
from temporalio.service import RPCError  # noqa: E402

from tracedagent import Approve, BadDecisions, PendingCall, Stop, ToolOutcome  # noqa: E402
from tracedagent.temporal import (approve_on_temporal, result_of, start_on_temporal,  # noqa: E402
                                  waiting_on_temporal)


async def _waiting(client: Client, workflow_id: str) -> list[dict]:
    deadline = time.monotonic() + 60
    while not (waiting := await waiting_on_temporal(client, workflow_id)):
        assert time.monotonic() < deadline, "the run never waited for approval"
        await asyncio.sleep(0.2)
    return waiting


def _whole(run_trace_id: str, expected: dict) -> dict:
    trace = eventually("the run's whole trace in Jaeger", lambda: (
        t if (t := jaeger_trace(run_trace_id)) and spans_by_name(t) == expected else None), timeout=60)
    ids = collections.Counter(s["spanID"] for s in trace["spans"])
    assert max(ids.values()) == 1, "no span twice"
    for span in trace["spans"]:
        parents = [r["spanID"] for r in span.get("references", []) if r["refType"] == "CHILD_OF"]
        assert all(p in ids for p in parents), f"{span['operationName']}'s parent is in the trace"
    return trace


async def test_an_approval_wait_is_resumed_by_its_decisions_after_the_worker_that_paused_it_exited(
        stack_up, telemetry, service_name, workers, tmp_path):
    require_temporal()
    client = await Client.connect(TEMPORAL)
    queue, workflow_id = f"q-{uuid.uuid4().hex}", f"payer-{uuid.uuid4().hex}"
    first = workers(queue, service_name)
    handle = await start_on_temporal(client, "payer", "refund order 7", task_queue=queue, workflow_id=workflow_id)
    waiting = await _waiting(client, workflow_id)
    shown = PendingCall(id="r1", name="refund", arguments={"amount": 30}, reason="refund requires approval")
    assert waiting == [{**shown.as_dict(), "digest": shown.digest}]

    # rejected before anything runs: an unknown id, a missing decision, a decision of the wrong type
    for bad, problem in (({"r1": True, "zz": True}, "zz"), ({}, "r1"), ({"r1": 3}, "int")):
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await approve_on_temporal(client, workflow_id, bad)
        assert failed.value.cause.type == "BadDecisions" and problem in str(failed.value.cause)
    with pytest.raises(BadDecisions, match="more than 10,000"):  # a pasted file: refused before it is sent
        await approve_on_temporal(client, workflow_id, {"r1": "no " * 5000})
    for bad in (["r1"], "r1", {"r1": "no " * 5000}):  # from another client: another shape, a pasted file
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await client.get_workflow_handle(workflow_id).execute_update(N.TEMPORAL_DECIDE_UPDATE, bad)
        assert failed.value.cause.type == "BadDecisions"
    other = PendingCall(id="r1", name="refund", arguments={"amount": 3000}, reason="")  # not what the person saw
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await approve_on_temporal(client, workflow_id, {"r1": Approve(digest=other.digest)})
    assert failed.value.cause.type == "DecisionMismatch"
    assert await waiting_on_temporal(client, workflow_id) == waiting, "still waiting after the rejections"
    assert not (tmp_path / "refunds").exists()

    first.stop()  # the run waits in Temporal, with no process holding it
    assert first.process.returncode is not None
    second = workers(queue, service_name)
    assert await approve_on_temporal(client, workflow_id, {"r1": Approve(digest=waiting[0]["digest"])}) == ["r1"]
    run = await asyncio.wait_for(result_of(handle), 60)
    assert await waiting_on_temporal(client, workflow_id) == []
    with pytest.raises(RPCError, match="already completed"):  # a finished run takes no decisions
        await approve_on_temporal(client, workflow_id, {"r1": True})

    assert run.stop is Stop.ANSWERED and run.output == "done"
    assert run.messages[-2]["role"] == "tool" and "refunded 30" in str(run.messages[-2]["content"])
    assert [line.split() for line in (tmp_path / "refunds").read_text().splitlines()] == \
        [["30", str(second.process.pid)]], "the approved call ran once, on the worker that took the decisions"
    expected = {"invoke_agent payer": 1, "step": 3, "chat fake-model": 2, "execute_tool refund": 1}
    trace = _whole(run.trace_id, expected)
    [run_span] = [s for s in trace["spans"] if s["operationName"] == "invoke_agent payer"]
    attributes = tags(run_span)
    assert attributes[N.PENDING_CALLS] == 1 and attributes[N.STOP_REASON] == "answered"
    assert json.loads(attributes[N.APPROVAL_APPROVED]) == ["refund"]
    assert json.loads(attributes.get(N.APPROVAL_DENIED, "[]")) == []
    assert json.loads(attributes[N.TOOLS_PENDING]) == ["refund"]
    steps = sorted((tags(s)[N.STEP_INDEX], tags(s).get(N.STEP_RESUMED, False)) for s in trace["spans"]
                   if s["operationName"] == "step")
    assert steps == [(0, False), (0, True), (1, False)], "the paused turn, its decided calls, the answer"


async def test_a_denied_call_is_not_run_and_the_model_is_shown_the_denial(
        stack_up, telemetry, service_name, workers, tmp_path):
    require_temporal()
    client = await Client.connect(TEMPORAL)
    queue, workflow_id = f"q-{uuid.uuid4().hex}", f"payer-{uuid.uuid4().hex}"
    workers(queue, service_name)
    handle = await start_on_temporal(client, "payer", "refund order 8", task_queue=queue, workflow_id=workflow_id)
    await _waiting(client, workflow_id)
    await approve_on_temporal(client, workflow_id, {"r1": "refunds need a manager"})
    run = await asyncio.wait_for(result_of(handle), 60)
    assert run.stop is Stop.ANSWERED and not (tmp_path / "refunds").exists()
    denied = [r for s in run.steps for r in s.tool_results if r.call_id == "r1"]
    assert [r.outcome for r in denied] == [ToolOutcome.DENIED] and "refunds need a manager" in denied[0].content
    trace = _whole(run.trace_id, {"invoke_agent payer": 1, "step": 3, "chat fake-model": 2, "execute_tool refund": 1})
    [run_span] = [s for s in trace["spans"] if s["operationName"] == "invoke_agent payer"]
    assert json.loads(tags(run_span)[N.APPROVAL_DENIED]) == ["refund"]
    assert json.loads(tags(run_span).get(N.APPROVAL_APPROVED, "[]")) == []


async def test_a_run_not_decided_within_its_approval_timeout_ends_approval_required_with_a_checkpoint(
        stack_up, telemetry, service_name, workers, tmp_path):
    require_temporal()
    client = await Client.connect(TEMPORAL)
    queue = f"q-{uuid.uuid4().hex}"
    workers(queue, service_name)
    handle = await start_on_temporal(client, "payer", "refund order 9", task_queue=queue, approval_timeout=1)
    run = await asyncio.wait_for(result_of(handle), 60)
    assert run.stop is Stop.APPROVAL_REQUIRED and [c.id for c in run.pending] == ["r1"]
    assert run.paused is not None and run.paused.agent == "payer" and not (tmp_path / "refunds").exists()
