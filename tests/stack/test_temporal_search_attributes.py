"""The operator's view on the real Temporal dev server, started as the stack starts it (with
tracedagent's search attributes registered): a worker refuses a namespace that lacks them,
naming them, before it polls anything; and the upsert ``run_search_attributes`` builds is what
``temporal workflow list --query`` finds, with no worker up."""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import timedelta

import pytest
from opentelemetry.sdk.trace import TracerProvider

from tracedagent import Agent, Stop, tool
from tracedagent._core import _names as N
from tracedagent.testing import FakeModel, tool_call

from ._temporal import TEMPORAL, require_temporal

pytest.importorskip("temporalio")  # the test group installs it: never skipped in CI
from google.protobuf.duration_pb2 import Duration  # noqa: E402
from temporalio import workflow  # noqa: E402
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from tracedagent.temporal import (SearchAttributesNotRegistered, approve_on_temporal, result_of,  # noqa: E402
                                  start_on_temporal, waiting_on_temporal, worker)
from tracedagent.temporal._search import SEARCH_KEYS, run_search_attributes  # noqa: E402


@workflow.defn(name="tracedagent-test.searchable", sandboxed=False)  # the sandbox would re-import this module
class Searchable:
    """Upserts a run's facts as the run workflow does: waiting, then ended."""

    def __init__(self) -> None:
        self.decided = False

    @workflow.run
    async def run(self, agent: str) -> None:
        workflow.upsert_search_attributes(run_search_attributes(agent=agent, trace_id="ab" * 16, waiting=True))
        await workflow.wait_condition(lambda: self.decided)
        workflow.upsert_search_attributes(run_search_attributes(waiting=False, stop="answered"))

    @workflow.signal
    def decide(self) -> None:
        self.decided = True


async def listed(client: Client, query: str) -> list[str]:
    return [w.id async for w in client.list_workflows(query)]


async def test_upserted_facts_are_what_temporal_workflow_list_finds_with_no_worker_up():
    require_temporal()
    client = await Client.connect(TEMPORAL)
    agent, queue = f"agent-{uuid.uuid4().hex[:8]}", f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue, workflows=[Searchable]):
        handle = await client.start_workflow(Searchable.run, agent, id=f"{agent}-run", task_queue=queue)
        waiting = f"{N.TEMPORAL_SEARCH_WAITING}=true AND {N.TEMPORAL_SEARCH_AGENT}='{agent}'"
        for _ in range(100):
            if await listed(client, waiting):
                break
            await asyncio.sleep(0.2)
    # The worker is gone: the visibility store answers.
    assert await listed(client, waiting) == [f"{agent}-run"]
    assert await listed(client, f"{N.TEMPORAL_SEARCH_TRACE_ID}='{'ab' * 16}' AND "
                                f"{N.TEMPORAL_SEARCH_AGENT}='{agent}'") == [f"{agent}-run"]
    async with Worker(client, task_queue=queue, workflows=[Searchable]):
        await handle.signal(Searchable.decide)
        await handle.result()
    ended = f"{N.TEMPORAL_SEARCH_STOP_REASON}='answered' AND {N.TEMPORAL_SEARCH_WAITING}=false AND " \
            f"{N.TEMPORAL_SEARCH_AGENT}='{agent}'"
    for _ in range(100):
        if await listed(client, ended):
            break
        await asyncio.sleep(0.2)
    assert await listed(client, ended) == [f"{agent}-run"]


async def test_a_worker_refuses_a_namespace_without_the_search_attributes_before_it_polls():
    require_temporal()
    client = await Client.connect(TEMPORAL)
    namespace = f"bare-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(RegisterNamespaceRequest(
        namespace=namespace, workflow_execution_retention_period=Duration(seconds=86400)))
    bare = await Client.connect(TEMPORAL, namespace=namespace)
    agent = Agent(FakeModel(["done"]), [], name=f"agent-{uuid.uuid4().hex[:8]}")
    entered = False
    with pytest.raises(SearchAttributesNotRegistered) as raised:
        async with worker(bare, [agent], task_queue=f"q-{uuid.uuid4().hex}"):
            entered = True
    assert not entered, "the block did not run: nothing was polled"
    assert raised.value.namespace == namespace and set(raised.value.missing) == set(N.TEMPORAL_SEARCH_ATTRIBUTES)

    # Opted out (a namespace whose operator will not register them): it starts.
    unchecked = worker(bare, [agent], task_queue=f"q-{uuid.uuid4().hex}", search_attributes=False,
                       graceful_shutdown_timeout=timedelta(seconds=1))
    async with unchecked:
        pass

    # The default namespace of the stack's dev server has them: the check passes.
    async with worker(client, [agent], task_queue=f"q-{uuid.uuid4().hex}"):
        pass


@tool(requires_approval=True)
def refund(amount: int) -> str:
    """Refunds an amount."""
    return f"refunded {amount}"


async def eventually_listed(client: Client, query: str, expected: list[str]) -> list[str]:
    for _ in range(100):  # the visibility store is eventually consistent
        if (found := await listed(client, query)) == expected:
            return found
        await asyncio.sleep(0.2)
    return await listed(client, query)


async def test_the_run_workflow_upserts_waiting_then_its_stop_reason_found_with_no_worker_up():
    """The run's own workflow: its agent, trace and conversation when it starts, waiting while a
    person must decide (listed with no worker up), then no longer waiting and its stop reason."""
    require_temporal()
    client = await Client.connect(TEMPORAL)
    name, queue = f"agent-{uuid.uuid4().hex[:8]}", f"q-{uuid.uuid4().hex}"
    provider = TracerProvider()  # recording: the run has a trace id

    def agent() -> Agent:
        return Agent(FakeModel([tool_call("refund", {"amount": 30}, id="r1"), "refunded"], by_step=True), [refund],
                     name=name, tracer_provider=provider)

    mine = f"{N.TEMPORAL_SEARCH_AGENT}='{name}'"
    async with worker(client, [agent()], task_queue=queue):
        handle = await start_on_temporal(client, name, "refund order 7", task_queue=queue,
                                         conversation_id=f"conv-{name}")
        for _ in range(150):
            if await waiting_on_temporal(client, handle.id):
                break
            await asyncio.sleep(0.2)
    # No worker is up: the visibility store answers, no query handler runs.
    assert await eventually_listed(client, f"{N.TEMPORAL_SEARCH_WAITING}=true AND {mine}", [handle.id]) == [handle.id]
    assert await listed(client, f"{N.TEMPORAL_SEARCH_CONVERSATION_ID}='conv-{name}'") == [handle.id]
    described = (await handle.describe()).typed_search_attributes
    trace_id = described.get(SEARCH_KEYS[N.TEMPORAL_SEARCH_TRACE_ID])
    assert trace_id is not None and len(trace_id) == 32
    assert described.get(SEARCH_KEYS[N.TEMPORAL_SEARCH_STOP_REASON]) is None, "no stop yet"
    # What `temporal workflow describe` and the UI show: an id a person can read, and the memo.
    assert re.fullmatch(rf"{name}-[0-9a-f]{{12}}", handle.id)
    assert await (await handle.describe()).memo() == {N.TEMPORAL_SEARCH_AGENT: name, N.TEMPORAL_SEARCH_TRACE_ID: trace_id,
                                                      N.TEMPORAL_SEARCH_CONVERSATION_ID: f"conv-{name}"}

    async with worker(client, [agent()], task_queue=queue):
        await approve_on_temporal(client, handle.id, {"r1": True})
        run = await result_of(handle)
    assert run.stop is Stop.ANSWERED and run.trace_id == trace_id
    assert run.requested_tools() == ["refund"], "requested once, however often it was decided"
    ended = f"{N.TEMPORAL_SEARCH_STOP_REASON}='answered' AND {N.TEMPORAL_SEARCH_WAITING}=false AND {mine}"
    assert await eventually_listed(client, ended, [handle.id]) == [handle.id]


async def test_a_worker_without_search_attributes_upserts_none():
    require_temporal()
    client = await Client.connect(TEMPORAL)
    name, queue = f"agent-{uuid.uuid4().hex[:8]}", f"q-{uuid.uuid4().hex}"
    # a provider of its own: whether the global one records (a recorder earlier in the session may
    # have installed one) decides whether the run has a trace id to put in the memo
    agent = Agent(FakeModel(["done"]), [], name=name, tracer_provider=TracerProvider())
    async with worker(client, [agent], task_queue=queue, search_attributes=False):
        handle = await start_on_temporal(client, name, "hi", task_queue=queue)
        run = await result_of(handle)
    assert run.stop is Stop.ANSWERED and run.trace_id
    described = await handle.describe()
    assert described.typed_search_attributes.get(SEARCH_KEYS[N.TEMPORAL_SEARCH_AGENT]) is None
    assert await described.memo() == {N.TEMPORAL_SEARCH_AGENT: name, N.TEMPORAL_SEARCH_TRACE_ID: run.trace_id}, \
        "a memo needs no registration"
