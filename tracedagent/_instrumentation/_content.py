"""Captured content (only with the user's opt-in): the GenAI conventions' JSON shapes, redacted,
bounded, and still JSON when cut.

The shapes are those of ``gen_ai.input.messages``, ``gen_ai.output.messages`` and
``gen_ai.system_instructions``: messages of typed parts (``text``, ``tool_call``,
``tool_call_response``), which is also what replay reads back. Each attribute is at most
``limit`` characters. What does not fit is cut *inside* the structure - long strings are
shortened, a conversation's middle messages are replaced by one ``omitted`` part saying how
many - and the result is serialised again, so a reader still parses it; the span's
``tracedagent.content.truncated`` lists the attributes that were cut (a fact, not a string
ending that a reader must recognise).

Capture costs time in proportion to what it records, not to what a tool returned: every
string is cut to about its share of the limit *before* the redactor reads it (with a margin, so
that a secret straddling the cut is still recognised whole), and a structure is walked only as
far as the limit can hold.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from typing import Any, Callable, Mapping

from .._core import _names as N
from .._core._records import Completion, Message
from .._core._secrets import MASK, Redactor

__all__ = ["ContentCapture", "capture_content_from_env", "encodable", "truncate"]

_log = logging.getLogger("tracedagent")

_MAX_DEPTH = 32
"""Nesting kept in captured structures; deeper levels become ``N.TOO_DEEP_MARK``."""
_MARGIN = 256
"""Characters past a cut that the redactor still reads, so that a secret the cut would split is
blanked whole (the credential shapes it knows are shorter)."""
_MIN_SHARE = 256
"""How much of each string the walk of a structure counts before the fit shares the limit out."""
_MAX_KEY = 128
"""A mapping key is cut to this many characters."""
_ATTEMPTS = 4
_JSON_TEXT = re.compile(r"\s*[\[{]")
"""Text that may be a JSON object or array (read as one before it is redacted)."""


# --- the opt-in ---------------------------------------------------------------------------

_CAPTURE_VALUES = {
    # The upstream GenAI instrumentations' values (opentelemetry-util-genai's ContentCapturingMode,
    # case-insensitive): content on spans, in events, both, or neither. tracedagent records
    # content on spans only and emits no content events, so only the span modes turn it on.
    "span_only": True, "span_and_event": True, "event_only": False, "no_content": False,
    # The older boolean form, which tracedagent has always read.
    "true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False,
}
"""Every value of ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` understood, and whether
it records content on tracedagent's spans."""
_warned: set[str] = set()


def capture_content_from_env() -> bool:
    """The GenAI instrumentations' opt-in switch for recording prompts and tool payloads, with
    the upstream values (``span_only``, ``span_and_event``: on; ``event_only``, ``no_content``:
    off) and the boolean ones (``true``/``1``/``yes``/``on``). Any other value captures nothing
    and is logged once, naming the values understood: a typo must not look like "no content"."""
    raw = os.environ.get(N.ENV_CAPTURE_CONTENT, "").strip()
    if not raw:
        return False
    capture = _CAPTURE_VALUES.get(raw.lower())
    if capture is None:
        if raw not in _warned:
            _warned.add(raw)
            _log.warning("tracedagent: %s=%r is not a value it knows, so no content is captured; use one of %s",
                         N.ENV_CAPTURE_CONTENT, raw[:64], ", ".join(_CAPTURE_VALUES))
        return False
    return capture


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending with ``N.TRUNCATION_MARK`` when it was cut
    (for names and descriptions, which are not JSON)."""
    return text if len(text) <= limit else text[: limit - len(N.TRUNCATION_MARK)] + N.TRUNCATION_MARK


_SURROGATES = dict.fromkeys(range(0xD800, 0xE000), "\ufffd")


def encodable(text: str) -> str:
    """``text`` as every exporter can encode it: lone surrogates, which UTF-8 cannot hold (the
    OTLP encoder would drop the whole attribute, and the span would lose what it said), become
    U+FFFD."""
    return text.translate(_SURROGATES)


class _Leaf:
    """A string of captured content, kept raw until the fit decides how much of it to show."""

    __slots__ = ("raw", "shown", "cut")

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.shown = raw
        self.cut = False


class _Name(str):
    """A string of the shape, not the content (a part's type, a role, a call's id or name): never
    shortened, or the messages would no longer be the GenAI shapes; bounded to ``_MAX_KEY``."""


def _name(value: Any) -> Any:
    return _Name(value[:_MAX_KEY]) if isinstance(value, str) else value


class ContentCapture:
    """Turns loop values into the content attributes of one agent's spans."""

    def __init__(self, redact: Callable[[str], str] | None, limit: int) -> None:
        self.redact = redact if redact is not None else Redactor()
        self.limit = limit

    # --- the attributes --------------------------------------------------------------------

    def conversation(self, messages: list[Message]) -> dict[str, Any]:
        """``gen_ai.system_instructions`` and ``gen_ai.input.messages`` for a conversation."""
        system = [{"type": "text", "content": m.get("content", "")} for m in messages if m.get("role") == "system"]
        rest = [m for m in messages if m.get("role") != "system"]
        out = _Attributes()
        if system:
            out.add(N.GEN_AI_SYSTEM_INSTRUCTIONS, *self._fit(system))
        out.add(N.GEN_AI_INPUT_MESSAGES, *self._fit_messages(rest))
        return out.attributes

    def output(self, completion: Completion, broke: str | None = None) -> dict[str, Any]:
        """``gen_ai.output.messages`` for one model turn. ``broke``: why a stream that ended early
        ended (its ``error.type``), for what of the turn had arrived - its finish reason, and a
        ``tracedagent.partial`` part saying so where a GenAI view shows the message."""
        message = _message(completion.as_message())
        message["finish_reason"] = _name(broke or completion.finish_reason
                                         or ("tool_call" if completion.tool_calls else "stop"))
        if broke:
            message["parts"].append({"type": _Name(N.PARTIAL_PART), N.PARTIAL_PART_REASON: _name(broke)})
        return _Attributes().add(N.GEN_AI_OUTPUT_MESSAGES, *self._fit([message])).attributes

    def answer(self, messages: Any) -> dict[str, Any]:
        """``gen_ai.output.messages`` on a run span: its answer, as messages."""
        return _Attributes().add(N.GEN_AI_OUTPUT_MESSAGES, *self._fit(messages)).attributes

    def schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        """``tracedagent.output.schema``: the JSON schema a typed call asked the answer to match."""
        return _Attributes().add(N.OUTPUT_SCHEMA, *self._fit(schema)).attributes

    def text(self, text: str) -> str:
        """A tool's result as a sentence quotes it: redacted and bounded."""
        return self.result(text)[N.GEN_AI_TOOL_CALL_RESULT]

    def arguments(self, arguments: Any) -> dict[str, Any]:
        """``gen_ai.tool.call.arguments``: a JSON object, or the model's raw string when it sent
        malformed JSON (a JSON string, so that replay can tell the two apart)."""
        return _Attributes().add(N.GEN_AI_TOOL_CALL_ARGUMENTS, *self._fit(arguments)).attributes

    def result(self, text: str) -> dict[str, Any]:
        """``gen_ai.tool.call.result``: a tool's result, a plain string, redacted and bounded."""
        leaf = _Leaf(text)
        self._show(leaf, self.limit)
        return _Attributes().add(N.GEN_AI_TOOL_CALL_RESULT, encodable(leaf.shown), leaf.shown != text).attributes

    # --- fitting -----------------------------------------------------------------------------

    def _fit_messages(self, messages: list[Message]) -> tuple[str, bool]:
        """A conversation as GenAI messages; when they would not fit, the first message and as
        many of the latest as fit, each counted at most a quarter of the limit (so that one huge
        message, which the fit will cut, does not push out all the others), with one
        ``omitted`` part in place of the rest."""
        sizes = [_size(m) for m in messages]
        if sum(sizes) <= self.limit or len(messages) <= 2:
            return self._fit([_message(m) for m in messages])
        room, share = self.limit - min(sizes[0], self.limit // 4), self.limit // 4
        first_kept = len(messages)
        while first_kept > 1 and (first_kept == len(messages) or room - min(sizes[first_kept - 1], share) >= 0):
            first_kept -= 1
            room -= min(sizes[first_kept], share)
        if first_kept == 1:
            return self._fit([_message(m) for m in messages])
        shown = [_message(messages[0]), _omitted(messages[1], first_kept - 1),
                 *(_message(m) for m in messages[first_kept:])]
        return self._fit(shown, cut=True)

    def _fit(self, value: Any, *, cut: bool = False) -> tuple[str, bool]:
        """``value`` as JSON of at most ``limit`` characters, and whether anything was cut: its
        strings shortened to a common length (those shorter keep all they have), then, if that
        is not enough, ever shorter; a structure too large for that is walked only as far as
        twice the limit, then the limit, then half of it... (its walk estimates the size)."""
        budget = 2.0 * self.limit
        while budget >= 16:
            walk = _Walk(self, budget)
            tree = walk.build(value, 0)
            lengths = sorted(len(leaf.raw) for leaf in walk.leaves)
            share = _share(lengths, self.limit - walk.fixed - 2 * len(lengths))  # 2: every string's quotes
            if lengths and sum(lengths) + 2 * len(lengths) <= self.limit:
                share = lengths[-1]  # the strings alone fit: try them whole (the walk's estimate is rough)
            for _ in range(_ATTEMPTS):
                for leaf in walk.leaves:
                    self._show(leaf, share)
                text = _dumps(tree)
                if len(text) <= self.limit:
                    return encodable(text), cut or walk.cut or any(leaf.cut for leaf in walk.leaves)
                # escapes (\n, \", \u0000) made it longer than counted: shorten in proportion
                share = max(0, int(share * self.limit / len(text) * 0.9) - 1)
            budget /= 2
        return _dumps([_omitted_part(1)]), True

    def _show(self, leaf: _Leaf, share: int) -> None:
        """``leaf.shown``: its first ``share`` characters, redacted. The redactor reads at most
        ``_MARGIN`` characters more than are shown, never the whole string."""
        raw = leaf.raw
        whole = len(raw) <= share
        text = raw if whole else raw[: share + _MARGIN]
        shown = self._redacted_json(text) if whole else self.redact(text)
        if not whole:
            # Where the text stops, a viewer shows that it was cut and how much (unless the
            # share is too small to hold the mark); the mark counts in the share.
            kept = share - len(N.CONTENT_CUT_MARK.format(shown=share, length=len(raw)))
            if kept >= 64:
                shown = shown[:kept] + N.CONTENT_CUT_MARK.format(shown=kept, length=len(raw))
            else:
                shown = shown[:share]
        leaf.shown = shown
        leaf.cut = not whole

    def _redacted_json(self, text: str) -> str:
        """A whole string: if it is a JSON object or array (a tool's result, arguments the model
        sent as text, JSON a model put in a string argument), its secret-named values are blanked
        as a structure's would be, and so are those of JSON held in its strings."""
        if _JSON_TEXT.match(text):
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                pass
            else:
                walk = _Walk(self, math.inf)
                cleaned = walk.build(parsed, 0)
                for leaf in walk.leaves:
                    leaf.shown = self._redacted_json(leaf.raw)
                if walk.masked or any(leaf.shown != leaf.raw for leaf in walk.leaves):
                    try:
                        return _dumps(cleaned)
                    except (ValueError, RecursionError):
                        pass
        return self.redact(text)


class _Attributes:
    """Content attributes and the names of those that were cut."""

    def __init__(self) -> None:
        self.attributes: dict[str, Any] = {}

    def add(self, name: str, text: str, cut: bool) -> _Attributes:
        self.attributes[name] = text
        if cut:
            self.attributes.setdefault(N.CONTENT_TRUNCATED, []).append(name)
        return self


class _Walk:
    """A captured value as a tree JSON can hold, its strings as ``_Leaf``s; every secret-named
    value masked; nothing deeper than ``_MAX_DEPTH``; and no more of it than ``budget``
    characters can show (``cut`` says when some was left out)."""

    def __init__(self, capture: ContentCapture, budget: float) -> None:
        self.capture = capture
        self.budget = budget
        self.leaves: list[_Leaf] = []
        self.fixed = 0
        """Characters of everything but the leaves: keys, numbers, punctuation."""
        self.spent = 0
        """``fixed`` plus what the leaves may show (each at most ``_MIN_SHARE``): the walk stops
        adding items to containers once the budget is spent."""
        self.cut = False
        self.masked = False

    def _full(self) -> bool:
        if self.fixed + self.spent >= self.budget:
            self.cut = True
        return self.cut

    def build(self, value: Any, depth: int) -> Any:
        if isinstance(value, _Name):
            self.fixed += len(value) + 2
            return self.capture.redact(str(value))
        if isinstance(value, (str, _Leaf)):
            leaf = value if isinstance(value, _Leaf) else _Leaf(value)
            self.leaves.append(leaf)
            self.spent += min(len(leaf.raw), _MIN_SHARE)
            return leaf
        if isinstance(value, bool) or value is None:
            self.fixed += 5
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            if abs(value) < 2**63:
                self.fixed += 20
                return value
            return self.build(_as_text(value), depth)  # an int past int64: JSON readers lose it
        if isinstance(value, float):
            if math.isfinite(value):
                self.fixed += 24
                return value
            return self.build(repr(value), depth)  # NaN, Infinity: not JSON
        if depth >= _MAX_DEPTH and isinstance(value, (Mapping, list, tuple)):
            return self.build(N.TOO_DEEP_MARK, depth)
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for k, v in value.items():
                if self._full():
                    break
                key = k if isinstance(k, str) else _as_text(k)
                key = self.capture.redact(key[:_MAX_KEY])
                self.fixed += len(key) + 6
                if Redactor.names_a_secret(key) and _set(v):
                    self.masked = True
                    out[key] = MASK
                else:
                    out[key] = self.build(v, depth + 1)
            return out
        if isinstance(value, (list, tuple)):
            items = []
            for v in value:
                if self._full():
                    break
                self.fixed += 2
                items.append(self.build(v, depth + 1))
            return items
        return self.build(_as_text(value), depth)  # what JSON cannot hold, as its text


def _share(lengths: list[int], room: int) -> int:
    """The longest a string may be so that all of them (``lengths``, sorted) fit in ``room``:
    those shorter keep everything, the rest share what is left equally."""
    room = max(0, room)
    if sum(lengths) <= room:
        return lengths[-1] if lengths else 0
    left = room
    for i, n in enumerate(lengths):
        share = left // (len(lengths) - i)
        if n > share:
            return share
        left -= n
    return lengths[-1]  # pragma: no cover - the sum did not fit


def _dumps(tree: Any) -> str:
    return json.dumps(tree, ensure_ascii=False, default=_shown, allow_nan=False)


def _shown(leaf: Any) -> str:
    return leaf.shown


def _set(value: Any) -> bool:
    """Whether a secret-named key holds anything to blank (``None`` and ``""`` hide nothing);
    never compares ``value``, which may be an object whose ``==`` is not a bool."""
    return value is not None and not (isinstance(value, str) and not value)


def _as_text(value: Any) -> str:
    try:
        return str(value)
    except (Exception, RecursionError):  # an int too long to print, a __str__ that raises
        return f"<{type(value).__name__} that cannot be shown>"


def _size(message: Message) -> int:
    """About how many characters a message takes as captured JSON, without reading it: its
    text's length, its tool calls' (arguments as sent, or 32 a key), and the structure's."""
    content = message.get("content")
    size = 64 + (len(content) if isinstance(content, str) else 64)
    for call in message.get("tool_calls") or ():
        arguments = call.get("arguments") if isinstance(call, Mapping) else None
        size += 96 + (len(arguments) if isinstance(arguments, str) else
                      32 * len(arguments) if isinstance(arguments, Mapping) else 64)
    return size


def _omitted_part(count: int) -> dict[str, Any]:
    """What stands for content left out at the capture limit: a part saying how much."""
    return {"type": _Name(N.CONTENT_OMITTED_PART), "count": count}


def _omitted(first: Message, count: int) -> dict[str, Any]:
    """The message standing for ``count`` messages left out of a conversation."""
    return {"role": _name(first.get("role", "user")), "parts": [_omitted_part(count)]}


def _message(message: Message) -> dict[str, Any]:
    """One loop message as a GenAI ``ChatMessage`` of typed parts."""
    role = message.get("role", "user")
    parts: list[Any] = []
    if role == "tool":
        content = message.get("content", "")
        parts.append({"type": _Name("tool_call_response"), "id": _name(message.get("tool_call_id")),
                      "response": _Leaf(content) if isinstance(content, str) else content})
        return {"role": _Name("tool"), "parts": parts,
                **({"name": _name(message["name"])} if message.get("name") else {})}
    if message.get("content"):
        parts.append({"type": _Name("text"), "content": message["content"]})
    for call in message.get("tool_calls") or ():
        parts.append({"type": _Name("tool_call"), "id": _name(call.get("id")), "name": _name(call.get("name")),
                      "arguments": call.get("arguments")})
    return {"role": _name(role), "parts": parts}
