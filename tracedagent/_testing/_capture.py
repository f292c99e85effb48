"""Capturing what agents send to the *global* OpenTelemetry providers, one recorder at a time.

OpenTelemetry lets a process set its global ``TracerProvider`` and ``MeterProvider`` once;
later ``set_*_provider`` calls are ignored with a warning. So a test toolkit cannot hand
each test a fresh global provider. Instead, the first recorder that asks for global
capture installs one process-wide span processor, the *router*, and every recorder
registers its exporter with the router while it is active:

- no global ``TracerProvider`` set yet: an SDK ``TracerProvider`` carrying the router
  becomes the global one (for the rest of the process);
- the application already set an SDK ``TracerProvider``: the router is added to it, and
  the application's own processors and exporters keep working;
- anything else (a no-op or a vendor's non-SDK provider) cannot be captured, and a
  ``GlobalCaptureWarning`` says so.

A span belongs to the recorders that were active when it *started* and is handed to them
when it ends, so a test sees only its own spans even if a thread left over from an
earlier test ends a span late.

Metrics cannot be routed that way (a measurement is not tied to a recorder), but the SDK
(1.43 and later, the lowest tracedagent allows) can add and remove a ``MetricReader`` on a
live ``MeterProvider`` (``add_metric_reader``): each active recorder attaches its own
``InMemoryMetricReader`` and so sees exactly the measurements made while it was attached.
With a non-SDK global ``MeterProvider``, global metrics are not captured and a warning says
so; metrics of agents given ``recorder.providers`` are always captured.

Nothing here runs at import time: loading ``tracedagent.testing`` or the pytest plugin
changes no global provider until a recorder is started.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any, Callable

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["GlobalCapture", "GlobalCaptureWarning"]


class GlobalCaptureWarning(UserWarning):
    """Spans or metrics sent to the global providers cannot be captured in this process."""


class _Router(SpanProcessor):
    """Hands each finished span to the exporters that were registered when it started."""

    def __init__(self) -> None:
        self._exporters: tuple[SpanExporter, ...] = ()
        """Replaced, never mutated, so ``on_start`` can read it without the lock."""
        self._owners: dict[tuple[int, int], tuple[SpanExporter, ...]] = {}
        """In-flight spans → their exporters (a span that never ends stays here)."""

    def add(self, exporter: SpanExporter) -> None:
        self._exporters = (*self._exporters, exporter)

    def remove(self, exporter: SpanExporter) -> None:
        self._exporters = tuple(e for e in self._exporters if e is not exporter)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self._exporters:
            self._owners[_key(span)] = self._exporters

    def on_end(self, span: ReadableSpan) -> None:
        for exporter in self._owners.pop(_key(span), ()):
            exporter.export((span,))

    def shutdown(self) -> None:
        self._owners.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # export is synchronous: nothing is ever pending


def _key(span: ReadableSpan) -> tuple[int, int]:
    context = span.get_span_context()
    return (context.trace_id, context.span_id)


_lock = threading.Lock()
_router = _Router()
_routed_provider: SdkTracerProvider | None = None
"""The global TracerProvider the router was added to (the router is added once)."""
_install_tried: set[type] = set()
_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, GlobalCaptureWarning, stacklevel=4)


def _global_sdk_provider(get: Callable[[], Any], set_: Callable[[Any], None], sdk_type: type,
                         signal: str) -> Any:
    """The global provider if it is an SDK one; the first call per signal installs a new
    ``sdk_type()`` if none is. ``None`` (warned once) when the global one is not an SDK one.

    ``set_`` is ignored by OpenTelemetry when a provider was already set, so the answer is
    always read back rather than assumed; trying only once keeps OpenTelemetry from
    logging "Overriding ... is not allowed" for every test when the user set a non-SDK one.
    """
    if not isinstance(get(), sdk_type) and sdk_type not in _install_tried:
        _install_tried.add(sdk_type)
        set_(sdk_type())
    provider = get()
    if isinstance(provider, sdk_type):
        return provider
    _warn_once(f"tracedagent: the global {sdk_type.__name__} is a {type(provider).__name__}, "
               f"not an OpenTelemetry SDK {sdk_type.__name__}, so {signal} of agents that use the global "
               "provider cannot be recorded; pass **recorder.providers to the Agent instead")
    return None


def _install_router() -> bool:
    """Put the router on the global TracerProvider; False when that is impossible."""
    global _routed_provider
    provider = _global_sdk_provider(trace.get_tracer_provider, trace.set_tracer_provider,
                                    SdkTracerProvider, "spans")
    if provider is None:
        return False
    if provider is not _routed_provider:
        provider.add_span_processor(_router)
        _routed_provider = provider
    return True


def _global_meter_provider() -> SdkMeterProvider | None:
    """The global SDK MeterProvider, to attach readers to; None (warned) if there is none."""
    return _global_sdk_provider(metrics.get_meter_provider, metrics.set_meter_provider,
                                SdkMeterProvider, "metrics")


class GlobalCapture:
    """One recorder's registration with the global providers, until ``close()``."""

    def __init__(self, exporter: SpanExporter, reader: MetricReader) -> None:
        self._exporter = exporter
        self._reader = reader
        with _lock:
            self.captures_spans = _install_router()
            """Whether spans sent to the global TracerProvider reach ``exporter``."""
            if self.captures_spans:
                _router.add(exporter)
            self._meter_provider = _global_meter_provider()
            if self._meter_provider is not None:
                self._meter_provider.add_metric_reader(reader)

    @property
    def captures_metrics(self) -> bool:
        """Whether measurements made on the global MeterProvider reach ``reader``."""
        return self._meter_provider is not None

    def close(self) -> None:
        """Stop capturing; the reader is detached (and shut down by the SDK)."""
        with _lock:
            _router.remove(self._exporter)
            if self._meter_provider is not None:
                self._meter_provider.remove_metric_reader(self._reader)
                self._meter_provider = None

