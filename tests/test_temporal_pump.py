"""The Temporal workflow's loop without a server: ``tracedagent.temporal._pump.pump`` driven by
fake activities (an executor that calls the model and the tools in this process, runs a
sub-agent as a nested pump, and answers the wait for decisions as the test says).

Every stop reason gives the ``Run`` ``arun`` gives; a pause waits and goes on with the
decisions (approve and deny) in the same run, or ends ``approval_required`` when the wait is
over; a team's sub-agent is a child run; a model failure is ``model_error``; a cancelled run's
span carries what it used. The live-server tier (tests/stack/test_temporal*.py) checks the
same against Temporal itself.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any, Mapping

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from scenarios import OUTPUT_TYPES, RETURNED_STOPS, SCENARIOS, TOOLS
from tracedagent import Agent, Budget, Completion, Stop, ToolCall, tool
from tracedagent._core import _names as N
from tracedagent._core._checkpoint import Checkpoint
from tracedagent._core._decisions import Decision, check_decisions
from tracedagent._core._machine import RunMachine, Waits
from tracedagent._core._output import with_instruction
from tracedagent._core._records import ToolResult
from tracedagent._core._result import usage_of
from tracedagent._core._run import RunState, initial_messages
from tracedagent._core._tools import Registry
from tracedagent._agent._team import SubAgentTool
from tracedagent._instrumentation._observer import RunScope
from tracedagent.testing import FakeModel, tool_call

pytest.importorskip("temporalio")  # tracedagent.temporal's package imports it (the pump itself does not)
from tracedagent.temporal._pump import pump  # noqa: E402


class Clock:
    """Workflow time, moved by the test (the wait for decisions takes ``waited`` seconds)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class FakeActivities:
    """The pump's executor in this process: the model and tools called directly, a hosted
    sub-agent's run a nested pump (a child workflow), the wait answered by ``decide``."""

    def __init__(self, agent: Agent, state: RunState, clock: Clock, decide: Any = None,
                 children: Mapping[str, Agent] | None = None, waited: float = 0.0) -> None:
        self.agent, self.state, self.clock = agent, state, clock
        self.decide, self.children, self.waited = decide, children or {}, waited
        self.log: list[tuple] = []

    async def model(self, request):
        self.log.append(("model", len(request.messages)))
        try:
            return await self.agent.model.acomplete(request)
        except Exception as exc:
            return exc

    async def tool(self, call: ToolCall) -> ToolResult:
        self.log.append(("tool", call.id))
        t = self.agent.registry.get(call.name)
        if isinstance(t, SubAgentTool) and call.name in self.children:
            checked = self.agent.registry.check(call)
            if isinstance(checked, ToolResult):
                return checked
            sub = self.children[call.name]
            run = await drive(sub, checked[1]["task"], budget=self.state.child_budget(t.budget or sub.budget),
                              clock=self.clock, decide=self.decide)
            self.state.charge(usage_of(run), run.cost)
            self.state.absorb(run)
            return Registry.result(call, t, lambda: t.answer(run))
        return await self.agent.registry.adispatch(call)

    async def decided(self, decided) -> ToolResult:
        if decided.denied is None:
            return await self.tool(decided.call)
        self.log.append(("denied", decided.call.id))
        return decided.denied

    async def wait(self, checkpoint: Checkpoint) -> Mapping[str, Decision] | None:
        self.log.append(("wait", tuple(c.id for c in checkpoint.pending)))
        self.clock.now += self.waited
        if self.decide is None:
            return None
        decisions = self.decide(checkpoint)
        check_decisions(checkpoint, decisions)  # as the decide update's validator does
        return decisions


def recording() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


LAST: dict[str, FakeActivities] = {}


async def drive(agent: Agent, task: str = "help me", *, budget: Budget | None = None, clock: Clock | None = None,
                decide: Any = None, children: Mapping[str, Agent] | None = None, waited: float = 0.0):
    """One run as ``AgentRun.run`` makes it: its span, its state on workflow time, a machine
    that can wait, and the pump."""
    clock = clock or Clock()
    budget = budget or agent.budget
    messages = initial_messages(with_instruction(agent.system_prompt, agent._output, agent.output_mode), None, task)
    traced = RunScope(agent._telemetry, budget, messages, None, asynchronous=True,
                      parallel_tool_calls=agent.parallel_tool_calls, max_tool_concurrency=agent.max_tool_concurrency)
    state = RunState(budget, messages, clock=clock, trace_id=traced.trace_id, agent=agent.name,
                     tools=agent.registry.names, span_id=traced.span_id)
    ids = iter(range(1_000))
    machine = RunMachine(state, agent.registry, traced, output=agent._output, output_mode=agent.output_mode,
                         waits=Waits(lambda: f"pause-{next(ids)}", clock))
    run_ = LAST[agent.name] = FakeActivities(agent, state, clock, decide, children, waited)
    with machine:
        return await pump(machine, run_, parallel=agent.parallel_tool_calls, concurrency=agent.max_tool_concurrency)


def facts(run) -> dict[str, Any]:
    return {"output": run.output, "stop": run.stop, "step_count": run.step_count, "messages": run.messages,
            "input_tokens": run.input_tokens, "output_tokens": run.output_tokens, "cost": run.cost,
            "requested": run.requested_tools(), "trajectory": run.trajectory(), "blocked": run.blocked_tools(),
            "not_dispatched": run.not_dispatched_tools(), "pending": run.pending_tools(),
            "error": run.error and type(run.error).__name__}


@pytest.mark.parametrize("stop", sorted(RETURNED_STOPS - {Stop.APPROVAL_REQUIRED}, key=lambda s: s.value))
async def test_each_stop_reason_gives_the_run_arun_gives(stop):
    make, budget, steps = SCENARIOS[stop]
    script, typed = make(), OUTPUT_TYPES.get(stop)
    expected = await Agent(FakeModel(script), TOOLS, budget=budget, name="desk", output_type=typed).arun("help me")
    run = await drive(Agent(FakeModel(script), TOOLS, budget=budget, name="desk", output_type=typed))
    assert run.stop is stop and facts(run) == facts(expected)
    if steps is not None:
        assert run.step_count == steps


def desk(*turns: Any, **kwargs: Any) -> Agent:
    provider, _ = recording()
    return Agent(FakeModel(list(turns)), TOOLS, name="desk", tracer_provider=provider, **kwargs)


PAUSING = Completion(tool_calls=[ToolCall("c1", "search_help", {"q": "a"}), ToolCall("c2", "close_account",
                                                                                    {"account": "A1"})])


async def test_a_pause_with_no_decision_before_the_wait_is_over_ends_approval_required_as_arun_does():
    make, budget, _ = SCENARIOS[Stop.APPROVAL_REQUIRED]
    script = make()
    expected = await Agent(FakeModel(script), TOOLS, budget=budget, name="desk").arun("help me")
    run = await drive(Agent(FakeModel(script), TOOLS, budget=budget, name="desk"), decide=None)
    assert run.stop is Stop.APPROVAL_REQUIRED and facts(run) == facts(expected)
    assert run.paused is not None and run.paused.id == "pause-0" and run.pending_tools() == ["close_account"]
    assert LAST["desk"].log[-1] == ("wait", tuple(c.id for c in run.pending))


@pytest.mark.parametrize("decision", [True, False, "not today"])
async def test_a_pause_waits_for_the_decisions_and_goes_on_in_the_same_run_as_resume_would(decision):
    provider, exporter = recording()
    agent = Agent(FakeModel([PAUSING, "done"]), TOOLS, name="desk", tracer_provider=provider)
    run = await drive(agent, decide=lambda cp: {"c2": decision})
    # As resume: the decided call as a step of its own (no model call), then the next turn.
    paused = Agent(FakeModel([PAUSING]), TOOLS, name="desk")
    resumed = Agent(FakeModel(["done"]), TOOLS, name="desk").resume((await paused.arun("help me")).paused,
                                                                     {"c2": decision})
    assert run.stop is Stop.ANSWERED and run.output == "done"
    assert [s.index for s in run.steps] == [0, 0, 1] and run.steps[1].resumed
    assert run.steps[1].tool_results == resumed.steps[0].tool_results
    assert run.messages == resumed.messages
    assert LAST["desk"].log == [("model", 1), ("tool", "c1"), ("wait", ("c2",))] + \
        ([("tool", "c2")] if decision is True else [("denied", "c2")]) + [("model", 4)]
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent desk"]
    approved, denied = (["close_account"], []) if decision is True else ([], ["close_account"])
    assert list(span.attributes[N.APPROVAL_APPROVED]) == approved and list(span.attributes[N.APPROVAL_DENIED]) == denied
    assert span.attributes[N.PENDING_CALLS] == 1 and list(span.attributes[N.TOOLS_PENDING]) == ["close_account"]
    assert [s.name for s in exporter.get_finished_spans()].count("step") == 3


async def test_the_wait_is_not_running_time():
    """A run with 60 s of time budget that waits an hour for a decision goes on with what it had left."""
    agent = desk(PAUSING, "done", budget=Budget(max_seconds=60))
    run = await drive(agent, decide=lambda cp: {"c2": True}, waited=3600)
    assert run.stop is Stop.ANSWERED and run.output == "done"


async def test_the_time_budget_is_the_runs_clock_not_the_process():
    agent = desk(tool_call("search_help", {"q": "a"}), "done", budget=Budget(max_seconds=0))
    run = await drive(agent)
    assert run.stop is Stop.TIME_BUDGET and run.step_count == 0 and agent.model.call_count == 0


async def test_a_team_runs_each_sub_agent_as_a_child_run_counted_in_its_totals():
    def team():
        researcher = Agent(FakeModel([tool_call("search_help", {"q": "x"}, id="r1"), "found"]), TOOLS,
                           name="researcher")
        writer = Agent(FakeModel([tool_call("search_help", {"q": str(i)}, id=f"w{i}") for i in range(5)]), TOOLS,
                       name="writer", budget=Budget(max_steps=2))
        planner = Agent(FakeModel([Completion(tool_calls=[ToolCall("r", "researcher", {"task": "find"}),
                                                          ToolCall("w", "writer", {"task": "write"})]), "done"]),
                        [researcher.as_tool(description="Researches."), writer.as_tool(description="Writes.")],
                        name="planner")
        return planner, researcher, writer

    planner, _, _ = team()
    expected = await planner.arun("plan")
    planner, researcher, writer = team()
    run = await drive(planner, "plan", children={"researcher": researcher, "writer": writer})
    assert facts(run) == facts(expected)
    assert sorted((r.stop, r.output, r.input_tokens, r.step_count) for r in run.sub_runs) == \
        sorted((r.stop, r.output, r.input_tokens, r.step_count) for r in expected.sub_runs)
    assert LAST["researcher"].log[0] == ("model", 1)  # each sub-agent is a run of its own


async def test_a_sub_agent_that_paused_ends_the_caller_approval_required_without_waiting():
    """Only resuming the sub-agent's run from its checkpoint can go on with it."""
    @tool(requires_approval=True)
    def refund(amount: int) -> str:
        """Refunds an amount."""
        return "refunded"

    clerk = Agent(FakeModel([tool_call("refund", {"amount": 9}, id="c1"), "never"]), [refund], name="clerk")
    lead = Agent(FakeModel([tool_call("clerk", {"task": "refund"}, id="t1"), "never"]),
                 [clerk.as_tool(description="Refunds.")], name="lead")
    run = await drive(lead, children={"clerk": clerk})  # no decision comes: the clerk's wait is over
    assert run.stop is Stop.APPROVAL_REQUIRED and run.paused is not None and run.paused.sub_agents
    assert ("wait", ("c1",)) in LAST["clerk"].log and not any(e[0] == "wait" for e in LAST["lead"].log)


async def test_a_model_failure_is_model_error_with_the_step_counted():
    agent = desk(tool_call("search_help", {"q": "a"}), TimeoutError("read timed out"))
    run = await drive(agent)
    assert run.stop is Stop.MODEL_ERROR and run.step_count == 2 and type(run.error).__name__ == "TimeoutError"


async def test_a_cancelled_run_ends_its_span_with_what_it_used():
    """The workflow cancelled while it waits for a decision: the run raises, and its span says
    cancelled with the steps, tokens and tool lists the run had used (not 0)."""
    provider, exporter = recording()
    agent = Agent(FakeModel([PAUSING, "done"]), TOOLS, name="desk", tracer_provider=provider)

    def never(cp):
        raise asyncio.CancelledError  # the wait is cancelled, as Temporal cancels the workflow's task

    task = asyncio.ensure_future(drive(agent, decide=never))
    await asyncio.sleep(0)
    with pytest.raises(asyncio.CancelledError):
        await task
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent desk"]
    assert span.attributes[N.STEPS] == 1
    assert span.attributes[N.GEN_AI_USAGE_INPUT_TOKENS] > 0 and span.attributes[N.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
    assert list(span.attributes[N.TOOLS_EXECUTED]) == ["search_help"]
    assert span.status.status_code.name == "ERROR"


def test_the_workflows_run_span_names_a_temporal_cancellation_and_keeps_what_the_run_used():
    """``AgentRun``'s observer: a cancellation in Temporal's sense (the workflow's, reaching it
    through an activity) is ``cancelled`` with the counts; a coroutine a worker dropped ends nothing."""
    from temporalio.exceptions import CancelledError as TemporalCancelled

    from tracedagent.temporal._workflow import _RunScope

    provider, exporter = recording()
    agent = Agent(FakeModel([]), TOOLS, name="desk", tracer_provider=provider)
    state = RunState(Budget(), initial_messages(None, None, "go"), agent="desk")
    state.record(0, Completion(tool_calls=[ToolCall("c1", "search_help", {"q": "a"})]))

    def drop() -> None:  # in a context of its own, as a worker's coroutine: the scope it leaves open stays there
        dropped = _RunScope(agent._telemetry, Budget(), state.messages)
        dropped.run_failed(GeneratorExit(), state.finish(Stop.CANCELLED))

    contextvars.copy_context().run(drop)
    assert exporter.get_finished_spans() == ()  # the run goes on on another worker
    scope = _RunScope(agent._telemetry, Budget(), state.messages)
    scope.run_failed(TemporalCancelled("cancelled"), state.finish(Stop.CANCELLED, call_failed=True))
    (span,) = exporter.get_finished_spans()
    assert span.attributes[N.STOP_REASON] == "cancelled" and span.attributes["error.type"] == "cancelled"
    assert span.attributes[N.STEPS] == 2 and list(span.attributes[N.TOOLS_REQUESTED]) == ["search_help"]


async def test_a_call_approved_after_a_wait_is_requested_once_as_under_resume():
    """The decided call is in the paused turn and in the decided step: the model asked for it
    once (``requested_tools`` and the run span's ``tracedagent.tools.requested``), as the paused
    and the resumed run count it once each, side by side."""
    provider, exporter = recording()
    run = await drive(Agent(FakeModel([PAUSING, "done"]), TOOLS, name="desk", tracer_provider=provider),
                      decide=lambda cp: {"c2": True})
    paused = await Agent(FakeModel([PAUSING]), TOOLS, name="desk").arun("help me")
    resumed = Agent(FakeModel(["done"]), TOOLS, name="desk").resume(paused.paused, {"c2": True})
    assert run.requested_tools() == paused.requested_tools() == ["search_help", "close_account"]
    assert resumed.requested_tools() == ["close_account"]
    assert run.trajectory() == ["search_help", "close_account"] == paused.trajectory() + resumed.trajectory()
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent desk"]
    assert list(span.attributes[N.TOOLS_REQUESTED]) == ["search_help", "close_account"]


async def test_a_conversation_past_the_payload_limit_ends_payload_limit_with_its_run_and_every_span_ended():
    """The workflow's executor checks the model request's size before it is sent and returns
    ``PayloadTooLarge`` as the call's failure (as ``_Activities.model`` does): the machine names
    the stop, the run is returned and its spans end (the server would have terminated it)."""
    from tracedagent._core._payloads import too_large

    class Bounded(FakeActivities):
        async def model(self, request):
            if (over := too_large({"messages": request.messages}, 6_000, "model request")) is not None:
                return over
            return await super().model(request)

    @tool
    def dump(n: int) -> str:
        """Dumps n kilobytes."""
        return "x" * (n * 1024)

    provider, exporter = recording()
    agent = Agent(FakeModel([tool_call("dump", {"n": 2}, id="d1"), tool_call("dump", {"n": 5}, id="d2"), "never"]),
                  [dump], name="desk", tracer_provider=provider)
    state = RunState(agent.budget, initial_messages(None, None, "go"), clock=Clock(), agent="desk",
                     tools=agent.registry.names)
    scope = RunScope(agent._telemetry, agent.budget, state.messages, None, asynchronous=True)
    machine = RunMachine(state, agent.registry, scope, waits=Waits(lambda: "p", Clock()))
    with machine:
        run = await pump(machine, Bounded(agent, state, Clock()), parallel=False, concurrency=None)
    assert run.stop is Stop.PAYLOAD_LIMIT and run.step_count == 3 and run.trajectory() == ["dump", "dump"]
    assert type(run.error).__name__ == "PayloadTooLarge" and "6,000 bytes" in run.output
    assert agent.model.call_count == 2, "the third request was not sent"
    spans = exporter.get_finished_spans()
    (root,) = [s for s in spans if s.name == "invoke_agent desk"]
    assert root.attributes[N.STOP_REASON] == "payload_limit" and root.status.status_code.name == "ERROR"
    assert [s.name for s in spans].count("step") == 3, "the step whose request was not sent ended too"
