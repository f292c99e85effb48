"""One empty OTLP export to an endpoint, and what its answer means.

``tracedagent doctor`` asks it of every OTLP endpoint; the exporters' wrapper asks it once
when an export fails, to say what happened. The SDK exporters' own records cannot say
it reliably: an HTTP exporter whose only attempt failed logs "timeout, max retries or
shutdown" whether nothing listened or nothing answered, and which records exist changes
between SDK releases. An empty export request is valid OTLP and stores nothing.

Both protocols are asked as the SDK's exporters would ask (for gRPC the target's address,
with TLS or without as ``export_target`` decided; for HTTP TLS for ``https``; the target's
headers sent along); the protocol stacks themselves (``grpc``, the OTLP messages) are
imported only when a question is asked. Whatever an answer quotes of the server or the
client library has the target's secrets blanked before it is cut to length: cut first, a
secret split at the cut would no longer be recognised.
"""

from __future__ import annotations

import enum
import http.client
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from . import _http
from .._core import _names as N
from ._endpoints import ExportTarget
from .._core._secrets import redact

__all__ = ["Answer", "Failure", "ask", "http_failure"]

_MAX_BODY = 64 * 1024
_QUOTE_LIMIT = 200
"""Characters of a server's or library's own words an answer quotes at most."""


class Failure(enum.Enum):
    """What kind of thing went wrong: what a message about it, and its advice, depend on."""

    UNREACHABLE = "unreachable"
    """Nothing answered: connection refused, no route, a name that does not resolve."""
    TIMED_OUT = "timed out"
    """Something accepted the connection and did not answer in time."""
    WRONG_PROTOCOL = "wrong protocol"
    """An HTTP/1 server answered a gRPC call, or a gRPC server an HTTP request."""
    UNIMPLEMENTED = "unimplemented"
    """It speaks the protocol but takes no such export (gRPC ``UNIMPLEMENTED``, HTTP 404)."""
    TRACES_ONLY = "traces only"
    """It took traces and refused metrics as unimplemented: what Jaeger's OTLP port does."""
    UNAUTHORIZED = "unauthorized"
    """It refused the credentials (gRPC ``UNAUTHENTICATED``/``PERMISSION_DENIED``, HTTP 401/403)."""
    TLS = "TLS handshake failed"
    """A gRPC call with TLS to something that answers, but not with TLS (or not with a
    certificate that is trusted): a plaintext collector asked with TLS, most often."""
    NOT_A_URL = "not a URL"
    """The URL cannot be asked at all."""
    OTHER = "other"
    """Any other status or error; ``Answer.detail`` says which."""


@dataclass(frozen=True, kw_only=True)
class Answer:
    """How an endpoint answered."""

    failure: Failure | None
    """``None``: the export was accepted."""
    detail: str
    """How it answered, or why it did not: one line, which may quote the server (redact it)."""
    signal: str | None = None
    """The signal whose export was refused (``None`` when accepted, or not an export)."""


def ask(targets: Sequence[ExportTarget], timeout: float, *, traces_at_same_place: ExportTarget | None = None
        ) -> Answer:
    """An empty export per target, in order, within ``timeout`` seconds in all; the targets
    share one protocol (and, for gRPC, one URL). The first refusal is the answer.

    A metrics export refused as unimplemented after traces were accepted - by an earlier
    target, or by ``traces_at_same_place``, asked only then - is ``TRACES_ONLY``.
    """
    started = time.monotonic()
    http = targets[0].protocol == N.PROTOCOL_HTTP
    ask_each = _http_export if http else _grpc
    answer = ask_each(targets, timeout)
    if answer.failure is Failure.UNIMPLEMENTED and answer.signal == "metrics":
        traces_accepted = any(t.signal == "traces" for t in targets) or (
            traces_at_same_place is not None
            and ask_each([traces_at_same_place], max(0.01, started + timeout - time.monotonic())).failure is None)
        if traces_accepted:
            return Answer(failure=Failure.TRACES_ONLY, signal="metrics",
                          detail="accepts traces, but refuses metrics as unimplemented "
                                 f"({'HTTP 404' if http else 'gRPC UNIMPLEMENTED'})")
    if answer.failure is None:
        return Answer(failure=None, detail=f"OTLP export accepted in {(time.monotonic() - started) * 1000:.0f} ms")
    return answer


def _grpc(targets: Sequence[ExportTarget], timeout: float) -> Answer:
    """An ``Export`` call per target over one channel, to the address the exporter dials,
    with TLS unless the target is ``insecure``."""
    import grpc
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2_grpc import MetricsServiceStub
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

    address = targets[0].sdk_endpoint
    channel = (grpc.insecure_channel(address) if targets[0].insecure
               else grpc.secure_channel(address, grpc.ssl_channel_credentials()))
    started = time.monotonic()
    target = targets[0]
    try:
        for target in targets:
            remaining = max(0.01, started + timeout - time.monotonic())
            metadata = tuple(target.headers.items())
            if target.signal == "traces":
                TraceServiceStub(channel).Export(ExportTraceServiceRequest(), timeout=remaining, metadata=metadata)
            else:
                MetricsServiceStub(channel).Export(ExportMetricsServiceRequest(), timeout=remaining, metadata=metadata)
    except grpc.RpcError as exc:
        return _grpc_failure(exc, timeout, target.signal, target.secrets)
    finally:
        channel.close()
    return Answer(failure=None, detail="accepted")


def _grpc_failure(exc: Any, timeout: float, signal: str, secrets: Iterable[str]) -> Answer:
    import grpc

    code = exc.code() if isinstance(exc, grpc.Call) else None
    details = _quote((exc.details() if isinstance(exc, grpc.Call) else None) or "", secrets, limit=None)
    if "http1.x server" in details or "Failed parsing HTTP/2" in details:  # an HTTP/1 server answered
        return Answer(failure=Failure.WRONG_PROTOCOL, signal=signal, detail="answers HTTP/1.x, not gRPC")
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return Answer(failure=Failure.TIMED_OUT, signal=signal, detail=f"no answer within {timeout:g} s")
    if code is grpc.StatusCode.UNAVAILABLE and ("handshake" in details.lower() or "ssl" in details.lower()):
        return Answer(failure=Failure.TLS, signal=signal, detail=f"gRPC UNAVAILABLE: {_quote(details, ())}")
    if code is grpc.StatusCode.UNAVAILABLE:
        detail = "connection refused" if "refused" in details.lower() else f"gRPC UNAVAILABLE: {_quote(details, ())}"
        return Answer(failure=Failure.UNREACHABLE, signal=signal, detail=detail)
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        return Answer(failure=Failure.UNAUTHORIZED, signal=signal, detail=f"gRPC {code.name}: credentials refused")
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return Answer(failure=Failure.UNIMPLEMENTED, signal=signal,
                      detail="gRPC UNIMPLEMENTED: answers gRPC, but has no OTLP receiver for it")
    return Answer(failure=Failure.OTHER, signal=signal,
                  detail=f"gRPC {code.name if code else 'error'}: {_quote(details, ())}")


def _http_export(targets: Sequence[ExportTarget], timeout: float) -> Answer:
    """``POST`` of an empty export request per target, as the SDK's HTTP exporter sends it."""
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    started = time.monotonic()
    for target in targets:
        request = ExportTraceServiceRequest() if target.signal == "traces" else ExportMetricsServiceRequest()
        try:
            status, _ = _http.request(target.url, max(0.01, started + timeout - time.monotonic()),
                                      max_bytes=_MAX_BODY, body=request.SerializeToString(),
                                      headers={**target.headers, "Content-Type": "application/x-protobuf"})
        except Exception as exc:
            if isinstance(_http.failure_reason(exc), (http.client.BadStatusLine, ConnectionResetError)):
                return Answer(failure=Failure.WRONG_PROTOCOL, signal=target.signal,  # what a gRPC server does
                              detail="closed the connection without an HTTP answer")
            failure = http_failure(exc, timeout, target.secrets)
            return Answer(failure=failure.failure, signal=target.signal, detail=failure.detail)
        if status in (401, 403):
            return Answer(failure=Failure.UNAUTHORIZED, signal=target.signal,
                          detail=f"HTTP {status}: credentials refused")
        if status == 404:
            return Answer(failure=Failure.UNIMPLEMENTED, signal=target.signal,
                          detail="HTTP 404: no OTLP receiver at this path")
        if status != 200:
            return Answer(failure=Failure.OTHER, signal=target.signal, detail=f"HTTP {status}")
    return Answer(failure=None, detail="accepted")


def http_failure(exc: Exception, timeout: float, secrets: Iterable[str] = ()) -> Answer:
    """What an HTTP request that got no answer (``_http.request`` raised ``exc``) ran into;
    what it quotes has ``secrets`` blanked."""
    reason = _http.failure_reason(exc)
    if isinstance(reason, TimeoutError):
        return Answer(failure=Failure.TIMED_OUT, detail=f"no answer within {timeout:g} s")
    if isinstance(reason, ConnectionRefusedError):
        return Answer(failure=Failure.UNREACHABLE, detail="connection refused")
    if isinstance(reason, ValueError):
        return Answer(failure=Failure.NOT_A_URL, detail="not a usable URL")
    if isinstance(reason, OSError) and reason.strerror:
        return Answer(failure=Failure.UNREACHABLE, detail=reason.strerror)
    text = reason if isinstance(reason, str) else f"{type(reason).__name__}: {reason}"
    return Answer(failure=Failure.OTHER, detail=_quote(text, secrets))


def _quote(text: str, secrets: Iterable[str], *, limit: int | None = _QUOTE_LIMIT) -> str:
    """``text`` on one line, ``secrets`` blanked, then cut to ``limit`` characters."""
    return redact(" ".join(text.split()), secrets)[:limit]
