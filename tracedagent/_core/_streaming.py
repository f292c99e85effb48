"""A model turn that arrives in pieces: what a streaming model yields, and the turn it adds up to.

A model that streams yields *chunks* from ``stream(...)`` (or ``astream(...)``):

* a ``str`` - text the model added to its answer (a delta);
* a ``ToolCallDelta`` - a piece of a tool call: its id and name when the provider first
  names the call, then fragments of its JSON arguments, all under the call's ``index``;
* a ``ToolCall`` - a tool call the model delivers whole (a provider that does not stream
  arguments, ``FakeModel``);
* a ``TurnEnd`` - what the provider says once, at the end: usage, the model that answered,
  the finish reason, the response id (several are merged, later fields winning).

Text is a plain ``str`` so that the common chunk costs nothing beyond the text itself.
``StreamedTurn`` adds the chunks up into the ``Completion`` the non-streamed path would have
produced, with tool-call fragments assembled into the same ``ToolCall``s; when the stream
breaks, ``partial()`` is what had arrived by then.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Union

from ._records import Completion, ToolCall, Usage

__all__ = ["ToolCallDelta", "TurnEnd", "ModelChunk", "StreamedTurn", "decode_arguments"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallDelta:
    """A piece of one tool call of a streamed turn."""

    index: int
    """Which call of the turn this piece belongs to, as the provider numbers them; the turn's
    calls are in the order of their indices."""
    id: str | None = None
    """The call's id, on the piece that first names the call (a call that never gets one is
    given a fresh id, as the non-streamed path does)."""
    name: str | None = None
    """The tool's name, on the piece that first names the call."""
    arguments: str = ""
    """A fragment of the call's JSON arguments; the fragments joined in order are the whole."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnEnd:
    """What a provider reports about a streamed turn as a whole, usually at its end."""

    usage: Usage | None = None
    """Tokens the call consumed (OpenAI: the final chunk with ``include_usage``)."""
    model: str | None = None
    """The model that actually answered."""
    finish_reason: str | None = None
    """Why the provider stopped generating."""
    response_id: str | None = None
    """The provider's id for the response."""
    provider_data: dict[str, Any] | None = field(default=None, hash=False)
    """What the turn carries back to its provider only (see ``Completion.provider_data``)."""


ModelChunk = Union[str, ToolCallDelta, ToolCall, TurnEnd]
"""What a model's ``stream`` / ``astream`` yields."""


def decode_arguments(raw: Any) -> dict[str, Any] | str:
    """Tool arguments as the registry wants them: a dict when the model sent a JSON object,
    otherwise the raw text, so the registry answers ``invalid_arguments`` rather than guessing."""
    if isinstance(raw, dict):
        return raw
    if raw is None:
        return {}
    text = raw if isinstance(raw, str) else json.dumps(raw, default=str)
    try:
        parsed = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError):  # the registry will say what is wrong with them
        return text
    return parsed if isinstance(parsed, dict) else text


class _PendingCall:
    __slots__ = ("id", "name", "fragments")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.fragments: list[str] = []


class StreamedTurn:
    """The chunks of one streamed model turn, added up as they arrive.

    ``add`` takes each chunk (a ``TypeError`` for anything that is not one: the model's
    failure); ``completion()`` is the whole turn, ``partial()`` the turn as far as it came.
    ``chunks`` counts what arrived, text and the rest."""

    __slots__ = ("texts", "_calls", "_whole", "_others", "_end")

    def __init__(self) -> None:
        self.texts: list[str] = []
        """The text deltas, in order (joined, the turn's text)."""
        self._calls: dict[int, _PendingCall] = {}
        self._whole: list[tuple[int, ToolCall]] = []
        self._others = 0
        self._end: dict[str, Any] = {}

    @property
    def chunks(self) -> int:
        """How many chunks arrived (counted without a per-chunk integer: the text deltas are a list)."""
        return len(self.texts) + self._others

    def add(self, chunk: Any) -> str | None:
        """Take one chunk; its text when it was text (which the driver passes on), else ``None``."""
        if type(chunk) is str:
            self.texts.append(chunk)
            return chunk
        self._others += 1
        if isinstance(chunk, ToolCallDelta):
            self._fragment(chunk)
        elif isinstance(chunk, ToolCall):
            self._whole.append((len(self._calls) + len(self._whole), chunk))
        elif isinstance(chunk, TurnEnd):
            for name in ("usage", "model", "finish_reason", "response_id", "provider_data"):
                value = getattr(chunk, name)
                if value is not None:
                    self._end[name] = value
        elif isinstance(chunk, str):  # a str subclass: its text, as a str
            self._others -= 1
            text = str.__str__(chunk)
            self.texts.append(text)
            return text
        else:
            raise TypeError(f"the model's stream yielded {type(chunk).__name__}, not a str, ToolCallDelta, "
                            "ToolCall or TurnEnd")
        return None

    def _fragment(self, delta: ToolCallDelta) -> None:
        if type(delta.index) is not int or not isinstance(delta.arguments, str):
            raise TypeError("the model's stream yielded a ToolCallDelta without an int index and string arguments")
        pending = self._calls.get(delta.index)
        if pending is None:
            pending = self._calls[delta.index] = _PendingCall()
        if delta.id:
            pending.id = delta.id
        if delta.name:
            pending.name = delta.name
        if delta.arguments:
            pending.fragments.append(delta.arguments)

    @property
    def text(self) -> str:
        return "".join(self.texts)

    def tool_calls(self) -> list[ToolCall]:
        """The turn's calls: fragments assembled (their arguments decoded as the non-streamed
        path decodes them), whole calls where they came, in order."""
        assembled = [(index, ToolCall(id=p.id or f"call_{uuid.uuid4().hex[:24]}", name=p.name or "",
                                      arguments=decode_arguments("".join(p.fragments))))
                     for index, p in sorted(self._calls.items())]
        if not self._whole:
            return [call for _, call in assembled]
        return [call for _, call in sorted(assembled + self._whole, key=lambda pair: pair[0])]

    def completion(self) -> Completion:
        """The whole turn, as ``complete`` would have returned it."""
        end = self._end
        calls = self.tool_calls()
        return Completion(text=self.text, tool_calls=calls or (), usage=end.get("usage") or Usage(),
                          model=end.get("model"), finish_reason=end.get("finish_reason"),
                          response_id=end.get("response_id"), provider_data=end.get("provider_data"))

    def partial(self) -> Completion:
        """What had arrived when the stream broke or was cut: the text so far and what the
        provider had reported (a call whose arguments were still arriving is not a request,
        and is left out)."""
        end = self._end
        return Completion(text=self.text, usage=end.get("usage") or Usage(), model=end.get("model"),
                          response_id=end.get("response_id"))
