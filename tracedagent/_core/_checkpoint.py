"""A paused run as data: what resuming it needs, written as versioned JSON and read back checked.

A run that stops ``approval_required`` carries a ``Checkpoint``; ``Run.checkpoint()`` is its
JSON, which the application keeps (a database row, a file) until a person has decided, in
this process or another. ``Checkpoint.loads`` reads it back, and every way it can be wrong -
not JSON, another version, a field of the wrong shape - is a ``CheckpointError`` subclass
raised before anything runs. It is the application's data, not telemetry: it holds the
conversation and the waiting calls' arguments whatever the content-capture setting.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any, Mapping, Union

from ._budget import Budget
from ._records import Message

__all__ = ["CHECKPOINT_VERSION", "Checkpoint", "PendingCall", "Spent", "SubAgentPause", "Decision",
           "CheckpointError", "MalformedCheckpoint", "UnknownCheckpointVersion", "WrongAgent", "BadDecisions",
           "AlreadyResumed", "check_decisions", "check_reasons", "budget_from", "MAX_REASON_LENGTH", "NESTED_ID_SEPARATOR"]

CHECKPOINT_VERSION = 1
"""The format ``Run.checkpoint()`` writes; ``Checkpoint.loads`` refuses any other."""

NESTED_ID_SEPARATOR = "/"
"""Joins a sub-agent's call id to the id of its own waiting call (``"outer/inner"``): ids a
provider gives are unique within one conversation only, and a team has several."""

Decision = Union[bool, str]
"""``True`` runs the call; ``False`` or a string denies it (the string is what the model is shown)."""


class CheckpointError(ValueError):
    """A checkpoint (or the decisions given with it) that cannot be resumed: nothing ran."""


class MalformedCheckpoint(CheckpointError):
    """Not JSON, or JSON without the fields, or with fields of the wrong type."""


class UnknownCheckpointVersion(CheckpointError):
    """Written by a format this version of tracedagent does not read."""


class WrongAgent(CheckpointError):
    """Paused by another agent: a different name or different tools."""


class BadDecisions(CheckpointError):
    """A decision for a call that is not waiting, a waiting call without one, or a value that
    is neither a bool nor a string."""


class AlreadyResumed(CheckpointError):
    """This checkpoint (its ``id``) was resumed before."""


@dataclass(frozen=True, kw_only=True)
class PendingCall:
    """A call that waits for a person's decision."""

    id: str
    """What ``decisions`` is keyed by: the call's id, or for a sub-agent's call the sub-agent
    call's id and its own joined by ``/``."""
    name: str
    """The tool it would run."""
    arguments: dict[str, Any] | str
    """Exactly what an approval runs it with."""
    reason: str
    """Why it waits: the policy's ``ask(...)`` or the tool's ``requires_approval``."""

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "reason": self.reason}


@dataclass(frozen=True, kw_only=True)
class Spent:
    """What a run used of its budget before it paused: a resumed run is bounded by the rest."""

    steps: int = 0
    """Model calls made."""
    input_tokens: int = 0
    """Input tokens, its sub-agents' included."""
    output_tokens: int = 0
    """Output tokens, its sub-agents' included."""
    cost: float = 0.0
    """USD at the budget's prices."""
    tool_calls: int = 0
    """Tool calls requested (``Budget.max_tool_calls`` counts these)."""
    seconds: float = 0.0
    """Time running: waiting for a person does not count against ``max_seconds``."""


@dataclass(frozen=True, kw_only=True)
class SubAgentPause:
    """A call to a sub-agent (``Agent.as_tool``) whose run paused: resuming continues inside it."""

    call_id: str
    """The id of the call to the sub-agent in the paused run's last turn."""
    name: str
    """The sub-agent tool's name."""
    arguments: dict[str, Any] | str
    """The call's arguments, as the model sent them."""
    checkpoint: Checkpoint
    """The sub-agent's paused run."""


@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    """Everything resuming a paused run needs. ``dumps`` / ``loads`` are its JSON."""

    id: str
    """Unique to this pause: on the paused and the resumed run spans and ``Run``, so an
    application can tell a checkpoint it has already resumed."""
    agent: str
    """The name of the agent whose run paused."""
    tools: tuple[str, ...]
    """Its tools' names, sorted: another agent's checkpoint is refused."""
    budget: Budget
    """The run's budget, whole: the resumed run gets what is left of it (``spent``)."""
    spent: Spent
    """What the run used before it paused."""
    messages: list[Message]
    """The conversation, the paused turn and the results of its dispatched calls included."""
    step_index: int
    """The index of the paused turn's step."""
    pending: tuple[PendingCall, ...] = ()
    """This run's own calls waiting for a decision."""
    sub_agents: tuple[SubAgentPause, ...] = ()
    """Calls to sub-agents whose runs paused."""
    conversation_id: str | None = None
    """``gen_ai.conversation.id``, which the resumed run keeps."""
    trace_id: str | None = None
    """The paused run span's trace id (hex), the resumed run span's ``tracedagent.resumed_from``."""
    span_id: str | None = None
    """The paused run span's id (hex): the resumed run span links to it."""
    paused_at: float = 0.0
    """``time.time()`` when the run paused: approval wait is measured from it."""
    repeats: tuple[tuple[str, str, int], ...] = ()
    """How many times the run had asked for each call (tool name, canonical arguments) when it
    paused: the resumed run's repeat check goes on counting from there. (Absent from a
    checkpoint an earlier release wrote: such a run counts afresh.)"""

    def calls(self) -> list[PendingCall]:
        """Every call waiting, sub-agents' included (their ids prefixed with the sub-agent call's)."""
        waiting = list(self.pending)
        for sub in self.sub_agents:
            waiting += [dataclasses.replace(c, id=f"{sub.call_id}{NESTED_ID_SEPARATOR}{c.id}")
                        for c in sub.checkpoint.calls()]
        return waiting

    def as_dict(self) -> dict[str, Any]:
        return {"version": CHECKPOINT_VERSION, "id": self.id, "agent": self.agent, "tools": list(self.tools),
                "budget": dataclasses.asdict(self.budget), "spent": dataclasses.asdict(self.spent),
                "messages": self.messages, "step_index": self.step_index,
                "pending": [c.as_dict() for c in self.pending],
                "sub_agents": [{"call_id": s.call_id, "name": s.name, "arguments": s.arguments,
                                "checkpoint": s.checkpoint.as_dict()} for s in self.sub_agents],
                "conversation_id": self.conversation_id, "trace_id": self.trace_id, "span_id": self.span_id,
                "paused_at": self.paused_at, "repeats": [list(r) for r in self.repeats]}

    def dumps(self) -> str:
        """The versioned JSON. Arguments JSON cannot hold are written as their ``str``."""
        return json.dumps(self.as_dict(), default=str, ensure_ascii=False)

    @classmethod
    def loads(cls, text: str | bytes) -> Checkpoint:
        """Read a checkpoint back, or raise a ``CheckpointError`` saying what is wrong with it."""
        try:
            data = json.loads(text)
        except (ValueError, TypeError, RecursionError) as exc:
            raise MalformedCheckpoint(f"the checkpoint is not JSON ({type(exc).__name__})") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> Checkpoint:
        if not isinstance(data, dict):
            raise MalformedCheckpoint("the checkpoint is not a JSON object")
        version = data.get("version")
        if version != CHECKPOINT_VERSION:
            raise UnknownCheckpointVersion(f"checkpoint version {str(version)[:20]!r}: this tracedagent reads "
                                           f"version {CHECKPOINT_VERSION}")
        try:
            budget = budget_from(data.get("budget"), "checkpoint")
            spent = Spent(**_fields(_typed(data, "spent", dict), Spent, "spent"))
            return cls(id=_typed(data, "id", str), agent=_typed(data, "agent", str),
                       tools=tuple(_strings(_typed(data, "tools", list), "tools")), budget=budget, spent=spent,
                       messages=[_typed({"message": m}, "message", dict) for m in _typed(data, "messages", list)],
                       step_index=_number(_typed(data, "step_index", int), "step_index"),
                       pending=tuple(_pending(p) for p in _typed(data, "pending", list)),
                       sub_agents=tuple(_sub_agent(s) for s in _typed(data, "sub_agents", list)),
                       conversation_id=_optional(data, "conversation_id"), trace_id=_optional(data, "trace_id"),
                       span_id=_optional(data, "span_id"), paused_at=_number(data.get("paused_at", 0.0), "paused_at"),
                       repeats=tuple(_repeat(r) for r in _typed({"repeats": data.get("repeats", [])}, "repeats", list)))
        except CheckpointError:
            raise
        except (TypeError, ValueError) as exc:  # Budget's own checks, an unknown field
            raise MalformedCheckpoint(f"the checkpoint's fields are wrong: {exc}") from None


def check_decisions(checkpoint: Checkpoint, decisions: Mapping[str, Decision]) -> None:
    """Exactly one decision for each waiting call, each a bool or a string (``BadDecisions``)."""
    if not isinstance(decisions, Mapping):
        raise BadDecisions(f"decisions must map call ids to True, False or a reason, not {type(decisions).__name__}")
    waiting = {c.id for c in checkpoint.calls()}
    unknown = sorted(str(k)[:80] for k in decisions if k not in waiting)
    if unknown:
        raise BadDecisions(f"no call is waiting with the id(s) {unknown}; waiting: {sorted(waiting)}")
    missing = sorted(waiting - set(decisions))
    if missing:
        raise BadDecisions(f"no decision for the waiting call(s) {missing}")
    for key, value in decisions.items():
        if not isinstance(value, (bool, str)):
            raise BadDecisions(f"the decision for {key!r} is {type(value).__name__}, not True, False or a reason")
    check_reasons(decisions)


def check_reasons(decisions: Any) -> None:
    """No denial reason longer than ``MAX_REASON_LENGTH`` (``BadDecisions``); what is not a
    mapping is left to ``check_decisions``."""
    for key, value in decisions.items() if isinstance(decisions, Mapping) else ():
        if isinstance(value, str) and len(value) > MAX_REASON_LENGTH:
            raise BadDecisions(f"the reason for {key!r} is {len(value):,} characters, more than {MAX_REASON_LENGTH:,}")


MAX_REASON_LENGTH = 10_000
"""The longest denial reason a decision may give: words a person wrote for the model, shown as
the call's result. A longer one is refused, not cut: it is more likely a mistake (a pasted file)
than a reason, and it would travel in every later model call (and past a durable engine's
payload limit)."""


_LARGEST = 2**53
"""The largest number a checkpoint may hold: what a JSON number keeps exactly in most readers.
Larger, it is garbage (no budget or run is that large), and a float cannot hold some of them."""


def budget_from(data: Any, where: str, *, defaults: bool = False) -> Budget:
    """A ``Budget`` from its fields as data (``where``: what held them, for the error), every
    field of its type, else ``MalformedCheckpoint``: a checkpoint's, where every field must be
    there, or (``defaults``: a missing field is the default's) a durable run's request
    (``tracedagent.temporal``), which a person may have written by hand."""
    if not isinstance(data, dict):
        raise MalformedCheckpoint(f"the {where}'s 'budget' is {type(data).__name__}, not dict")
    if defaults:
        data = {**dataclasses.asdict(Budget()), **data}
    return Budget(**_fields(data, Budget, "budget", where))


def _fields(data: dict[str, Any], kind: type, key: str, where: str = "checkpoint") -> dict[str, Any]:
    """``data`` as the fields of the dataclass ``kind`` (``Budget``, ``Spent``): every field
    present, each a non-negative number of the field's own type (an int where the field is an
    int), or ``None`` where the field may be - so that a checkpoint that lost a field or holds
    a wrong type is refused here, before anything runs, rather than reset to a default or
    failing half-way through a resumed run. (So a field added to ``Budget`` later must raise
    ``CHECKPOINT_VERSION``, or be given its default here for older checkpoints.)"""
    fields = {f.name: f for f in dataclasses.fields(kind)}
    unknown = sorted(str(name)[:40] for name in data if name not in fields)
    missing = sorted(name for name in fields if name not in data)
    if unknown or missing:
        raise MalformedCheckpoint(f"the {where}'s {key!r} has unknown fields {unknown} or lacks {missing}")
    for name, f in fields.items():
        value, annotation = data[name], str(f.type)
        if value is None and "None" in annotation:
            continue
        _number(value, f"{key}.{name}", where)
        if annotation.startswith("int") and type(value) is not int:
            raise MalformedCheckpoint(f"the {where}'s '{key}.{name}' is {type(value).__name__}, not int")
    return data


def _typed(data: dict[str, Any], key: str, kind: type) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise MalformedCheckpoint(f"the checkpoint's {key!r} is {type(value).__name__}, not {kind.__name__}")
    return value


def _optional(data: dict[str, Any], key: str) -> str | None:
    return None if data.get(key) is None else _typed(data, key, str)


def _number(value: Any, key: str, where: str = "checkpoint") -> Any:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not -_LARGEST <= value <= _LARGEST
            or not math.isfinite(value) or value < 0):
        raise MalformedCheckpoint(f"the {where}'s {key!r} is not a non-negative number")
    return value


def _strings(values: list[Any], key: str) -> list[str]:
    if not all(isinstance(v, str) for v in values):
        raise MalformedCheckpoint(f"the checkpoint's {key!r} are not all strings")
    return values


def _arguments(data: dict[str, Any]) -> dict[str, Any] | str:
    value = data.get("arguments")
    if not isinstance(value, (dict, str)):
        raise MalformedCheckpoint("a waiting call's arguments are neither an object nor a string")
    return value


def _repeat(data: Any) -> tuple[str, str, int]:
    if not (isinstance(data, list) and len(data) == 3 and isinstance(data[0], str) and isinstance(data[1], str)
            and type(data[2]) is int):
        raise MalformedCheckpoint("the checkpoint's 'repeats' are not [tool name, arguments, count] triples")
    return data[0], data[1], _number(data[2], "repeats")


def _pending(data: Any) -> PendingCall:
    data = _typed({"call": data}, "call", dict)
    return PendingCall(id=_typed(data, "id", str), name=_typed(data, "name", str), arguments=_arguments(data),
                       reason=_typed(data, "reason", str))


def _sub_agent(data: Any) -> SubAgentPause:
    data = _typed({"sub_agent": data}, "sub_agent", dict)
    return SubAgentPause(call_id=_typed(data, "call_id", str), name=_typed(data, "name", str),
                         arguments=_arguments(data), checkpoint=Checkpoint.from_dict(data.get("checkpoint")))

