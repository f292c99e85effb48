"""A model called to stream: each call a ``chat`` span, its text passed on as it arrives, and
nothing recorded per chunk (``InstrumentedModel.stream_turn`` / ``astream_turn`` use these).

``streamed`` / ``astreamed`` read the model's ``stream`` / ``astream`` into a
``StreamedTurn`` and yield each text delta; the driver reads the finished turn (or, when the
stream broke, what had arrived) off the ``Turn`` it passed in. The ``chat`` span is the one
``complete`` gets (``ChatScope``, opened by the instrumented model's ``chat``), plus
``gen_ai.request.stream``, the time to the first chunk and the number of chunks, set once at
the end; the time to the first chunk is also a histogram.

However the stream ends, its span ends: a consumer that stops reading closes these
generators, which closes the model's stream (an adapter's HTTP response with it) and ends
the span marked ``cancelled``; the run's deadline ends it marked ``timeout``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, AsyncIterator, Callable, Iterator

from opentelemetry import trace

from .._core import _names as N
from .._core._records import Completion, check_completion, in_thread
from .._core._request import ModelRequest
from .._core._streaming import StreamedTurn
from .._core._deadline import Deadline, DeadlineExceeded, awaited
from ._spans import ChatScope, failure_kind
from ._telemetry import AgentTelemetry, bounded, ending_elsewhere, guard

__all__ = ["streamed", "astreamed", "threaded", "StreamScope", "Turn"]


class Turn(StreamedTurn):
    """A ``StreamedTurn`` with the checked ``Completion`` once the call has ended."""

    __slots__ = ("result",)

    def __init__(self) -> None:
        StreamedTurn.__init__(self)
        self.result: Completion | None = None
        """The whole turn, checked (``check_completion``), once the stream ended well."""

    def received(self) -> Completion | None:
        """What a broken or cut stream had delivered, or ``None`` if nothing came (or what came
        is not a turn the loop can keep: the model's error then is the whole story)."""
        if not self.chunks:
            return None
        try:
            return check_completion(self.partial())
        except TypeError:
            return None


class StreamScope(ChatScope):
    """The ``chat`` span of a streamed call: ``ChatScope``'s, plus what streaming adds."""

    __slots__ = ("_asked", "_first")
    doing = "ending a streamed chat span"

    def __init__(self, telemetry: AgentTelemetry, request: ModelRequest) -> None:
        ChatScope.__init__(self, telemetry, request)
        with guard("marking a streamed call"):
            if self.recording:
                self.span.set_attribute(N.GEN_AI_REQUEST_STREAM, True)
        self._asked = time.perf_counter()
        self._first: float | None = None

    def first_chunk(self) -> None:
        """The first chunk arrived now."""
        self._first = time.perf_counter() - self._asked

    def finish(self, completion: Completion, chunks: int) -> None:
        self._facts(chunks, None)
        self.end(completion)

    def broke(self, kind: str, turn: Turn) -> None:
        """The stream ended early (``kind``: cancelled, timeout, the error's class): what had
        arrived stays on the span, marked partial - its usage if a chunk carried any and, with
        capture on, its text as the output message, its finish reason ``kind``."""
        self._facts(turn.chunks, kind)
        with guard("keeping a broken stream's partial turn"):
            received = turn.received() if self.recording else None
            if received is not None:
                usage = received.usage
                attributes: dict[str, Any] = {N.RESPONSE_PARTIAL: True}
                if usage.input_tokens or usage.output_tokens:
                    attributes.update({N.GEN_AI_USAGE_INPUT_TOKENS: usage.input_tokens,
                                       N.GEN_AI_USAGE_OUTPUT_TOKENS: usage.output_tokens})
                if self._t.capture is not None:
                    attributes.update(self._t.capture.output(received, bounded(kind)))
                self.span.set_attributes(attributes)
        self.fail(kind)

    def _facts(self, chunks: int, kind: str | None) -> None:
        t, first = self._t, self._first
        with guard(self.doing):
            if self.recording:
                self.span.set_attribute(N.RESPONSE_CHUNKS, chunks)
                if first is not None:
                    self.span.set_attribute(N.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, first)
        if first is not None and t.metrics_on:
            with guard("recording model metrics"):
                labels = t.chat_attributes if kind is None else {**t.chat_attributes, N.ERROR_TYPE: bounded(kind)}
                t.first_chunk_histogram.record(first, labels)


def _close(chunks: Any) -> None:
    close = getattr(chunks, "close", None)
    if close is not None:
        close()


async def _aclose(chunks: Any) -> None:
    close = getattr(chunks, "aclose", None)
    if close is not None:
        await close()


def _close_after(chunks: Any) -> None:
    """Close a stream the call is leaving already (it failed, or the consumer left): a close
    that fails as well has nothing to add, and must not replace why the call ended."""
    try:
        _close(chunks)
    except Exception:
        pass


async def _aclose_after(chunks: Any) -> None:
    try:
        await _aclose(chunks)
    except Exception:
        pass


def streamed(chat: Any, stream: Callable[[ModelRequest], Any], request: ModelRequest, turn: Turn,
             deadline: Deadline | None) -> Iterator[str]:
    """The text deltas of the model's ``stream(request)``, inside the call's ``chat`` span
    (``chat(request, streamed=True)``), the turn added up in ``turn``; ``DeadlineExceeded``
    past ``deadline`` (checked as each chunk arrives; the model was given the time left)."""
    scope = chat(request, streamed=True)
    chunks: Any = None
    try:
        chunks = iter(stream(request))
        append, add = turn.texts.append, turn.add
        for chunk in chunks:  # the first chunk
            scope.first_chunk()
            text = add(chunk)
            if text:
                yield text
            if deadline is not None and deadline.passed():
                raise DeadlineExceeded
            break
        for chunk in chunks:  # the rest: text, the common chunk, on the shortest path
            if type(chunk) is str:
                append(chunk)
                if chunk:
                    yield chunk
            elif text := add(chunk):
                yield text
            if deadline is not None and deadline.passed():
                raise DeadlineExceeded
        turn.result = check_completion(turn.completion())
        _close(chunks)  # a response whose close fails is the call's failure, its span ended below
    except GeneratorExit:  # the consumer stopped reading
        _close_after(chunks)
        scope.broke(N.ERROR_CANCELLED, turn)
        raise
    except BaseException as exc:
        _close_after(chunks)
        scope.broke(failure_kind(exc), turn)
        raise
    scope.finish(turn.result, turn.chunks)


async def astreamed(chat: Any, astream: Callable[[ModelRequest], Any], request: ModelRequest, turn: Turn,
                    deadline: Deadline | None) -> AsyncIterator[str]:
    """``streamed`` for async code, over the model's ``astream(request)`` (or its ``stream``
    read in a worker thread: ``threaded``); a chunk still awaited when ``deadline`` passes is
    cancelled."""
    scope = chat(request, streamed=True)
    chunks: Any = None
    try:
        chunks = astream(request).__aiter__()
        append, add = turn.texts.append, turn.add
        first = True
        async for chunk in (chunks if deadline is None else _until(deadline, chunks)):
            if first:
                scope.first_chunk()
                first = False
            if type(chunk) is str:  # text, the common chunk, on the shortest path
                append(chunk)
                if chunk:
                    yield chunk
            elif text := add(chunk):
                yield text
        turn.result = check_completion(turn.completion())
        await _aclose(chunks)
    except GeneratorExit:
        # Closed by asyncio's shutdown of async generators (left open when ``asyncio.run``
        # ended), in asyncio's context rather than the run's: the chat span is not current there.
        with contextlib.nullcontext() if trace.get_current_span() is scope.span else ending_elsewhere():
            try:
                await _aclose_after(chunks)
            finally:  # even if this task is cancelled again while it closes
                scope.broke(N.ERROR_CANCELLED, turn)
        raise
    except BaseException as exc:
        try:
            await _aclose_after(chunks)
        finally:
            scope.broke(failure_kind(exc), turn)
        raise
    scope.finish(turn.result, turn.chunks)


def threaded(stream: Callable[[ModelRequest], Any]) -> Callable[[ModelRequest], Any]:
    """A sync model's ``stream`` as an ``astream``: each chunk read in a worker thread."""
    return lambda request: _Threaded(iter(stream(request)))


async def _until(deadline: Deadline, chunks: Any) -> AsyncIterator[Any]:
    """``chunks``, each awaited until ``deadline`` (a chunk still awaited then is cancelled:
    ``DeadlineExceeded``). Only a run with a time budget pays for this layer."""
    read = chunks.__anext__
    while True:
        try:
            chunk = await awaited(deadline, read())
        except StopAsyncIteration:
            return
        yield chunk


class _Threaded:
    """A sync model stream read from async code, each chunk in a worker thread. A read and the
    close take turns (a lock): a cancelled or cut-off read goes on in its thread, and a generator
    cannot be closed while it runs, so the close waits for that read to end, then closes."""

    __slots__ = ("_chunks", "_turn")

    def __init__(self, chunks: Iterator[Any]) -> None:
        self._chunks = chunks
        self._turn = threading.Lock()

    def __aiter__(self) -> _Threaded:
        return self

    async def __anext__(self) -> Any:
        chunk = await in_thread(self._next)
        if chunk is _END:
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        await in_thread(self._close)

    def _next(self) -> Any:
        with self._turn:
            return next(self._chunks, _END)

    def _close(self) -> None:
        with self._turn:
            _close(self._chunks)


_END = object()
