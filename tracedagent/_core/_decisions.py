"""A person's decisions on the calls a paused run waits for, checked against its checkpoint.

``decisions`` maps every waiting call's id (``Checkpoint.calls``) to one of:

- ``True``: run it, with the checkpoint's arguments;
- ``False`` or a string: deny it (the string is what the model is shown);
- ``Approve`` (``approve(pending_call)``): run it *if it is still the call the person saw* - the
  approval carries the call's digest (tool name and arguments), and a checkpoint whose call
  under that id changed since is refused (``DecisionMismatch``) before anything runs. It may
  carry corrected arguments (``approve(call, arguments=...)``): the call then runs with those.

``check_decisions`` refuses a bad set (``BadDecisions``); ``settle`` turns a checked set into
what the resumed run acts on (``True`` / a denial), the same for ``Agent.resume`` and a durable
workflow.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Union

from ._checkpoint import BadDecisions, Checkpoint, DecisionMismatch, PendingCall

__all__ = ["Decision", "Approve", "approve", "check_decisions", "check_reasons", "settle", "decisions_to_data",
           "decisions_from_data", "MAX_REASON_LENGTH", "SHARED_ID"]


@dataclass(frozen=True, kw_only=True)
class Approve:
    """An approval bound to what the person saw: ``approve(call)`` makes one."""

    digest: str
    """``PendingCall.digest`` of the call the person approved: its tool name and arguments."""
    arguments: dict[str, Any] | None = None
    """Arguments the person corrected (the call runs with these, checked against the tool's
    schema like any call's); ``None``: the checkpoint's, exactly."""


Decision = Union[bool, str, Approve]
"""``True`` or ``Approve`` runs the call; ``False`` or a string denies it (the string is what the model is shown)."""

MAX_REASON_LENGTH = 10_000
"""The longest denial reason a decision may give: words a person wrote for the model, shown as
the call's result. A longer one is refused, not cut: it is more likely a mistake (a pasted file)
than a reason, and it would travel in every later model call (and past a durable engine's
payload limit)."""

SHARED_ID = "its id is shared by another waiting call, so no one decision can name it"
"""Why a waiting call is denied whatever was decided, when another waiting call has its id
(two calls to sub-agents under one id: a model's bug, or a forged checkpoint)."""


def approve(call: PendingCall, *, arguments: dict[str, Any] | None = None) -> Approve:
    """Approve ``call`` as the person saw it (``run.pending``): the resume runs it only if the
    call waiting under its id is still this one. ``arguments``: the person's correction."""
    return Approve(digest=call.digest, arguments=None if arguments is None else dict(arguments))


def check_decisions(checkpoint: Checkpoint, decisions: Mapping[str, Decision]) -> None:
    """Exactly one decision for each waiting call, each ``True``, ``False``, a reason, or an
    ``Approve`` of that very call (``BadDecisions``; ``DecisionMismatch`` for another call's)."""
    if not isinstance(decisions, Mapping):
        raise BadDecisions(f"decisions must map call ids to True, False or a reason, not {type(decisions).__name__}")
    waiting: dict[str, list[PendingCall]] = {}
    for call in checkpoint.calls():
        waiting.setdefault(call.id, []).append(call)
    unknown = sorted(str(k)[:80] for k in decisions if k not in waiting)
    if unknown:
        raise BadDecisions(f"no call is waiting with the id(s) {unknown[:20]}; waiting: {sorted(waiting)[:20]}")
    missing = sorted(set(waiting) - set(decisions))
    if missing:
        raise BadDecisions(f"no decision for the waiting call(s) {missing[:20]}")
    for key, value in decisions.items():
        if isinstance(value, Approve):
            calls = waiting[key]
            if len(calls) == 1 and value.digest != calls[0].digest:
                raise DecisionMismatch(f"the approval of {key!r} is for another call than the one waiting under "
                                       f"that id ({calls[0].name[:80]!r}, digest {calls[0].digest[:16]}...): its "
                                       "tool or arguments changed since the person saw it")
            if value.arguments is not None and not isinstance(value.arguments, dict):
                raise BadDecisions(f"the corrected arguments for {key!r} are {type(value.arguments).__name__}, "
                                   "not an object")
        elif not isinstance(value, (bool, str)):
            raise BadDecisions(f"the decision for {key!r} is {type(value).__name__}, not True, False, a reason "
                               "or approve(call)")
    check_reasons(decisions)


def check_reasons(decisions: Any) -> None:
    """No denial reason longer than ``MAX_REASON_LENGTH`` (``BadDecisions``); what is not a
    mapping is left to ``check_decisions``."""
    for key, value in decisions.items() if isinstance(decisions, Mapping) else ():
        if isinstance(value, str) and len(value) > MAX_REASON_LENGTH:
            raise BadDecisions(f"the reason for {key!r} is {len(value):,} characters, more than {MAX_REASON_LENGTH:,}")


def settle(checkpoint: Checkpoint, decisions: Mapping[str, Decision]) -> tuple[Checkpoint, dict[str, Decision]]:
    """Checked decisions as the resumed run acts on them: a call whose id another waiting call
    shares is denied (``SHARED_ID``) - one decision never runs two calls; this run's own
    ``Approve``s become ``True``, their corrected arguments written into the returned
    checkpoint's waiting calls (its ``_edited`` names their tools, for the run span); a
    sub-agent's stay ``Approve``s, for its own resume to check and settle."""
    times = Counter(c.id for c in checkpoint.calls())
    settled: dict[str, Decision] = {k: SHARED_ID if times[k] > 1 else v for k, v in decisions.items()}
    edits: dict[str, dict[str, Any]] = {}
    for call in checkpoint.pending:
        value = settled.get(call.id)
        if isinstance(value, Approve):
            if value.arguments is not None:
                edits[call.id] = value.arguments
            settled[call.id] = True
    if edits:
        pending = tuple(dataclasses.replace(c, arguments=edits.get(c.id, c.arguments)) for c in checkpoint.pending)
        checkpoint = dataclasses.replace(checkpoint, pending=pending)
        object.__setattr__(checkpoint, "_edited", [c.name for c in pending if c.id in edits])
    return checkpoint, settled


def decisions_to_data(decisions: Mapping[str, Decision]) -> dict[str, Any]:
    """Decisions as JSON data (a durable engine's update): an ``Approve`` as ``{"approve":
    digest, "arguments": ...}``."""
    return {k: {"approve": v.digest, "arguments": v.arguments} if isinstance(v, Approve) else v
            for k, v in decisions.items()}


def decisions_from_data(data: Any) -> Any:
    """``decisions_to_data`` read back; anything else is left for ``check_decisions`` to refuse."""
    if not isinstance(data, Mapping):
        return data
    return {k: Approve(digest=v["approve"], arguments=v.get("arguments"))
            if isinstance(v, Mapping) and isinstance(v.get("approve"), str) and set(v) <= {"approve", "arguments"}
            else v for k, v in data.items()}
