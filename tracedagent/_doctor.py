"""``tracedagent doctor``: is everything the telemetry goes to actually there?

Telemetry fails quietly by design - it must never break a run - so a collector that was
never started, a Jaeger on another port, or a gRPC exporter pointed at the HTTP port all
look the same from the application: no traces. The doctor asks each endpoint one question
that the right service answers in milliseconds:

=====================  ==========================================================  ===================
check                  question                                                    reachable when
=====================  ==========================================================  ===================
collector OTLP gRPC    ``Export`` of an empty ``ExportTraceServiceRequest``         the call succeeds
collector OTLP/HTTP    ``POST /v1/traces`` (``/v1/metrics``) of the same empty body  HTTP 200
collector health       ``GET`` of the ``health_check`` extension                    HTTP 200
Jaeger                 ``GET /api/services``                                       HTTP 200, Jaeger's JSON
Prometheus             ``GET /-/ready``                                            HTTP 200
Alertmanager           ``GET /-/ready``                                            HTTP 200
=====================  ==========================================================  ===================

The OTLP endpoints are exactly the ones ``configure()`` would export to - the same
``export_target`` resolves both - and the requests carry the same OTLP headers. An empty
export request is valid OTLP and carries no data. When neither an argument nor a variable
names an endpoint or a protocol, both local defaults (gRPC 4317 and HTTP 4318) are checked.

Every check runs on its own thread under the same timeout, so the doctor answers within
that timeout plus ``_GRACE`` (0.5 s) even when nothing is up. Header values and URL credentials go only where
they belong: URLs are shown without ``user:password@``, and error texts have secret
values blanked.
"""

from __future__ import annotations

import functools
import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import grpc
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2_grpc import MetricsServiceStub
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from rich.table import Table
from rich.text import Text

from . import _http
from . import _names as N
from ._endpoints import (ExportTarget, export_target, metrics_wanted, secret_values, split_url,
                         start_service, traces_wanted, without_credentials)
from ._secrets import redact

__all__ = ["Check", "Outcome", "plan", "run", "table"]

_COMPOSE_SERVICE = {"collector": "otel-collector", "jaeger": "jaeger", "prometheus": "prometheus",
                    "alertmanager": "alertmanager"}
"""docker-compose.yml's name for each service of the stack."""

_PROTOCOL_LABEL = {N.PROTOCOL_GRPC: "OTLP gRPC", N.PROTOCOL_HTTP: "OTLP/HTTP"}
_MAX_BODY = 64 * 1024
_GRACE = 0.5
"""Seconds past the timeout to wait for a thread that is still answering before giving up on it."""


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What one check found."""

    reachable: bool
    """The endpoint answered as the service it should be."""
    detail: str
    """How it answered, or why it did not: one line."""
    hint: str | None = None
    """What to do when the answer shows a misconfiguration rather than a service that is down
    (``None``: the hint is how to start the service)."""


@dataclass(frozen=True, kw_only=True)
class Check:
    """One endpoint and the question to ask it."""

    name: str
    """The row's name: ``collector OTLP gRPC (traces, metrics)``, ``Jaeger query API``, ..."""
    url: str
    """The URL asked. It may carry ``user:password@``; ``shown_url`` drops them."""
    service: str
    """The stack's service that answers it: ``collector``, ``jaeger``, ``prometheus`` or ``alertmanager``."""
    probe: Callable[[float], Outcome]
    """Asks the question within a timeout in seconds; failures it understands come back as an
    ``Outcome``, anything else it raises is reported by ``run`` as a failed check."""
    secrets: frozenset[str] = field(default=frozenset(), repr=False)
    """Header values and URL credentials: blanked out of whatever the answer says."""

    @property
    def shown_url(self) -> str:
        return without_credentials(self.url)

    @property
    def start_hint(self) -> str:
        return start_service(_COMPOSE_SERVICE[self.service])


# --- what to check -----------------------------------------------------------------------

def plan(*, otlp: str | None, protocol: str | None, collector_health: str, jaeger: str, prometheus: str,
         alertmanager: str) -> list[Check]:
    """The checks for these endpoints: the collector's OTLP receivers (as ``configure`` would
    resolve ``otlp`` and ``protocol``), then its health, Jaeger, Prometheus and Alertmanager."""
    return [
        *_otlp_checks(otlp, protocol),
        _get_check("collector health", collector_health, "collector"),
        _get_check("Jaeger query API", _join(jaeger, "api/services"), "jaeger", jaeger_json=True),
        _get_check("Prometheus", _join(prometheus, "-/ready"), "prometheus"),
        _get_check("Alertmanager", _join(alertmanager, "-/ready"), "alertmanager"),
    ]


def _otlp_checks(endpoint: str | None, protocol: str | None) -> list[Check]:
    """One check per distinct (protocol, URL) that ``configure`` would export to."""
    signals = [signal for signal, on in (("traces", traces_wanted()), ("metrics", metrics_wanted(None))) if on]
    targets = [export_target(signal, endpoint=endpoint, protocol=protocol) for signal in signals]
    if not any(t.endpoint_named or t.protocol_named for t in targets):
        # Nothing chosen: the local stack offers both receivers, and either may be the one wanted.
        targets = [export_target(signal, protocol=p) for p in (N.PROTOCOL_GRPC, N.PROTOCOL_HTTP) for signal in signals]
    places: dict[tuple[str, str], list[ExportTarget]] = {}
    for target in targets:
        places.setdefault((target.protocol, target.url), []).append(target)
    checks = []
    for (target_protocol, url), group in places.items():
        probe = _grpc_export if target_protocol == N.PROTOCOL_GRPC else _http_export
        checks.append(Check(
            name=f"collector {_PROTOCOL_LABEL[target_protocol]} ({', '.join(t.signal for t in group)})",
            url=url, service="collector", probe=functools.partial(probe, group),
            secrets=frozenset().union(*(t.secrets for t in group))))
    return checks


def _get_check(name: str, url: str, service: str, *, jaeger_json: bool = False) -> Check:
    return Check(name=name, url=url, service=service, secrets=frozenset(secret_values(url, {})),
                 probe=functools.partial(_get, url, name=name, jaeger_json=jaeger_json))


def _join(base: str, path: str) -> str:
    return f"{base.rstrip('/')}/{path}"


# --- running them --------------------------------------------------------------------------

def run(checks: Sequence[Check], *, timeout: float = N.DOCTOR_TIMEOUT) -> list[Outcome]:
    """Every check at once, each on its own thread; outcomes in the order of ``checks``.

    A check still busy shortly after ``timeout`` counts as unreachable; its (daemon) thread
    is left to finish on its own, so it cannot hold up the answer or the exit.
    """
    outcomes: list[Outcome | None] = [None] * len(checks)

    def ask(index: int, check: Check) -> None:
        try:
            outcome = check.probe(timeout)
        except Exception as exc:  # a check must never crash the doctor
            outcome = Outcome(reachable=False, detail=f"the check failed ({type(exc).__name__})")
        outcomes[index] = _redacted(outcome, check.secrets)

    threads = [threading.Thread(target=ask, args=(i, check), name="tracedagent-doctor", daemon=True)
               for i, check in enumerate(checks)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout + _GRACE
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [outcome or Outcome(reachable=False, detail=f"no answer within {timeout:g} s") for outcome in outcomes]


def _redacted(outcome: Outcome, secrets: frozenset[str]) -> Outcome:
    return Outcome(reachable=outcome.reachable, detail=redact(outcome.detail, secrets),
                   hint=redact(outcome.hint, secrets) if outcome.hint else outcome.hint)


def table(checks: Sequence[Check], outcomes: Sequence[Outcome]) -> Table:
    """One row per check: reachable or not, how it answered, and what to do about it."""
    result = Table(header_style="bold")
    result.add_column("service", no_wrap=True)
    result.add_column("URL", overflow="fold")
    result.add_column("status", no_wrap=True)
    result.add_column("details")
    for check, outcome in zip(checks, outcomes):
        status = Text("reachable", style="green") if outcome.reachable else Text("unreachable", style="bold red")
        details = Text(outcome.detail)
        if not outcome.reachable:
            details.append("\n" + (outcome.hint or check.start_hint), style="yellow")
        result.add_row(Text(check.name), Text(check.shown_url), status, details)  # Text, not markup: URLs hold "["
    return result


# --- the probes --------------------------------------------------------------------------

def _grpc_export(targets: Sequence[ExportTarget], timeout: float) -> Outcome:
    """An empty ``Export`` call per signal, as the SDK's gRPC exporter would make it (TLS for
    ``https``); the targets share one URL."""
    url = targets[0].url
    parts = split_url(without_credentials(url))
    address = parts.netloc
    channel = (grpc.secure_channel(address, grpc.ssl_channel_credentials()) if parts.scheme == "https"
               else grpc.insecure_channel(address))
    started = time.monotonic()
    try:
        for target in targets:
            remaining = max(0.01, started + timeout - time.monotonic())
            metadata = tuple(target.headers.items())
            if target.signal == "traces":
                TraceServiceStub(channel).Export(ExportTraceServiceRequest(), timeout=remaining, metadata=metadata)
            else:
                MetricsServiceStub(channel).Export(ExportMetricsServiceRequest(), timeout=remaining, metadata=metadata)
    except grpc.RpcError as exc:
        return _grpc_failure(exc, timeout)
    finally:
        channel.close()
    return Outcome(reachable=True, detail=f"OTLP export accepted in {_ms_since(started)}")


def _grpc_failure(exc: grpc.RpcError, timeout: float) -> Outcome:
    code = exc.code() if isinstance(exc, grpc.Call) else None
    details = " ".join(((exc.details() if isinstance(exc, grpc.Call) else None) or "").split())
    if "http1.x server" in details or "Failed parsing HTTP/2" in details:  # an HTTP/1 server answered
        return Outcome(reachable=False, detail="answers HTTP/1.x, not gRPC",
                       hint="an OTLP/HTTP port? use --protocol http/protobuf (or OTEL_EXPORTER_OTLP_PROTOCOL)")
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return Outcome(reachable=False, detail=f"no answer within {timeout:g} s")
    if code is grpc.StatusCode.UNAVAILABLE and "refused" in details.lower():
        return Outcome(reachable=False, detail="connection refused")
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        return Outcome(reachable=False, detail=f"refused the export (gRPC {code.name})",
                       hint=f"check the headers in {N.ENV_OTLP_HEADERS}")
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return Outcome(reachable=False, detail="answers gRPC, but has no OTLP receiver (UNIMPLEMENTED)",
                       hint="is this the collector's OTLP gRPC port (4317)?")
    return Outcome(reachable=False, detail=f"gRPC {code.name if code else 'error'}: {details[:200]}")


def _http_export(targets: Sequence[ExportTarget], timeout: float) -> Outcome:
    """``POST`` of an empty export request per signal, as the SDK's HTTP exporter would send it."""
    started = time.monotonic()
    for target in targets:
        request = ExportTraceServiceRequest() if target.signal == "traces" else ExportMetricsServiceRequest()
        try:
            status, _ = _http.request(target.url, max(0.01, started + timeout - time.monotonic()),
                                      max_bytes=_MAX_BODY, body=request.SerializeToString(),
                                      headers={**target.headers, "Content-Type": "application/x-protobuf"})
        except Exception as exc:
            if isinstance(_http.failure_reason(exc), (http.client.BadStatusLine, ConnectionResetError)):  # what a gRPC server does
                return Outcome(reachable=False, detail="closed the connection without an HTTP answer",
                               hint="an OTLP gRPC port? use --protocol grpc (or OTEL_EXPORTER_OTLP_PROTOCOL)")
            return _http_failure(exc, timeout)
        if status in (401, 403):
            return Outcome(reachable=False, detail=f"refused the export (HTTP {status})",
                           hint=f"check the headers in {N.ENV_OTLP_HEADERS}")
        if status == 404:
            return Outcome(reachable=False, detail="HTTP 404: no OTLP receiver at this path",
                           hint="is this the collector's OTLP/HTTP port (4318)?")
        if status != 200:
            return Outcome(reachable=False, detail=f"HTTP {status}")
    return Outcome(reachable=True, detail=f"OTLP export accepted in {_ms_since(started)}")


def _get(url: str, timeout: float, *, name: str, jaeger_json: bool = False) -> Outcome:
    """``GET`` answered with 200 (and, for Jaeger, with its ``{"data": [...]}``)."""
    started = time.monotonic()
    try:
        status, body = _http.request(url, timeout, max_bytes=_MAX_BODY)
    except Exception as exc:
        return _http_failure(exc, timeout)
    if status == 503:
        return Outcome(reachable=False, detail="HTTP 503: not ready yet", hint="starting? try again in a few seconds")
    if status != 200:
        return Outcome(reachable=False, detail=f"HTTP {status}",
                       hint=f"something answers, but not as {name} would: is this its URL?")
    if jaeger_json:
        try:
            services = json.loads(body)["data"]
            count = len(services or [])
        except (ValueError, KeyError, TypeError):
            return Outcome(reachable=False, detail="HTTP 200, but not Jaeger's JSON",
                           hint="is this Jaeger's query port (16686)?")
        return Outcome(reachable=True, detail=f"HTTP 200 in {_ms_since(started)}; "
                                              f"{count} service{'s' if count != 1 else ''} with traces")
    return Outcome(reachable=True, detail=f"HTTP 200 in {_ms_since(started)}")


def _http_failure(exc: Exception, timeout: float) -> Outcome:
    reason = _http.failure_reason(exc)
    if isinstance(reason, TimeoutError):
        return Outcome(reachable=False, detail=f"no answer within {timeout:g} s")
    if isinstance(reason, ConnectionRefusedError):
        return Outcome(reachable=False, detail="connection refused")
    if isinstance(reason, ValueError):
        return Outcome(reachable=False, detail="not a usable URL", hint="expected http://HOST:PORT or https://HOST:PORT")
    if isinstance(reason, OSError) and reason.strerror:
        return Outcome(reachable=False, detail=reason.strerror)
    text = reason if isinstance(reason, str) else f"{type(reason).__name__}: {reason}"
    return Outcome(reachable=False, detail=" ".join(text.split())[:200])


def _ms_since(started: float) -> str:
    return f"{(time.monotonic() - started) * 1000:.0f} ms"
