"""Pausing a run for a person's decision, and continuing one from its checkpoint: ``RunState``'s
decisions about approval, apart so that ``_run`` stays readable.

A driver screens a turn (``Registry.waiting``) and calls ``hold`` with the calls that wait,
dispatches the others, and after its other checks calls ``pause``, which ends the run
``approval_required`` with a ``Checkpoint`` when anything waits. ``continue_from`` rebuilds
the state of a paused run from its checkpoint, for any driver (``Agent.resume``, a durable
workflow that receives the decisions as a signal).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

from ._budget import Budget, Stop
from ._checkpoint import NESTED_ID_SEPARATOR, Checkpoint, PendingCall, SubAgentPause
from ._deadline import Clock, Deadline
from ._signing import Keyring, sign_with
from ._usage import RunUsage, Spent
from ._records import ToolOutcome

if TYPE_CHECKING:  # the attributes and methods of RunState this relies on
    from ._records import Message

__all__ = ["Pausing", "PausedRun", "step_fates"]


class Pausing:
    """The approval decisions of a ``RunState`` (which has every attribute used here)."""

    budget: Budget
    messages: list[Message]
    agent: str
    tools: tuple[str, ...]
    trace_id: str | None
    span_id: str | None
    conversation_id: str | None
    started: float
    first_step: int = 0
    """The index of the first model turn: a resumed run goes on from its paused turn's."""
    carried: Spent = Spent()
    """What the run spent before its pause (``continue_from``)."""
    resumed: Checkpoint | None = None
    """The checkpoint the run continues from."""
    checkpoint_keys: Keyring | None = None
    """The keys the agent signs its checkpoints with (``None``: unsigned); set by the driver."""
    checkpoint_max_age: float | None = None
    """Seconds a checkpoint of this run stays resumable (its signed ``expires``); ``None``: no limit."""
    deadline: Deadline | None
    clock: Clock
    usage: RunUsage
    steps: list[Any]
    _seen_calls: dict[tuple[str, str], int]

    def finish(self, stop: Stop, *, detail: Any = None) -> Any: ...  # RunState's

    def continue_from(self, checkpoint: Checkpoint) -> None:
        """Rebuild a paused run's state from its checkpoint (any driver may: ``Agent.resume``,
        a durable workflow): what it spent counts against this run's ceilings, its time only
        as running time, and its turns go on from the paused one."""
        spent = self.carried = checkpoint.spent
        self.resumed = checkpoint
        self.first_step = spent.steps
        self.usage.add(spent)  # a fresh state: its totals start from the paused run's
        self._seen_calls = {(name, arguments): times for name, arguments, times in checkpoint.repeats}
        if self.budget.max_seconds is not None:
            self.deadline = Deadline.after(max(0.0, self.budget.max_seconds - spent.seconds), self.clock)
        # A sub-agent resumed by its resumed caller has no more time than the caller has left, as
        # one that starts does (``child_budget``): its checkpoint's window began before the pause.
        caller = self.parent.deadline if self.parent is not None else None
        if caller is not None and (self.deadline is None or caller.at < self.deadline.at):
            self.deadline = caller

    def step_indices(self) -> range:
        """The loop's iterations: ``range(max_steps)``, less the turns taken before a pause."""
        return range(self.first_step, self.budget.max_steps)

    def hold(self, step: Any, waiting: dict[int, str]) -> None:
        """Before the turn is dispatched: the calls (by position) that wait for a decision. The
        driver dispatches the others; ``pause`` then stops the run if any wait. A call whose id
        another call of the turn shares is not held: a decision names a call by its id, so one
        decision would run both. Nor is a call whose id contains ``/``, the separator of a
        sub-agent's nested ids: a model that names its call ``t0/c0`` beside a sub-agent call ``t0``
        whose own waiting call is ``c0`` would put two calls under one id. Such a call is
        dispatched instead, and the registry denies it, as it denies every call that needs
        approval and has none (fail closed)."""
        if waiting:
            calls = step.completion.tool_calls
            times = Counter(call.id for call in calls)
            waiting = {i: why for i, why in waiting.items()
                       if times[calls[i].id] == 1 and NESTED_ID_SEPARATOR not in calls[i].id}
        step.waiting = waiting

    def waits(self, step: Any) -> bool:
        """Whether a call of ``step`` waits for a decision: held, or a sub-agent's run that paused."""
        return _waits(step)

    def waited(self, left: float | None) -> None:
        """A run that waited for decisions within itself (a durable workflow) goes on with the
        ``left`` seconds it had when the wait began: the wait is not running time, as for a
        resumed run (``continue_from``)."""
        if left is not None:
            self.deadline = Deadline.after(left, self.clock)

    def pause(self, step: Any) -> Any:
        """After the turn's other calls were dispatched and nothing else ended the run: if a
        call waits for a decision (held, or a sub-agent's run that paused), the run stops
        ``approval_required`` with a checkpoint to resume from. (Nothing waits in nearly every
        step: the id and the time are only drawn when something does.)"""
        if not _waits(step):
            return None
        return self.finish(Stop.APPROVAL_REQUIRED, detail=self.checkpoint_at(step, uuid.uuid4().hex, time.time()))

    def checkpoint_at(self, step: Any, checkpoint_id: str, paused_at: float) -> Checkpoint | None:
        """The checkpoint of a run pausing after ``step`` (``None`` if nothing waits), the step
        marked paused. A durable workflow takes its id and time from its history, and waits
        for the decisions instead of finishing."""
        if not _waits(step):
            return None
        calls = step.completion.tool_calls
        subs = [r for r in step.tool_results if r.outcome is ToolOutcome.PENDING]
        step.paused = True
        arguments = {call.id: call.arguments for call in calls}
        return sign_with(Checkpoint(
            id=checkpoint_id, agent=self.agent, tools=self.tools, budget=self.budget,
            spent=self.usage.snapshot(steps=self.first_step + sum(not s.resumed for s in self.steps),
                                      seconds=self.carried.seconds + self.clock() - self.started),
            messages=self.messages, step_index=step.index,
            pending=tuple(PendingCall(id=calls[i].id, name=calls[i].name, arguments=calls[i].arguments, reason=why)
                          for i, why in sorted(step.waiting.items())),
            sub_agents=tuple(SubAgentPause(call_id=r.call_id, name=r.name, arguments=arguments.get(r.call_id, {}),
                                           checkpoint=r.pending.paused) for r in subs),
            conversation_id=self.conversation_id, trace_id=self.trace_id, span_id=self.span_id,
            paused_at=paused_at, repeats=tuple((name, arguments, times)
                                               for (name, arguments), times in self._seen_calls.items())),
            self.checkpoint_keys, self.checkpoint_max_age)


def _waits(step: Any) -> bool:
    """Whether a call of ``step`` waits for a decision: held, or a sub-agent's run that paused."""
    return bool(step.waiting) or any(r.outcome is ToolOutcome.PENDING for r in step.tool_results)


class PausedRun:
    """What a ``Run`` says of a pause (``Run`` has ``paused`` and ``stop``)."""

    paused: Checkpoint | None
    stop: Stop
    steps: list[Any]

    def pending_tools(self) -> list[str]:
        """Tools whose calls wait for a person's decision (the run paused)."""
        return [name for step in self.steps for name in step.pending_names]

    @property
    def pending(self) -> list[PendingCall]:
        """The calls waiting for a decision (empty unless the run paused): each with its id,
        name, arguments and the reason it waits."""
        return [] if self.paused is None else self.paused.calls()

    @property
    def checkpoint_id(self) -> str | None:
        """The id of the checkpoint this run paused with (``tracedagent.checkpoint.id``)."""
        return None if self.paused is None else self.paused.id

    def checkpoint(self) -> str:
        """A paused run as versioned JSON for ``Agent.resume``: the application's data, with
        the conversation and the waiting calls' arguments in it (store it as such)."""
        if self.paused is None:
            raise ValueError(f"only a paused run has a checkpoint; this one stopped {self.stop.value}")
        return self.paused.dumps()


def step_fates(step: Any) -> tuple[list[str], list[str], list[str], list[str], list[str]]:
    """``Step.fates``: held calls are pending if the run paused on their turn, else not
    dispatched; a sub-agent's call whose run paused is pending if this run paused too, else
    blocked (it was dispatched, and did not succeed: the run stopped for another reason)."""
    calls = step.completion.tool_calls
    requested = [call.name for call in calls]
    executed: list[str] = []
    blocked: list[str] = []
    pending: list[str] = []
    for result in step.tool_results:
        if result.ok:
            executed.append(result.name)
        elif result.outcome is ToolOutcome.PENDING and step.paused:
            pending.append(result.name)
        else:
            blocked.append(result.name)
    if not step.waiting:
        return requested, executed, blocked, requested[len(step.tool_results):], pending
    held = [requested[i] for i in sorted(step.waiting)]
    dispatchable = [name for i, name in enumerate(requested) if i not in step.waiting]
    not_dispatched = dispatchable[len(step.tool_results):]
    return (requested, executed, blocked, not_dispatched, held + pending) if step.paused else \
        (requested, executed, blocked, held + not_dispatched, pending)
