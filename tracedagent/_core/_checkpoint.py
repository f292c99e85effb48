"""A paused run as data: what resuming it needs, written as versioned, signed JSON and read back checked.

A run that stops ``approval_required`` carries a ``Checkpoint``; ``Run.checkpoint()`` is its
JSON, which the application keeps (a database row, a file) until a person has decided, in
this process or another. ``Checkpoint.loads`` reads it back, and every way it can be wrong -
not JSON, another version, a field of the wrong shape, a conversation that is not one, a
signature that does not match - is a ``CheckpointError`` subclass raised before anything runs.
It is the application's data, not telemetry: it holds the conversation and the waiting calls'
arguments whatever the content-capture setting.

**Trust.** A ``Checkpoint`` this process made (``RunState.checkpoint_at``, or built in code) is
trusted as made. One read from text (``loads``/``from_dict``) remembers where it came from
(``_signing.Origin``) and is trusted only once accepted (``_signing.accept``): its signature checked with the
agent's keys (``_signing``), or - unsigned - taken because the agent was told to
(``accept_unsigned_checkpoints``). The text is signed when written (``dumps``) with the key of
the agent that paused; one read from text is written back exactly as it was read, never signed
anew, so reading and writing cannot turn an unsigned checkpoint into a signed one.

**Version 2** (this release) added the signature, the prompt-cache token counts of ``spent``
and the budget's prompt-cache prices and output retries; version 1 is still read (its cache counts read as 0, its
cache prices as ``None``, its output retries as the default 1, and it has no signature).

**Adding a field**: add it to the dataclass with a default, write it in ``as_dict``, read and
check it in ``from_dict`` (a missing or wrong-typed field is ``MalformedCheckpoint``: a field
that silently fell back to a default could reset a budget). Until a release writes version 2,
a field is added to version 2 and to ``_ABSENT_IN[1]`` (the value a version-1 checkpoint reads
as) - and, if version-2 checkpoints without it may be stored already (Temporal's recorded
histories hold some), to ``_ABSENT_IN[2]``, its default, as ``max_output_retries`` is; after a
release, add a version (``CHECKPOINT_VERSION`` + 1) and an ``_ABSENT_IN`` entry for the one
before. The signature covers every field, so nothing else changes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any

from ._budget import Budget
from ._checkpoint_errors import (AlreadyResumed, BadDecisions, CheckpointError, DecisionMismatch,
                                 ExpiredCheckpoint, MalformedCheckpoint, TamperedCheckpoint,
                                 UnknownCheckpointVersion, UnsignedCheckpoint, WrongAgent)
from ._messages import MalformedMessage, check_messages
from ._records import Message
from ._signing import SIGNATURE, CheckpointKey, Keyring, Origin, call_digest, keyring, signature_block, verify
from ._usage import Spent  # the usage record's snapshot: what a paused run had spent

__all__ = ["CHECKPOINT_VERSION", "Checkpoint", "PendingCall", "Spent", "SubAgentPause", "CheckpointError",
           "MalformedCheckpoint", "UnknownCheckpointVersion", "WrongAgent", "BadDecisions", "DecisionMismatch",
           "AlreadyResumed", "TamperedCheckpoint", "UnsignedCheckpoint", "ExpiredCheckpoint", "budget_from",
           "budget_within", "NESTED_ID_SEPARATOR", "nested_id", "escape_id"]

CHECKPOINT_VERSION = 2
"""The format ``Run.checkpoint()`` writes; ``Checkpoint.loads`` reads it and version 1."""

_ABSENT_IN: dict[int, dict[str, dict[str, Any]]] = {
    1: {"spent": {"cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
        "budget": {"price_per_1k_cache_read": None, "price_per_1k_cache_write": None, "max_output_retries": 1}},
    # Written before typed outputs (Temporal histories hold such checkpoints): the default retry.
    2: {"budget": {"max_output_retries": 1}},
}
"""Fields an older version lacks, by version and object, with the value they read as."""

NESTED_ID_SEPARATOR = "/"
"""Joins a sub-agent's call id to the id of its own waiting call (``"outer/inner"``): ids a
provider gives are unique within one conversation only, and a team has several. The outer id is
escaped (``escape_id``), and a run never holds a call of its own whose id contains the
separator, so a model-chosen id can never equal a nested one."""

_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_HEX = {"trace_id": re.compile(r"[0-9a-f]{32}"), "span_id": re.compile(r"[0-9a-f]{16}")}


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

    @property
    def digest(self) -> str:
        """What the person deciding sees, as a digest of the tool name and the arguments:
        ``approve(call)`` carries it, and a resume refuses it unless the call is still this one."""
        return call_digest(self.name, self.arguments)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "reason": self.reason}


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
        """Every call waiting, sub-agents' included (their ids prefixed with the sub-agent call's:
        ``nested_id``). These ids are what ``decisions`` is keyed by."""
        waiting = list(self.pending)
        for sub in self.sub_agents:
            waiting += [dataclasses.replace(c, id=nested_id(sub.call_id, c.id)) for c in sub.checkpoint.calls()]
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
        """The versioned JSON, signed with the key of the agent that paused (or, for a checkpoint
        made in code, ``TRACEDAGENT_CHECKPOINT_KEY``) when there is one. A checkpoint read from
        text is written back as it was read. Arguments JSON cannot hold are written as their ``str``."""
        origin = getattr(self, "_origin", None)
        if origin is not None:
            return json.dumps(origin.data, ensure_ascii=False)
        # The data as a reader will get it back (tuples as lists, objects as strings): what it checks.
        data = json.loads(json.dumps(self.as_dict(), default=str, ensure_ascii=False))
        keys, max_age = getattr(self, "_signing", None) or (keyring(None), None)
        if keys is not None:
            data = signature_block(data, keys, None if max_age is None else self.paused_at + max_age)
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def loads(cls, text: str | bytes, key: CheckpointKey | Keyring | None = None) -> Checkpoint:
        """Read a checkpoint back, or raise a ``CheckpointError`` saying what is wrong with it. A
        signed one is checked with ``key`` (default: ``TRACEDAGENT_CHECKPOINT_KEY``) when there is
        one: altered or foreign, it is ``TamperedCheckpoint``; past its ``expires``,
        ``ExpiredCheckpoint``. Without a key it is checked when an agent resumes it."""
        try:
            data = json.loads(text)
        except (ValueError, TypeError, RecursionError) as exc:
            raise MalformedCheckpoint(f"the checkpoint is not JSON ({type(exc).__name__})") from None
        keys = keyring(key)
        if isinstance(data, dict) and data.get(SIGNATURE) is not None and keys is not None:
            verify(Origin(data), keys, time.time())  # before its fields: a changed one is tampered
        cp = cls.from_dict(data)
        if keys is not None and data.get(SIGNATURE) is not None:
            cp._origin.accepted = True  # type: ignore[attr-defined]
        return cp

    @classmethod
    def from_dict(cls, data: Any, _root: Origin | None = None) -> Checkpoint:
        """A checkpoint from its JSON data, checked field by field; untrusted until ``accept``ed."""
        if not isinstance(data, dict):
            raise MalformedCheckpoint("the checkpoint is not a JSON object")
        version = data.get("version")
        if version not in (1, CHECKPOINT_VERSION) or type(version) is not int:
            raise UnknownCheckpointVersion(f"checkpoint version {str(version)[:20]!r}: this tracedagent reads "
                                           f"versions 1 and {CHECKPOINT_VERSION}")
        origin = Origin(data, _root)
        absent = _ABSENT_IN.get(version, {})
        try:
            budget = data.get("budget")
            budget = budget_from({**absent.get("budget", {}), **budget} if isinstance(budget, dict) else budget,
                                 "checkpoint")
            spent = Spent(**_fields({**absent.get("spent", {}), **_typed(data, "spent", dict)}, Spent, "spent"))
            messages = _typed(data, "messages", list)
            check_messages(messages)
            cp = cls(id=_identifier(data, "id"), agent=_typed(data, "agent", str),
                     tools=tuple(_strings(_typed(data, "tools", list), "tools")), budget=budget, spent=spent,
                     messages=messages, step_index=_number(_typed(data, "step_index", int), "step_index"),
                     pending=tuple(_pending(p) for p in _typed(data, "pending", list)),
                     sub_agents=tuple(_sub_agent(s, origin.top) for s in _typed(data, "sub_agents", list)),
                     conversation_id=_optional(data, "conversation_id"), trace_id=_hex(data, "trace_id"),
                     span_id=_hex(data, "span_id"), paused_at=_number(data.get("paused_at", 0.0), "paused_at"),
                     repeats=tuple(_repeat(r) for r in _typed({"repeats": data.get("repeats", [])}, "repeats", list)))
        except CheckpointError:
            raise
        except MalformedMessage as exc:
            raise MalformedCheckpoint(f"the checkpoint's conversation is not one: {exc}") from exc
        except (TypeError, ValueError) as exc:  # Budget's own checks, an unknown field
            raise MalformedCheckpoint(f"the checkpoint's fields are wrong: {exc}") from None
        object.__setattr__(cp, "_origin", origin)
        return cp


def escape_id(call_id: str) -> str:
    """A sub-agent call's id as the first part of a nested id: ``%`` and ``/`` escaped, so that
    the join cannot be read two ways."""
    return call_id.replace("%", "%25").replace(NESTED_ID_SEPARATOR, "%2F")


def nested_id(outer: str, inner: str) -> str:
    """The id of a sub-agent's waiting call ``inner`` in its caller's run (the sub-agent call ``outer``)."""
    return escape_id(outer) + NESTED_ID_SEPARATOR + inner


def budget_within(signed: Budget, given: Budget | None) -> Budget:
    """The budget a resumed run gets when its resumer passes one: each ceiling the lower of the
    checkpoint's and ``given``'s (``None``: no ceiling); the checkpoint's prices. A resume may
    lower what a signed checkpoint allows, never raise it."""
    if given is None:
        return signed
    lower: dict[str, Any] = {}
    for name in ("max_steps", "max_tokens", "max_cost", "repeat_limit", "no_progress_limit", "max_seconds",
                 "max_tool_calls_per_step", "max_tool_calls", "max_output_retries"):
        mine, theirs = getattr(signed, name), getattr(given, name)
        lower[name] = mine if theirs is None else theirs if mine is None else min(mine, theirs)
    return dataclasses.replace(signed, **lower)


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


def _identifier(data: dict[str, Any], key: str) -> str:
    value = _typed(data, key, str)
    if not _ID.fullmatch(value):
        raise MalformedCheckpoint(f"the checkpoint's {key!r} is not 1 to 128 letters, digits and . _ : -")
    return value


def _hex(data: dict[str, Any], key: str) -> str | None:
    value = _optional(data, key)
    if value is not None and not _HEX[key].fullmatch(value):
        raise MalformedCheckpoint(f"the checkpoint's {key!r} is not a hex {key.replace('_', ' ')}")
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
    if NESTED_ID_SEPARATOR in _typed(data, "id", str):  # a run never holds one: a nested id's look-alike
        raise MalformedCheckpoint(f"a waiting call's id contains {NESTED_ID_SEPARATOR!r}")
    return PendingCall(id=_typed(data, "id", str), name=_typed(data, "name", str), arguments=_arguments(data),
                       reason=_typed(data, "reason", str))


def _sub_agent(data: Any, root: Origin) -> SubAgentPause:
    data = _typed({"sub_agent": data}, "sub_agent", dict)
    return SubAgentPause(call_id=_typed(data, "call_id", str), name=_typed(data, "name", str),
                         arguments=_arguments(data), checkpoint=Checkpoint.from_dict(data.get("checkpoint"), root))

