"""The workflow that drives one agent run: the loop's decisions, deterministically.

``AgentRun.run`` is ``Agent._aloop`` with each model call and each tool call an activity: the
same ``RunState`` decisions in the same order (time budget, record, answer, the turn's
ceilings and repeat check, append, the budgets after the tools, the step ceiling) and the same
run and step scopes. Everything it decides on is in the run's history (the activities'
results) or in the agent's definition, so a replay on any worker decides the same; the time
budget is workflow time, which replays too.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Sequence

from opentelemetry import context as otel_context
from temporalio import workflow
from temporalio.exceptions import (ActivityError, ApplicationError, CancelledError, TimeoutError as TemporalTimeout,
                                   is_cancelled_exception)

from .._core import _names as N
from .._core._budget import Budget, Stop
from .._core._checkpoint import BadDecisions, Checkpoint
from .._core._decisions import Decision, check_decisions, decisions_from_data, settle
from .._core._deadline import Deadline
from .._core._records import ToolCall, ToolOutcome, ToolResult
from .._core._run import Run, RunState, initial_messages
from .._core._result import usage_of
from .._agent._resume import _plan, denied, record_decisions
from .._agent._team import SubAgentTool
from .._core._tools import Approved, Registry, Tool
from .._instrumentation._observer import RunScope
from .._instrumentation._spans import ToolScope, failure_kind
from ._activities import PROPAGATOR, traceparent
from ._codec import (budget_to_data, call_to_data, completion_from_data, error_from_data, request_from_data,
                     result_from_data, run_from_data, run_to_data)
from ._hosting import HostedAgent, hosted, is_hosted

__all__ = ["AgentRun", "WorkflowRunState"]


class WorkflowRunState(RunState):
    """``RunState`` on workflow time (``workflow.time()``), the same on every replay."""

    def __init__(self, budget: Budget, messages: list, **kwargs: Any) -> None:
        super().__init__(budget, messages, clock=workflow.time, **kwargs)

    def model_failed(self, error: BaseException | None) -> Run:
        if error is not None and self.deadline is not None and self.deadline.passed():
            error = None  # cut by the deadline: out of time, as RunState decides
        return super().model_failed(error)


@workflow.defn(name=N.TEMPORAL_WORKFLOW)
class AgentRun:
    """One run of a hosted agent. Input: ``{"agent", "task", "history", "budget",
    "conversation_id", "traceparent"}``; result: the ``Run`` as data (``_codec``)."""

    def __init__(self) -> None:
        self._state: WorkflowRunState | None = None
        self._waiting: Checkpoint | None = None
        """The pause the run waits in for a person's decisions (``None`` when it does not wait)."""
        self._decisions: dict[str, Decision] | None = None
        """The decisions the ``decide`` update brought, until the run takes them."""

    @workflow.query(name=N.TEMPORAL_PROGRESS_QUERY)
    def progress(self) -> dict[str, Any]:
        """Where the run is: steps recorded, tokens and cost so far. A query replays the
        history on a worker (even of a finished run); nothing is emitted for it."""
        state = self._state
        if state is None:
            return {"steps": 0, "input_tokens": 0, "output_tokens": 0, "cost": 0.0}
        return {"steps": len(state.steps), "input_tokens": state.input_tokens, "output_tokens": state.output_tokens,
                "cost": state.cost}

    @workflow.query(name=N.TEMPORAL_WAITING_QUERY)
    def waiting(self) -> list[dict[str, Any]]:
        """The calls the run waits for a decision on: id, tool name, arguments, why (empty
        when it does not wait). The arguments are the application's data: show them to who decides."""
        cp = self._waiting
        if cp is None or self._decisions is not None:
            return []
        return [{"id": c.id, "name": c.name, "arguments": c.arguments, "reason": c.reason, "digest": c.digest}
                for c in cp.pending]

    @workflow.update(name=N.TEMPORAL_DECIDE_UPDATE)
    async def decide(self, decisions: Any) -> list[str]:  # Any: a payload of another shape is BadDecisions
        """A person's decisions on the waiting calls (as ``Agent.resume`` takes them): the run
        goes on with them. Returns the ids decided."""
        self._decisions = dict(decisions_from_data(decisions))
        return sorted(decisions)

    @decide.validator
    def _validate(self, decisions: Any) -> None:
        """Rejected (nothing is written to the history, nothing runs) unless the run waits and
        there is exactly one decision, ``True``, ``False`` or a reason, for each waiting call."""
        if self._waiting is None or self._decisions is not None:
            raise ApplicationError("the run is not waiting for decisions", type="NotWaiting", non_retryable=True)
        try:
            check_decisions(self._waiting, decisions_from_data(decisions))
        except BadDecisions as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from None

    async def wait_for_decisions(self, cp: Checkpoint, timeout: float | None) -> dict[str, Decision] | None:
        """Wait (workflow time: no process holds the run) for the ``decide`` update; ``None``
        after ``timeout`` seconds."""
        self._waiting = cp
        try:
            await workflow.wait_condition(lambda: self._decisions is not None,
                                          timeout=None if timeout is None else timedelta(seconds=timeout))
        except asyncio.TimeoutError:
            return None
        finally:
            self._waiting = None
        decisions, self._decisions = self._decisions, None
        return decisions

    @workflow.run
    async def run(self, request: Any) -> dict[str, Any]:
        info = workflow.info()
        # Faults no retry would mend (a request written by hand, by another client, or for an
        # agent this queue does not host): the run fails at once, and its caller hears why.
        try:
            checked = request_from_data(request)
        except (TypeError, ValueError) as exc:
            raise ApplicationError(f"not a run request: {exc}", type="BadRequest", non_retryable=True) from None
        if not is_hosted(info.task_queue, checked["agent"]):
            raise ApplicationError(f"no agent named {checked['agent']!r} is hosted on task queue "
                                   f"{info.task_queue!r}", type="AgentNotHosted", non_retryable=True)
        agent = hosted(info.task_queue, checked["agent"])
        a = agent.agent
        budget = checked["budget"] or a.budget
        messages = initial_messages(a.system_prompt, checked["history"], checked["task"])
        conversation_id = checked["conversation_id"]
        token = otel_context.attach(PROPAGATOR.extract(checked["traceparent"]))
        try:
            traced = RunScope(agent.workflow_telemetry, budget, messages, conversation_id, asynchronous=True,
                              parallel_tool_calls=a.parallel_tool_calls, max_tool_concurrency=a.max_tool_concurrency)
            traced.span.set_attributes({N.TEMPORAL_WORKFLOW_ID: info.workflow_id,
                                        N.TEMPORAL_TASK_QUEUE: info.task_queue})
            state = self._state = WorkflowRunState(budget, messages, trace_id=traced.trace_id,
                                                   conversation_id=conversation_id, agent=a.name,
                                                   tools=a.registry.names, span_id=traced.span_id)
            state.checkpoint_keys, state.checkpoint_max_age = a._checkpoint_keys, a.checkpoint_max_age
            try:
                run = await _Loop(agent, state, traced, self, checked["approval_timeout"]).run()
            except GeneratorExit:  # the coroutine dropped by a worker that left it: the run goes on elsewhere
                raise
            except BaseException as exc:  # cancelled, or evicted (replaying: nothing is ended)
                traced.fail(_kind(exc))
                if is_cancelled_exception(exc) and not isinstance(exc, (asyncio.CancelledError, CancelledError)):
                    raise CancelledError("the run was cancelled") from exc  # the workflow ends cancelled
                raise
            traced.end(run)
        except GeneratorExit:  # (as above) closed from another context: its own is not there to restore
            raise
        except BaseException:
            otel_context.detach(token)
            raise
        otel_context.detach(token)
        return run_to_data(run)


class _Loop:
    """The six verbs, with activities for the model and the tools."""

    def __init__(self, agent: HostedAgent, state: WorkflowRunState, traced: RunScope, workflow_: AgentRun,
                 approval_timeout: float | None) -> None:
        self.agent, self.state, self.traced = agent, state, traced
        self.workflow, self.approval_timeout = workflow_, approval_timeout
        self.queue = workflow.info().task_queue
        self.settings = agent.settings
        self.name = agent.agent.name

    async def run(self) -> Run:
        state, traced = self.state, self.traced
        for i in range(state.budget.max_steps):
            if stopped := state.before_call():
                return stopped
            traced.start_step(i)
            # 1. call the model with the whole conversation
            answer = await self._model()
            if "completion" not in answer:
                return state.model_failed(error_from_data(answer["error"]) if "error" in answer else None)
            completion = completion_from_data(answer["completion"])
            step = state.record(i, completion)
            # 2. check: a turn without tool calls is the answer
            if not completion.wants_tools:
                return state.finish(Stop.ANSWERED)
            if stopped := state.check_turn(completion.tool_calls):
                return stopped
            state.hold(step, self.agent.agent.registry.waiting(completion.tool_calls))  # calls a person decides on
            calls = [c for n, c in enumerate(completion.tool_calls) if n not in step.waiting]
            # 3. dispatch the turn's calls (as arun does), 4. append their results in call order
            if stopped := state.append(step, *await self._dispatch(calls)):
                return stopped
            if stopped := state.over_budget():
                return stopped
            if step.waiting or any(r.outcome is ToolOutcome.PENDING for r in step.tool_results):
                if stopped := await self._pause(step):
                    return stopped
                continue  # the decided calls' step ended the turn
            traced.end_step(step)
            # 5. repeat, until an exit above or the end of range(max_steps)
        # 6. stop: the ceiling is the loop's structure, not a condition
        return state.finish(Stop.STEP_BUDGET)

    async def _pause(self, step: Any) -> Run | None:
        """Where ``pause`` would stop the run: wait for the decisions instead, then go on as
        ``resume`` does (approved calls dispatched with the checkpoint's arguments, denied ones
        given their denial), in this run and trace. Ends ``approval_required`` with the
        checkpoint after the approval timeout, or when a sub-agent run in an activity paused
        (nothing in this workflow can resume it)."""
        state, traced = self.state, self.traced
        cp = state.checkpoint_at(step, workflow.uuid4().hex, workflow.time())
        assert cp is not None  # something waits: the caller checked
        if cp.sub_agents:
            return state.finish(Stop.APPROVAL_REQUIRED, detail=cp)
        traced.span.set_attributes({N.PENDING_CALLS: len(cp.pending), N.TOOLS_PENDING: [c.name for c in cp.pending]})
        left = state.seconds_left()
        decisions = await self.workflow.wait_for_decisions(cp, self.approval_timeout)
        if decisions is None:
            return state.finish(Stop.APPROVAL_REQUIRED, detail=cp)
        cp, decisions = settle(cp, decisions)  # an Approve's corrected arguments, a shared id denied
        if left is not None:  # the wait is not running time, as for a resumed run
            state.deadline = Deadline.after(left, state.clock)
        traced.end_step(step)  # the paused turn: its held calls pending
        plan = _plan(cp, decisions)
        traced.span.set_attributes({
            N.APPROVAL_APPROVED: [c.name for c, _ in plan if isinstance(c, Approved)],
            N.APPROVAL_DENIED: [c.name for c, _ in plan if not isinstance(c, Approved)]})
        record_decisions(self.agent.workflow_telemetry, cp, decisions, workflow.time())
        traced.start_step(cp.step_index)
        decided = state.record_decided(cp.step_index, [call for call, _ in plan])
        for call, _ in plan:
            if isinstance(call, Approved):
                result = await self._tool(call)
            else:
                result = denied(call, decisions[call.id])
                ToolScope(self.agent.workflow_telemetry, call, known=True).end(result)
            if stopped := state.append(decided, result):
                return stopped
        if stopped := state.over_budget():
            return stopped
        traced.end_step(decided)
        return None

    def _options(self, limit: timedelta) -> dict[str, Any]:
        s = self.settings
        return {"start_to_close_timeout": limit, "heartbeat_timeout": timedelta(seconds=s.heartbeat_timeout),
                "retry_policy": s.retry_policy()}

    async def _model(self) -> dict[str, Any]:
        left = self.state.seconds_left()
        request = {"agent": self.name, "messages": self.state.messages, "seconds_left": left,
                   "traceparent": traceparent()}
        if self.state.budget.priced:  # the chat span prices its call as the run does
            request["budget"] = budget_to_data(self.state.budget)
        try:
            return await workflow.execute_activity(
                N.TEMPORAL_MODEL_ACTIVITY, request,
                **self._options(self.settings.limit(None, left, self.settings.model_timeout)))
        except ActivityError as exc:  # every attempt failed as an attempt (timed out, worker lost)
            if is_cancelled_exception(exc):  # the run is cancelled, not the call failed
                raise
            return {"error": {"type": type(exc.cause or exc).__name__, "message": str(exc.cause or exc)}}

    async def _tool(self, call: ToolCall) -> ToolResult:
        left = self.state.seconds_left()
        tool = self.agent.tool(call.name)
        if isinstance(tool, SubAgentTool) and is_hosted(self.queue, getattr(tool.runs, "name", None)):
            return await self._child(call, tool)
        request = {"agent": self.name, "call": call_to_data(call), "seconds_left": left, "traceparent": traceparent()}
        limit = self.settings.limit(tool.timeout if tool else None, left, self.settings.tool_timeout)
        try:
            return result_from_data(await workflow.execute_activity(N.TEMPORAL_TOOL_ACTIVITY, request,
                                                                    **self._options(limit)))
        except ActivityError as exc:
            if is_cancelled_exception(exc):
                raise
            timed_out = isinstance(exc.cause, TemporalTimeout)
            return ToolResult(call_id=call.id, name=call.name,
                              content=f"Error: {call.name} failed ({'timed out' if timed_out else 'activity failed'})",
                              outcome=ToolOutcome.TIMEOUT if timed_out else ToolOutcome.ERROR,
                              error_type=None if timed_out else type(exc.cause or exc).__name__)

    async def _child(self, call: ToolCall, tool: SubAgentTool) -> ToolResult:
        """A sub-agent's run as a child workflow on this task queue, inside the call's
        ``execute_tool`` span (made here, in the workflow), as ``run`` nests it: bounded by what
        this run has left, its spend counted in this run's totals when it ends. The registry's
        policy and argument checks run here first, in workflow code: they must be deterministic."""
        scope = ToolScope(self.agent.workflow_telemetry, call, known=True)
        try:
            checked = self.agent.agent.registry._check(call)  # the policy and argument checks, not the call
            if isinstance(checked, ToolResult):
                scope.end(checked)
                return checked
            sub = hosted(self.queue, tool.runs.name)
            budget = self.state.child_budget(tool.budget or sub.agent.budget)
            request = {"agent": sub.agent.name, "task": checked[1]["task"], "history": None,
                       "budget": budget_to_data(budget), "conversation_id": self.state.conversation_id,
                       "traceparent": traceparent(), "approval_timeout": self.approval_timeout}
            data = await workflow.execute_child_workflow(
                N.TEMPORAL_WORKFLOW, request, id=f"{workflow.info().workflow_id}.{workflow.uuid4().hex[:16]}",
                task_queue=self.queue)
        except GeneratorExit:  # the coroutine dropped by a worker that left it
            raise
        except BaseException as exc:  # cancelled, evicted (replaying: nothing ends), or the child failed
            scope.fail(_kind(exc))
            raise
        run = run_from_data(data)
        self.state.charge(usage_of(run), run.cost)  # cache tokens too
        self.state.absorb(run)
        scope.span.set_attribute(N.SUB_AGENT_STOP_REASON, run.stop.value)
        # The sub-agent's answer or stop, as the caller's registry turns a tool's into a result.
        shown = Tool(name=call.name, description="", fn=lambda: tool.answer(run))
        result = Registry([shown]).dispatch(ToolCall(id=call.id, name=call.name, arguments={}))
        scope.end(result)
        return result

    async def _dispatch(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """As ``_acalls.dispatch_turn``: concurrently (at most the agent's
        ``max_tool_concurrency`` at once), or one after another stopping at a fatal result; a
        call not started when the time budget ran out is not dispatched."""
        a = self.agent.agent
        if a.parallel_tool_calls and len(calls) > 1:
            limit = asyncio.Semaphore(a.max_tool_concurrency) if a.max_tool_concurrency else None

            async def one(call: ToolCall) -> ToolResult | None:
                if limit is None:
                    return await self._tool(call) if self.state.may_start(call) else None
                async with limit:
                    return await self._tool(call) if self.state.may_start(call) else None

            outcomes = await asyncio.gather(*(one(call) for call in calls))
            return [outcome for outcome in outcomes if outcome is not None]
        results: list[ToolResult] = []
        for call in calls:
            if not self.state.may_start(call):
                break
            results.append(await self._tool(call))
            if self.state.ends_turn(results[-1]):
                break
        return results


def _kind(exc: BaseException) -> str:
    """``error.type`` of a span the workflow ends on ``exc``: ``cancelled`` for a cancellation
    in Temporal's sense (the workflow's, reaching it through an activity or a child), else as
    ``arun`` names it."""
    return N.ERROR_CANCELLED if is_cancelled_exception(exc) else failure_kind(exc)
