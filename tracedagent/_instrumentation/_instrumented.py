"""The model and the registry as the loop sees them: each call inside its span scope.

``InstrumentedModel`` is itself a ``Model``: ``complete`` and ``acomplete`` take a
``ModelRequest`` and return the checked ``Completion``, each call a ``chat`` span opened in
one place (``chat``); ``stream_turn`` / ``astream_turn`` call the model to stream
(``_streamed.py``). The model's own methods are read once, when it is wrapped
(``model_calls``: a model written to the earlier signature gets its shim there), so nothing
here asks a model about its parameters again. ``InstrumentedRegistry.dispatch`` is the
registry's call inside a ``ToolScope``. Wrappers instrument; nothing here decides anything
about the run.
"""

from __future__ import annotations

from typing import AsyncIterator, Iterator

from .._core._deadline import Deadline, awaited
from .._core._records import Completion, ToolCall, ToolResult, check_completion, in_thread
from .._core._request import Model, ModelRequest, model_calls
from .._core._tools import Registry
from ._spans import ChatScope, ToolScope
from ._streamed import StreamScope, Turn, astreamed, streamed, threaded
from ._telemetry import AgentTelemetry

__all__ = ["InstrumentedModel", "InstrumentedRegistry"]


class InstrumentedModel:
    """A ``Model`` whose every call is a ``chat`` span, with the GenAI client metrics."""

    def __init__(self, model: Model, telemetry: AgentTelemetry) -> None:
        self.wrapped = model
        self._t = telemetry
        calls = model_calls(model)
        self._complete, self._acomplete = calls.complete, calls.acomplete
        self._stream, self._astream = calls.stream, calls.astream

    def chat(self, request: ModelRequest, *, streamed: bool = False) -> ChatScope:
        """The ``chat`` span of one call, open until the scope ends (a context manager that
        fails it on an exception); a streamed call's says so and counts its chunks.
        (``complete`` and ``acomplete`` build the same ``ChatScope`` in place: one call fewer
        in every step of a run.)"""
        return StreamScope(self._t, request) if streamed else ChatScope(self._t, request)

    def complete(self, request: ModelRequest) -> Completion:
        """The model's answer, checked (``check_completion``), inside its ``chat`` span."""
        with ChatScope(self._t, request) as chat:
            completion = check_completion(self._complete(request))
            chat.end(completion)
        return completion

    async def acomplete(self, request: ModelRequest, *, deadline: Deadline | None = None) -> Completion:
        """The model's ``acomplete``, or its ``complete`` in a worker thread (the thread carries
        the context, so the chat span stays the parent of anything the model traces itself),
        cut off at ``deadline`` (``DeadlineExceeded``; the span ends marked ``timeout``)."""
        with ChatScope(self._t, request) as chat:
            answer = self._acomplete(request) if self._acomplete is not None else in_thread(self._complete, request)
            completion = check_completion(await awaited(deadline, answer))
            chat.end(completion)
        return completion

    @property
    def streams(self) -> bool:
        """Whether the model streams at all (else a streamed call is ``complete``'s, one delta)."""
        return self._stream is not None or self._astream is not None

    def stream_turn(self, request: ModelRequest, turn: Turn, *, deadline: Deadline | None = None) -> Iterator[str]:
        """The call's text deltas as they arrive; ``turn.result`` once it has ended (the rest of
        the turn, tool calls and usage, is added up in ``turn``). Past ``deadline`` (checked as
        each chunk arrives) the call is cut: ``DeadlineExceeded``. A model without ``stream``
        is ``complete``d, its whole text one delta, its span exactly ``complete``'s."""
        if self._stream is None:
            return self._whole(request, turn)
        return streamed(self.chat, self._stream, request, turn, deadline)

    def astream_turn(self, request: ModelRequest, turn: Turn, *,
                     deadline: Deadline | None = None) -> AsyncIterator[str]:
        """``stream_turn`` for async code: the model's ``astream`` (or its ``stream`` read in a
        worker thread, or ``acomplete``); a chunk still awaited when ``deadline`` passes is cancelled."""
        if self._astream is not None:
            return astreamed(self.chat, self._astream, request, turn, deadline)
        if self._stream is not None:
            return astreamed(self.chat, threaded(self._stream), request, turn, deadline)
        return self._awhole(request, turn, deadline)

    def _whole(self, request: ModelRequest, turn: Turn) -> Iterator[str]:
        completion = turn.result = self.complete(request)
        if completion.text:
            yield completion.text

    async def _awhole(self, request: ModelRequest, turn: Turn, deadline: Deadline | None) -> AsyncIterator[str]:
        completion = turn.result = await self.acomplete(request, deadline=deadline)
        if completion.text:
            yield completion.text


class InstrumentedRegistry:
    """A ``Registry`` whose every dispatch is an ``execute_tool`` span, with the tool-call counter."""

    def __init__(self, registry: Registry, telemetry: AgentTelemetry) -> None:
        self.wrapped = registry
        self._t = telemetry

    def span(self, call: ToolCall) -> ToolScope:
        """The ``execute_tool`` span of one call, open until the scope ends (a context manager
        that fails it on an exception)."""
        return ToolScope(self._t, call, known=call.name in self.wrapped)

    def dispatch(self, call: ToolCall) -> ToolResult:
        with ToolScope(self._t, call, known=call.name in self.wrapped) as scope:
            result = self.wrapped.dispatch(call)
            scope.end(result)
        return result

