"""Resuming a paused run: ``Agent.resume`` / ``Agent.aresume``.

A run that stopped ``approval_required`` left a ``Checkpoint``. Resuming it, with a decision
for every waiting call, is a new run - a new trace - whose span links to the paused run's:

1. ``prepare``: the checkpoint is read and checked (its signature with the agent's keys, its
   version and shape - its conversation too -, its agent and tools, every sub-agent's too, the
   decisions - an ``Approve`` against the call's digest -, whether it was resumed before). Any
   problem is a ``CheckpointError`` and nothing has run. A ``budget`` given may lower the
   checkpoint's ceilings, never raise them.
2. ``_start``: the run span (with the link, ``tracedagent.resumed_from``, the decisions) and
   a ``RunState`` rebuilt from the checkpoint (``RunState.continue_from``): what the run had
   spent counts against its budget.
3. ``_decided``: the decided calls, as one step without a model call: approved calls are
   dispatched with exactly the checkpoint's arguments, denied ones get a ``denied`` result
   the model sees, a paused sub-agent is resumed with its share of the decisions. Then the
   checks any turn gets - a fatal result, the budgets, and ``pause`` (a sub-agent may pause
   again).
4. The same loop as ``run`` / ``arun`` (``Agent._loop`` / ``_aloop``), from the next turn.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Mapping, Protocol

from .._core import _names as N
from .._core._budget import Budget
from .._core._checkpoint import (NESTED_ID_SEPARATOR, AlreadyResumed, Checkpoint, PendingCall, SubAgentPause,
                                 WrongAgent, budget_within, escape_id)
from .._core._decisions import Decision, check_decisions, settle
from .._core._signing import accept, claim_key
from .._core._records import ToolCall, ToolOutcome, ToolResult
from .._core._run import Run, RunState, current_run
from .._core._tools import Approved, Registry
from .._instrumentation._instrumented import InstrumentedRegistry
from .._instrumentation._observer import Resumed, RunScope
from .._instrumentation._spans import failure_kind
from .._instrumentation._telemetry import AgentTelemetry, bounded, guard
from . import _acalls
from ._team import SubAgentTool, resuming_tool

Agent = Any
"""An ``Agent`` (``_loop`` imports this module, so it cannot be imported back, not even for types)."""

__all__ = ["Claim", "prepare", "resume", "aresume", "record_decisions", "denied", "DENIED_BY_A_PERSON"]

DENIED_BY_A_PERSON = "a person did not approve this call"
"""What the model is shown for a call denied with ``False`` (a string decision is shown as given)."""


class Claim(Protocol):
    """Marks a checkpoint id as resumed, atomically, where every process resuming runs can see it
    (a unique row in the application's database): ``False`` if it already was."""

    def __call__(self, checkpoint_id: str, /) -> bool: ...


def prepare(agent: Agent, checkpoint: str | bytes | Checkpoint, decisions: Mapping[str, Decision],
            claim: Claim | None, *, synchronous: bool = False,
            budget: Budget | None = None) -> tuple[Checkpoint, Mapping[str, Decision]]:
    """The checkpoint, read and checked against ``agent`` and ``decisions``, and the decisions as
    the run acts on them (``settle``); claimed last, so a refused resume does not use it up. A
    sync ``resume`` that would need an event loop of its own (async tools, or a paused
    sub-agent, which is resumed as an async tool) inside a running one is refused here, as
    ``run`` is, rather than failing the approved call."""
    keys = agent._checkpoint_keys
    cp = checkpoint if isinstance(checkpoint, Checkpoint) else Checkpoint.loads(checkpoint, keys)
    accept(cp, keys, unsigned=agent.accept_unsigned_checkpoints, now=time.time())
    _check_agent(agent, cp)
    check_decisions(cp, decisions)
    if synchronous and (agent.registry.has_async_tools or cp.sub_agents) and _acalls.in_event_loop():
        raise RuntimeError("Agent.resume was called inside a running event loop and this run has async tools "
                           "or a paused sub-agent; use `await agent.aresume(...)` instead")
    key = claim_key(cp)  # the id, unless an unsigned checkpoint's, which whoever edits it chooses
    settled, decided = settle(cp, decisions)
    if budget is not None:
        settled = dataclasses.replace(settled, budget=budget_within(settled.budget, budget))
    claimed = agent._claim(key) if claim is None else claim(key)
    if not claimed:
        raise AlreadyResumed(f"checkpoint {key} was resumed before (or a resume of it was interrupted); each pause "
                             "is resumed once")
    return settled, decided


def _check_agent(agent: Agent, cp: Checkpoint) -> None:
    """The agent (and every sub-agent with a paused run) is the one that paused."""
    tools = tuple(sorted(agent.registry.names))
    if cp.agent != agent.name or cp.tools != tools:
        raise WrongAgent(f"the checkpoint was paused by agent {cp.agent[:80]!r} with tools {list(cp.tools)[:20]}, "
                         f"not {agent.name!r} with {list(tools)[:20]}")
    for sub in cp.sub_agents:
        tool = agent.registry.get(sub.name)
        if not isinstance(tool, SubAgentTool) or tool.runs is None:
            raise WrongAgent(f"the checkpoint waits inside sub-agent {sub.name[:80]!r}, which {agent.name!r} "
                             "does not have")
        _check_agent(tool.runs, sub.checkpoint)


def resume(agent: Agent, checkpoint: str | bytes | Checkpoint, decisions: Mapping[str, Decision],
           claim: Claim | None = None, budget: Budget | None = None) -> Run:
    """See ``Agent.resume``."""
    cp, decisions = prepare(agent, checkpoint, decisions, claim, synchronous=True, budget=budget)
    traced, state, parent = _start(agent, cp, decisions, asynchronous=False)
    token = current_run.set(state)
    try:
        run = _decided(agent, state, traced, cp, decisions) or agent._loop(state, traced)
    except BaseException as exc:  # an interrupt, or a bug: no Run, but no span left open
        traced.fail(failure_kind(exc))
        raise
    finally:
        current_run.reset(token)
    return agent._end(traced, run, parent)


async def aresume(agent: Agent, checkpoint: str | bytes | Checkpoint, decisions: Mapping[str, Decision],
                  claim: Claim | None = None, budget: Budget | None = None) -> Run:
    """See ``Agent.aresume``."""
    cp, decisions = prepare(agent, checkpoint, decisions, claim, budget=budget)
    traced, state, parent = _start(agent, cp, decisions, asynchronous=True)
    token = current_run.set(state)
    try:
        run = await _adecided(agent, state, traced, cp, decisions) or await agent._aloop(state, traced)
    except BaseException as exc:
        traced.fail(failure_kind(exc))
        raise
    finally:
        current_run.reset(token)
    return agent._end(traced, run, parent)


def _start(agent: Agent, cp: Checkpoint, decisions: Mapping[str, Decision], *,
           asynchronous: bool) -> tuple[RunScope, RunState, RunState | None]:
    """The resumed run's span, linked to the paused one, and its state rebuilt from the checkpoint.
    A sub-agent's is a sub-run of the resumed caller's, in its conversation."""
    parent = current_run.get()
    messages = [dict(m) for m in cp.messages]
    approved = [c.name for c in cp.pending if decisions[c.id] is True]
    denied = [c.name for c in cp.pending if decisions[c.id] is not True]
    traced = RunScope(agent._telemetry, cp.budget, messages, cp.conversation_id, asynchronous=asynchronous,
                      parallel_tool_calls=agent.parallel_tool_calls, max_tool_concurrency=agent.max_tool_concurrency,
                      resumed=Resumed(cp, approved, denied))
    try:
        state = RunState(cp.budget, messages, trace_id=traced.trace_id, conversation_id=cp.conversation_id,
                         parent=parent, agent=agent.name, tools=agent.registry.names, span_id=traced.span_id)
        state.checkpoint_keys, state.checkpoint_max_age = agent._checkpoint_keys, agent.checkpoint_max_age
        state.continue_from(cp)
    except BaseException as exc:  # a bug: no run, but no span left open
        traced.fail(failure_kind(exc))
        raise
    record_decisions(agent._telemetry, cp, decisions, time.time())
    return traced, state, parent


def record_decisions(t: AgentTelemetry, cp: Checkpoint, decisions: Mapping[str, Decision], now: float) -> None:
    """How long the pause lasted (``now``: wall clock, as the checkpoint may come from another
    process; a workflow's time) and each of this run's own decisions (a sub-agent's resumed
    run counts its own)."""
    if not t.metrics_on:
        return
    with guard("recording approval metrics"):
        t.approval_wait_histogram.record(max(0.0, now - cp.paused_at), {N.GEN_AI_AGENT_NAME: t.agent_name})
        for call in cp.pending:
            outcome = N.DECISION_APPROVED if decisions[call.id] is True else N.DECISION_DENIED
            t.decision_counter.add(1, {N.GEN_AI_AGENT_NAME: t.agent_name, N.GEN_AI_TOOL_NAME: bounded(call.name),
                                       N.DECISION: outcome})


def _plan(cp: Checkpoint, decisions: Mapping[str, Decision]) -> list[tuple[ToolCall, PendingCall | SubAgentPause]]:
    """Each decided call as it is dispatched: approved ones as ``Approved`` calls with the
    checkpoint's arguments, in the checkpoint's order, sub-agents' after this run's own."""
    plan: list[tuple[ToolCall, PendingCall | SubAgentPause]] = []
    for call in cp.pending:
        kind = Approved if decisions[call.id] is True else ToolCall
        plan.append((kind(call.id, call.name, call.arguments), call))
    for sub in cp.sub_agents:
        plan.append((Approved(sub.call_id, sub.name, sub.arguments), sub))
    return plan


def denied(call: ToolCall, decision: Decision) -> ToolResult:
    """The result of a call a person denied: the reason they gave, or ``DENIED_BY_A_PERSON``."""
    reason = decision if isinstance(decision, str) and decision else DENIED_BY_A_PERSON
    return ToolResult(call.id, call.name, f"Denied: {reason}", ToolOutcome.DENIED)


def _denial(agent: Agent, call: ToolCall, decision: Decision) -> ToolResult:
    """A denied call's result (the model sees it), in an ``execute_tool`` span like a policy's denial."""
    result = denied(call, decision)
    with agent._tools.span(call) as scope:
        scope.end(result)
    return result


def _sub_registry(agent: Agent, sub: SubAgentPause, decisions: Mapping[str, Decision]) -> InstrumentedRegistry:
    """A registry of one tool, the paused sub-agent resumed with its share of the decisions,
    instrumented as the agent's own: its call is an ``execute_tool`` span of this run."""
    prefix = escape_id(sub.call_id) + NESTED_ID_SEPARATOR
    own = {key[len(prefix):]: value for key, value in decisions.items() if key.startswith(prefix)}
    tool = agent.registry.get(sub.name)
    assert isinstance(tool, SubAgentTool)  # prepare checked it
    return InstrumentedRegistry(Registry([resuming_tool(tool, sub.checkpoint, own)]), agent._telemetry)


def _decided(agent: Agent, state: RunState, traced: RunScope, cp: Checkpoint,
             decisions: Mapping[str, Decision]) -> Run | None:
    """Step 3 for ``resume``: the decided calls one after another."""
    plan = _plan(cp, decisions)
    traced.start_step(cp.step_index)
    step = state.record_decided(cp.step_index, [call for call, _ in plan])
    for call, waited in plan:
        if isinstance(waited, SubAgentPause):
            result = _sub_registry(agent, waited, decisions).dispatch(call)
        elif isinstance(call, Approved):
            result = agent._tools.dispatch(call)
        else:
            result = _denial(agent, call, decisions[waited.id])
        if stopped := state.append(step, result):
            return stopped
    return _after(state, traced, step)


async def _adecided(agent: Agent, state: RunState, traced: RunScope, cp: Checkpoint,
                    decisions: Mapping[str, Decision]) -> Run | None:
    """Step 3 for ``aresume``: the decided calls one after another, each under the run's deadline."""
    plan = _plan(cp, decisions)
    traced.start_step(cp.step_index)
    step = state.record_decided(cp.step_index, [call for call, _ in plan])
    for call, waited in plan:
        if isinstance(waited, SubAgentPause):
            result = await _acalls.dispatch(_sub_registry(agent, waited, decisions), call, state.deadline)
        elif isinstance(call, Approved):
            result = await _acalls.dispatch(agent._tools, call, state.deadline)
        else:
            result = _denial(agent, call, decisions[waited.id])
        if stopped := state.append(step, result):
            return stopped
    return _after(state, traced, step)


def _after(state: RunState, traced: RunScope, step: object) -> Run | None:
    """The checks that end a turn: the budgets, then a sub-agent that paused again."""
    if (stopped := state.over_budget()) or (stopped := state.pause(step)):
        return stopped
    traced.end_step(step)  # type: ignore[arg-type]
    return None
