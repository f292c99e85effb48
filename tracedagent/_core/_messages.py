"""One check of a conversation's shape, wherever one enters the loop from outside.

A ``history`` given to ``run()``, the conversation in a checkpoint, a durable run's request:
each is a list of loop messages (``Message`` in ``_records``) written by someone else, and a
wrong shape used to surface late - a ``KeyError`` inside the model call, after an approved
call had already run. ``check_messages`` refuses it before anything runs, with the index of
the message and the field that is wrong (``MalformedMessage``). (Converting an OpenAI- or
Anthropic-shaped history into the loop's shape belongs in front of this check, not in it.)

The shape:

- every message is an object with ``"role"``: ``"system"``, ``"user"``, ``"assistant"`` or ``"tool"``;
- ``"content"``, if present, is a string or null (a user's may also be a list of content-part objects);
- an assistant's ``"tool_calls"``, if present, is a list of ``{"id": str, "name": str,
  "arguments": object or str}``; its ``"provider_data"`` an object;
- a tool message has a string ``"tool_call_id"`` naming a call of the last assistant turn that
  asked for tools, and answers it no more often than it was asked for; its ``"name"``, if
  present, is a string.

Other keys are left alone (adapters ignore what they do not know).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

__all__ = ["MalformedMessage", "check_messages", "ROLES"]

ROLES = ("system", "user", "assistant", "tool")


class MalformedMessage(ValueError):
    """A conversation that is not a list of loop messages: ``index`` is the message's position
    (``None``: the list itself), ``field`` the key that is wrong."""

    def __init__(self, index: int | None, field: str, problem: str) -> None:
        where = "the conversation" if index is None else f"message {index}"
        super().__init__(f"{where}: {field!r} {problem}")
        self.index = index
        self.field = field


def check_messages(messages: Any, name: str = "messages") -> None:
    """Raise ``MalformedMessage`` unless ``messages`` is a list of loop messages (see above);
    ``name`` is what the caller calls the list (a Temporal request's ``history``)."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise MalformedMessage(None, name, f"is not a list of messages (a {type(messages).__name__})")
    asked: Counter[str] = Counter()  # the ids the last assistant turn asked for, not yet answered
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise MalformedMessage(i, "message", f"is {type(message).__name__}, not an object")
        role = message.get("role")
        if role not in ROLES:
            raise MalformedMessage(i, "role", f"is {_shown(role)}, not one of {', '.join(ROLES)}")
        content = message.get("content")
        if not (content is None or isinstance(content, str)
                or (role == "user" and isinstance(content, list) and all(isinstance(p, Mapping) for p in content))):
            raise MalformedMessage(i, "content", f"is {type(content).__name__}, not a string")
        if role == "assistant":
            asked = _tool_calls(i, message)
            if message.get("provider_data") is not None and not isinstance(message["provider_data"], Mapping):
                raise MalformedMessage(i, "provider_data", "is not an object")
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                raise MalformedMessage(i, "tool_call_id", f"is {type(call_id).__name__}, not a string")
            if asked[call_id] < 1:
                raise MalformedMessage(i, "tool_call_id", f"{_shown(call_id)} answers no call of the assistant turn "
                                       "before it (or answers one twice)")
            asked[call_id] -= 1
            if "name" in message and not isinstance(message["name"], str):
                raise MalformedMessage(i, "name", "is not a string")
        else:
            asked = Counter()


def _tool_calls(i: int, message: Mapping[str, Any]) -> Counter[str]:
    calls = message.get("tool_calls")
    if calls is None:
        return Counter()
    if not isinstance(calls, list):
        raise MalformedMessage(i, "tool_calls", f"is {type(calls).__name__}, not a list")
    ids: Counter[str] = Counter()
    for n, call in enumerate(calls):
        if not (isinstance(call, Mapping) and isinstance(call.get("id"), str) and isinstance(call.get("name"), str)
                and isinstance(call.get("arguments"), (Mapping, str))):
            raise MalformedMessage(i, f"tool_calls[{n}]", "is not {id: string, name: string, arguments: object or "
                                   "string}")
        ids[call["id"]] += 1
    return ids


def _shown(value: Any) -> str:
    return repr(value)[:60] if isinstance(value, str) else type(value).__name__
