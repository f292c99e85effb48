"""Replies a server sent that the SDK cannot read, told at once to the request they answer.

Over stdio the SDK parses each line the server writes. A line that is not JSON-RPC (not JSON, a
``result`` that is not an object, nesting deeper than its parser reads) is logged and handed to
the session's message handler as an exception, and the request it answered waits on until its
timeout: "no answer in time", when the server did answer. ``Replies`` keeps, for one connection,
the requests tracedagent waits on by the JSON-RPC id each was sent with (``_tracing.noting_ids``),
and ends the one an unreadable line names at once, with ``MCPInvalidReply``. A line that names
no request in flight (a log line a server prints on its stdout) is ignored, as the SDK ignores
it. A reply that is JSON-RPC but not the shape of its request's result (the SDK raises
pydantic's ``ValidationError``) is ``MCPInvalidReply`` too. Over HTTP the SDK itself answers an
unreadable body as a parse error (-32700) of the request it answered: ``MCPRequestError``.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Awaitable, TypeVar

from .._core._records import error_type
from ._results import MCPInvalidReply
from ._tracing import identifier, noting_ids

__all__ = ["Replies"]

T = TypeVar("T")

_LEADING_ID = re.compile(r'\s*\{\s*(?:"jsonrpc"\s*:\s*"[^"\\]*"\s*,\s*)?"id"\s*:\s*(-?[0-9]{1,19}|"(?:[^"\\]|\\.){0,256}")')
"""The id at the start of a reply that is not JSON (cut short): where a JSON-RPC writer puts it."""
_WHAT_LENGTH = 200
"""Characters of what was wrong with a reply the model is shown at most."""


class Replies:
    """One connection's requests waiting for an answer, by JSON-RPC id, and the unreadable
    replies that end them."""

    def __init__(self, server: str) -> None:
        self._server = server
        self._waiting: dict[str, asyncio.Future[MCPInvalidReply]] = {}

    async def answer(self, work: Awaitable[T]) -> T:
        """``await work`` (the SDK sending one or more requests): its value, or ``MCPInvalidReply``
        as soon as the server's reply to one of its requests cannot be read (the work is then
        cancelled, and the SDK tells the server so)."""
        from pydantic import ValidationError

        unreadable: asyncio.Future[MCPInvalidReply] = asyncio.get_running_loop().create_future()
        ids: list[str] = []

        def note(request_id: str) -> None:
            ids.append(request_id)
            self._waiting[request_id] = unreadable

        with noting_ids(note):  # the task copies the context: its requests are noted
            task = asyncio.ensure_future(work)
        try:
            await asyncio.wait((task, unreadable), return_when=asyncio.FIRST_COMPLETED)
        finally:  # answered, unreadable, or the caller cancelled: the work ends here either way
            for request_id in ids:
                self._waiting.pop(request_id, None)
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if unreadable.done() and task.cancelled():
            raise unreadable.result()
        try:
            return task.result()
        except ValidationError as exc:  # JSON-RPC, but not the shape of this request's result
            raise self._invalid(exc) from None

    def unreadable(self, error: Exception) -> None:
        """The SDK could not read a line the server sent (``error``): the request it names, if
        one is waiting, ends now."""
        request_id = _named_id(error)
        waiting = self._waiting.get(request_id) if request_id is not None else None
        if waiting is not None and not waiting.done():
            waiting.set_result(self._invalid(error))

    def _invalid(self, error: Exception) -> MCPInvalidReply:
        return MCPInvalidReply(f"the MCP server {self._server!r} answered with a reply that could not be read "
                               f"({_what(error)})")


def _errors(error: Exception) -> list[dict[str, Any]]:
    """pydantic's list of what failed (``[]`` for any other exception)."""
    errors = getattr(error, "errors", None)
    try:
        found = errors(include_url=False) if callable(errors) else []
    except Exception:
        return []
    return found if isinstance(found, list) else []


def _what(error: Exception) -> str:
    """What was wrong with a reply, from pydantic's first error that is not a field missing
    (the SDK tries each kind of JSON-RPC message in turn): its kind, where, and pydantic's
    message (``json_invalid: Invalid JSON: recursion limit exceeded at line 1 column 3034``).
    Never the reply's content; bounded and printable."""
    found = [e for e in _errors(error) if isinstance(e, dict)]
    if not found:
        return error_type(error)
    first = next((e for e in found if e.get("type") != "missing"), found[0])
    where = ".".join(str(part) for part in first.get("loc", ()))
    text = f"{first.get('type')}{f' at {where}' if where else ''}: {first.get('msg')}"
    return identifier(text[:_WHAT_LENGTH])


def _named_id(error: Exception) -> str | None:
    """The id of the request an unreadable reply answers, if it can be told: from the whole
    message (a field missing at its top level, which the SDK reports with the message as its
    input), or from the text that is not JSON-RPC (parsed as plain JSON, else its start)."""
    for e in _errors(error):
        loc, reply = e.get("loc", ()), e.get("input")
        if loc == () and isinstance(reply, (str, bytes)):
            return _id_in_text(reply)
        if len(loc) <= 2 and e.get("type") == "missing" and isinstance(reply, dict):
            return _as_id(reply.get("id"))
    return None


def _id_in_text(text: str | bytes) -> str | None:
    try:
        reply = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python reads
        if isinstance(text, bytes):
            text = text[:512].decode("utf-8", "replace")
        found = _LEADING_ID.match(text[:512])
        if found is None:
            return None
        try:
            return _as_id(json.loads(found.group(1)))
        except ValueError:
            return None
    return _as_id(reply.get("id")) if isinstance(reply, dict) else None


def _as_id(value: Any) -> str | None:
    """A JSON-RPC id as the SDK's span names it (``str``), or ``None`` if it is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    if isinstance(value, int) and not -2**63 <= value < 2**63:
        return None
    return str(value)
