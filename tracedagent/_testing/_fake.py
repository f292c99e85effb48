"""``FakeModel``: a model that plays a script, for tests and the demo (no model can be reached
from a test). Its token counts are estimated from what it was sent, so the quadratic growth of
input tokens over a run is visible in tests and traces, as with a real model."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import math
import threading
import time
from typing import Any, AsyncIterator, Iterable, Iterator, Sequence, Union

from .._core._records import Completion, Message, ToolCall, Usage
from .._core._request import ModelRequest, as_request
from .._core._streaming import ModelChunk, TurnEnd

__all__ = ["FakeModel", "ScriptExhausted", "ScriptItem", "tool_call", "estimate_tokens", "json_answer"]

ScriptItem = Union[str, Completion, BaseException]
_call_ids = itertools.count(1)


class ScriptExhausted(RuntimeError):
    """The model was called more often than its script has turns."""


def tool_call(name: str, args: dict[str, Any] | str | None = None, *, id: str | None = None,
              text: str = "") -> Completion:
    """A turn requesting one tool call; ``args`` may be a raw (even malformed) JSON string."""
    call = ToolCall(id=id or f"call_{next(_call_ids)}", name=name, arguments={} if args is None else args)
    return Completion(text=text, tool_calls=[call], finish_reason="tool_calls")


def json_answer(value: Any) -> str:
    """A scripted typed answer: ``value`` (a dataclass, a pydantic model, or anything JSON takes)
    as the JSON text a model answers with, for an agent with ``output_type``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    elif hasattr(value, "model_dump"):  # a pydantic model, in its JSON mode (dates as text)
        value = value.model_dump(mode="json")
    return json.dumps(value, default=str)


def estimate_tokens(payload: Any) -> int:
    """About four characters a token, never zero: deterministic, like a tokenizer."""
    text = payload if isinstance(payload, str) else json.dumps(payload, sort_keys=True, default=str)
    return max(1, math.ceil(len(text) / 4))


class FakeModel:
    """A ``Model`` that plays a script: ``str`` answers, ``Completion`` turns (see ``tool_call``),
    or exceptions to raise. An exhausted script raises ``ScriptExhausted``.

    ``calls`` records what each call was sent (a copy of the messages at that moment).
    ``latency`` sleeps that many seconds per call, so a demo's waterfall looks real.
    ``acomplete`` (which ``Agent.arun`` awaits) plays the same script; its latency is an
    ``asyncio.sleep``. A turn without usage gets an estimate (``estimate_tokens``) unless
    ``estimate_usage=False``.

    ``stream`` / ``astream`` (which ``Agent.stream`` / ``astream`` read) play the same script a
    piece at a time: the text in chunks of ``chunk_size`` characters, each after
    ``chunk_delay`` seconds, then the turn's tool calls whole, then a ``TurnEnd`` with the
    usage; the chunks add up to the turn ``complete`` returns.

    ``by_step=True`` plays the turn for the conversation's step instead of the next one in this
    object: the number of assistant turns in the messages it is sent (a history's included).
    A durable run's model calls go to whichever worker polls first, each with its own copy of
    the model, and a call is made again when its worker dies: only the conversation says which
    turn is due (docs/temporal.md, "Testing").
    """

    provider_name = "fake"

    def __init__(self, script: Iterable[ScriptItem], *, model_name: str = "fake-model",
                 latency: float = 0.0, estimate_usage: bool = True, chunk_size: int = 4,
                 chunk_delay: float = 0.0, by_step: bool = False) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
        self.script = list(script)
        self.chunk_size = chunk_size
        """Characters of text per streamed chunk."""
        self.chunk_delay = chunk_delay
        """Seconds before each streamed text chunk: a slow stream, for deadlines and demos."""
        self.estimate_usage = estimate_usage
        """``False`` plays each turn's usage as scripted, zero included (replay does: a
        provider that reported no tokens reported none)."""
        self.by_step = by_step
        """Play the turn the conversation is at (its assistant turns counted), not the next one."""
        self.model_name = model_name
        self.latency = latency
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    @property
    def call_count(self) -> int:
        return len(self.calls)

    def complete(self, request: ModelRequest | list[Message], tools: list[dict[str, Any]] | None = None,
                 max_output_tokens: int | None = None, temperature: float | None = None) -> Completion:
        """The script's next turn. Takes a ``ModelRequest``, or the earlier arguments
        (``complete(messages, tools, max_output_tokens, temperature)``; ``as_request``)."""
        request = as_request(request, tools, max_output_tokens, temperature)
        index = self._asked(request)
        if self.latency:
            time.sleep(self.latency)
        return self._play(index, request)

    async def acomplete(self, request: ModelRequest | list[Message], tools: list[dict[str, Any]] | None = None,
                        max_output_tokens: int | None = None, temperature: float | None = None) -> Completion:
        """``complete`` for ``Agent.arun``: the same script, its latency an ``asyncio.sleep``
        (so concurrent runs overlap, and cancelling the run cancels the call)."""
        request = as_request(request, tools, max_output_tokens, temperature)
        index = self._asked(request)
        if self.latency:
            await asyncio.sleep(self.latency)
        return self._play(index, request)

    def stream(self, request: ModelRequest | list[Message], tools: list[dict[str, Any]] | None = None,
               max_output_tokens: int | None = None, temperature: float | None = None) -> Iterator[ModelChunk]:
        """``complete``, a chunk at a time (its latency before the first, ``chunk_delay`` before each text chunk)."""
        request = as_request(request, tools, max_output_tokens, temperature)
        index = self._asked(request)
        if self.latency:
            time.sleep(self.latency)
        for chunk in self._pieces(self._play(index, request)):
            if self.chunk_delay and type(chunk) is str:
                time.sleep(self.chunk_delay)
            yield chunk

    async def astream(self, request: ModelRequest | list[Message], tools: list[dict[str, Any]] | None = None,
                      max_output_tokens: int | None = None,
                      temperature: float | None = None) -> AsyncIterator[ModelChunk]:
        """``stream`` for ``Agent.astream``: its sleeps are ``asyncio.sleep``."""
        request = as_request(request, tools, max_output_tokens, temperature)
        index = self._asked(request)
        if self.latency:
            await asyncio.sleep(self.latency)
        for chunk in self._pieces(self._play(index, request)):
            if self.chunk_delay and type(chunk) is str:
                await asyncio.sleep(self.chunk_delay)
            yield chunk

    def _pieces(self, completion: Completion) -> Iterator[ModelChunk]:
        text, size = completion.text, self.chunk_size
        for start in range(0, len(text), size):
            yield text[start:start + size]
        yield from completion.tool_calls
        yield TurnEnd(usage=completion.usage, model=completion.model, finish_reason=completion.finish_reason,
                      response_id=completion.response_id, provider_data=completion.provider_data)

    def _asked(self, request: ModelRequest) -> int:
        settings = request.settings
        index = self._take(request.messages, request.tools, settings.max_output_tokens, settings.temperature)
        if request.output is not None:  # what a typed run asked for (ModelRequest.output)
            self.calls[index]["output"] = request.output
        return index

    def _take(self, messages: Sequence[Message], tools: list[dict[str, Any]] | None,
              max_output_tokens: int | None, temperature: float | None) -> int:
        """Record the call and claim its turn of the script (one at a time: runs in threads
        may share the model)."""
        with self._lock:
            self.calls.append({"messages": [dict(m) for m in messages], "tools": tools,
                               "max_output_tokens": max_output_tokens, "temperature": temperature})
            if self.by_step:
                return sum(1 for m in messages if m.get("role") == "assistant")
            return len(self.calls) - 1

    def _play(self, index: int, request: ModelRequest) -> Completion:
        """Turn ``index`` of the script: raised, or returned with estimated usage."""
        if index >= len(self.script):
            asked = (f"was asked for turn {index + 1} (the conversation's assistant turns plus one)" if self.by_step
                     else f"was called {index + 1} times")
            raise ScriptExhausted(f"FakeModel {asked} but its script has {len(self.script)} turns")
        item = self.script[index]
        if isinstance(item, BaseException):
            raise item
        completion = Completion(text=item, finish_reason="stop") if isinstance(item, str) else item
        if self.estimate_usage and completion.usage == Usage():
            sent = estimate_tokens({"messages": request.messages, "tools": request.tools})
            answered = estimate_tokens([completion.text, [tc.as_dict() for tc in completion.tool_calls]])
            completion = dataclasses.replace(completion, usage=Usage(input_tokens=sent, output_tokens=answered),
                                             model=completion.model or self.model_name)
        return completion
