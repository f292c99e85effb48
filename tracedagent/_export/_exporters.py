"""The SDK's OTLP exporters, each wrapped so that an outage costs one log line and a bounded exit.

Each exporter ``configure()`` builds is wrapped in a small delegating exporter that:

* turns failed exports into one WARNING on the ``tracedagent`` logger that names the
  signal and what happened (and one INFO when exports succeed again). What happened is
  learnt by asking the endpoint one empty export (``_probe``, as ``tracedagent doctor``
  does), once per outage: the SDK's records do not say it reliably. A collector that
  cannot be reached is one outage for every signal sent there; an endpoint that answers
  but refuses one signal (Jaeger's OTLP port refuses metrics) is that signal's alone;
* silences the SDK exporter's own per-batch records - only on the thread, and only for the
  duration, of one of these exports, so other exporters in the process still log as usual;
* drops rather than waits once shutdown has begun and the endpoint is known to fail,
  or the shutdown's deadline has passed.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .._core import _names as N
from ._endpoints import LOG_START_HINT, TLS_ADVICE, ExportTarget
from ._probe import Answer, Failure, ask
from .._core._secrets import redact

__all__ = ["Collector", "GuardedExporter", "guarded_exporter", "report_hung"]

_log = logging.getLogger("tracedagent")

_OUTAGES = (Failure.UNREACHABLE, Failure.TIMED_OUT)
"""Failures that stop every signal sent to a place, not only the one that found them."""
_REFUSED = {
    Failure.UNIMPLEMENTED: "refused as unimplemented",
    Failure.WRONG_PROTOCOL: "not understood",
    Failure.UNAUTHORIZED: "unauthorized",
    Failure.TLS: "failed its TLS handshake",
}
"""How the warning says what happened to one signal's exports (else: ``failed``)."""
_ADVICE = {
    Failure.WRONG_PROTOCOL: f"is the protocol right? (protocol=..., or {N.ENV_OTLP_PROTOCOL})",
    Failure.UNAUTHORIZED: f"check the headers (headers=..., or {N.ENV_OTLP_HEADERS})",
    Failure.TLS: TLS_ADVICE,
}
"""What to do about a refusal, when the failure says; else the doctor is named."""
_TRACES_ONLY_ADVICE = ("an endpoint that takes traces only answers so, as Jaeger's OTLP port does: send metrics to "
                       f"a collector, or turn them off (metrics=False, or {N.ENV_METRICS_EXPORTER}=none)")
"""What to do about metrics refused as unimplemented."""
_DOCTOR = "`tracedagent doctor` checks every endpoint"
_MIN_PROBE_TIME = 0.05
"""Seconds below which asking the endpoint is not worth starting (shutdown's time is up)."""


class Collector:
    """Whether one place (``scheme://host:port``) answers, as the exporters sending there find out.

    The first export that finds it unreachable or timing out logs one WARNING; the first
    success after that, one INFO.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        """``scheme://host:port``: what messages name."""
        self.secrets: set[str] = set()
        """Redacted from any text an endpoint or the SDK sent before it is logged."""
        self.down = False
        self._lock = threading.Lock()

    def unreachable(self, signals: str, answer: Answer) -> None:
        """An export of ``signals`` found no answer: ``answer.failure`` is an outage, or
        ``OTHER`` when there was no time left to ask what happened."""
        with self._lock:
            if self.down:
                return
            self.down = True
        what = answer.failure.value if answer.failure in _OUTAGES else "failed"
        _log.warning("tracedagent: cannot reach the collector at %s (%s export %s: %s); telemetry sent there is "
                     "dropped until it answers; %s", self.where, signals, what, redact(answer.detail, self.secrets),
                     LOG_START_HINT)

    def reachable(self) -> None:
        with self._lock:
            if not self.down:
                return
            self.down = False
        _log.info("tracedagent: reconnected to the collector at %s; exporting again", self.where)


class _HttpLibraryLogs(logging.Filter):
    """Blanks export credentials out of what the SDK's HTTP library logs: at DEBUG, urllib3
    writes every request line, the export URL's ``?api_key=...`` included."""

    LOGGERS = ("urllib3.connectionpool", "urllib3.connection", "urllib3.util.retry")

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()
        self._installed = False

    def protect(self, secrets: Iterable[str]) -> None:
        self.secrets.update(secrets)
        if self.secrets and not self._installed:
            self._installed = True
            for name in self.LOGGERS:
                logging.getLogger(name).addFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot format itself: logging reports it as it would
            return True
        shown = redact(message, list(self.secrets))
        if shown != message:
            record.msg, record.args = shown, ()
        return True


_http_library_logs = _HttpLibraryLogs()


def guarded_exporter(target: ExportTarget, collectors: dict[str, Collector]) -> GuardedExporter:
    """The SDK's exporter for ``target``, wrapped; exporters to the same place share a ``Collector``."""
    collector = collectors.setdefault(target.where, Collector(target.where))
    collector.secrets.update(target.secrets)
    _http_library_logs.protect(target.secrets)
    inner = _sdk_exporter(target)
    wrapper = _SpanExporter if target.signal == "traces" else _MetricExporter
    return wrapper(inner, target, collector)


def report_hung(exporters: Sequence[GuardedExporter], timeout: float) -> None:
    """Shutdown gave up after ``timeout`` seconds: say so once per place, naming the signals
    whose export was still waiting (all of them, if none was exporting), and what the SDK
    had said meanwhile (an exporter retrying a refused connection is not a hung collector).
    A place that accepted an export in the last ``timeout`` seconds and said nothing wrong was
    answering: it was not unreachable, there was more to send than time to send it."""
    hung = [e for e in exporters if e.in_flight is not None] or list(exporters)
    by_place: dict[Collector, list[GuardedExporter]] = {}
    for exporter in hung:
        by_place.setdefault(exporter.collector, []).append(exporter)
    now = time.monotonic()
    for collector, waiting in by_place.items():
        if not collector.down and not any(e.in_flight for e in waiting) and \
                any(now - e.accepted_at <= timeout + 1 for e in waiting):
            _log.warning("tracedagent: the flush at shutdown ran out of its %.2g s while the collector at %s was "
                         "accepting %s exports: what was still queued is dropped (counted in the warning on "
                         "dropped spans)", timeout, collector.where, " and ".join(e.signal for e in waiting))
            continue
        detail = f"no answer within {timeout:.2g} s of shutdown"
        said = [reason for e in waiting for reason in e.in_flight or ()]
        if said:
            detail += f"; the exporter was retrying after: {said[0]}"
        collector.unreachable(" and ".join(e.signal for e in waiting), Answer(failure=Failure.TIMED_OUT, detail=detail))


def _sdk_exporter(target: ExportTarget) -> Any:
    """The SDK's own exporter; imported here so that only the chosen protocol's stack loads.

    Every setting ``export_target`` resolved is passed, so that the exporter reads no
    variable it could fail on: the gRPC exporters raise out of their constructor on a
    timeout or compression variable they cannot parse.
    """
    settings = {"endpoint": target.sdk_endpoint, "headers": target.sdk_headers, "timeout": target.sdk_timeout}
    if target.protocol == N.PROTOCOL_HTTP:
        from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
        compression = HttpCompression(target.compression or "none")
        if target.signal == "traces":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans
            return HttpSpans(**settings, compression=compression)
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetrics
        return HttpMetrics(**settings, compression=compression)
    from grpc import Compression as GrpcCompression
    grpc_settings = {**settings, "insecure": target.insecure,
                     "compression": GrpcCompression.Gzip if target.compression else GrpcCompression.NoCompression}
    with _unparsable_timeout_hidden(target.signal):
        if target.signal == "traces":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
            return GrpcSpans(**grpc_settings)
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetrics
        return GrpcMetrics(**grpc_settings)


_TIMEOUT_VARIABLE = {"traces": N.ENV_OTLP_TRACES_TIMEOUT, "metrics": N.ENV_OTLP_METRICS_TIMEOUT}
_environ_lock = threading.Lock()


@contextmanager
def _unparsable_timeout_hidden(signal: str) -> Iterator[None]:
    """Hide ``OTEL_EXPORTER_OTLP_{signal}_TIMEOUT`` from a gRPC exporter's constructor while it
    runs, if its value is not a number: the constructor calls ``float()`` on it even when it
    is given a timeout, and would raise. ``export_target`` has already warned about the value
    and chosen the timeout passed instead. Only a value that would raise is hidden, and only
    for the constructor's few microseconds."""
    variable = _TIMEOUT_VARIABLE[signal]
    with _environ_lock:
        value = os.environ.get(variable)
        hide = value is not None and not _is_number(value)
        if hide:
            del os.environ[variable]
        try:
            yield
        finally:
            if hide:
                os.environ[variable] = value  # type: ignore[assignment]  # hide: it was set


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class _SdkExportLogs(logging.Filter):
    """Holds back an SDK exporter's log records while *our* wrapper is exporting on this thread.

    The SDK exporters log an error (and a warning per retry) for every failed batch; the
    wrapper reports an outage once instead. Records logged outside such an export, or on
    another thread, pass untouched. Warning-or-worse messages are kept as the reason:
    redacted first, then cut to ``_REASON_LIMIT`` characters (cut first, a secret split at
    the cut would no longer match, and its first half would be shown).
    """

    _REASON_LIMIT = 300

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    @contextmanager
    def held(self, secrets: Iterable[str] = ()) -> Iterator[list[str]]:
        reasons: list[str] = []
        self._local.reasons = reasons
        self._local.secrets = secrets
        try:
            yield reasons
        finally:
            self._local.reasons = None

    def filter(self, record: logging.LogRecord) -> bool:
        reasons = getattr(self._local, "reasons", None)
        if reasons is None:
            return True
        if record.levelno >= logging.WARNING:
            text = redact(" ".join(record.getMessage().split()), self._local.secrets)
            reasons.append(text[: self._REASON_LIMIT])
        return False


_sdk_export_logs = _SdkExportLogs()


class GuardedExporter:
    """Delegates to an SDK exporter; reports failures once; bounds exports during shutdown."""

    exported = 0
    """Items in exports the collector accepted (spans; ``Telemetry.spans_exported``)."""
    accepted_at = -math.inf
    """``time.monotonic()`` of the last export the collector accepted."""

    def _guard(self, inner: Any, target: ExportTarget, collector: Collector) -> None:
        self.inner = inner
        self.target = target
        self.signal = target.signal
        """``"traces"`` or ``"metrics"``."""
        self.collector = collector
        self.in_flight: list[str] | None = None
        """While an export waits for the SDK exporter: the warnings it logged so far."""
        self._refused = False
        """The endpoint answers, but refuses this signal's exports (until one succeeds)."""
        self._closing_deadline: float | None = None
        self._closed = False
        self._lock = threading.Lock()
        # The records come from the loggers of the modules defining the exporter's classes.
        for cls in type(inner).__mro__:
            if cls.__module__.startswith("opentelemetry.exporter."):
                logging.getLogger(cls.__module__).addFilter(_sdk_export_logs)

    @property
    def failing(self) -> bool:
        """Exports are known to fail: the place is down, or refuses this signal."""
        return self.collector.down or self._refused

    def begin_closing(self, deadline: float) -> None:
        """From now on, drop rather than wait: everything once ``deadline`` (monotonic) passes,
        and at once if exports are known to fail - closing the SDK exporter aborts an export
        that is sleeping between retries."""
        self._closing_deadline = deadline
        if self.failing:
            self.close()

    def _send(self, export: Callable[[], bool]) -> bool:
        deadline = self._closing_deadline
        if self._closed or (deadline is not None and (self.failing or time.monotonic() >= deadline)):
            return False
        with _sdk_export_logs.held(self.collector.secrets) as reasons:
            self.in_flight = reasons
            try:
                ok = export()
            except Exception as exc:  # an exporter raising must not reach the SDK's worker thread
                ok = False
                reasons.append(type(exc).__name__)
            finally:
                self.in_flight = None
        if ok:
            self._succeeded()
        elif not self._closed:  # a failure caused by our own close() is not an outage
            self._failed(reasons[0] if reasons else None)  # the first names the root error
        return ok

    def _succeeded(self) -> None:
        self.accepted_at = time.monotonic()
        self.collector.reachable()
        with self._lock:
            if not self._refused:
                return
            self._refused = False
        _log.info("tracedagent: %s export to %s accepted again", self.signal, self.collector.where)

    def _failed(self, reason: str | None) -> None:
        """Say what happened, once: ask the endpoint, unless a failure is already reported."""
        if self.failing:
            return
        answer = self._ask()
        if answer is None:  # no time left to ask (shutdown): most likely the outage it ends with
            self.collector.unreachable(self.signal, Answer(failure=Failure.OTHER, detail=reason or "export failed"))
            return
        if answer.failure is None:  # it takes an empty export: this batch was refused for what it held
            answer = Answer(failure=Failure.OTHER, detail=reason or "export failed", signal=self.signal)
        if answer.failure in _OUTAGES:
            self.collector.unreachable(self.signal, answer)
            return
        with self._lock:
            if self._refused:
                return
            self._refused = True
        failure = answer.failure or Failure.OTHER
        advice = (_TRACES_ONLY_ADVICE if (failure, self.signal) == (Failure.UNIMPLEMENTED, "metrics")
                  else _ADVICE.get(failure, _DOCTOR))
        _log.warning("tracedagent: %s export to %s %s (%s); %s are being dropped; %s", self.signal,
                     self.collector.where, _REFUSED.get(failure, "failed"),
                     redact(answer.detail, self.collector.secrets), self.signal, advice)

    def _ask(self) -> Answer | None:
        """What the endpoint answers an empty export of this signal now, within a second (less
        once shutdown has begun); ``None`` when there is no time left to ask, or asking failed."""
        timeout = N.EXPORT_PROBE_TIMEOUT
        if self._closing_deadline is not None:
            timeout = min(timeout, self._closing_deadline - time.monotonic())
        if timeout < _MIN_PROBE_TIME:
            return None
        try:
            return ask([self.target], timeout)
        except Exception:  # asking must not fail the exporter's thread either
            _log.debug("tracedagent: asking %s what happened failed", self.collector.where, exc_info=True)
            return None

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with _sdk_export_logs.held():
            self.inner.shutdown()


class _SpanExporter(GuardedExporter, SpanExporter):
    def __init__(self, inner: SpanExporter, target: ExportTarget, collector: Collector) -> None:
        self._guard(inner, target, collector)
        self._count_lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        ok = self._send(lambda: self.inner.export(spans) is SpanExportResult.SUCCESS)
        if ok:
            with self._count_lock:
                self.exported += len(spans)
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _MetricExporter(GuardedExporter, MetricExporter):
    def __init__(self, inner: MetricExporter, target: ExportTarget, collector: Collector) -> None:
        # The reader asks its exporter for these; pass the OTLP exporter's own through
        # (it reads OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE and friends).
        MetricExporter.__init__(self, preferred_temporality=inner._preferred_temporality,
                                preferred_aggregation=inner._preferred_aggregation)
        self._guard(inner, target, collector)

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        ok = self._send(lambda: self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
                        is MetricExportResult.SUCCESS)
        return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.close()

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis)
