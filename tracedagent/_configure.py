"""``configure()``: the one place tracedagent touches the OpenTelemetry SDK for export.

It builds a ``TracerProvider`` (batching spans to an OTLP exporter) and a ``MeterProvider``
(a periodic reader on an OTLP exporter), installs them globally, and returns a
``Telemetry`` handle whose ``shutdown(timeout)`` flushes them.

Four decisions shape it:

* **The SDK reads its own variables.** An argument wins; otherwise a setting is left to
  the SDK exporter, which already reads ``OTEL_EXPORTER_OTLP_*`` (including the
  per-signal ``TRACES_``/``METRICS_`` forms), ``OTEL_BSP_*`` and ``OTEL_METRIC_EXPORT_*``.
  tracedagent supplies only what the SDK has no variable-free answer for: the protocol
  (the SDK's exporters are one class per protocol), 127.0.0.1 instead of ``localhost``
  when nothing names an endpoint, a service name, and a shorter export timeout.
* **Never replace what the application installed.** OpenTelemetry's global providers can
  be set once per process; if the application got there first, its provider is used as
  is, with one warning, and nothing is added to it.
* **A missing collector costs at most about 2 s at exit.** The SDK's defaults wait 7-8 s
  at exit for 10 pending spans and 30 s for 5,000 when nothing listens, and 10 s when
  the collector hangs (``benchmarks/exit_time.py``). Here each export is bounded
  (``export_timeout``), exports are dropped at once during shutdown when the collector is
  known to be down, and the shutdown itself runs on a helper thread that the caller waits
  for at most ``timeout`` seconds (1.5 s at exit), after which the exporters are closed,
  which aborts their retries and drops what was still pending.
* **One warning per outage, not one error per batch.** Each exporter is wrapped in a
  small delegating exporter that turns a failed export into one WARNING on the
  ``tracedagent`` logger (and one INFO when exports succeed again), and silences the SDK
  exporter's own per-batch records - only on the thread, and only for the duration, of
  one of these exports, so other exporters in the process still log as usual.

Headers (which may carry API keys) are passed to the exporters and nowhere else: they
are never logged, and ``Telemetry`` does not show them.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence
from urllib.parse import SplitResult, urlsplit

from opentelemetry import metrics, trace
from opentelemetry.metrics._internal import _ProxyMeterProvider  # the "nothing installed yet" global
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.util.re import parse_env_headers

from . import _names as N
from ._secrets import redact

__all__ = ["ExportTarget", "Telemetry", "configure", "export_target", "metrics_wanted", "secret_values",
           "split_url", "traces_wanted", "without_credentials"]

_log = logging.getLogger("tracedagent")

_PROTOCOLS = (N.PROTOCOL_GRPC, N.PROTOCOL_HTTP)
_SIGNAL_ENV = {
    # signal: (protocol, endpoint, headers, timeout) variables, signal-specific first
    "traces": (N.ENV_OTLP_TRACES_PROTOCOL, N.ENV_OTLP_TRACES_ENDPOINT, N.ENV_OTLP_TRACES_HEADERS,
               N.ENV_OTLP_TRACES_TIMEOUT),
    "metrics": (N.ENV_OTLP_METRICS_PROTOCOL, N.ENV_OTLP_METRICS_ENDPOINT, N.ENV_OTLP_METRICS_HEADERS,
                N.ENV_OTLP_METRICS_TIMEOUT),
}
_HTTP_PATH = {"traces": N.HTTP_TRACES_PATH, "metrics": N.HTTP_METRICS_PATH}

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
    ``shutdown`` also runs at interpreter exit, with a 1.5 s bound so that the whole exit,
    interpreter teardown included, waits at most about 2 s more than without telemetry.
    """

    def __init__(self, *, tracer_provider: trace.TracerProvider, meter_provider: metrics.MeterProvider,
                 service_name: str | None, endpoint: str | None, protocol: str | None,
                 owns_tracer_provider: bool, owns_meter_provider: bool,
                 exporters: Sequence[_GuardedExporter], settings: tuple[Any, ...]) -> None:
        self.tracer_provider = tracer_provider
        """The provider spans go to: tracedagent's own, or the one the application installed."""
        self.meter_provider = meter_provider
        """The provider metrics go to (a no-op one when metrics are off)."""
        self.service_name = service_name
        """``service.name`` of tracedagent's own providers; ``None`` if it built none."""
        self.endpoint = endpoint
        """Where tracedagent's span exporter sends (the full URL for HTTP, without credentials);
        ``None`` if it has none."""
        self.protocol = protocol
        """``"grpc"`` or ``"http/protobuf"`` for that exporter; ``None`` if it has none."""
        self._owns = (owns_tracer_provider, owns_meter_provider)
        self._exporters = tuple(exporters)
        self._settings = settings  # to notice a second configure() asking for something else; never shown
        self._stopped = False
        self._stop_lock = threading.Lock()
        if any(self._owns):
            atexit.register(self._shutdown_at_exit)

    @property
    def providers(self) -> dict[str, Any]:
        """Keyword arguments for ``Agent(...)``."""
        return {"tracer_provider": self.tracer_provider, "meter_provider": self.meter_provider}

    @property
    def spans_exported(self) -> int:
        """Spans the collector has accepted so far through tracedagent's own exporter (0 when
        the application's provider is used): what was delivered, not what was produced."""
        return sum(e.exported for e in self._exporters if isinstance(e, _SpanExporter))

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
            atexit.unregister(self._shutdown_at_exit)
        deadline = time.monotonic() + timeout
        for exporter in self._exporters:
            exporter.begin_closing(deadline)
        finished = _within(timeout, lambda: self._stop_providers(timeout))
        if not finished:
            for exporter in self._exporters:
                exporter.collector.failed(f"no answer within {timeout:g} s of shutdown")  # a hung collector
                exporter.close()  # aborts an export still waiting or retrying; its data is dropped
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

    def _shutdown_at_exit(self) -> None:
        self.shutdown(N.EXIT_FLUSH_TIMEOUT)

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

def configure(*, service_name: str | None = None, endpoint: str | None = None, protocol: str | None = None,
              headers: Mapping[str, str] | None = None, resource_attributes: Mapping[str, Any] | None = None,
              metrics: bool | None = None, metric_export_interval: float | None = None,
              export_timeout: float | None = None, set_global: bool = True) -> Telemetry:
    """Export tracedagent's spans and metrics over OTLP; returns the handle that flushes them.

    Every argument is optional; ``None`` means "from the standard environment variable,
    else the default":

    * ``service_name``: ``OTEL_SERVICE_NAME``, ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES``,
      else ``"tracedagent"``.
    * ``endpoint``: the collector's base URL. ``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT``
      and ``OTEL_EXPORTER_OTLP_ENDPOINT`` (read by the SDK), else ``http://127.0.0.1:4317``
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
    * ``set_global``: install the providers as OpenTelemetry's global ones (what ``Agent``
      uses by default). With ``False`` the pipeline is private: pass
      ``**telemetry.providers`` to ``Agent``; each such call builds a new pipeline.

    With ``set_global=True`` it is idempotent: a second call returns the first handle (and
    warns if it asked for different settings, and once if that handle was shut down: its
    providers drop spans, and OpenTelemetry's global providers cannot be replaced). If the application already installed a
    global tracer or meter provider, that provider is used as it is - one warning says
    so - and tracedagent adds no exporter to it.
    """
    if protocol is not None and protocol not in _PROTOCOLS:
        raise ValueError(f"protocol must be one of {_PROTOCOLS}, not {protocol!r}")
    settings = (service_name, endpoint, protocol, dict(headers or {}), dict(resource_attributes or {}),
                metrics, metric_export_interval, export_timeout)
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
        if _global._settings != settings:
            changed = [name for name, old, new in zip(_SETTING_NAMES, _global._settings, settings) if old != new]
            _log.warning("tracedagent: configure() was already called; keeping the first configuration "
                         "(this call asked for different %s)", ", ".join(changed))
        return _global


_SETTING_NAMES = ("service_name", "endpoint", "protocol", "headers", "resource_attributes", "metrics",
                  "metric_export_interval", "export_timeout")


def _build(settings: tuple[Any, ...], *, install: bool) -> Telemetry:
    (service_name, endpoint, protocol, headers, resource_attributes, metrics_on, metric_export_interval,
     export_timeout) = settings
    metrics_on = metrics_wanted(metrics_on)
    traces_on = traces_wanted()

    app_tracer = app_meter = None
    if install:
        app_tracer, app_meter = _installed_providers(metrics_on)
    builds_provider = app_tracer is None or (metrics_on and app_meter is None)
    resource = _resource(service_name, resource_attributes) if builds_provider else None
    collectors: dict[str, _Collector] = {}
    exporters: list[_GuardedExporter] = []
    where: tuple[str, str] | None = None

    tracer_provider: trace.TracerProvider
    if app_tracer is not None:
        tracer_provider = app_tracer
    else:
        sdk_tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)  # our atexit bounds it
        if traces_on:  # off: spans still get trace ids (for logs), and go nowhere
            span_exporter, url, traces_protocol = _exporter("traces", protocol, endpoint, headers, export_timeout,
                                                            collectors)
            exporters.append(span_exporter)
            where = (url, traces_protocol)
            sdk_tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
        tracer_provider = sdk_tracer_provider

    meter_provider: metrics.MeterProvider
    if app_meter is not None:
        meter_provider = app_meter
    elif not metrics_on:
        meter_provider = metrics.NoOpMeterProvider()
    else:
        metric_exporter, _, _ = _exporter("metrics", protocol, endpoint, headers, export_timeout, collectors)
        exporters.append(metric_exporter)
        interval = None if metric_export_interval is None else metric_export_interval * 1000
        reader = PeriodicExportingMetricReader(metric_exporter, export_interval_millis=interval)
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)

    if install:
        if app_tracer is None:
            trace.set_tracer_provider(tracer_provider)
        if app_meter is None and metrics_on:
            metrics.set_meter_provider(meter_provider)
    return Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider,
                     service_name=str(resource.attributes[SERVICE_NAME]) if resource else None,
                     endpoint=where[0] if where else None, protocol=where[1] if where else None,
                     owns_tracer_provider=app_tracer is None, owns_meter_provider=app_meter is None and metrics_on,
                     exporters=exporters, settings=settings)


def metrics_wanted(metrics: bool | None) -> bool:
    """The ``metrics`` argument, else on unless ``OTEL_METRICS_EXPORTER=none``."""
    if metrics is not None:
        return metrics
    return os.environ.get(N.ENV_METRICS_EXPORTER, "").strip().lower() != "none"


def traces_wanted() -> bool:
    """Spans are exported unless ``OTEL_TRACES_EXPORTER=none``, which (as in the SDK's own
    auto-configuration) keeps the tracer provider and drops only its exporter."""
    return os.environ.get(N.ENV_TRACES_EXPORTER, "").strip().lower() != "none"


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


def _resource(service_name: str | None, attributes: Mapping[str, Any]) -> Resource:
    """Arguments over ``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES`` (merged by the SDK's
    ``Resource.create``), over tracedagent's default service name."""
    attributes = dict(attributes)
    if service_name is not None:
        attributes[SERVICE_NAME] = service_name
    elif SERVICE_NAME not in attributes and not OTELResourceDetector().detect().attributes.get(SERVICE_NAME):
        attributes[SERVICE_NAME] = N.DEFAULT_SERVICE_NAME
    return Resource.create(attributes)


@dataclass(frozen=True, kw_only=True)
class ExportTarget:
    """Where one signal's OTLP exporter sends, as ``configure()`` resolves it.

    ``configure`` builds its exporters from these, and ``tracedagent doctor`` checks them,
    so the two can never disagree about where telemetry goes.
    """

    signal: str
    """``"traces"`` or ``"metrics"``."""
    protocol: str
    """``"grpc"`` or ``"http/protobuf"``."""
    url: str
    """Where exports go: for HTTP the full signal URL (``.../v1/traces``). It may carry
    ``user:password@``; show it only through ``without_credentials``."""
    sdk_endpoint: str | None
    """What ``configure`` passes to the SDK exporter: ``None`` when a variable names the
    endpoint, which the SDK then reads itself."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The headers of ``OTEL_EXPORTER_OTLP_[SIGNAL_]HEADERS`` (they may hold API keys: never shown)."""
    endpoint_named: bool
    """An argument or variable named the endpoint (``False``: tracedagent's default)."""
    protocol_named: bool
    """An argument or variable named the protocol (``False``: the default, gRPC)."""


def export_target(signal: str, *, endpoint: str | None = None, protocol: str | None = None) -> ExportTarget:
    """Where ``configure(endpoint=..., protocol=...)`` sends ``signal`` (``"traces"`` or ``"metrics"``):
    an argument, else the standard variables, else tracedagent's default.

    Raises ``ValueError`` naming the argument or variable when the endpoint is not a URL.
    """
    protocol_env, endpoint_env, headers_env, _ = _SIGNAL_ENV[signal]
    env_protocol = None if protocol else _protocol_from_env(protocol_env)
    resolved = protocol or env_protocol or N.DEFAULT_PROTOCOL
    http = resolved == N.PROTOCOL_HTTP

    def signal_url(base: str) -> str:
        return f"{base.rstrip('/')}/{_HTTP_PATH[signal]}" if http else base

    # What to pass: an argument, else nothing when a variable names the endpoint (the SDK
    # reads it, appending the signal path to a base URL), else tracedagent's default.
    sdk_endpoint: str | None
    if endpoint:
        source, sdk_endpoint = "endpoint", signal_url(endpoint)
        url = sdk_endpoint
    elif os.environ.get(endpoint_env):
        source, sdk_endpoint, url = endpoint_env, None, os.environ[endpoint_env]
    elif os.environ.get(N.ENV_OTLP_ENDPOINT):
        source, sdk_endpoint, url = N.ENV_OTLP_ENDPOINT, None, signal_url(os.environ[N.ENV_OTLP_ENDPOINT])
    else:
        source, sdk_endpoint = "the default", signal_url(N.DEFAULT_HTTP_ENDPOINT if http else N.DEFAULT_GRPC_ENDPOINT)
        url = sdk_endpoint
    try:
        split_url(url)
    except ValueError as exc:  # say where the bad URL came from, not what it is: it may hold credentials
        raise ValueError(f"{source} is {exc}") from None
    headers = parse_env_headers(os.environ.get(headers_env) or os.environ.get(N.ENV_OTLP_HEADERS, ""), liberal=True)
    return ExportTarget(signal=signal, protocol=resolved, url=url, sdk_endpoint=sdk_endpoint, headers=headers,
                        endpoint_named=bool(endpoint) or sdk_endpoint is None,
                        protocol_named=bool(protocol) or env_protocol is not None)


def _exporter(signal: str, protocol: str | None, endpoint: str | None, headers: Mapping[str, str],
              export_timeout: float | None, collectors: dict[str, _Collector]) -> tuple[_GuardedExporter, str, str]:
    """One signal's OTLP exporter, wrapped; also the URL it sends to and its protocol."""
    target = export_target(signal, endpoint=endpoint, protocol=protocol)
    merged_headers: dict[str, str] | None = None
    if headers:  # the gRPC exporter would otherwise drop the variable's headers, not merge them
        merged_headers = {**target.headers, **{k.lower(): v for k, v in headers.items()}}

    _, _, _, timeout_env = _SIGNAL_ENV[signal]
    timeout = export_timeout
    if timeout is None and not (os.environ.get(timeout_env) or os.environ.get(N.ENV_OTLP_TIMEOUT)):
        timeout = N.DEFAULT_EXPORT_TIMEOUT

    inner = _sdk_exporter(signal, target.protocol == N.PROTOCOL_HTTP, target.sdk_endpoint, merged_headers, timeout)
    collector = collectors.setdefault(_display(target.url), _Collector(_display(target.url)))
    collector.secrets.update(secret_values(target.url, merged_headers if merged_headers is not None else target.headers))
    wrapper: _GuardedExporter = _SpanExporter(inner, collector) if signal == "traces" else _MetricExporter(inner, collector)
    return wrapper, without_credentials(target.url), target.protocol


def _protocol_from_env(signal_variable: str) -> str | None:
    """The protocol a variable names (a wrong value is warned about and means the default);
    ``None`` when neither variable is set."""
    for variable in (signal_variable, N.ENV_OTLP_PROTOCOL):
        value = os.environ.get(variable, "").strip()
        if value:
            if value in _PROTOCOLS:
                return value
            _log.warning("tracedagent: %s=%r is not one of %s; using %s", variable, value, _PROTOCOLS,
                         N.DEFAULT_PROTOCOL)
            return N.DEFAULT_PROTOCOL
    return None


def _sdk_exporter(signal: str, http: bool, url: str | None, headers: dict[str, str] | None,
                  timeout: float | None) -> Any:
    """The SDK's own exporter; imported here so that only the chosen protocol's stack loads."""
    if http:
        if signal == "traces":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans
            return HttpSpans(endpoint=url, headers=headers, timeout=timeout)
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetrics
        return HttpMetrics(endpoint=url, headers=headers, timeout=timeout)
    if signal == "traces":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
        return GrpcSpans(endpoint=url, headers=headers, timeout=timeout)
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetrics
    return GrpcMetrics(endpoint=url, headers=headers, timeout=timeout)


def secret_values(url: str, headers: Mapping[str, str]) -> set[str]:
    """What an SDK error message must not carry into our log: header values and URL credentials
    (``_secrets.redact`` blanks those long enough to be secrets)."""
    parts = split_url(url)
    found = set(headers.values())
    found.update(part for part in (parts.username, parts.password) if part)
    return found


def split_url(url: str) -> SplitResult:
    """``url`` in parts, ``http://`` assumed when it names no scheme: an OTLP gRPC endpoint is
    often written ``host:4317``, and ``urlsplit`` would take ``host`` for the scheme.

    Raises ``ValueError`` when ``url`` is not one (an unclosed IPv6 ``[``, a port out of
    range...), with a message that quotes no part of it: it may hold credentials.
    """
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
    except ValueError:
        raise ValueError("not a usable URL (expected scheme://host:port)") from None
    try:
        parts.port  # urlsplit checks the port only when it is read
    except ValueError:
        raise ValueError("not a usable URL (its port is not a number from 0 to 65535)") from None
    return parts


def without_credentials(url: str) -> str:
    """``url`` without its ``user:password@``, if it has one."""
    parts = split_url(url)
    if not (parts.username or parts.password):
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def _display(url: str) -> str:
    """``scheme://host:port`` of a URL, for messages: no path, and no user:password@."""
    parts = split_url(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


# --- the exporters' wrapper ---------------------------------------------------------------

class _Collector:
    """Whether one collector is reachable, as its span and metric exporters find out.

    The first failed export logs one WARNING; the first success after that, one INFO.
    """

    def __init__(self, where: str) -> None:
        self.where = where
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
        _log.warning("tracedagent: cannot reach the collector at %s (%s); spans are being dropped; start it "
                     "with `make stack-up` or `docker compose up -d` (`tracedagent doctor` checks every endpoint)",
                     self.where, reason or "export failed")

    def succeeded(self) -> None:
        with self._lock:
            if not self.down:
                return
            self.down = False
        _log.info("tracedagent: reconnected to the collector at %s; exporting again", self.where)


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


class _GuardedExporter:
    """Delegates to an SDK exporter; reports outages once; bounds exports during shutdown."""

    def _guard(self, inner: Any, collector: _Collector) -> None:
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


class _SpanExporter(_GuardedExporter, SpanExporter):
    def __init__(self, inner: SpanExporter, collector: _Collector) -> None:
        self._guard(inner, collector)
        self.exported = 0
        """Spans in exports the collector accepted (``Telemetry.spans_exported``)."""
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


class _MetricExporter(_GuardedExporter, MetricExporter):
    def __init__(self, inner: MetricExporter, collector: _Collector) -> None:
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
