"""The SDK's OTLP exporters, each wrapped so that an outage costs one log line and a bounded exit.

Each exporter ``configure()`` builds is wrapped in a small delegating exporter that:

* turns a failed export into one WARNING on the ``tracedagent`` logger (and one INFO when
  exports succeed again), shared by the exporters that send to the same collector;
* silences the SDK exporter's own per-batch records - only on the thread, and only for the
  duration, of one of these exports, so other exporters in the process still log as usual;
* drops rather than waits once shutdown has begun and the collector is known to be down,
  or the shutdown's deadline has passed.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import _names as N
from ._endpoints import LOG_START_HINT, ExportTarget
from ._secrets import redact

__all__ = ["Collector", "GuardedExporter", "guarded_exporter"]

_log = logging.getLogger("tracedagent")


class Collector:
    """Whether one collector is reachable, as its span and metric exporters find out.

    The first failed export logs one WARNING; the first success after that, one INFO.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        """``scheme://host:port``: what messages name."""
        self.secrets: set[str] = set()
        """Redacted from the SDK's error text before it is logged."""
        self.down = False
        self._lock = threading.Lock()

    def failed(self, reason: str | None) -> None:
        with self._lock:
            if self.down:
                return
            self.down = True
        reason = redact(reason, self.secrets) if reason else reason
        _log.warning("tracedagent: cannot reach the collector at %s (%s); spans are being dropped; %s",
                     self.where, reason or "export failed", LOG_START_HINT)

    def succeeded(self) -> None:
        with self._lock:
            if not self.down:
                return
            self.down = False
        _log.info("tracedagent: reconnected to the collector at %s; exporting again", self.where)


def guarded_exporter(target: ExportTarget, collectors: dict[str, Collector]) -> GuardedExporter:
    """The SDK's exporter for ``target``, wrapped; exporters to the same place share a ``Collector``."""
    collector = collectors.setdefault(target.where, Collector(target.where))
    collector.secrets.update(target.secrets)
    inner = _sdk_exporter(target)
    return _SpanExporter(inner, collector) if target.signal == "traces" else _MetricExporter(inner, collector)


def _sdk_exporter(target: ExportTarget) -> Any:
    """The SDK's own exporter; imported here so that only the chosen protocol's stack loads."""
    settings = {"endpoint": target.sdk_endpoint, "headers": target.sdk_headers, "timeout": target.sdk_timeout}
    if target.protocol == N.PROTOCOL_HTTP:
        if target.signal == "traces":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans
            return HttpSpans(**settings)
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetrics
        return HttpMetrics(**settings)
    if target.signal == "traces":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
        return GrpcSpans(**settings)
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetrics
    return GrpcMetrics(**settings)


class _SdkExportLogs(logging.Filter):
    """Holds back an SDK exporter's log records while *our* wrapper is exporting on this thread.

    The SDK exporters log an error (and a warning per retry) for every failed batch; the
    wrapper reports an outage once instead. Records logged outside such an export, or on
    another thread, pass untouched. Warning-or-worse messages are kept as the reason.
    """

    _REASON_LIMIT = 300

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    @contextmanager
    def held(self) -> Iterator[list[str]]:
        reasons: list[str] = []
        self._local.reasons = reasons
        try:
            yield reasons
        finally:
            self._local.reasons = None

    def filter(self, record: logging.LogRecord) -> bool:
        reasons = getattr(self._local, "reasons", None)
        if reasons is None:
            return True
        if record.levelno >= logging.WARNING:
            reasons.append(" ".join(record.getMessage().split())[: self._REASON_LIMIT])
        return False


_sdk_export_logs = _SdkExportLogs()


class GuardedExporter:
    """Delegates to an SDK exporter; reports outages once; bounds exports during shutdown."""

    signal: str
    """``"traces"`` or ``"metrics"``."""
    exported = 0
    """Items in exports the collector accepted (spans; ``Telemetry.spans_exported``)."""

    def _guard(self, inner: Any, collector: Collector) -> None:
        self.inner = inner
        self.collector = collector
        self._closing_deadline: float | None = None
        self._closed = False
        self._close_lock = threading.Lock()
        # The records come from the loggers of the modules defining the exporter's classes.
        for cls in type(inner).__mro__:
            if cls.__module__.startswith("opentelemetry.exporter."):
                logging.getLogger(cls.__module__).addFilter(_sdk_export_logs)

    def begin_closing(self, deadline: float) -> None:
        """From now on, drop rather than wait: everything once ``deadline`` (monotonic) passes,
        and at once if the collector is known to be down - closing the SDK exporter aborts
        an export that is sleeping between retries."""
        self._closing_deadline = deadline
        if self.collector.down:
            self.close()

    def _send(self, export: Callable[[], bool]) -> bool:
        deadline = self._closing_deadline
        if self._closed or (deadline is not None and (self.collector.down or time.monotonic() >= deadline)):
            return False
        with _sdk_export_logs.held() as reasons:
            try:
                ok = export()
            except Exception as exc:  # an exporter raising must not reach the SDK's worker thread
                ok = False
                reasons.append(type(exc).__name__)
        if ok:
            self.collector.succeeded()
        elif not self._closed:  # a failure caused by our own close() is not an outage
            self.collector.failed(reasons[0] if reasons else None)  # the first names the root error
        return ok

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        with _sdk_export_logs.held():
            self.inner.shutdown()


class _SpanExporter(GuardedExporter, SpanExporter):
    signal = "traces"

    def __init__(self, inner: SpanExporter, collector: Collector) -> None:
        self._guard(inner, collector)
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
    signal = "metrics"

    def __init__(self, inner: MetricExporter, collector: Collector) -> None:
        # The reader asks its exporter for these; pass the OTLP exporter's own through
        # (it reads OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE and friends).
        MetricExporter.__init__(self, preferred_temporality=inner._preferred_temporality,
                                preferred_aggregation=inner._preferred_aggregation)
        self._guard(inner, collector)

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        ok = self._send(lambda: self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
                        is MetricExportResult.SUCCESS)
        return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.close()

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis)
