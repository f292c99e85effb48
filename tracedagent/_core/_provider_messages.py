"""A ``history`` in the providers' own message shapes, converted to the loop's (``Message``).

Applications keep their conversations in the shape their provider's API speaks: OpenAI's Chat
Completions (an assistant's ``tool_calls`` as ``{"type": "function", "function": {"name",
"arguments": "<JSON text>"}}``, a result as ``role: tool`` with ``tool_call_id``) or Anthropic's
Messages (``content`` as a list of ``text``, ``tool_use`` and ``tool_result`` blocks). ``run(task,
history=...)`` takes either, and the loop's own shape: ``loop_messages`` converts what is in a
provider's shape, in front of the one shape check (``_messages.check_messages``), which then
judges the result. A provider's message that cannot be converted (an image block in an assistant
turn, an OpenAI call without a name) is ``ProviderMessageError``, a ``MalformedMessage`` naming
the message and the field. Before, such a history failed the run as "the model call failed
(KeyError)" from inside a model adapter.

What is not in a provider's shape is left as it is, for ``check_messages`` to accept or refuse.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ._messages import ROLES, MalformedMessage
from ._records import Message

__all__ = ["ProviderMessageError", "loop_messages"]

_THINKING = ("thinking", "redacted_thinking")


class ProviderMessageError(MalformedMessage):
    """A message in OpenAI's or Anthropic's shape that does not convert to the loop's: ``index``
    is the message's position in the history, ``field`` the part that is wrong. No content is
    quoted."""


def loop_messages(history: Any) -> Any:
    """``history`` with each message in OpenAI's or Anthropic's shape converted to the loop's (an
    Anthropic user turn of tool results becomes one ``tool`` message per result, then a ``user``
    message for its text, if any); every message a new dict. Anything that is not a list of
    messages is returned as it is, for ``check_messages`` to refuse."""
    if not isinstance(history, (list, tuple)):
        return history
    messages: list[Any] = []
    names: dict[str, str] = {}  # tool call id -> tool name, for results that do not say it
    for index, message in enumerate(history):
        if not isinstance(message, Mapping):
            messages.append(message)
            continue
        message = dict(message)
        if message.get("role") == "developer":  # OpenAI's newer name for system instructions
            message["role"] = "system"
        role, content = message.get("role"), message.get("content")
        if role == "assistant":
            message = _assistant(message, index)
            calls = message.get("tool_calls")
            names.update((call["id"], call["name"]) for call in (calls if isinstance(calls, list) else ())
                         if isinstance(call, Mapping) and isinstance(call.get("id"), str)
                         and isinstance(call.get("name"), str))
        elif role == "tool":
            message["content"] = _text(content, index, "content")
            if isinstance(message.get("tool_call_id"), str) and "name" not in message:
                message["name"] = names.get(message["tool_call_id"], "")
        elif role == "user" and isinstance(content, list) and any(_kind(b) == "tool_result" for b in content):
            messages.extend(_tool_results(content, index, names))
            continue
        elif role == "user" and isinstance(content, list) and all(_kind(b) == "text" for b in content):
            message["content"] = _text(content, index, "content")  # other parts (images) stay as they are
        elif role in ROLES and role != "user":
            message["content"] = _text(content, index, "content")
        messages.append(message)
    return messages


def _assistant(message: Message, index: int) -> Message:
    if message.get("function_call") is not None:
        raise ProviderMessageError(index, "function_call", "is OpenAI's deprecated single call; send it as tool_calls")
    message.pop("function_call", None)
    calls = message.get("tool_calls")
    calls = [_call(call, index, f"tool_calls[{n}]") for n, call in enumerate(calls)] if isinstance(calls, list) else calls
    content = message.get("content")
    if isinstance(content, list):  # Anthropic's blocks (or OpenAI's content parts)
        texts, thinking, used = [], [], []
        for n, block in enumerate(content):
            field, kind = f"content[{n}]", _kind(block)
            if kind == "text":
                texts.append(_text(block.get("text"), index, f"{field}.text"))
            elif kind == "tool_use":
                used.append({"id": _string(block, "id", index, field), "name": _string(block, "name", index, field),
                             "arguments": _object(block.get("input", {}), index, f"{field}.input")})
            elif kind in _THINKING:
                thinking.append(dict(block))
            else:
                raise ProviderMessageError(index, field, f"is a {_shown(kind)} block, which an assistant turn of the "
                                           "loop cannot hold (text, tool_use, thinking)")
        message["content"] = "".join(texts)
        calls = [*(calls or []), *used] if used else calls
        if thinking:
            data = dict(message.get("provider_data") or {})
            data["anthropic"] = {**data.get("anthropic", {}), "thinking": thinking}
            message["provider_data"] = data
    else:
        message["content"] = _text(content, index, "content")
    if calls is not None:
        message["tool_calls"] = calls
    if message.get("tool_calls") in ([], None):
        message.pop("tool_calls", None)
    return message


def _call(call: Any, index: int, field: str) -> Any:
    """One entry of ``tool_calls``: OpenAI's ``{"id", "type": "function", "function": {...}}`` is
    converted; anything else (the loop's own ``{"id", "name", "arguments"}``) is left as it is."""
    if not isinstance(call, Mapping) or "function" not in call:
        return dict(call) if isinstance(call, Mapping) else call
    if call.get("type", "function") != "function":
        raise ProviderMessageError(index, f"{field}.type", f"is {_shown(call.get('type'))}; only function calls "
                                   "convert")
    function = call["function"]
    if not isinstance(function, Mapping):
        raise ProviderMessageError(index, f"{field}.function", f"is a {type(function).__name__}, not an object")
    arguments = function.get("arguments", "{}")
    if isinstance(arguments, str):  # JSON text; kept raw when it is not an object, as a model's would be
        try:
            decoded = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            decoded = arguments
        arguments = decoded if isinstance(decoded, dict) else arguments
    elif not isinstance(arguments, Mapping):
        raise ProviderMessageError(index, f"{field}.function.arguments", f"is a {type(arguments).__name__}, not "
                                   "JSON text or an object")
    return {"id": _string(call, "id", index, field), "name": _string(function, "name", index, f"{field}.function"),
            "arguments": arguments}


def _tool_results(content: list[Any], index: int, names: Mapping[str, str]) -> list[Message]:
    """An Anthropic user turn holding ``tool_result`` blocks: one ``tool`` message per result, in
    order, then its text as one ``user`` message."""
    results: list[Message] = []
    texts: list[str] = []
    for n, block in enumerate(content):
        field, kind = f"content[{n}]", _kind(block)
        if kind == "text":
            texts.append(_text(block.get("text"), index, f"{field}.text"))
        elif kind == "tool_result":
            call_id = _string(block, "tool_use_id", index, field)
            results.append({"role": "tool", "tool_call_id": call_id, "name": names.get(call_id, ""),
                            "content": _text(block.get("content", ""), index, f"{field}.content")})
        else:
            raise ProviderMessageError(index, field, f"is a {_shown(kind)} block beside tool results; such a turn "
                                       "converts only with text and tool_result blocks")
    return results + ([{"role": "user", "content": "\n".join(texts)}] if texts else [])


def _text(content: Any, index: int, field: str) -> Any:
    """A message's text: a list of text parts or blocks joined; anything else as it is."""
    if not isinstance(content, list):
        return content
    parts = []
    for n, block in enumerate(content):
        if isinstance(block, str):
            parts.append(block)
        elif _kind(block) == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            raise ProviderMessageError(index, f"{field}[{n}]", f"is a {_shown(_kind(block))} part; only text "
                                       "converts here")
    return "".join(parts)


def _kind(block: Any) -> Any:
    return block.get("type") if isinstance(block, Mapping) else None


def _string(mapping: Mapping[str, Any], key: str, index: int, field: str) -> str:
    value = mapping.get(key)
    if not isinstance(value, str) or not value:
        raise ProviderMessageError(index, f"{field}.{key}", f"is {'missing' if value is None else _shown(value)}; "
                                   "expected a non-empty string")
    return value


def _object(value: Any, index: int, field: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ProviderMessageError(index, field, f"is a {type(value).__name__}, not an object")
    return dict(value)


def _shown(value: Any) -> str:
    """A value named in an error: a short string itself, anything else its type (never long content)."""
    if isinstance(value, str) and len(value) <= 40 and value.isprintable():
        return repr(value)
    return "missing" if value is None else type(value).__name__
