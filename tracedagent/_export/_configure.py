"""``configure()``: the one place tracedagent touches the OpenTelemetry SDK for export.

It builds a ``TracerProvider`` (batching spans to an OTLP exporter) and a ``MeterProvider``
(a periodic reader on an OTLP exporter), installs them globally, and returns a
``Telemetry`` handle whose ``shutdown(timeout)`` flushes them.

Four decisions shape it:

* **The standard variables, read once.** An argument wins; otherwise the standard
  ``OTEL_EXPORTER_OTLP_*`` variables (with their per-signal ``TRACES_``/``METRICS_``
  forms) decide. ``_endpoints.export_target`` reads those the SDK exporters would fail on
  or read differently from the specification - endpoint, timeout, compression, whether a
  gRPC endpoint uses TLS - and passes the answer, so that a bad value is one warning and
  the default, never an exception; the rest (headers, certificates, ``OTEL_BSP_*``,
  ``OTEL_METRIC_EXPORT_*``) are left to the SDK. tracedagent adds the protocol (the SDK's
  exporters are one class per protocol), 127.0.0.1 instead of ``localhost`` when nothing
  names an endpoint, a service name, and a shorter export timeout.
* **Never replace what the application installed.** OpenTelemetry's global providers can
  be set once per process; if the application got there first, its provider is used as
  is, with one warning, and nothing is added to it.
* **A missing collector costs at most about 2 s at exit.** The SDK's defaults wait 7-8 s
  at exit for 10 pending spans and 30 s for 5,000 when nothing listens, and 10 s when
  the collector hangs (``benchmarks/exit_time.py``). Here each export is bounded
  (``export_timeout``), exports are dropped at once during shutdown when the collector is
  known to be down, and the shutdown itself runs on a helper thread that the caller waits
  for at most ``timeout`` seconds (1.5 s at exit, for every pipeline of the process
  together), after which the exporters are closed, which aborts their retries and drops
  what was still pending.
* **One warning per outage, not one error per batch.** Each exporter is wrapped
  (``_exporters``) so that a failed export becomes one WARNING on the ``tracedagent`` logger.

Where each signal goes is resolved once, by ``_endpoints.export_target``, which
``tracedagent doctor`` uses too.

Headers (which may carry API keys) are passed to the exporters and nowhere else: they
are never logged, and ``Telemetry`` does not show them.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, Sequence

from opentelemetry import metrics, trace
from opentelemetry.metrics._internal import _ProxyMeterProvider  # the "nothing installed yet" global
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, OTELResourceDetector, Resource
from opentelemetry.sdk.trace import TracerProvider

from .._core import _names as N
from . import _sigterm
from ._endpoints import PROTOCOLS, ExportTarget, export_target, metrics_wanted, traces_wanted, warn_about
from ._exporters import Collector, GuardedExporter, guarded_exporter, report_hung
from ._queue import SpanQueue
from .._core._secrets import redact

__all__ = ["Telemetry", "configure"]

_log = logging.getLogger("tracedagent")

_lock = threading.Lock()
_global: Telemetry | None = None
"""The handle of the process-wide (``set_global=True``) configuration, once there is one."""
_warned_stopped = False
"""Whether ``configure()`` has said that ``_global`` was shut down (it says so once)."""


# --- the handle ---------------------------------------------------------------------------

class Telemetry:
    """What ``configure()`` set up: the two providers, where they export, and how to stop.

    Pass ``**telemetry.providers`` to an ``Agent`` when ``configure(set_global=False)``
    was used. Usable as a context manager: leaving the block calls ``shutdown()``.
    ``shutdown`` also runs at interpreter exit, and on SIGTERM, with a 1.5 s bound shared by
    every pipeline of the process (``_sigterm``), so that the whole exit, interpreter
    teardown included, waits at most about 2 s more than without telemetry.
    """

    def __init__(self, *, tracer_provider: trace.TracerProvider, meter_provider: metrics.MeterProvider,
                 service_name: str | None, endpoint: str | None, protocol: str | None,
                 owns_tracer_provider: bool, owns_meter_provider: bool,
                 exporters: Sequence[GuardedExporter], settings: _Settings,
                 span_queue: SpanQueue | None = None) -> None:
        self.tracer_provider = tracer_provider
        """The provider spans go to: tracedagent's own, or the one the application installed."""
        self.meter_provider = meter_provider
        """The provider metrics go to (a no-op one when metrics are off)."""
        self.service_name = service_name
        """``service.name`` of tracedagent's own providers; ``None`` if it built none."""
        self.endpoint = endpoint
        """Where tracedagent's span exporter sends (the full URL for HTTP; ``http://`` or
        ``https://`` for gRPC, as it is dialled), without credentials (``user:password@``, and
        credential query values as ``***``); ``None`` if it has none."""
        self.protocol = protocol
        """``"grpc"`` or ``"http/protobuf"`` for that exporter; ``None`` if it has none."""
        self._owns = (owns_tracer_provider, owns_meter_provider)
        self._exporters = tuple(exporters)
        self._span_queue = span_queue
        self._settings = settings  # to notice a second configure() asking for something else; never shown
        self._stopped = False
        self._stop_lock = threading.RLock()  # reentrant: a SIGTERM handler may interrupt its holder
        if any(self._owns):  # shut down at exit (and on SIGTERM), within one bound for every pipeline
            _sigterm.watch(self.shutdown, sigterm=_sigterm.wanted(settings.handle_sigterm))

    @property
    def providers(self) -> dict[str, Any]:
        """Keyword arguments for ``Agent(...)``."""
        return {"tracer_provider": self.tracer_provider, "meter_provider": self.meter_provider}

    @property
    def spans_exported(self) -> int:
        """Spans the collector has accepted so far through tracedagent's own exporter (0 when
        the application's provider is used): what was delivered, not what was produced."""
        return sum(e.exported for e in self._exporters if e.signal == "traces")

    @property
    def spans_dropped(self) -> int:
        """Spans that ended and will not be exported: pushed out of the full queue, or ended after
        shutdown began (and, once shut down, those the flush had no time for). 0 without
        tracedagent's own exporter."""
        q = self._span_queue
        return 0 if q is None else q.evicted + q.refused + (q.queued if self._stopped else 0)

    def force_flush(self, timeout: float = N.DEFAULT_SHUTDOWN_TIMEOUT) -> bool:
        """Export what is pending now; ``False`` if that did not finish within ``timeout`` seconds
        (the flush then goes on in the background)."""
        return _within(timeout, lambda: self._flush_providers(timeout))

    def shutdown(self, timeout: float = N.DEFAULT_SHUTDOWN_TIMEOUT) -> bool:
        """Flush and stop tracedagent's providers, waiting at most ``timeout`` seconds.

        Returns ``False`` if the flush did not finish in time; what was still pending is
        then dropped. Providers the application installed are flushed, not shut down:
        they are the application's. Calling it again does nothing and returns ``True``.
        """
        with self._stop_lock:
            if self._stopped:
                return True
            self._stopped = True
        if any(self._owns):
            _sigterm.forget(self.shutdown)
        deadline = time.monotonic() + timeout
        for exporter in self._exporters:
            exporter.begin_closing(deadline)
        finished = _within(timeout, lambda: self._stop_providers(timeout))
        if not finished:
            report_hung(self._exporters, timeout)
            for exporter in self._exporters:
                exporter.close()  # aborts an export still waiting or retrying; its data is dropped
        if self._span_queue is not None:
            self._span_queue.report_dropped()
        return finished

    def _flush_providers(self, timeout: float) -> None:
        millis = int(timeout * 1000)
        _flush(self.tracer_provider, millis)
        _flush(self.meter_provider, millis)

    def _stop_providers(self, timeout: float) -> None:
        owns_tracer, owns_meter = self._owns
        millis = int(timeout * 1000)
        if owns_tracer:
            self.tracer_provider.shutdown()  # type: ignore[attr-defined]  # ours: an SDK provider
        else:
            _flush(self.tracer_provider, millis)
        if owns_meter:
            self.meter_provider.shutdown(timeout_millis=millis)  # type: ignore[attr-defined]
        else:
            _flush(self.meter_provider, millis)

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (f"<Telemetry service_name={self.service_name!r} protocol={self.protocol!r} "
                f"endpoint={self.endpoint!r}>")


def _flush(provider: object, millis: int) -> None:
    """Flush a provider that can be flushed (the API's no-op providers cannot)."""
    flush = getattr(provider, "force_flush", None)
    if flush is not None:
        flush(millis)


def _within(timeout: float, work: Callable[[], None]) -> bool:
    """Run ``work`` on a daemon thread and wait for it at most ``timeout`` seconds.

    The SDK's ``BatchSpanProcessor.shutdown`` waits up to 30 s and its ``force_flush``
    ignores its timeout; waiting on our own thread is what makes ``timeout`` a bound. If
    the interpreter refuses new threads (some Python 3.12 releases, at exit), the work
    runs inline, still bounded by the exporters' own deadlines.
    """
    done = threading.Event()

    def run() -> None:
        try:
            work()
        except Exception:  # an SDK flush or shutdown failing must not escape into the caller
            _log.debug("tracedagent: flushing telemetry failed", exc_info=True)
        finally:
            done.set()

    try:
        threading.Thread(target=run, name="tracedagent-telemetry-flush", daemon=True).start()
    except RuntimeError:
        run()
    return done.wait(max(0.0, timeout))


# --- configure ----------------------------------------------------------------------------

def configure(*, service_name: str | None = None, service_version: str | None = None, endpoint: str | None = None,
              protocol: str | None = None, headers: Mapping[str, str] | None = None,
              resource_attributes: Mapping[str, Any] | None = None,
              metrics: bool | None = None, metric_export_interval: float | None = None,
              export_timeout: float | None = None, handle_sigterm: bool | None = None,
              set_global: bool = True) -> Telemetry:
    """Export tracedagent's spans and metrics over OTLP; returns the handle that flushes them.

    Every argument is optional; ``None`` means "from the standard environment variable,
    else the default":

    * ``service_name``: ``OTEL_SERVICE_NAME``, ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES``,
      else ``"tracedagent"``.
    * ``service_version``: ``service.version`` on the resource (Jaeger shows it in the
      process panel), else ``service.version`` in ``OTEL_RESOURCE_ATTRIBUTES``, else none.
    * ``endpoint``: the collector's base URL. ``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT``
      and ``OTEL_EXPORTER_OTLP_ENDPOINT``, else ``http://127.0.0.1:4317``
      for gRPC or ``http://127.0.0.1:4318`` for HTTP. For HTTP, ``/v1/traces`` and
      ``/v1/metrics`` are appended to a base URL given here.
    * ``protocol``: ``"grpc"`` or ``"http/protobuf"``; ``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_PROTOCOL``,
      ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``"grpc"``.
    * ``headers``: sent with every export, merged over ``OTEL_EXPORTER_OTLP_[SIGNAL_]HEADERS``
      (keys are lower-cased, as gRPC requires). Never logged.
    * ``resource_attributes``: merged over ``OTEL_RESOURCE_ATTRIBUTES``.
    * ``metrics``: ``False`` exports no metrics; ``None`` exports them unless
      ``OTEL_METRICS_EXPORTER=none``.
    * Spans are exported unless ``OTEL_TRACES_EXPORTER=none``; then the tracer provider is
      still built (runs keep their trace ids) but has no exporter.
    * ``metric_export_interval`` (seconds): ``OTEL_METRIC_EXPORT_INTERVAL`` (ms), else 60 s.
    * ``export_timeout`` (seconds, per export, retries included):
      ``OTEL_EXPORTER_OTLP_[SIGNAL_]TIMEOUT`` (seconds, as the Python SDK reads it), else 2 s.
    * ``handle_sigterm``: on SIGTERM, flush (within the exit bound) before the process ends
      as SIGTERM ends it - only if the application set no handler of its own and this is
      the main thread. ``TRACEDAGENT_HANDLE_SIGTERM=false`` turns it off, else on.
    * ``set_global``: install the providers as OpenTelemetry's global ones (what ``Agent``
      uses by default). With ``False`` the pipeline is private: pass
      ``**telemetry.providers`` to ``Agent``; each such call builds a new pipeline.

    With ``set_global=True`` it is idempotent: a second call returns the first handle (and
    warns if it asked for different settings, and once if that handle was shut down: its
    providers drop spans, and OpenTelemetry's global providers cannot be replaced). If the
    application already installed a global tracer or meter provider, that provider is used
    as it is - one warning says so - and tracedagent adds no exporter to it.
    """
    if protocol is not None and protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, not {protocol!r}")
    settings = _Settings(service_name=service_name, service_version=service_version, endpoint=endpoint,
                         protocol=protocol, headers=dict(headers or {}),
                         resource_attributes=dict(resource_attributes or {}), metrics=metrics,
                         metric_export_interval=metric_export_interval, export_timeout=export_timeout,
                         handle_sigterm=handle_sigterm)
    if not set_global:
        return _build(settings, install=False)
    global _global, _warned_stopped
    with _lock:
        if _global is None:
            _global = _build(settings, install=True)
            return _global
        if _global._stopped and any(_global._owns) and not _warned_stopped:
            _warned_stopped = True
            _log.warning("tracedagent: the global telemetry pipeline was shut down; spans are dropped - "
                         "OpenTelemetry's global providers cannot be replaced in a process (shut it down only "
                         "at the end, or use configure(set_global=False) for a pipeline of your own)")
        changed = _global._settings.differences(settings)
        if changed:
            _log.warning("tracedagent: configure() was already called; keeping the first configuration "
                         "(this call asked for different %s)", ", ".join(changed))
        return _global


@dataclass(frozen=True, kw_only=True)
class _Settings:
    """What one ``configure()`` call asked for (``None``: left to the variables and defaults).

    Kept on the handle so that a second global call asking for something else is noticed;
    never shown, since ``headers`` may hold API keys.
    """

    service_name: str | None
    """The ``service_name`` argument."""
    service_version: str | None
    """The ``service_version`` argument."""
    endpoint: str | None
    """The ``endpoint`` argument."""
    protocol: str | None
    """The ``protocol`` argument."""
    headers: dict[str, str] = field(repr=False)
    """The ``headers`` argument (empty when none)."""
    resource_attributes: dict[str, Any]
    """The ``resource_attributes`` argument (empty when none)."""
    metrics: bool | None
    """The ``metrics`` argument."""
    metric_export_interval: float | None
    """The ``metric_export_interval`` argument, in seconds."""
    export_timeout: float | None
    """The ``export_timeout`` argument, in seconds."""
    handle_sigterm: bool | None
    """The ``handle_sigterm`` argument."""

    def differences(self, other: _Settings) -> list[str]:
        """The names of the settings ``other`` asks differently for (never their values)."""
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]


def _build(settings: _Settings, *, install: bool) -> Telemetry:
    metrics_on = metrics_wanted(settings.metrics)
    app_tracer = app_meter = None
    if install:
        app_tracer, app_meter = _installed_providers(metrics_on)
    builds_provider = app_tracer is None or (metrics_on and app_meter is None)
    resource = _resource(settings) if builds_provider else None

    def target(signal: str) -> ExportTarget:
        return export_target(signal, endpoint=settings.endpoint, protocol=settings.protocol, headers=settings.headers,
                             timeout=settings.export_timeout)

    # Only tracedagent's own providers get exporters; spans are kept even when not exported
    # (``OTEL_TRACES_EXPORTER=none``): runs keep their trace ids, for logs.
    traces_target = target("traces") if app_tracer is None and traces_wanted() else None
    metrics_target = target("metrics") if app_meter is None and metrics_on else None
    warn_about([t for t in (traces_target, metrics_target) if t is not None])
    collectors: dict[str, Collector] = {}  # exporters to one place share what they learn of it
    span_exporter = _exporter(traces_target, collectors) if traces_target else None
    metric_exporter = _exporter(metrics_target, collectors) if metrics_target else None

    tracer_provider: trace.TracerProvider
    span_queue: SpanQueue | None = None
    if app_tracer is not None:
        tracer_provider = app_tracer
    else:
        sdk_tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)  # our atexit bounds it
        if span_exporter is not None:
            span_queue = SpanQueue(span_exporter, where=traces_target.shown_url if traces_target else "?")
            sdk_tracer_provider.add_span_processor(span_queue)
        tracer_provider = sdk_tracer_provider

    meter_provider: metrics.MeterProvider
    if app_meter is not None:
        meter_provider = app_meter
    elif metric_exporter is None:
        meter_provider = metrics.NoOpMeterProvider()
    else:
        interval = None if settings.metric_export_interval is None else settings.metric_export_interval * 1000
        reader = PeriodicExportingMetricReader(metric_exporter, export_interval_millis=interval)
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)

    if install:
        if app_tracer is None:
            trace.set_tracer_provider(tracer_provider)
        if app_meter is None and metrics_on:
            metrics.set_meter_provider(meter_provider)
    return Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider,
                     service_name=str(resource.attributes[SERVICE_NAME]) if resource else None,
                     endpoint=traces_target.shown_url if traces_target else None,
                     protocol=traces_target.protocol if traces_target else None,
                     owns_tracer_provider=app_tracer is None, owns_meter_provider=app_meter is None and metrics_on,
                     exporters=[e for e in (span_exporter, metric_exporter) if e is not None], settings=settings,
                     span_queue=span_queue)


def _exporter(target: ExportTarget, collectors: dict[str, Collector]) -> GuardedExporter | None:
    """The guarded SDK exporter for ``target``; ``None``, with one warning, if the SDK cannot
    build one (a variable it reads that tracedagent does not, such as a credential provider
    that is not installed): the application must not fail because its telemetry did."""
    try:
        return guarded_exporter(target, collectors)
    except Exception as exc:
        _log.warning("tracedagent: the SDK could not build the %s exporter (%s: %s); %s are not exported",
                     target.signal, type(exc).__name__, redact(str(exc), target.secrets)[:300], target.signal)
        return None


def _installed_providers(metrics_on: bool) -> tuple[trace.TracerProvider | None, metrics.MeterProvider | None]:
    """The global providers the application already installed (``None`` where it did not)."""
    tracer_provider = trace.get_tracer_provider()
    meter_provider = metrics.get_meter_provider()
    app_tracer = None if isinstance(tracer_provider, trace.ProxyTracerProvider) else tracer_provider
    app_meter = None if isinstance(meter_provider, _ProxyMeterProvider) or not metrics_on else meter_provider
    found = [f"{kind} ({type(p).__name__})" for kind, p in (("TracerProvider", app_tracer),
                                                            ("MeterProvider", app_meter)) if p is not None]
    if found:
        _log.warning("tracedagent: the application already installed a global %s; configure() uses it "
                     "as it is and adds no exporter to it", " and a global ".join(found))
    return app_tracer, app_meter


def _resource(settings: _Settings) -> Resource:
    return resource_for(settings.service_name, settings.service_version, settings.resource_attributes)


def resource_for(service_name: str | None = None, service_version: str | None = None,
                 resource_attributes: Mapping[str, Any] | None = None) -> Resource:
    """The resource ``configure()`` gives its providers: arguments over ``OTEL_SERVICE_NAME`` /
    ``OTEL_RESOURCE_ATTRIBUTES`` (merged by the SDK's ``Resource.create``), over tracedagent's
    default service name. The command line resolves ``--service`` with it too."""
    attributes = dict(resource_attributes or {})
    if service_version is not None:
        attributes[SERVICE_VERSION] = service_version
    if service_name is not None:
        attributes[SERVICE_NAME] = service_name
    elif SERVICE_NAME not in attributes and not OTELResourceDetector().detect().attributes.get(SERVICE_NAME):
        attributes[SERVICE_NAME] = N.DEFAULT_SERVICE_NAME
    return Resource.create(attributes)


