"""Resuming a paused run: ``Agent.resume`` / ``Agent.aresume``.

A run that stopped ``approval_required`` left a ``Checkpoint``. Resuming it, with a decision
for every waiting call, is a new run - a new trace - whose span links to the paused run's:

1. ``prepare``: the checkpoint is read and checked (its signature with the agent's keys, its
   version and shape - its conversation too -, its agent and tools, every sub-agent's too, the
   decisions - an ``Approve`` against the call's digest -, whether it was resumed before). Any
   problem is a ``CheckpointError`` and nothing has run. A ``budget`` given may lower the
   checkpoint's ceilings, never raise them.
2. ``_machine``: the run span (with the link, ``tracedagent.resumed_from``, the decisions)
   and the run's machine, whose ``resume`` rebuilds the state from the checkpoint
   (``RunState.continue_from``: what the run had spent counts against its budget).
3. The decided calls, as one step without a model call (the machine's ``Decided``): approved
   calls are dispatched with exactly the checkpoint's arguments, denied ones get the
   ``denied`` result the model sees, a paused sub-agent is resumed with its share of the
   decisions. Then the checks any turn gets - a fatal result, the budgets, and ``pause`` (a
   sub-agent may pause again).
4. The same pump as ``run`` / ``arun`` (``Agent._pump`` / ``_apump``), from the next turn.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Mapping, Protocol

from .._core._attributes import NO_ATTRIBUTES
from .._core._budget import Budget
from .._core._checkpoint import AlreadyResumed, Checkpoint, WrongAgent, budget_within
from .._core._decisions import Decision, check_decisions, settle
from .._core._machine import DENIED_BY_A_PERSON, DecidedCall, RunMachine, denied
from .._core._records import ToolResult
from .._core._run import Run, current_run
from .._core._signing import accept, claim_key
from .._core._tools import Registry
from .._instrumentation._instrumented import InstrumentedRegistry
from .._instrumentation._observer import Resumed, record_decisions
from . import _acalls
from ._team import SubAgentTool, resuming_tool

Agent = Any
"""An ``Agent`` (``_loop`` imports this module, so it cannot be imported back, not even for types)."""

__all__ = ["Claim", "prepare", "resume", "aresume", "record_decisions", "denied", "DENIED_BY_A_PERSON"]


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
           claim: Claim | None = None, budget: Budget | None = None,
           attributes: Mapping[str, Any] = NO_ATTRIBUTES) -> Run:
    """See ``Agent.resume``: the decided calls one after another, then ``run``'s pump."""
    cp, decisions = prepare(agent, checkpoint, decisions, claim, synchronous=True, budget=budget)
    with _machine(agent, cp, decisions, attributes, asynchronous=False) as machine:
        results: list[ToolResult] = []
        for decided in machine.resume(cp, decisions).calls:
            results.append(_denial(agent, decided) if decided.denied is not None else _registry(agent, decided).dispatch(decided.call))
            if machine.ends_turn(results[-1]):
                break
        return agent._pump(machine, machine.tools_done(results))


async def aresume(agent: Agent, checkpoint: str | bytes | Checkpoint, decisions: Mapping[str, Decision],
                  claim: Claim | None = None, budget: Budget | None = None,
                  attributes: Mapping[str, Any] = NO_ATTRIBUTES) -> Run:
    """See ``Agent.aresume``: the decided calls one after another, each under the run's
    deadline, then ``arun``'s pump."""
    cp, decisions = prepare(agent, checkpoint, decisions, claim, budget=budget)
    with _machine(agent, cp, decisions, attributes, asynchronous=True) as machine:

        async def perform(decided: DecidedCall) -> ToolResult:
            if decided.denied is not None:
                return _denial(agent, decided)
            return await _acalls.dispatch(_registry(agent, decided), decided.call, machine.deadline)

        results = await _acalls.decided_turn(perform, machine, machine.resume(cp, decisions).calls)
        return await agent._apump(machine, machine.tools_done(results))


def _machine(agent: Agent, cp: Checkpoint, decisions: Mapping[str, Decision], attributes: Mapping[str, Any], *,
             asynchronous: bool) -> RunMachine:
    """The resumed run's machine: its span linked to the paused one, its state the checkpoint's
    (``RunMachine.resume`` rebuilds it). A sub-agent's is a sub-run of the resumed caller's."""
    messages = [dict(m) for m in cp.messages]
    traced, state = agent._begin(cp.budget, messages, cp.conversation_id, current_run.get(),
                                 asynchronous=asynchronous, resumed=Resumed(cp, decisions),
                                 attributes=attributes)
    record_decisions(agent._telemetry, cp, decisions, time.time())
    return agent._driven(state, traced)


def _denial(agent: Agent, decided: DecidedCall) -> ToolResult:
    """A denied call's result (the model sees it), in an ``execute_tool`` span like a policy's denial."""
    result = decided.denied
    assert result is not None
    with agent._tools.span(decided.call) as scope:
        scope.end(result)
    return result


def _registry(agent: Agent, decided: DecidedCall) -> InstrumentedRegistry:
    """Where an approved call is dispatched: the agent's registry, or for a paused sub-agent a
    registry of one tool, the sub-agent resumed with its share of the decisions, instrumented
    as the agent's own (its call is an ``execute_tool`` span of this run)."""
    if decided.sub is None:
        return agent._tools
    tool = agent.registry.get(decided.sub.name)
    assert isinstance(tool, SubAgentTool)  # prepare checked it
    return InstrumentedRegistry(Registry([resuming_tool(tool, decided.sub.checkpoint, decided.decisions)]),
                                agent._telemetry)
