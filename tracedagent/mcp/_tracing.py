"""The MCP conventions on tracedagent's spans, and the trace context a server joins.

A ``tools/call`` is not a span of its own: the registry's ``execute_tool`` span (current while
the tool runs) gets the MCP attributes, as the MCP conventions ask of an MCP client whose tool
calls an outer GenAI instrumentation already traces. ``initialize`` and ``tools/list`` are
client spans of their own.

The ``mcp`` SDK opens a client span for every request it sends and puts that span's context in
the request's ``params._meta`` (``traceparent``, ``tracestate``). For the requests tracedagent
sends, the span tracedagent has for the request (the tool's span, the ``tools/list`` span) takes
its place: the SDK's ``jsonrpc.request.id`` and JSON-RPC error code are set on it, and the context
injected is its, so that a traced server's spans are children of the tool span itself. This is
done by wrapping the function the SDK's dispatcher opens its span with, only while a request of
tracedagent's is being sent (a context variable says so); an SDK without that function keeps its
own span, one level between the tool span and the server's. The same wrapper tells whoever
asked (``noting_ids``) the JSON-RPC id each request is sent with: a reply the SDK cannot read
is matched to its request by that id (``_replies.py``).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
from typing import Any, Callable, Iterator

from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode

from .._core import _names as N
from .._core._records import error_type

__all__ = ["connect_span", "end_failed", "identifier", "install_join", "joined", "leaf", "noting_ids",
           "request_span"]

_JOINED: contextvars.ContextVar[Span | None] = contextvars.ContextVar("tracedagent_mcp_joined", default=None)
"""The span that stands for the request being sent in this task, if tracedagent sent it."""
_NOTE_ID: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar("tracedagent_mcp_ids",
                                                                                        default=None)
"""Told the JSON-RPC id of each request sent in this task (``noting_ids``)."""

_KEPT = frozenset({N.JSONRPC_REQUEST_ID, N.RPC_RESPONSE_STATUS_CODE})
"""What of the SDK's own span attributes the standing-in span takes: the request id, the error
code. Its ``error.type`` and status are the registry's to set (as for every tool)."""


@contextlib.contextmanager
def joined(span: Span) -> Iterator[None]:
    """Requests sent inside this block are ``span``'s: the SDK opens no span of its own for them."""
    token = _JOINED.set(span)
    try:
        yield
    finally:
        _JOINED.reset(token)


class _StandIn:
    """What the SDK's request code holds in place of its span: attribute writes it is allowed
    through to the joined span, everything else a no-op."""

    def __init__(self, span: Span) -> None:
        self._span = span

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        kept = {key: value for key, value in attributes.items() if key in _KEPT}
        if kept:
            self._span.set_attributes(kept)

    def set_attribute(self, key: str, value: Any) -> None:
        self.set_attributes({key: value})

    def __getattr__(self, name: str) -> Any:
        return getattr(INVALID_SPAN, name)


@contextlib.contextmanager
def noting_ids(note: Callable[[str], None]) -> Iterator[None]:
    """Requests sent inside this block (and tasks started in it) tell ``note`` their JSON-RPC id."""
    token = _NOTE_ID.set(note)
    try:
        yield
    finally:
        _NOTE_ID.reset(token)


def _joining(original: Callable[..., Any]) -> Callable[..., Any]:
    @contextlib.contextmanager
    def otel_span(name: str, *, kind: SpanKind, attributes: dict[str, Any] | None = None,
                  context: Any = None, **options: Any) -> Iterator[Any]:
        note = _NOTE_ID.get()
        if note is not None and attributes and attributes.get(N.JSONRPC_REQUEST_ID) is not None:
            note(str(attributes[N.JSONRPC_REQUEST_ID]))
        span = _JOINED.get()
        if span is None or context is not None or kind is not SpanKind.CLIENT:
            with original(name, kind=kind, attributes=attributes, context=context, **options) as own:
                yield own
            return
        stand_in = _StandIn(span)
        stand_in.set_attributes(attributes or {})
        yield stand_in

    otel_span.tracedagent_joins = True  # type: ignore[attr-defined]
    return otel_span


def install_join() -> bool:
    """Wrap the SDK dispatcher's span function once per process; ``False`` when this SDK has
    none to wrap (its own client span then stays)."""
    try:
        module = importlib.import_module("mcp.shared.jsonrpc_dispatcher")
    except ImportError:
        return False
    original = getattr(module, "otel_span", None)
    if original is None:
        return False
    if not getattr(original, "tracedagent_joins", False):
        module.otel_span = _joining(original)
    return True


@contextlib.contextmanager
def request_span(tracer: trace.Tracer, method: str, attributes: dict[str, Any]) -> Iterator[Span]:
    """A client span for one of the session's own requests (``initialize``, ``tools/list``),
    current and joined while the block sends it. It ends whatever happens; an exception marks it
    failed with the exception's class as ``error.type`` (never its message)."""
    span = tracer.start_span(method, kind=SpanKind.CLIENT, attributes={N.MCP_METHOD_NAME: method, **attributes})
    try:
        with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False), joined(span):
            yield span
    except BaseException as exc:
        span.set_attribute(N.ERROR_TYPE, getattr(exc, "error_type", None) or error_type(exc))
        span.set_status(Status(StatusCode.ERROR))
        raise
    finally:
        span.end()


def connect_span(tracer: trace.Tracer, parent: Any, attributes: dict[str, Any]) -> Span | None:
    """``mcp.connect`` around a session's first requests when ``parent`` has no span, else None.
    Started here and ended by the caller rather than with ``with``: a transport that cannot
    connect (anyio's task groups in the SDK) cancels the requests first and raises its own error
    only as its context exits, after a ``with`` inside it would have ended the span as cancelled."""
    if trace.get_current_span(parent).get_span_context().is_valid:
        return None
    return tracer.start_span(N.MCP_CONNECT_SPAN_NAME, context=parent, attributes=attributes)


def end_failed(span: Span, kind: str) -> None:
    """End ``span`` as failed with ``kind`` as its ``error.type``: a class or a named outcome,
    never a message (a command line or a URL's secrets can be in one)."""
    span.set_attribute(N.ERROR_TYPE, kind)
    span.set_status(Status(StatusCode.ERROR))
    span.end()


def leaf(exc: BaseException) -> BaseException:
    """The first exception inside an exception group (anyio's task groups raise them)."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


def identifier(text: str) -> str:
    """A name or id the server chose, as an attribute: at most ``MAX_NAME_LENGTH`` characters,
    printable (a hostile server cannot bloat every span of the session, nor write escapes)."""
    if len(text) <= N.MAX_NAME_LENGTH and text.isprintable():
        return text
    return "".join(c if c.isprintable() else "?" for c in text[:N.MAX_NAME_LENGTH])
