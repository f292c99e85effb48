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
Temporal (if named)    gRPC ``grpc.health.v1.Health/Check`` of the WorkflowService   ``SERVING``
=====================  ==========================================================  ===================

Temporal is checked only when an address is named (``--temporal`` or
``TRACEDAGENT_TEMPORAL_ADDRESS``): most users of the telemetry run no Temporal at all.

The OTLP endpoints are exactly the ones ``configure()`` would export to - the same
``export_target`` resolves both - and the requests carry the same OTLP headers. An empty
export request is valid OTLP and carries no data; ``_probe`` asks it and reads the answer,
for the doctor and for the warning an export failure logs alike. An endpoint that takes
traces but answers metrics with "unimplemented" is named for what it is most likely to be:
Jaeger's own OTLP port, which takes traces only. When neither an argument nor a variable
names an endpoint or a protocol, both local defaults (gRPC 4317 and HTTP 4318) are checked.

Every check runs on its own thread under the same timeout, so the doctor answers within
that timeout plus ``_GRACE`` (0.5 s) even when nothing is up. Header values and URL credentials go only where
they belong: URLs are shown without ``user:password@`` and with ``***`` for query values
that name a credential, and error texts have secret values blanked (by the probes, before
they cut a quote to length, and again here). A gRPC endpoint is shown as the exporter dials
it: ``https://`` when it is asked with TLS, as one written without a scheme is.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from rich.table import Table
from rich.text import Text

from .._export import _http
from .._core import _names as N
from .._export._endpoints import (TLS_ADVICE, ExportTarget, export_target, metrics_wanted, secret_values, shown_url,
                         start_service, traces_wanted, warn_about)
from .._export._probe import Answer, Failure, ask, http_failure
from .._core._secrets import redact

__all__ = ["Check", "Outcome", "plan", "run", "table", "temporal_queries"]

_COMPOSE_SERVICE = {"collector": "otel-collector", "jaeger": "jaeger", "prometheus": "prometheus",
                    "alertmanager": "alertmanager", "temporal": "temporal"}
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
    """The URL asked. It may carry ``user:password@`` and credentials in its query; ``shown_url``
    blanks them."""
    service: str
    """The stack's service that answers it: ``collector``, ``jaeger``, ``prometheus`` or ``alertmanager``."""
    probe: Callable[[float], Outcome]
    """Asks the question within a timeout in seconds; failures it understands come back as an
    ``Outcome``, anything else it raises is reported by ``run`` as a failed check."""
    secrets: frozenset[str] = field(default=frozenset(), repr=False)
    """Header values and URL credentials: blanked out of whatever the answer says."""

    @property
    def shown_url(self) -> str:
        return shown_url(self.url)

    @property
    def start_hint(self) -> str:
        return start_service(_COMPOSE_SERVICE[self.service])


# --- what to check -----------------------------------------------------------------------

def plan(*, otlp: str | None, protocol: str | None, collector_health: str, jaeger: str, prometheus: str,
         alertmanager: str, temporal: str | None = None) -> list[Check]:
    """The checks for these endpoints: the collector's OTLP receivers (as ``configure`` would
    resolve ``otlp`` and ``protocol``), then its health, Jaeger, Prometheus and Alertmanager,
    and the Temporal frontend at ``temporal`` (``HOST:PORT``) when one is named."""
    temporal_checks = [] if not temporal else [Check(
        name="Temporal frontend", url=temporal, service="temporal",
        probe=functools.partial(_temporal_health, temporal))]
    return [
        *_otlp_checks(otlp, protocol),
        _get_check("collector health", collector_health, "collector"),
        _get_check("Jaeger query API", _join(jaeger, "api/services"), "jaeger", jaeger_json=True),
        _get_check("Prometheus", _join(prometheus, "-/ready"), "prometheus"),
        _get_check("Alertmanager", _join(alertmanager, "-/ready"), "alertmanager"),
        *temporal_checks,
    ]


def _otlp_checks(endpoint: str | None, protocol: str | None) -> list[Check]:
    """One check per distinct (protocol, URL) that ``configure`` would export to."""
    signals = [signal for signal, on in (("traces", traces_wanted()), ("metrics", metrics_wanted(None))) if on]
    targets = [export_target(signal, endpoint=endpoint, protocol=protocol) for signal in signals]
    if not any(t.endpoint_named or t.protocol_named for t in targets):
        # Nothing chosen: the local stack offers both receivers, and either may be the one wanted.
        targets = [export_target(signal, protocol=p) for p in (N.PROTOCOL_GRPC, N.PROTOCOL_HTTP) for signal in signals]
    warn_about(targets)
    places: dict[tuple[str, str], list[ExportTarget]] = {}
    for target in targets:
        places.setdefault((target.protocol, target.url), []).append(target)
    traces_by_place = {(t.protocol, t.where): t for t in targets if t.signal == "traces"}
    checks = []
    for (target_protocol, url), group in places.items():
        # A metrics receiver that turns out to be missing is explained by whether traces are
        # taken at the same place (Jaeger's OTLP port takes traces only).
        witness = traces_by_place.get((target_protocol, group[0].where))
        checks.append(Check(
            name=f"collector {_PROTOCOL_LABEL[target_protocol]} ({', '.join(t.signal for t in group)})",
            url=url, service="collector", probe=functools.partial(_otlp_export, group, witness),
            secrets=frozenset().union(*(t.secrets for t in group))))
    return checks


def _get_check(name: str, url: str, service: str, *, jaeger_json: bool = False) -> Check:
    secrets = secret_values(url, {})
    return Check(name=name, url=url, service=service, secrets=secrets,
                 probe=functools.partial(_get, url, name=name, jaeger_json=jaeger_json, secrets=secrets))


def _join(base: str, path: str) -> str:
    return f"{base.rstrip('/')}/{path}"


# --- running them --------------------------------------------------------------------------

def run(checks: Sequence[Check], *, timeout: float = N.DOCTOR_TIMEOUT) -> list[Outcome]:
    """Every check at once, each on its own thread; outcomes in the order of ``checks``.

    A check still busy shortly after ``timeout`` counts as unreachable; its (daemon) thread
    is left to finish on its own, so it cannot hold up the answer or the exit.
    """
    outcomes: list[Outcome | None] = [None] * len(checks)

    def check_one(index: int, check: Check) -> None:
        try:
            outcome = check.probe(timeout)
        except Exception as exc:  # a check must never crash the doctor
            outcome = Outcome(reachable=False, detail=f"the check failed ({type(exc).__name__})")
        outcomes[index] = _redacted(outcome, check.secrets)

    threads = [threading.Thread(target=check_one, args=(i, check), name="tracedagent-doctor", daemon=True)
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


def temporal_queries(address: str) -> list[str]:
    """What an operator asks Temporal at ``address`` about runs, with tracedagent's search
    attributes (``TEMPORAL_SEARCH_ATTRIBUTES``): the CLI's queries, each with what it finds, and
    where the Temporal UI is (which takes the same queries)."""
    listing = f"temporal workflow list --address {address} --query"
    queries = [(f"'{N.TEMPORAL_SEARCH_WAITING}=true'", "runs waiting for a person (approve_on_temporal)"),
               (f"\"{N.TEMPORAL_SEARCH_AGENT}='support'\"", "one agent's runs"),
               (f"\"{N.TEMPORAL_SEARCH_TRACE_ID}='TRACE_ID'\"", "the run of a trace (Run.trace_id)"),
               (f"\"{N.TEMPORAL_SEARCH_CONVERSATION_ID}='CONVERSATION_ID'\"", "a conversation's runs"),
               (f"\"{N.TEMPORAL_SEARCH_STOP_REASON}='budget_exhausted'\"", "runs that ended on a stop reason")]
    host, _, port = address.rpartition(":")
    ui = f"http://{host}:{int(port) + 1000}" if port.isdigit() else "its web UI"
    return ([f"Runs on Temporal, found by tracedagent's search attributes ({', '.join(N.TEMPORAL_SEARCH_ATTRIBUTES)}; "
             "a worker checks at start that the namespace has them):"]
            + [f"  {listing} {query}   # {what}" for query, what in queries]
            + [f"The Temporal UI takes the same queries: {ui} for `temporal server start-dev` without --headless "
               "(the stack's runs headless), or your cluster's or Temporal Cloud's UI."])


# --- the probes --------------------------------------------------------------------------

_OTLP_HINTS = {
    (Failure.WRONG_PROTOCOL, N.PROTOCOL_GRPC): ("an OTLP/HTTP port? use --protocol http/protobuf "
                                                f"(or {N.ENV_OTLP_PROTOCOL})"),
    (Failure.WRONG_PROTOCOL, N.PROTOCOL_HTTP): f"an OTLP gRPC port? use --protocol grpc (or {N.ENV_OTLP_PROTOCOL})",
    (Failure.UNIMPLEMENTED, N.PROTOCOL_GRPC): "is this the collector's OTLP gRPC port (4317)?",
    (Failure.UNIMPLEMENTED, N.PROTOCOL_HTTP): "is this the collector's OTLP/HTTP port (4318)?",
}
"""What to do about an OTLP answer that shows a misconfiguration, by protocol."""
_HINTS = {
    Failure.TRACES_ONLY: (f"Jaeger's OTLP port? it takes traces only: send metrics to the collector (--otlp), "
                          f"or turn them off ({N.ENV_METRICS_EXPORTER}=none)"),
    Failure.UNAUTHORIZED: f"check the headers in {N.ENV_OTLP_HEADERS}",
    Failure.NOT_A_URL: "expected http://HOST:PORT or https://HOST:PORT",
    Failure.TLS: TLS_ADVICE,
}
"""The same, whatever the protocol."""


def _otlp_export(targets: Sequence[ExportTarget], traces_at_same_place: ExportTarget | None,
                 timeout: float) -> Outcome:
    """The empty export ``configure``'s exporters would make, for each target."""
    answer = ask(targets, timeout, traces_at_same_place=traces_at_same_place)
    return _outcome(answer, _OTLP_HINTS.get((answer.failure, targets[0].protocol)))


def _outcome(answer: Answer, hint: str | None = None) -> Outcome:
    return Outcome(reachable=answer.failure is None, detail=answer.detail, hint=hint or _HINTS.get(answer.failure))


def _get(url: str, timeout: float, *, name: str, jaeger_json: bool = False, secrets: frozenset[str]) -> Outcome:
    """``GET`` answered with 200 (and, for Jaeger, with its ``{"data": [...]}``)."""
    started = time.monotonic()
    try:
        status, body = _http.request(url, timeout, max_bytes=_MAX_BODY)
    except Exception as exc:
        return _outcome(http_failure(exc, timeout, secrets))
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


def _temporal_health(address: str, timeout: float) -> Outcome:
    """The standard gRPC health check of Temporal's WorkflowService, with the request and the
    answer written by hand (a string field 1 out, an enum field 1 back: 1 is ``SERVING``), so the
    doctor needs neither the Temporal SDK nor grpcio-health-checking."""
    import grpc  # the OTLP gRPC exporter's dependency; imported only when Temporal is checked

    started = time.monotonic()
    service = N.TEMPORAL_HEALTH_SERVICE.encode()
    channel = grpc.insecure_channel(address)
    try:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=lambda body: body, response_deserializer=lambda body: body)
        answer = check(b"\x0a" + bytes([len(service)]) + service, timeout=timeout)
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        name = getattr(code, "name", "an error")
        if code == grpc.StatusCode.UNIMPLEMENTED:
            return Outcome(reachable=False, detail="gRPC answers, but has no health check",
                           hint="is this Temporal's frontend port (7233)?")
        return Outcome(reachable=False, detail=f"gRPC {name}")
    except ValueError as exc:  # an address grpc cannot parse
        return Outcome(reachable=False, detail=f"not an address ({type(exc).__name__})", hint="expected HOST:PORT")
    finally:
        channel.close()
    if answer != b"\x08\x01":
        return Outcome(reachable=False, detail="the WorkflowService is not serving", hint="starting? try again soon")
    return Outcome(reachable=True, detail=f"SERVING in {_ms_since(started)}")


def _ms_since(started: float) -> str:
    return f"{(time.monotonic() - started) * 1000:.0f} ms"
