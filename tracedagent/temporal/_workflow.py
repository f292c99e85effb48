"""The workflow that drives one agent run: a pump of the run machine, deterministically.

``AgentRun.run`` is ``arun`` with each model call and each tool call an activity, a hosted
sub-agent's run a child workflow: the ``RunMachine`` decides everything (``_core/_machine.py``)
and ``_pump.pump`` performs its requests through ``_Activities``. A run that pauses for approval
does not end: the machine, told the workflow can wait (``Waits``), hands a ``Wait``, and the
workflow waits (workflow time, no process holding it) for the ``decide`` update, then goes on
with the decided calls in the same run and trace, as ``resume`` would.

Everything it decides on is in the run's history (the activities' results) or in the agent's
definition, so a replay on any worker decides the same; the clock is workflow time, the
pause's id the workflow's random. Workflows in flight when a worker is upgraded replay
against the new code: this pump asks for the same commands in the same order as the loop it
replaced (no ``workflow.patched`` needed; tests/test_temporal_replay.py replays histories
recorded by that worker; docs/temporal.md).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Mapping

from opentelemetry import context as otel_context
from temporalio import workflow
from temporalio.exceptions import (ActivityError, ApplicationError, CancelledError, TimeoutError as TemporalTimeout,
                                   is_cancelled_exception)

from .._core import _names as N
from .._core._attributes import run_attributes
from .._core._budget import Stop
from .._core._checkpoint import BadDecisions, Checkpoint
from .._core._deadline import DeadlineExceeded
from .._core._decisions import Decision, check_decisions, decisions_from_data
from .._core._output import with_instruction
from .._core._machine import DecidedCall, RunMachine, Waits
from .._core._payloads import too_large
from .._core._records import Completion, ToolCall, ToolOutcome, ToolResult
from .._core._request import ModelRequest
from .._core._run import Run, RunState, initial_messages
from .._core._result import usage_of
from .._agent._team import SubAgentTool
from .._core._tools import Registry
from .._instrumentation._observer import RunScope
from .._instrumentation._spans import ToolScope, failure_kind
from ._activities import PROPAGATOR, traceparent
from ._codec import (budget_to_data, call_to_data, completion_from_data, error_from_data, request_from_data,
                     result_from_data, run_from_data, run_to_data, run_within)
from ._hosting import HostedAgent, hosted, is_hosted
from ._pump import pump
from ._search import run_memo, run_search_attributes

__all__ = ["AgentRun", "SEARCH_ATTRIBUTES_PATCH", "MEMO_PATCH"]

SEARCH_ATTRIBUTES_PATCH = "tracedagent-search-attributes"
"""The ``workflow.patched`` id of the search-attribute upserts: a run started by a worker before
them replays without them (its history has no upsert commands); every new run has them."""
MEMO_PATCH = "tracedagent-memo"
"""The ``workflow.patched`` id of the memo a run sets when it starts (``run_memo``), likewise."""


@workflow.defn(name=N.TEMPORAL_WORKFLOW)
class AgentRun:
    """One run of a hosted agent. Input: ``{"agent", "task", "history", "budget",
    "conversation_id", "traceparent"}``; result: the ``Run`` as data (``_codec``)."""

    def __init__(self) -> None:
        self._state: RunState | None = None
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
        messages = initial_messages(with_instruction(a.system_prompt, a._output, a.output_mode), checked["history"],
                                    checked["task"])  # a typed run's prompted instruction, as under arun
        conversation_id = checked["conversation_id"]
        token = otel_context.attach(PROPAGATOR.extract(checked["traceparent"]))
        try:
            traced = _RunScope(agent.workflow_telemetry, budget, messages, conversation_id, asynchronous=True,
                               parallel_tool_calls=a.parallel_tool_calls, max_tool_concurrency=a.max_tool_concurrency,
                               attributes=run_attributes(a.attributes, checked["attributes"]))  # the request's win
            traced.span.set_attributes({N.TEMPORAL_WORKFLOW_ID: info.workflow_id,
                                        N.TEMPORAL_TASK_QUEUE: info.task_queue})
            # Asked once, here, on every replay too: the upserts are workflow commands.
            if workflow.patched(MEMO_PATCH):
                workflow.upsert_memo(run_memo(agent=a.name, trace_id=traced.trace_id, conversation_id=conversation_id))
            traced.searchable = agent.search_attributes and workflow.patched(SEARCH_ATTRIBUTES_PATCH)
            traced.upsert(agent=a.name, trace_id=traced.trace_id, conversation_id=conversation_id, waiting=False)
            state = self._state = RunState(budget, messages, clock=workflow.time, trace_id=traced.trace_id,
                                           conversation_id=conversation_id, agent=a.name, tools=a.registry.names,
                                           span_id=traced.span_id)
            state.checkpoint_keys, state.checkpoint_max_age = a._checkpoint_keys, a.checkpoint_max_age
            machine = RunMachine(state, a.registry, traced, output=a._output, output_mode=a.output_mode,
                                 waits=Waits(lambda: workflow.uuid4().hex, workflow.time))
            try:
                with machine:  # an exception out of the pump ends the run span with what it used
                    run = await pump(machine, _Activities(agent, state, self, checked["approval_timeout"], traced.attributes),
                                     parallel=a.parallel_tool_calls, concurrency=a.max_tool_concurrency)
            except GeneratorExit:  # the coroutine dropped by a worker that left it: the run goes on elsewhere
                raise
            except BaseException as exc:  # cancelled, or evicted (replaying: nothing is ended)
                if is_cancelled_exception(exc) and not isinstance(exc, (asyncio.CancelledError, CancelledError)):
                    raise CancelledError("the run was cancelled") from exc  # the workflow ends cancelled
                raise
        except GeneratorExit:  # (as above) closed from another context: its own is not there to restore
            raise
        except BaseException:
            otel_context.detach(token)
            raise
        otel_context.detach(token)
        return run_within(run_to_data(run), agent.settings.max_payload)  # else the server terminates the workflow


class _RunScope(RunScope):
    """The run span as the workflow's machine's observer: a run that raised names a
    cancellation in Temporal's sense (``_kind``); a coroutine dropped by a worker that left it
    (``GeneratorExit``) ends nothing, as the run goes on on another worker.

    It also tells Temporal's visibility store what an operator searches on (``searchable``: the
    hosted agent's ``search_attributes``, and a run started after the upserts existed): waiting
    for a person or not, and the stop reason at the end (``_search``). Unlike the spans, these
    are workflow commands, made on replay too."""

    searchable = False
    """Whether the run upserts its search attributes."""

    def upsert(self, **facts: Any) -> None:
        if self.searchable:
            workflow.upsert_search_attributes(run_search_attributes(**facts))

    def waiting(self, checkpoint: Checkpoint) -> None:
        self.upsert(waiting=True)
        super().waiting(checkpoint)

    def decided(self, checkpoint: Checkpoint, decisions: Mapping[str, Decision], now: float) -> None:
        self.upsert(waiting=False)
        super().decided(checkpoint, decisions, now)

    def run_ended(self, run: Run) -> None:
        self.upsert(waiting=False, stop=run.stop.value)
        super().run_ended(run)

    def run_failed(self, error: BaseException, used: Run) -> None:
        if isinstance(error, GeneratorExit):
            return
        if is_cancelled_exception(error):  # a cancelled run no longer waits for anyone
            self.upsert(waiting=False, stop=Stop.CANCELLED.value)
        self.fail(_kind(error), used=used)


class _Activities:
    """The executor of the workflow's pump (``_pump.Executor``): the model and each tool call an
    activity, a hosted sub-agent's run a child workflow, the wait the ``decide`` update."""

    def __init__(self, agent: HostedAgent, state: RunState, workflow_: AgentRun,
                 approval_timeout: float | None, attributes: Mapping[str, Any]) -> None:
        self.agent, self.state = agent, state
        self.attributes = attributes
        """The run's own attributes (``attributes=``): a sub-agent's child workflow carries them."""
        self.workflow, self.approval_timeout = workflow_, approval_timeout
        self.queue = workflow.info().task_queue
        self.settings = agent.settings
        self.name = agent.agent.name

    def _options(self, limit: timedelta) -> dict[str, Any]:
        s = self.settings
        return {"start_to_close_timeout": limit, "heartbeat_timeout": timedelta(seconds=s.heartbeat_timeout),
                "retry_policy": s.retry_policy()}

    async def model(self, asked: ModelRequest) -> Completion | Exception:
        """The model activity (it builds the call from the agent's settings and the messages).
        A call that failed once the run's time was up was cut by it (its attempt's limit was
        the time left, plus grace): ``DeadlineExceeded``, as ``arun``'s deadline cuts a call."""
        left = self.state.seconds_left()
        request = {"agent": self.name, "messages": asked.messages, "seconds_left": left,
                   "traceparent": traceparent()}
        if self.state.budget.priced:  # the chat span prices its call as the run does
            request["budget"] = budget_to_data(self.state.budget)
        if (over := too_large(request, self.settings.max_payload, "model request")) is not None:
            return over  # not sent (the server would terminate the workflow): the machine names the stop
        try:
            answer = await workflow.execute_activity(
                N.TEMPORAL_MODEL_ACTIVITY, request,
                **self._options(self.settings.limit(None, left, self.settings.model_timeout)))
        except ActivityError as exc:  # every attempt failed as an attempt (timed out, worker lost)
            if is_cancelled_exception(exc):  # the run is cancelled, not the call failed
                raise
            answer = {"error": {"type": type(exc.cause or exc).__name__, "message": str(exc.cause or exc)}}
        if "completion" in answer:
            return completion_from_data(answer["completion"])
        deadline = self.state.deadline
        if "error" in answer and not (deadline is not None and deadline.passed()):
            return error_from_data(answer["error"])
        return DeadlineExceeded("the run's time budget ran out during the model call")

    async def tool(self, call: ToolCall) -> ToolResult:
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
            checked = self.agent.agent.registry.check(call)  # the policy and argument checks, not the call
            if isinstance(checked, ToolResult):
                scope.end(checked)
                return checked
            sub = hosted(self.queue, tool.runs.name)
            budget = self.state.child_budget(tool.budget or sub.agent.budget)
            request = {"agent": sub.agent.name, "task": checked[1]["task"], "history": None,
                       "budget": budget_to_data(budget), "conversation_id": self.state.conversation_id,
                       "traceparent": traceparent(), "approval_timeout": self.approval_timeout,
                       "attributes": dict(self.attributes)}  # a sub-agent carries its caller's
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
        result = Registry.result(call, tool, lambda: tool.answer(run))  # as the registry turns a tool's value
        scope.end(result)
        return result

    async def decided(self, decided: DecidedCall) -> ToolResult:
        if decided.denied is None:
            return await self.tool(decided.call)
        ToolScope(self.agent.workflow_telemetry, decided.call, known=True).end(decided.denied)
        return decided.denied

    async def wait(self, checkpoint: Checkpoint) -> Mapping[str, Decision] | None:
        return await self.workflow.wait_for_decisions(checkpoint, self.approval_timeout)


def _kind(exc: BaseException) -> str:
    """``error.type`` of a span the workflow ends on ``exc``: ``cancelled`` for a cancellation
    in Temporal's sense (the workflow's, reaching it through an activity or a child), else as
    ``arun`` names it."""
    return N.ERROR_CANCELLED if is_cancelled_exception(exc) else failure_kind(exc)
