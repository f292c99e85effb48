"""Runs on the real Temporal dev server (``make stack-up`` starts it), workers in this process:
every stop reason gives the same ``Run`` and the same span tree as ``arun``; a worker that
keeps no workflow in its cache replays the whole history at every step and still emits each
span once; the client, run, step, chat and tool spans are one trace."""

from __future__ import annotations

import asyncio
import collections
import datetime
import uuid

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from scenarios import OUTPUT_TYPES, RETURNED_STOPS, SCENARIOS, TOOLS
from tracedagent import Agent, Budget, Stop
from tracedagent._core import _names as N
from tracedagent.testing import FakeModel, tool_call

from ._temporal import TEMPORAL, require_temporal, run_facts, tree

temporalio = pytest.importorskip("temporalio")  # the test group installs it: never skipped in CI
from temporalio.client import Client  # noqa: E402

from tracedagent.temporal import run_on_temporal, worker  # noqa: E402


@pytest.fixture
async def client():
    require_temporal()
    return await Client.connect(TEMPORAL)


def recording() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def name() -> str:
    return f"agent-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("stop", sorted(RETURNED_STOPS, key=lambda s: s.value))
async def test_each_stop_reason_gives_the_same_run_and_span_tree_as_arun(client, stop):
    make, budget, _ = SCENARIOS[stop]
    script = make()  # the same turns (and call ids) for both runs
    here, here_spans = recording()
    there, there_spans = recording()
    agent_name = name()
    typed = OUTPUT_TYPES.get(stop)
    local = Agent(FakeModel(script), TOOLS, budget=budget, name=agent_name, tracer_provider=here, output_type=typed)
    durable = Agent(FakeModel(script), TOOLS, budget=budget, name=agent_name, tracer_provider=there, output_type=typed)
    queue = f"q-{uuid.uuid4().hex}"
    expected = await local.arun("help me")
    async with worker(client, [durable], task_queue=queue):
        # A pause for approval waits for a person on Temporal; with no wait it ends as arun's does.
        run = await run_on_temporal(client, agent_name, "help me", task_queue=queue, tracer_provider=there,
                                    approval_timeout=0 if stop is Stop.APPROVAL_REQUIRED else None,
                                    output_type=typed)
    assert run.stop is stop
    assert run_facts(run) == run_facts(expected)
    assert tree(list(there_spans.get_finished_spans())) == tree(list(here_spans.get_finished_spans()))
    spans = there_spans.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 1 and run.trace_id == format(spans[0].context.trace_id, "032x")
    (client_span,) = [s for s in spans if s.name == f"{N.TEMPORAL_CLIENT_SPAN} {agent_name}"]
    (run_span,) = [s for s in spans if s.name == f"invoke_agent {agent_name}"]
    assert run_span.parent.span_id == client_span.context.span_id and client_span.parent is None
    assert client_span.attributes[N.STOP_REASON] == stop.value
    assert run_span.attributes[N.TEMPORAL_TASK_QUEUE] == queue
    assert all(s.attributes[N.TEMPORAL_ATTEMPT] == 1 for s in spans if s.name.startswith(("chat", "execute_tool")))


async def test_a_worker_that_replays_the_whole_history_at_every_step_emits_each_span_once(client):
    """``max_cached_workflows=0``: every workflow task starts from the history, as after a
    worker restart between steps; the run and step spans are still each exported once."""
    provider, exporter = recording()
    agent_name = name()
    script = [tool_call("search_help", {"q": f"q{i}"}) for i in range(4)] + ["done"]
    agent = Agent(FakeModel(script), TOOLS, name=agent_name, tracer_provider=provider)
    queue = f"q-{uuid.uuid4().hex}"
    async with worker(client, [agent], task_queue=queue, max_cached_workflows=0):
        run = await run_on_temporal(client, agent_name, "go", task_queue=queue, tracer_provider=provider)
    assert run.ok and run.step_count == 5
    spans = exporter.get_finished_spans()
    ids = collections.Counter(s.context.span_id for s in spans)
    assert max(ids.values()) == 1, "no span exported twice"
    names = collections.Counter(s.name for s in spans)
    assert names == {f"{N.TEMPORAL_CLIENT_SPAN} {agent_name}": 1, f"invoke_agent {agent_name}": 1, "step": 5,
                     "chat fake-model": 5, "execute_tool search_help": 4}
    by_id = {s.context.span_id for s in spans}
    assert all(s.parent is None or s.parent.span_id in by_id for s in spans), "every parent exported"
    assert len({s.context.trace_id for s in spans}) == 1


async def test_the_time_budget_is_workflow_time(client):
    """A budget of 0 s is spent before the first model call, as in ``arun``; in the workflow
    the clock is the workflow's, so a replay decides the same."""
    provider, exporter = recording()
    agent_name = name()
    agent = Agent(FakeModel(["never"]), TOOLS, name=agent_name, tracer_provider=provider)
    queue = f"q-{uuid.uuid4().hex}"
    async with worker(client, [agent], task_queue=queue, max_cached_workflows=0):
        run = await run_on_temporal(client, agent_name, "go", task_queue=queue, budget=Budget(max_seconds=0),
                                    tracer_provider=provider)
    assert run.stop is Stop.TIME_BUDGET and run.step_count == 0 and agent.model.call_count == 0


async def test_a_query_replays_a_finished_run_and_emits_nothing(client):
    """Answering a query on a finished run replays its whole history on a worker, run span's
    end included: no span and no metric may come of it."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    provider, exporter = recording()
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    agent_name = name()
    agent = Agent(FakeModel([tool_call("search_help", {"q": "a"}), "done"]), TOOLS, name=agent_name,
                  tracer_provider=provider, meter_provider=meters)
    queue = f"q-{uuid.uuid4().hex}"
    workflow_id = f"wf-{uuid.uuid4().hex}"

    def runs_counted() -> int:
        data = reader.get_metrics_data()
        return sum(point.value for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
                   if m.name == N.METRIC_RUNS for point in m.data.data_points) if data else 0

    async with worker(client, [agent], task_queue=queue, max_cached_workflows=0):
        run = await run_on_temporal(client, agent_name, "go", task_queue=queue, workflow_id=workflow_id,
                                    tracer_provider=provider)
        spans_before, runs_before = len(exporter.get_finished_spans()), runs_counted()
        progress = await client.get_workflow_handle(workflow_id).query(N.TEMPORAL_PROGRESS_QUERY)
    assert progress == {"steps": 2, "input_tokens": run.input_tokens, "output_tokens": run.output_tokens, "cost": 0.0}
    assert len(exporter.get_finished_spans()) == spans_before == 7
    assert runs_counted() == runs_before == 1


def test_the_benchmark_runs_and_prints_every_figure():
    """benchmarks/temporal.py against the dev server, small: its figures are for people to read."""
    import subprocess
    import sys
    from pathlib import Path

    require_temporal()
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "temporal.py"
    done = subprocess.run([sys.executable, str(script), "--steps", "2", "--runs", "1", "--throughput", "4"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for figure in ("(a) bare Temporal workflow", "(b) tracedagent.temporal run", "(b)/(a) = ", "runs/s"):
        assert figure in done.stdout, done.stdout


async def test_sub_agents_are_child_workflows_with_the_same_run_and_span_tree_as_arun(client):
    """A planner delegating to two sub-agents in one turn (one answers, one runs out of steps):
    on Temporal each sub-run is a child workflow inside the planner's execute_tool span, and
    the team's Run (totals, sub-runs) and span tree are arun's."""
    from tracedagent import Completion, ToolCall

    def team(provider):
        suffix = "team"
        researcher = Agent(FakeModel([tool_call("search_help", {"q": "delays"}, id="r1"), "found"]), TOOLS,
                           name=f"researcher-{suffix}", tracer_provider=provider)
        writer = Agent(FakeModel([tool_call("search_help", {"q": str(i)}, id=f"w{i}") for i in range(5)]), TOOLS,
                       name=f"writer-{suffix}", budget=Budget(max_steps=2), tracer_provider=provider)
        planner = Agent(FakeModel([Completion(tool_calls=[ToolCall("r", researcher.name, {"task": "find"}),
                                                          ToolCall("w", writer.name, {"task": "write"})]), "done"]),
                        [researcher.as_tool(description="Researches."), writer.as_tool(description="Writes.")],
                        name=f"planner-{suffix}", tracer_provider=provider)
        return planner, researcher, writer

    here, here_spans = recording()
    there, there_spans = recording()
    planner, _, _ = team(here)
    expected = await planner.arun("plan", conversation_id="chat-1")
    durable = team(there)
    queue = f"q-{uuid.uuid4().hex}"
    async with worker(client, durable, task_queue=queue, max_cached_workflows=0):  # replays at every step too
        run = await run_on_temporal(client, durable[0].name, "plan", task_queue=queue, conversation_id="chat-1",
                                    tracer_provider=there)
    assert run_facts(run) == run_facts(expected)
    assert sorted((r.stop, r.output, r.input_tokens, r.step_count) for r in run.sub_runs) == \
        sorted((r.stop, r.output, r.input_tokens, r.step_count) for r in expected.sub_runs)
    assert tree(list(there_spans.get_finished_spans())) == tree(list(here_spans.get_finished_spans()))
    assert len({s.context.trace_id for s in there_spans.get_finished_spans()}) == 1


async def test_a_run_of_an_agent_no_worker_hosts_fails_at_once_saying_so(client):
    from temporalio.client import WorkflowFailureError

    provider, exporter = recording()
    queue = f"q-{uuid.uuid4().hex}"
    async with worker(client, [Agent(FakeModel(["hi"]), name=name(), tracer_provider=provider)], task_queue=queue):
        with pytest.raises(WorkflowFailureError) as failed:
            await run_on_temporal(client, "nobody", "go", task_queue=queue, tracer_provider=provider)
    assert failed.value.cause.type == "AgentNotHosted" and "'nobody'" in failed.value.cause.message
    (span,) = exporter.get_finished_spans()  # the client's, failed; no run began
    assert span.name == f"{N.TEMPORAL_CLIENT_SPAN} nobody" and span.status.status_code.name == "ERROR"


async def test_a_cancelled_run_ends_every_span_it_opened_as_cancelled(client):
    """Cancelling the workflow while a tool call runs: the activity is cancelled (it heartbeats),
    and the run, its step and the call end ``cancelled``, as a cancelled ``arun`` does."""
    import asyncio

    from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

    from tracedagent import tool
    from tracedagent.temporal import ActivitySettings, start_on_temporal

    started = asyncio.Event()

    @tool
    async def wait_forever(q: str) -> str:
        """Waits."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    provider, exporter = recording()
    agent_name = name()
    agent = Agent(FakeModel([tool_call("wait_forever", {"q": "x"})]), [wait_forever], name=agent_name,
                  tracer_provider=provider)
    queue = f"q-{uuid.uuid4().hex}"
    async with worker(client, [agent], task_queue=queue, settings=ActivitySettings(heartbeat_timeout=1)):
        handle = await start_on_temporal(client, agent_name, "go", task_queue=queue)
        await asyncio.wait_for(started.wait(), 30)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
        for _ in range(100):  # the activity hears of the cancellation at its next heartbeat
            if any(s.name == "execute_tool wait_forever" for s in exporter.get_finished_spans()):
                break
            await asyncio.sleep(0.1)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {f"invoke_agent {agent_name}", "step", "chat fake-model", "execute_tool wait_forever"}
    assert spans[f"invoke_agent {agent_name}"].attributes[N.STOP_REASON] == "cancelled"
    for span_name in (f"invoke_agent {agent_name}", "step", "execute_tool wait_forever"):
        assert spans[span_name].attributes[N.ERROR_TYPE] == N.ERROR_CANCELLED, span_name


def test_doctor_finds_the_stacks_temporal_serving():
    import os
    import subprocess
    import sys

    require_temporal()
    env = {**os.environ, "COLUMNS": "250", N.ENV_TEMPORAL_ADDRESS: TEMPORAL}
    done = subprocess.run([sys.executable, "-m", "tracedagent", "doctor"], capture_output=True, text=True,
                          timeout=60, env=env)
    row = next(line for line in done.stdout.splitlines() if "Temporal frontend" in line)
    assert TEMPORAL in row and " reachable " in row and "SERVING" in row, done.stdout


async def test_history_system_prompt_and_conversation_reach_the_workflow_as_they_reach_arun(client):
    history = [{"role": "user", "content": "my order is 1042"}, {"role": "assistant", "content": "noted"}]
    script = [tool_call("search_help", {"q": "1042"}, id="h1"), "it ships today"]
    here, here_spans = recording()
    there, there_spans = recording()
    agent_name = name()
    options = dict(system_prompt="You help with orders.", name=agent_name, max_output_tokens=300, temperature=0.2)
    local = Agent(FakeModel(script), TOOLS, tracer_provider=here, **options)
    durable = Agent(FakeModel(script), TOOLS, tracer_provider=there, **options)
    expected = await local.arun("where is it?", history, conversation_id="chat-9")
    queue = f"q-{uuid.uuid4().hex}"
    async with worker(client, [durable], task_queue=queue):
        run = await run_on_temporal(client, agent_name, "where is it?", history, conversation_id="chat-9",
                                    task_queue=queue, tracer_provider=there)
    assert run_facts(run) == run_facts(expected) and run.conversation_id == "chat-9"
    assert durable.model.calls == local.model.calls, "the model was sent the same, prompt and options included"
    assert tree(list(there_spans.get_finished_spans())) == tree(list(here_spans.get_finished_spans()))


@pytest.mark.parametrize("request_, problem", [
    ({"agent": "x"}, "'task' is NoneType"),
    ({"agent": "x", "task": "go", "budget": {"max_step": 3}}, "unknown fields ['max_step']"),
    ({"agent": "x", "task": "go", "budget": {"max_steps": 2.5}}, "'budget.max_steps' is float"),
    ({"agent": "x", "task": "go", "history": "hello"}, "'history' is not a list of messages"),
    ({"agent": ["x"], "task": "go"}, "'agent' is list"),
    ({"agent": "x", "task": "go", "approval_timeout": "soon"}, "'approval_timeout' is 'soon'"),
    ("go", "a str, not an object"),
])
async def test_a_request_written_by_hand_that_is_not_a_run_request_fails_at_once_saying_why(client, request_, problem):
    """Started by another client or by hand, a request that lacks a field or holds a wrong type
    fails the workflow at once (BadRequest, not retried); it was a workflow task failing on every
    retry, the run never ending. Nothing ran, so no span was made."""
    from temporalio.client import WorkflowFailureError

    provider, exporter = recording()
    queue = f"q-{uuid.uuid4().hex}"
    agent = Agent(FakeModel(["hi"]), name=name(), tracer_provider=provider)
    if isinstance(request_, dict) and request_["agent"] == "x":
        request_ = {**request_, "agent": agent.name}  # hosted: only the request is wrong
    async with worker(client, [agent], task_queue=queue):
        with pytest.raises(WorkflowFailureError) as failed:
            await client.execute_workflow(N.TEMPORAL_WORKFLOW, request_, id=f"bad-{uuid.uuid4().hex}",
                                          task_queue=queue, execution_timeout=datetime.timedelta(seconds=60))
    assert failed.value.cause.type == "BadRequest" and problem in failed.value.cause.message
    assert exporter.get_finished_spans() == ()


async def test_a_sub_agents_wait_for_approval_ends_within_the_teams_approval_timeout(client):
    """The planner's approval_timeout reaches its sub-agents' child workflows: a sub-agent's call
    that waits ends the team approval_required within the timeout (the child waited forever)."""
    import time

    from tracedagent import tool
    from tracedagent.temporal import result_of, start_on_temporal

    @tool(requires_approval=True)
    def refund(amount: int) -> str:
        """Refunds an amount."""
        return "refunded"

    provider, exporter = recording()
    clerk = Agent(FakeModel([tool_call("refund", {"amount": 900}, id="c1"), "never"]), [refund], name=name(),
                  tracer_provider=provider)
    lead = Agent(FakeModel([tool_call(clerk.name, {"task": "refund"}, id="t1"), "never"]),
                 [clerk.as_tool(description="Refunds.")], name=name(), tracer_provider=provider)
    queue = f"q-{uuid.uuid4().hex}"
    async with worker(client, [lead, clerk], task_queue=queue):
        started = time.monotonic()
        handle = await start_on_temporal(client, lead.name, "help", task_queue=queue, approval_timeout=1.0)
        run = await asyncio.wait_for(result_of(handle), 60)
    assert run.stop is Stop.APPROVAL_REQUIRED and time.monotonic() - started < 30
    [sub] = run.sub_runs
    assert sub.stop is Stop.APPROVAL_REQUIRED and sub.pending_tools() == ["refund"]
    assert all(span.end_time is not None for span in exporter.get_finished_spans())
    assert {s.name for s in exporter.get_finished_spans()} >= {f"invoke_agent {lead.name}", f"invoke_agent {clerk.name}"}
