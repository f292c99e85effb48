"""``MCPServer``: one MCP server's session, and its tools as ordinary ``Tool``s.

The session lives on an event loop of its own (``_thread.LoopThread``), opened by ``with`` or
``async with`` and ended by leaving the block; every tool call is handed to that loop, so the
tools work under ``run`` and ``arun`` alike, from many runs at once, sharing the one session.
A connection that is lost is reported on the call it was lost in and opened again by the next
call (a stdio server is started again); the tool list follows the server's
``notifications/tools/list_changed`` (``_listing.py``); a reply the SDK cannot read ends its
request at once (``_replies.py``); a call is cut off at the deadline of the run that makes it,
under ``run`` as under ``arun``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncContextManager, Awaitable, Callable, Sequence
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace

from .._core import _names as N
from .._core._deadline import DeadlineExceeded, RunDeadlineExceeded
from .._core._records import error_type
from .._core._run import current_run
from .._core._tools import Tool
from .._version import __version__
from ._arguments import input_validator
from ._listing import ToolList
from ._replies import Replies
from ._results import (MCPConnectionLost, MCPInvalidReply, MCPRequestError, MCPToolError, MCPUnavailable, cut,
                       result_text)
from ._thread import LoopThread
from ._tracing import connect_span, end_failed, identifier, install_join, joined, leaf, request_span

__all__ = ["MCPServer"]

DEFAULT_TIMEOUT = 60.0
"""Seconds one tool call may take unless the server is given another ``timeout``."""
DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds starting (or reaching) a server, ``initialize`` and ``tools/list`` may take together."""
DEFAULT_MAX_RESULT_LENGTH = 100_000
"""Characters of one result the model is shown at most; the rest is cut, and the cut is said."""
_CLOSE_TIMEOUT = 10.0


@dataclass(kw_only=True)
class _Live:
    """One open connection: the session on it and what the server told about it."""

    session: Any
    """The SDK's ``ClientSession``."""
    protocol_version: str
    """What ``initialize`` agreed on (``mcp.protocol.version``)."""
    session_id: str
    """``mcp.session.id``: the server's ``Mcp-Session-Id`` over HTTP, else one of tracedagent's."""
    replies: Replies
    """Its requests waiting for an answer, ended at once by a reply that cannot be read."""
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    """Set to end the connection: its owner task leaves the SDK's contexts (same task, as anyio asks)."""


class MCPServer:
    """An MCP server, reached over stdio (``MCPServer.stdio``) or streamable HTTP
    (``MCPServer.http``). Use it as a context manager (``with`` or ``async with``); inside, its
    ``tools()`` are ordinary ``Tool``s for a ``Registry``. ``docs/mcp.md`` is the guide."""

    def __init__(self, *, name: str, connect: Callable[[Callable[[str], None]], AsyncContextManager[Any]],
                 transport: str, address: str | None = None, port: int | None = None,
                 timeout: float | None = DEFAULT_TIMEOUT, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 max_result_length: int = DEFAULT_MAX_RESULT_LENGTH,
                 tracer_provider: trace.TracerProvider | None = None) -> None:
        """Prefer the ``stdio`` and ``http`` constructors. ``connect(on_session_id)`` opens the
        SDK transport (its read and write streams), calling ``on_session_id`` with a session id
        the server assigns; ``transport`` is ``network.transport``."""
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive or None, got {timeout}")
        self.name = name
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_result_length = max_result_length
        self._connect = connect
        self._attributes: dict[str, Any] = {N.NETWORK_TRANSPORT: transport, N.MCP_SERVER: name}
        if address is not None:
            self._attributes[N.SERVER_ADDRESS] = address
        if port is not None:
            self._attributes[N.SERVER_PORT] = port
        self._tracer = trace.get_tracer(N.TRACER_NAME, __version__, tracer_provider)
        self._thread: LoopThread | None = None
        self._live: _Live | None = None
        self._opening: asyncio.Lock | None = None
        self._owners: set[asyncio.Task[None]] = set()
        self._tools = ToolList(self._tracer, self._attributes, connect_timeout, lambda: self._live)
        self._closed = False
        self.connections = 0
        """How many times a session was opened: 1 after entering, more after restarts."""
        install_join()

    @classmethod
    def stdio(cls, command: str, args: Sequence[str] = (), *, env: dict[str, str] | None = None,
              cwd: str | None = None, name: str | None = None, **options: Any) -> MCPServer:
        """A server started as ``command args...``, talked to over its stdin and stdout. ``env``
        is added to the few variables the SDK passes on (``PATH``, ``HOME``, ...). Options:
        ``timeout`` (seconds per call, ``None`` for none), ``connect_timeout``,
        ``max_result_length``, ``tracer_provider``."""
        from mcp.client.stdio import StdioServerParameters, stdio_client

        parameters = StdioServerParameters(command=command, args=list(args), env=env, cwd=cwd)

        def connect(on_session_id: Callable[[str], None]) -> AsyncContextManager[Any]:
            on_session_id(uuid.uuid4().hex)  # stdio has no session id of its own: one per process
            return stdio_client(parameters, errlog=sys.stderr)

        shown = name or _program(command, list(args))
        return cls(name=shown, connect=connect, transport=N.NETWORK_TRANSPORT_PIPE, **options)

    @classmethod
    def http(cls, url: str, *, headers: dict[str, str] | None = None, name: str | None = None,
             **options: Any) -> MCPServer:
        """A server at ``url``, over streamable HTTP. ``headers`` go with every request (an
        ``Authorization`` header, say). Options as for ``stdio``."""
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        parts = urlsplit(url)
        default_port = 443 if parts.scheme == "https" else 80

        def connect(on_session_id: Callable[[str], None]) -> AsyncContextManager[Any]:
            async def read_session_id(response: Any) -> None:
                found = response.headers.get("mcp-session-id")
                if found:
                    on_session_id(found)

            client = create_mcp_http_client(headers=headers)
            client.event_hooks["response"].append(read_session_id)
            return _owning(client, streamable_http_client(url, http_client=client))

        # Never the URL itself as the name: it may hold a key in its query or a password.
        return cls(name=name or parts.hostname or "mcp", connect=connect, transport=N.NETWORK_TRANSPORT_TCP,
                   address=parts.hostname, port=parts.port or default_port, **options)

    # --- the block ------------------------------------------------------------------------

    def __enter__(self) -> MCPServer:
        thread = self._start()
        try:
            thread.call(self._open(otel_context.get_current(), restart=False))
        except BaseException:
            self._stop_thread()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._thread is not None:
            with contextlib.suppress(Exception):
                self._thread.call(self._close(), timeout=_CLOSE_TIMEOUT + 1)
        self._stop_thread()

    async def __aenter__(self) -> MCPServer:
        thread = self._start()
        try:
            await thread.acall(self._open(otel_context.get_current(), restart=False))
        except BaseException:
            await asyncio.to_thread(self._stop_thread)
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._thread is not None:
            with contextlib.suppress(Exception):
                await self._thread.acall(self._close())
        await asyncio.to_thread(self._stop_thread)

    def _start(self) -> LoopThread:
        if self._thread is not None or self._closed:
            raise RuntimeError(f"MCPServer {self.name!r} can be entered once")
        self._thread = LoopThread(f"tracedagent-mcp-{self.name}")
        return self._thread

    def _stop_thread(self) -> None:
        self._closed = True
        if self._thread is not None:
            self._thread.close()

    # --- the tools ------------------------------------------------------------------------

    def tools(self, prefix: str = "") -> list[Tool]:
        """The server's tools as of its latest ``tools/list``, named ``prefix + name`` (a prefix
        keeps two servers' tools apart in one registry). Their schemas are the server's; a call's
        input is checked against it in full (JSON Schema, by ``jsonschema``) before it is sent,
        and times out after ``timeout`` seconds.
        A registry holds the tools it was built with: build one from ``tools()`` again to follow
        a changed list (``docs/mcp.md``)."""
        if self._thread is None or self._closed:
            raise RuntimeError(f"MCPServer {self.name!r} is not open: use it inside `with` or `async with`")
        return [self._tool(listed, prefix) for listed in self._tools.tools]

    def _tool(self, listed: Any, prefix: str) -> Tool:
        remote = listed.name
        local = prefix + remote
        thread = self._thread
        assert thread is not None

        async def call(**arguments: Any) -> str:
            if self._closed or thread.loop.is_closed():
                raise MCPUnavailable(f"the MCP server {self.name!r} was closed")
            span = trace.get_current_span()
            return await _until_the_runs_deadline(thread.acall(
                self._call(remote, arguments, otel_context.get_current(), span, renamed=remote != local)))

        call.__name__ = call.__qualname__ = local
        schema = listed.input_schema if isinstance(listed.input_schema, dict) else {"type": "object", "properties": {}}
        return Tool(name=local, description=listed.description or listed.title or "", parameters=schema,
                    fn=call, validator=input_validator(schema), timeout=self.timeout)

    # --- on the session's loop ------------------------------------------------------------

    async def _call(self, name: str, arguments: dict[str, Any], context: Any, span: Any, *, renamed: bool) -> str:
        """One ``tools/call``, its attributes on ``span`` (the registry's ``execute_tool`` span)."""
        token = otel_context.attach(context)
        try:
            span.set_attributes({N.MCP_METHOD_NAME: N.MCP_TOOLS_CALL, **self._attributes,
                                 **({N.MCP_TOOL_NAME: identifier(name)} if renamed else {})})
            live = await self._session()
            span.set_attributes({N.MCP_SESSION_ID: live.session_id, N.MCP_PROTOCOL_VERSION: live.protocol_version})
            from mcp.shared.exceptions import MCPError
            from mcp_types import CONNECTION_CLOSED

            try:
                with joined(span):
                    result = await live.replies.answer(live.session.call_tool(name, arguments))
            except MCPError as exc:
                if exc.error.code == CONNECTION_CLOSED and not await self._answers(live):
                    self._lose(live)
                    raise MCPConnectionLost(f"the connection to the MCP server {self.name!r} ended during the "
                                            "call; it is opened again for the next call") from None
                raise MCPRequestError(f"the MCP server answered with error {exc.error.code}: "
                                      f"{cut(exc.error.message, self.max_result_length)}", code=exc.error.code) from None
            except (OSError, EOFError) as exc:
                self._lose(live)
                raise MCPConnectionLost(f"the connection to the MCP server {self.name!r} failed "
                                        f"({error_type(exc)})") from None
            await self._tools.caught_up()  # a list_changed seen during the call is applied before it returns
            text = result_text(result.content, result.structured_content, max_length=self.max_result_length)
            if result.is_error:
                raise MCPToolError(text or "the tool failed and said nothing")
            return text
        finally:
            otel_context.detach(token)

    async def _answers(self, live: _Live) -> bool:
        """Whether the session still answers a ``ping``. -32000 is the SDK's code for a connection
        that closed, and also one servers send for errors of their own: the ping tells a server
        that answered an error (its message reaches the model, the session stays) from one gone."""
        try:
            await asyncio.wait_for(live.session.send_ping(), self.connect_timeout)
        except Exception:
            return False
        return True

    async def _session(self) -> _Live:
        """The open session, opening one (again) if the last was lost."""
        if self._live is not None:
            return self._live
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._live is None:
                try:
                    await self._open(otel_context.get_current(), restart=True)
                except MCPUnavailable:
                    raise
                except Exception as exc:
                    raise MCPUnavailable(f"could not reach the MCP server {self.name!r} ({error_type(exc)})") from exc
            assert self._live is not None
            return self._live

    def _lose(self, live: _Live) -> None:
        if self._live is live:
            self._live = None
        live.stop.set()

    async def _open(self, parent: Any, *, restart: bool) -> None:
        """Start the task that owns a new connection, and wait until it is usable."""
        ready: asyncio.Future[_Live] = asyncio.get_running_loop().create_future()
        owner = asyncio.create_task(self._own(ready, parent, restart))
        self._owners.add(owner)
        owner.add_done_callback(self._owners.discard)
        try:
            self._live = await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
        except BaseException as exc:
            if isinstance(exc, asyncio.TimeoutError) and not ready.done():
                ready.set_exception(asyncio.TimeoutError())  # tells the owner why it is cancelled
            owner.cancel()
            await asyncio.gather(owner, return_exceptions=True)
            if ready.done() and not ready.cancelled():
                ready.exception()  # retrieved, or asyncio logs it when the future is collected
            if isinstance(exc, (asyncio.TimeoutError, Exception)):
                cause = leaf(exc)
                if isinstance(cause, MCPInvalidReply):  # it answered: not "could not reach", not "no answer"
                    raise MCPUnavailable(str(cause)) from cause
                raise MCPUnavailable(f"could not start or reach the MCP server {self.name!r} "
                                     f"({'no answer in time' if isinstance(cause, asyncio.TimeoutError) else error_type(cause)})") from cause
            raise
        self.connections += 1

    async def _own(self, ready: asyncio.Future[_Live], parent: Any, restart: bool) -> None:
        """Open the transport and the session, ``initialize``, ``tools/list``; then hold them
        until the connection is to end, and leave them from this same task."""
        from mcp.client.session import ClientSession

        connect = connect_span(self._tracer, parent, {**self._attributes, **({N.MCP_RESTART: True} if restart else {})})
        token = otel_context.attach(parent if connect is None else trace.set_span_in_context(connect, parent))
        ids: list[str] = []
        live: _Live | None = None
        replies = Replies(self.name)

        async def on_message(message: Any) -> None:
            self._on_message(message, replies)

        try:
            async with contextlib.AsyncExitStack() as stack:
                streams = await stack.enter_async_context(self._connect(ids.append))
                session = await stack.enter_async_context(ClientSession(*streams, message_handler=on_message))
                restarted = {N.MCP_RESTART: True} if restart else {}
                with request_span(self._tracer, N.MCP_INITIALIZE, {**self._attributes, **restarted}) as span:
                    started = await replies.answer(session.initialize())
                    live = _Live(session=session, protocol_version=identifier(str(started.protocol_version)),
                                 session_id=identifier(ids[-1]) if ids else uuid.uuid4().hex, replies=replies)
                    span.set_attributes({N.MCP_PROTOCOL_VERSION: live.protocol_version,
                                         N.MCP_SESSION_ID: live.session_id})
                await self._tools.fetch(live)
                if connect is not None:
                    connect.end()
                    connect = None
                ready.set_result(live)
                await live.stop.wait()
        except BaseException as exc:
            if connect is not None:
                end_failed(connect, _why_not_connected(exc, ready))
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            elif not isinstance(exc, (Exception, asyncio.CancelledError)):
                raise
        finally:
            if live is not None and self._live is live:
                self._live = None
            otel_context.detach(token)

    def _on_message(self, message: Any, replies: Replies) -> None:
        """What the SDK hands over besides answers: a changed tool list is listed again; a line
        it could not read may be the answer a request of this connection waits for."""
        from mcp_types import ToolListChangedNotification

        if isinstance(message, Exception):
            replies.unreadable(message)
        elif isinstance(message, ToolListChangedNotification) and self._live is not None:
            self._tools.changed()

    async def _close(self) -> None:
        """End the connection and wait (bounded) for its owner to leave the SDK's contexts."""
        self._closed = True
        if self._live is not None:
            self._lose(self._live)
        self._tools.close()
        owners = list(self._owners)  # they leave on their own once stopped; cancelled only if they do not
        done, pending = await asyncio.wait(owners, timeout=_CLOSE_TIMEOUT) if owners else (set(), set())
        for owner in pending:
            owner.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


def _program(command: str, args: list[str]) -> str:
    """A stdio server's name when it was given none: its module (``python -m mcp_server_time``),
    its script, or its command."""
    if os.path.basename(command).startswith("python") and args:
        return args[1] if args[0] == "-m" and len(args) > 1 else os.path.basename(args[0])
    return os.path.basename(command)


async def _until_the_runs_deadline(work: Awaitable[str]) -> str:
    """``await work``, cut off at the deadline of the run making the call, if it has one
    (``RunDeadlineExceeded``: the registry records the call as a driver records a call it cut).
    ``run`` cannot cut a call itself, but this one waits on another loop's work, which can be
    cancelled: so an MCP call ends at the run's deadline under ``run`` too (under ``arun`` the
    driver cuts it at the same moment, with the same result)."""
    state = current_run.get()
    deadline = None if state is None else state.deadline
    if deadline is None:
        return await work
    try:
        return await deadline.cut(work)
    except DeadlineExceeded:
        raise RunDeadlineExceeded from None


def _why_not_connected(exc: BaseException, ready: asyncio.Future[Any]) -> str:
    """``error.type`` for a connection that never became usable: ``timeout`` when ``_open`` gave up
    waiting (it says so on ``ready`` before cancelling the owner), else the innermost error's class."""
    if ready.done() and not ready.cancelled() and isinstance(ready.exception(), asyncio.TimeoutError):
        return N.ERROR_TIMEOUT
    return error_type(leaf(exc))


@contextlib.asynccontextmanager
async def _owning(client: Any, transport: AsyncContextManager[Any]) -> Any:
    """The HTTP transport with the client it was given, which it does not close itself."""
    async with client, transport as streams:
        yield streams

