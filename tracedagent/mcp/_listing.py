"""A server's tool list: ``tools/list``, fetched again when the server says it changed.

A server may send ``notifications/tools/list_changed`` as often as it likes (50,000 during one
call once made as many ``tools/list`` requests, each with its trace). The notifications are
counted, not each answered: one refresh runs at a time, and those that come while it runs are
one more refresh, queued, which starts once it ends and reads every change announced before it
started. A call whose result arrives after a change was announced returns once a refresh that
started after that announcement has ended (or failed: the last list is kept, its span says why).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Callable

from opentelemetry import context as otel_context
from opentelemetry import trace

from .._core import _names as N
from ._tracing import request_span

__all__ = ["ToolList"]


class ToolList:
    """The latest complete ``tools/list`` answer of one server, across its connections."""

    def __init__(self, tracer: trace.Tracer, attributes: dict[str, Any], timeout: float,
                 current: Callable[[], Any]) -> None:
        """``current()`` is the server's open connection (``_server._Live``), or ``None``;
        ``timeout`` bounds each refresh."""
        self.tools: list[Any] = []
        self._tracer = tracer
        self._attributes = attributes
        self._timeout = timeout
        self._current = current
        self._announced = 0
        """``list_changed`` notifications received."""
        self._read = 0
        """How many of them a finished refresh started after (its list reads their changes)."""
        self._refreshing: asyncio.Task[None] | None = None
        self._round: asyncio.Future[None] | None = None
        """Done when the refresh running now ends."""

    async def fetch(self, live: Any) -> None:
        """``tools/list`` on ``live``, every page; the list is replaced once it is whole. A reply
        that cannot be read fails it at once (``MCPInvalidReply``), as for a tool call."""
        listed: list[Any] = []
        cursor = None
        attributes = {**self._attributes, N.MCP_SESSION_ID: live.session_id,
                      N.MCP_PROTOCOL_VERSION: live.protocol_version}
        with request_span(self._tracer, N.MCP_TOOLS_LIST, attributes):
            from mcp_types import PaginatedRequestParams

            while True:
                params = PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await live.replies.answer(live.session.list_tools(params=params))
                listed.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        self.tools = listed

    def changed(self) -> None:
        """The server said its list changed: a refresh starts, unless one is running (then one
        more follows it, however many more notifications come meanwhile)."""
        self._announced += 1
        if self._refreshing is None or self._refreshing.done():
            token = otel_context.attach(otel_context.Context())  # its tools/list is a trace of its own
            try:
                self._refreshing = asyncio.ensure_future(self._refresh())
            finally:
                otel_context.detach(token)

    async def _refresh(self) -> None:
        while self._read < self._announced and (live := self._current()) is not None:
            announced = self._announced
            self._round = asyncio.get_running_loop().create_future()
            try:
                with contextlib.suppress(Exception):  # a failed refresh keeps the last list; its span says why
                    await asyncio.wait_for(self.fetch(live), self._timeout)
            finally:
                self._read = max(self._read, announced)
                self._round.set_result(None)

    async def caught_up(self) -> None:
        """Returns once every change announced until now is read (or its refresh failed or
        was given up): at most the refresh running now and the one queued after it."""
        announced = self._announced
        while self._read < announced and (refreshing := self._refreshing) is not None and not refreshing.done():
            waits: set[asyncio.Future[Any]] = {refreshing, *([self._round] if self._round is not None else [])}
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)

    def close(self) -> None:
        if self._refreshing is not None:
            self._refreshing.cancel()
