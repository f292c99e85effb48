"""What the provider adapters share: the request cycle of ``complete`` and ``acomplete``
(``SdkModel``), the missing-SDK message, argument decoding, the server address, the error for
unreadable responses, per-call timeouts, and keeping keys out of exception text.

Nothing here imports a provider SDK, so ``tracedagent.models`` stays importable without them.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import contextmanager
from typing import Any, AsyncIterator, Callable, ClassVar, Iterable, Iterator
from urllib.parse import urlsplit

from .._core import _names as N
from .._core._records import Completion, Message, in_thread
from .._core._request import ModelRequest, as_request
from .._core._streaming import ModelChunk, ToolCallDelta, decode_arguments
from .._core._secrets import redact

__all__ = ["SdkModel", "StreamReader", "MalformedResponseError", "missing_sdk", "client_options", "decode_arguments",
           "encode_arguments", "server_of", "capped_timeout", "scrub_secrets"]

_DEFAULT_PORTS = {"https": 443, "http": 80}
_MIN_API_KEY_LENGTH = 16
"""Shorter keys (``api_key="ollama"`` for a local server) are placeholders, not secrets;
blanking them would mangle the server's own words in its error messages."""


class MalformedResponseError(ValueError):
    """The provider answered with success, but the body lacks what every response must have.

    The message names only what was missing, never the body: a body can hold prompt text.
    """


class SdkModel:
    """A ``Model`` over a provider SDK, sync and async: ``complete`` sends one ``ModelRequest`` through
    the SDK's sync client, ``acomplete`` the same request through its async client. Both build
    the request alike, bound it by the call's ``timeout``, blank the credentials out of what the
    SDK raises, and read the response alike.

    A subclass calls ``_connect`` from its constructor and says what differs per provider: its
    SDK's base exception (``sdk_error``), how to build a client (``_new_client``), which method
    sends a request (``_create``), and how a request and a completion look (``_request``,
    ``_completion``).
    """

    sdk_error: ClassVar[type[Exception]]
    """The SDK's base exception: what both calls scrub of credentials before letting it through."""
    client: Any
    """The sync SDK client; ``None`` when only an ``async_client`` was given."""
    server_address: str | None
    server_port: int | None

    def _connect(self, client: Any, async_client: Any, options: dict[str, Any]) -> None:
        """Keep the ready-made clients, or the options to build them from. With neither, the
        sync client is built now and the async one on the first ``acomplete``; with only one of
        them, the adapter builds nothing (options would configure no client, so they are refused)."""
        ready = client if client is not None else async_client
        self._options = client_options(ready, **options)
        self._builds_async = ready is None
        self.client = self._new_client(asynchronous=False, options=self._options) if ready is None else client
        self._async_given = async_client
        self._async_built: tuple[asyncio.AbstractEventLoop, Any] | None = None
        self.server_address, self.server_port = server_of((ready if ready is not None else self.client).base_url)

    @property
    def async_client(self) -> Any:
        """The async SDK client: the one given, else the one the adapter built for the event
        loop that last called ``acomplete`` (``None`` before that)."""
        return self._async_built[1] if self._builds_async and self._async_built else self._async_given

    def complete(self, request: ModelRequest | list[Message], tools: list[dict[str, Any]] | None = None,
                 max_output_tokens: int | None = None, temperature: float | None = None,
                 timeout: float | None = None) -> Completion:
        """One request through the sync client. The request's ``timeout`` (seconds; the
        ``Agent`` passes what its time budget has left) bounds each phase of each attempt, and
        never lengthens the client's own timeout. SDK errors that survive its retries propagate
        as they are (``RateLimitError``, ``InternalServerError``, ``APITimeoutError``,
        ``AuthenticationError``...), so the run stops with ``Stop.MODEL_ERROR``. Called the
        earlier way, ``complete(messages, tools, max_output_tokens, temperature, timeout)``, it
        makes that request (``as_request``)."""
        asked = as_request(request, tools, max_output_tokens, temperature, timeout)
        if self.client is None:
            raise TypeError(f"{type(self).__name__} was given only an async_client: call it through "
                            "acomplete (Agent.arun), or give it a client as well")
        sent = self._timed_request(self.client, asked)
        with self._scrubbed(self.client):
            response = self._create(self.client)(**sent)
        return self._noted(sent, self._completion(response))

    async def acomplete(self, request: ModelRequest | list[Message], tools: list[dict[str, Any]] | None = None,
                        max_output_tokens: int | None = None, temperature: float | None = None,
                        timeout: float | None = None) -> Completion:
        """``complete`` through the async client. Given only a sync ``client``, the adapter has no
        async one, and runs ``complete`` in a worker thread instead."""
        asked = as_request(request, tools, max_output_tokens, temperature, timeout)
        client = self._async_client_here()
        if client is None:
            return await in_thread(self.complete, asked)
        sent = self._timed_request(client, asked)
        with self._scrubbed(client):
            response = await self._create(client)(**sent)
        return self._noted(sent, self._completion(response))

    def stream(self, request: ModelRequest | list[Message], tools: list[dict[str, Any]] | None = None,
               max_output_tokens: int | None = None, temperature: float | None = None,
               timeout: float | None = None) -> Iterator[ModelChunk]:
        """``complete``, streamed: the same request with ``stream=True`` through the sync client,
        yielding the provider's text deltas and tool-call fragments as they arrive, then a
        ``TurnEnd`` with the usage. Closing the generator early (the consumer stopped reading)
        closes the HTTP response, so the provider sees the client go away. A stream that
        breaks raises what the SDK (or ``httpx``) raised, scrubbed like ``complete``'s errors."""
        asked = as_request(request, tools, max_output_tokens, temperature, timeout)
        if self.client is None:
            raise TypeError(f"{type(self).__name__} was given only an async_client: stream through "
                            "astream (Agent.astream), or give it a client as well")
        sent = self._timed_request(self.client, asked)
        reader, called = self._reader_for(sent), _Called(self, sent)
        with self._scrubbed(self.client):
            response = self._create(self.client)(**sent, **self._stream_request())
            with response:
                for event in response:
                    for chunk in reader.read(event):
                        called.add(chunk)
                        yield chunk
        yield called.end(reader.end())

    async def astream(self, request: ModelRequest | list[Message], tools: list[dict[str, Any]] | None = None,
                      max_output_tokens: int | None = None, temperature: float | None = None,
                      timeout: float | None = None) -> AsyncIterator[ModelChunk]:
        """``stream`` through the async client. Given only a sync ``client``, the sync stream is
        read in a worker thread, one chunk at a time."""
        asked = as_request(request, tools, max_output_tokens, temperature, timeout)
        client = self._async_client_here()
        if client is None:
            chunks = self.stream(asked)
            try:
                while (chunk := await in_thread(next, chunks, None)) is not None:
                    yield chunk
            finally:
                await in_thread(chunks.close)
            return
        sent = self._timed_request(client, asked)
        reader, called = self._reader_for(sent), _Called(self, sent)
        with self._scrubbed(client):
            response = await self._create(client)(**sent, **self._stream_request())
            async with response:
                async for event in response:
                    for chunk in reader.read(event):
                        called.add(chunk)
                        yield chunk
        yield called.end(reader.end())

    def _async_client_here(self) -> Any:
        """The async client for the running event loop. An async client's connections belong to
        the loop that opened them (a second ``asyncio.run`` reusing them fails with "Event loop is
        closed"), so a client the adapter builds serves one loop, and another loop gets a new one.
        The loop and its client are kept as one pair, so threads running loops of their own
        never share a client."""
        if not self._builds_async:
            return self._async_given
        loop = asyncio.get_running_loop()
        built = self._async_built
        if built is None or built[0] is not loop:
            built = self._async_built = (loop, self._new_client(asynchronous=True, options=self._options))
        return built[1]

    def _timed_request(self, client: Any, asked: ModelRequest) -> dict[str, Any]:
        request = self._request(asked)
        if asked.timeout is not None:
            request["timeout"] = capped_timeout(client.timeout, asked.timeout)
        return request

    def _noted(self, request: dict[str, Any], completion: Completion) -> Completion:
        """Puts what the request's ``tool_choice`` asked, and whether the answer followed it, on the
        current span (the ``Agent``'s ``chat`` span): some servers ignore it (llama.cpp's server
        treats a named function as ``auto``), and the trace should say so."""
        note_tool_choice(self._tool_choice(request), [call.name for call in completion.tool_calls])
        return completion

    def _tool_choice(self, request: dict[str, Any]) -> tuple[str, str | None] | None:
        """The request's ``tool_choice`` as (``auto``/``none``/``required``/``function``, the
        named tool), or ``None`` when it carried none or no tools."""
        return None

    @contextmanager
    def _scrubbed(self, client: Any) -> Iterator[None]:
        """SDK exceptions raised in the block leave without ``client``'s credentials in their text."""
        try:
            yield
        except self.sdk_error as exc:
            scrub_secrets(exc, [getattr(client, "api_key", None), getattr(client, "auth_token", None)])
            raise

    # What each provider fills in.

    def _new_client(self, *, asynchronous: bool, options: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _create(self, client: Any) -> Callable[..., Any]:
        raise NotImplementedError

    def _request(self, asked: ModelRequest) -> dict[str, Any]:
        """The SDK call's keyword arguments for ``asked`` (its timeout aside)."""
        raise NotImplementedError

    def _completion(self, response: Any) -> Completion:
        raise NotImplementedError

    def _stream_request(self) -> dict[str, Any]:
        """What turns the request into a streamed one (``stream=True``, and whatever else the
        provider needs to report usage at the end)."""
        return {"stream": True}

    def _reader(self) -> StreamReader:
        raise NotImplementedError

    def _reader_for(self, request: dict[str, Any]) -> StreamReader:
        """The reader of a stream sent with ``request`` (an adapter whose reading depends on what
        was asked, Anthropic's output tool, says so here)."""
        return self._reader()


class StreamReader:
    """One streamed response's events as the loop's chunks (``_streaming.ModelChunk``): what a
    provider's adapter implements to stream. It keeps what the provider reports once (ids,
    usage, the finish reason) for the ``TurnEnd`` of ``end``."""

    def read(self, event: Any) -> Iterable[ModelChunk]:
        """The chunks one event of the provider's stream carries (often one, often none)."""
        raise NotImplementedError

    def end(self) -> ModelChunk:
        """The ``TurnEnd`` once the stream is over: usage, model, finish reason, response id."""
        raise NotImplementedError


class _Called:
    """A streamed call's tool names, for ``note_tool_choice`` once the stream has ended."""

    def __init__(self, model: SdkModel, request: dict[str, Any]) -> None:
        self.choice = model._tool_choice(request)
        self.names: dict[int, str] = {}

    def add(self, chunk: ModelChunk) -> None:
        if self.choice is not None and isinstance(chunk, ToolCallDelta) and chunk.name:
            self.names[chunk.index] = chunk.name

    def end(self, last: ModelChunk) -> ModelChunk:
        note_tool_choice(self.choice, [name for _, name in sorted(self.names.items())])
        return last


def note_tool_choice(choice: tuple[str, str | None] | None, called: list[str]) -> None:
    """``tracedagent.request.tool_choice`` (and the named tool) and
    ``tracedagent.response.tool_choice_followed`` on the current span. Telemetry never fails a call."""
    if choice is None:
        return
    try:
        from opentelemetry import trace

        span = trace.get_current_span()
        if not span.is_recording():
            return
        asked, name = choice
        attributes: dict[str, Any] = {N.REQUEST_TOOL_CHOICE: asked}
        if name:
            attributes[N.REQUEST_TOOL_CHOICE_NAME] = name[:N.MAX_NAME_LENGTH]
        if asked != "auto":
            attributes[N.RESPONSE_TOOL_CHOICE_FOLLOWED] = (
                not called if asked == "none" else bool(called) and (asked == "required" or set(called) == {name}))
        span.set_attributes(attributes)
    except Exception:  # pragma: no cover - a broken tracer must not fail the model call
        pass


def missing_sdk(module: str, extra: str) -> str:
    """The ImportError text for an adapter whose SDK is not installed."""
    return (f"tracedagent.models.{module} needs the official `{extra}` SDK, which is an optional "
            f"dependency: pip install 'tracedagent[{extra}]'")


def client_options(client: Any, **options: Any) -> dict[str, Any]:
    """The SDK-client keyword arguments the caller set; refuses them next to a ready-made client,
    where they would silently do nothing."""
    given = {k: v for k, v in options.items() if v is not None}
    if client is not None and given:
        raise TypeError(f"{', '.join(sorted(given))} configure the client the adapter builds; "
                        "set them on the client you passed instead")
    return given


def encode_arguments(arguments: dict[str, Any] | str) -> str:
    """Arguments back to the JSON text a chat API expects; a raw string is replayed verbatim."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def server_of(base_url: Any) -> tuple[str | None, int | None]:
    """``server.address`` and ``server.port`` of an SDK client's base URL."""
    parts = urlsplit(str(base_url))
    if not parts.hostname:
        return None, None
    return parts.hostname, parts.port or _DEFAULT_PORTS.get(parts.scheme)


def capped_timeout(configured: Any, seconds: float) -> Any:
    """The per-request timeout of a call that must end within ``seconds``: the client's own
    timeout with each part (connect, read, write, pool) cut to ``seconds``. A float would replace
    all of them, lengthening the SDK's short connect timeout or a timeout the user chose."""
    parts = ("connect", "read", "write", "pool")
    if isinstance(configured, (int, float)):
        return min(configured, seconds)
    if all(hasattr(configured, part) for part in parts):  # the SDKs' httpx Timeout
        return type(configured)(**{part: seconds if getattr(configured, part) is None
                                   else min(getattr(configured, part), seconds) for part in parts})
    return seconds  # no timeout configured


def scrub_secrets(exc: BaseException, secrets: Iterable[Any]) -> None:
    """Remove credentials from an SDK exception's text, in place, before it propagates.

    Real providers mask keys in their error bodies, but a proxy or a home-grown compatible
    server may echo the ``Authorization`` header back, and the SDK puts the body into the
    exception message, from where it reaches logs and tracebacks.
    """
    found = list(secrets)

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return redact(value, found, min_length=_MIN_API_KEY_LENGTH)
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    exc.args = tuple(clean(a) for a in exc.args)
    for attribute in ("message", "body"):
        if hasattr(exc, attribute):
            try:
                setattr(exc, attribute, clean(getattr(exc, attribute)))
            except AttributeError:  # a read-only property: the args above are what str() shows
                pass
