"""A worker exporting through the SDK's default ``BatchSpanProcessor`` (a 5 s schedule delay),
SIGKILLed inside a tool call on the real Temporal dev server: the spans of every activity that
had completed, and the step span a completed workflow task ended, had already arrived at the
OTLP receiver, because an activity exports the spans its call ended before it reports its
result (``ActivitySettings.flush_timeout``) and the worker those of each workflow task before
it completes it (``FlushingRunner``). Only the Temporal dev server is needed: the receiver is in
this process."""

from __future__ import annotations

import asyncio
import collections
import signal
import time
import uuid

import pytest

from otlp_receivers import GrpcReceiver
from ._temporal import TEMPORAL, require_temporal
from .test_temporal_workers import workers  # noqa: F401  (the fixture)

pytest.importorskip("temporalio")  # the test group installs it: never skipped in CI
from temporalio.client import Client  # noqa: E402

from tracedagent.temporal import result_of, start_on_temporal  # noqa: E402


async def test_a_sigkilled_worker_has_exported_the_spans_of_its_completed_activities(workers, tmp_path):
    require_temporal()
    client = await Client.connect(TEMPORAL)
    queue, service = f"q-{uuid.uuid4().hex}", f"sigkill-{uuid.uuid4().hex[:8]}"
    (tmp_path / "hang").touch()
    with GrpcReceiver() as receiver:
        worker = workers(queue, service, receiver.endpoint, "batch")
        handle = await start_on_temporal(client, "durable", "go", task_queue=queue)
        effects = tmp_path / "effects"
        deadline = time.monotonic() + 60
        # record(1) has begun: the model call of step 0, record(0) and the model call of step 1
        # have completed as activities (Temporal recorded each before scheduling the next).
        while not (effects.exists() and any(line.startswith("1 ") for line in effects.read_text().splitlines())):
            assert time.monotonic() < deadline, "the run never reached the second tool call"
            await asyncio.sleep(0.05)
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait()
        try:
            arrived = collections.Counter(s.name for s in receiver.spans() if s.resource.get("service.name") == service)
            assert arrived["chat fake-model"] == 2, f"both completed model calls' spans arrived: {arrived}"
            assert arrived["execute_tool record"] == 1, f"the completed tool call's span arrived: {arrived}"
            assert arrived["step"] == 1, f"step 0, ended in a workflow task Temporal recorded, arrived: {arrived}"
            assert arrived["invoke_agent durable"] == 0, "the run span is open: it never ended on that worker"
            tool = next(s for s in receiver.spans() if s.name == "execute_tool record")
            assert tool.attributes["tracedagent.tool.outcome"] == "ok"
        finally:
            await handle.terminate()


async def test_a_worker_sigkilled_as_the_run_ends_has_exported_the_run_and_step_spans_its_workflow_ended(
        workers, tmp_path):
    """The last workflow task ends the last step and the run span, in workflow code: the worker
    exports them before it completes the task, so a worker killed the moment the run's result is
    known has lost none (the next activity's flush, which carries earlier steps' spans, never comes)."""
    require_temporal()
    client = await Client.connect(TEMPORAL)
    queue, service = f"q-{uuid.uuid4().hex}", f"sigkill-{uuid.uuid4().hex[:8]}"
    with GrpcReceiver() as receiver:
        worker = workers(queue, service, receiver.endpoint, "batch")
        run = await result_of(await start_on_temporal(client, "durable", "go", task_queue=queue))
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait()
        assert run.ok and run.step_count == 3
        arrived = collections.Counter(s.name for s in receiver.spans() if s.resource.get("service.name") == service)
        assert arrived == {"invoke_agent durable": 1, "step": 3, "chat fake-model": 3, "execute_tool record": 2}
        assert {s.trace_id for s in receiver.spans() if s.resource.get("service.name") == service} == {run.trace_id}
