"""Captured content (only with the user's opt-in): the GenAI conventions' JSON shapes, redacted,
bounded, and marked when cut.

Every string passes through the agent's redactor before it is serialised, and a structure
nested deeper than a model could mean is cut with a marker rather than crashing the encoder.
The shapes are those of ``gen_ai.input.messages``, ``gen_ai.output.messages`` and
``gen_ai.system_instructions``: messages of typed parts (``text``, ``tool_call``,
``tool_call_response``), which is also what replay reads back.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from .._core import _names as N
from .._core._records import Completion, Message
from .._core._secrets import MASK, Redactor

__all__ = ["ContentCapture", "encodable", "truncate", "is_truncated"]

_MAX_DEPTH = 32
"""Nesting kept in captured structures; deeper levels become ``N.TOO_DEEP_MARK``."""


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending with ``N.TRUNCATION_MARK`` when it was cut."""
    return text if len(text) <= limit else text[: limit - len(N.TRUNCATION_MARK)] + N.TRUNCATION_MARK


_SURROGATES = dict.fromkeys(range(0xD800, 0xE000), "\ufffd")


def encodable(text: str) -> str:
    """``text`` as every exporter can encode it: lone surrogates, which UTF-8 cannot hold (the
    OTLP encoder would drop the whole attribute, and the span would lose what it said), become
    U+FFFD."""
    return text.translate(_SURROGATES)


class ContentCapture:
    """Turns loop values into the content attributes' strings for one agent."""

    def __init__(self, redact: Callable[[str], str] | None, limit: int) -> None:
        self.redact = redact if redact is not None else Redactor()
        self.limit = limit

    # --- the shapes ------------------------------------------------------------------------

    def messages(self, messages: list[Message]) -> tuple[str | None, str]:
        """``(gen_ai.system_instructions, gen_ai.input.messages)`` for a conversation."""
        system = [{"type": "text", "content": m.get("content", "")} for m in messages if m.get("role") == "system"]
        # A tool's result is text, but may be a JSON object with secret-named values in it.
        rest = [_message({**m, "content": self._redacted_text(m["content"])} if m.get("role") == "tool"
                         and isinstance(m.get("content"), str) else m)
                for m in messages if m.get("role") != "system"]
        return (self.serialise(system) if system else None), self.serialise(rest)

    def output(self, completion: Completion) -> str:
        """``gen_ai.output.messages`` for one model turn."""
        message = _message(completion.as_message())
        message["finish_reason"] = completion.finish_reason or ("tool_call" if completion.tool_calls else "stop")
        return self.serialise([message])

    def arguments(self, arguments: Any) -> str:
        """``gen_ai.tool.call.arguments``: a JSON object, or the model's raw string when it sent
        malformed JSON (a JSON string, so that replay can tell the two apart)."""
        return self.serialise(arguments)

    def text(self, text: str) -> str:
        """A plain string (a tool's result), redacted and bounded."""
        return self._bounded(self._redacted_text(text))

    def _redacted_text(self, text: str) -> str:
        """``text`` redacted; a JSON object or array (what a tool returning a dict becomes)
        also has its secret-named values blanked, as a structure would."""
        if text[:1] in ("{", "["):
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                pass
            else:
                cleaned = self._clean(parsed, 0)
                if cleaned != parsed:
                    try:
                        return json.dumps(cleaned, ensure_ascii=False)
                    except (ValueError, RecursionError):
                        pass
        return self.redact(text)

    # --- serialising -----------------------------------------------------------------------

    def serialise(self, value: Any) -> str:
        try:
            text = json.dumps(self._clean(value, 0), ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):  # keys JSON cannot hold (a custom model's tuples)
            text = json.dumps(self.redact(_as_text(value)), ensure_ascii=False)
        return self._bounded(text)

    def _bounded(self, text: str) -> str:
        return encodable(truncate(text, self.limit))

    def _clean(self, value: Any, depth: int) -> Any:
        """``value`` with every string redacted, every secret-named value masked, and nothing
        deeper than ``_MAX_DEPTH``."""
        if isinstance(value, str):
            return self.redact(value)
        if depth >= _MAX_DEPTH and isinstance(value, (Mapping, list, tuple)):
            return N.TOO_DEEP_MARK
        if isinstance(value, Mapping):
            return {k: MASK if isinstance(k, str) and Redactor.names_a_secret(k) and _set(v)
                    else self._clean(v, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._clean(v, depth + 1) for v in value]
        return value


def _set(value: Any) -> bool:
    """Whether a secret-named key holds anything to blank (``None`` and ``""`` hide nothing);
    never compares ``value``, which may be an object whose ``==`` is not a bool."""
    return value is not None and not (isinstance(value, str) and not value)


def _as_text(value: Any) -> str:
    try:
        return str(value)
    except (Exception, RecursionError):  # an int too long to print, a __str__ that raises
        return f"<{type(value).__name__} that cannot be shown>"


def is_truncated(text: str) -> bool:
    """Whether captured content was cut at the capture limit (replay refuses such content)."""
    return text.endswith(N.TRUNCATION_MARK)


def _message(message: Message) -> dict[str, Any]:
    """One loop message as a GenAI ``ChatMessage`` of typed parts."""
    role = message.get("role", "user")
    parts: list[dict[str, Any]] = []
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": message.get("tool_call_id"),
                      "response": message.get("content", "")})
        return {"role": "tool", "parts": parts, **({"name": message["name"]} if message.get("name") else {})}
    if message.get("content"):
        parts.append({"type": "text", "content": message["content"]})
    for call in message.get("tool_calls") or ():
        parts.append({"type": "tool_call", "id": call.get("id"), "name": call.get("name"),
                      "arguments": call.get("arguments")})
    return {"role": role, "parts": parts}
