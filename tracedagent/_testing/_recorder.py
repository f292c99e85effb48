"""``Recorder``: every span and metric an agent emits, kept in memory for a test to query."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Iterator

from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, MetricsData
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ._capture import GlobalCapture
from ._match import attributes_match, find_spans
from ._views import RunView, is_run_span

__all__ = ["Recorder"]


class Recorder:
    """Private SDK providers that keep every span and metric in memory, and optionally
    the same for agents that use the global providers.

    Two ways to point an agent at it:

    - ``Agent(..., **recorder.providers)``: the agent uses this recorder's own
      ``TracerProvider`` and ``MeterProvider``; nothing global is touched.
    - ``with Recorder() as recorder:`` (or the ``tracedagent_recorder`` pytest fixture):
      also records agents created *without* providers, which use OpenTelemetry's global
      ones. See ``tracedagent._testing._capture`` for how that works although the global
      providers can be set only once per process.

    Queries: ``spans()``, ``span()``, ``runs()``, ``only_run()``, ``metric()``,
    ``histogram_sum()``, ``log_records()`` (what reached its ``logger_provider``: the
    evaluation events of ``tracedagent.evals``). Keyword arguments name attributes by the alias rule of
    ``ATTRIBUTE_ALIASES`` (``stop_reason=``, ``tool_name=``, ...) or by exact key.
    """

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        """Receives finished spans from both the private and (while started) the global provider."""
        # shutdown_on_exit=False: a test suite makes thousands of recorders, and an atexit
        # hook per provider would keep every one of them (and its spans) alive.
        self.tracer_provider = TracerProvider(shutdown_on_exit=False)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.metric_reader = InMemoryMetricReader()
        """Reads the private ``meter_provider``."""
        self.meter_provider = MeterProvider(metric_readers=[self.metric_reader], shutdown_on_exit=False)
        self.log_exporter = InMemoryLogRecordExporter()
        """Receives the log records of the private ``logger_provider`` (the global one is not captured)."""
        self.logger_provider = LoggerProvider(shutdown_on_exit=False)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.log_exporter))
        self._global_reader = InMemoryMetricReader()
        self._capture: GlobalCapture | None = None
        self._global_metrics: MetricsData | None = None
        """The global reader's last data, kept when ``stop()`` detaches it."""
        self._used = False

    @property
    def providers(self) -> dict[str, Any]:
        """``tracer_provider`` and ``meter_provider``, for ``Agent(..., **recorder.providers)``."""
        return {"tracer_provider": self.tracer_provider, "meter_provider": self.meter_provider}

    # --- global capture ----------------------------------------------------------------------

    def start(self) -> Recorder:
        """Also record spans and metrics sent to the global providers, until ``stop()``.

        Installs the process-wide capture on first use (an SDK ``TracerProvider`` and
        ``MeterProvider`` become the global ones if none was set). A recorder starts once.
        """
        if self._used:
            raise RuntimeError("a Recorder can be started once; make a new Recorder for a new capture")
        self._used = True
        self._capture = GlobalCapture(self.exporter, self._global_reader)
        return self

    def stop(self) -> None:
        """Stop recording the global providers; what was recorded stays queryable."""
        if self._capture is None:
            return
        if self._capture.captures_metrics:
            self._global_metrics = self._global_reader.get_metrics_data()
        self._capture.close()
        self._capture = None

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def capturing_global(self) -> bool:
        """Whether spans sent to the global TracerProvider are being recorded right now."""
        return self._capture is not None and self._capture.captures_spans

    # --- spans and runs ------------------------------------------------------------------------

    def spans(self, name: str | None = None, **attributes: Any) -> list[ReadableSpan]:
        """Finished spans in the order they ended, optionally only those with this exact
        name and these attributes: ``recorder.spans("step", step_index=0)``."""
        return find_spans(self.exporter.get_finished_spans(), name, **attributes)

    def span(self, name: str | None = None, **attributes: Any) -> ReadableSpan:
        """The one span matching; fails, listing what was recorded, unless exactly one does."""
        __tracebackhide__ = True
        found = self.spans(name, **attributes)
        if len(found) != 1:
            wanted = {"name": name, **attributes} if name is not None else attributes
            raise AssertionError(f"expected exactly one span matching {wanted}, found {len(found)}\n"
                                 f"spans recorded: {[s.name for s in self.spans()]}")
        return found[0]

    def runs(self, **attributes: Any) -> list[RunView]:
        """One view per ``invoke_agent`` span whose attributes match, in the order the runs
        ended: ``recorder.runs(stop_reason="answered")``."""
        spans = self.spans()
        return [RunView(span, spans) for span in spans if is_run_span(span)
                and attributes_match(span.attributes, attributes)]

    def only_run(self, **attributes: Any) -> RunView:
        """The single run recorded (matching ``attributes``); fails unless there is exactly one.
        A team counts as one run: its sub-agents' runs are in ``RunView.sub_runs``."""
        __tracebackhide__ = True
        runs = self.runs(**attributes)
        if len(runs) > 1:
            nested = {sub.span.context.span_id for run in runs for sub in run.sub_runs}
            runs = [run for run in runs if run.span.context.span_id not in nested]
        if len(runs) != 1:
            found = "\n".join(f"  {run!r}" for run in self.runs()) or "  (no run spans)"
            hint = ("" if self.capturing_global else
                    "\nThis recorder only sees agents given **recorder.providers; start it (or use the "
                    "tracedagent_recorder fixture) to record agents that use the global providers.")
            raise AssertionError(f"expected exactly one run{' matching ' + repr(attributes) if attributes else ''}, "
                                 f"found {len(runs)}; runs recorded:\n{found}{hint}")
        return runs[0]

    def clear(self) -> None:
        """Forget the spans recorded so far (metrics are cumulative and are kept)."""
        self.exporter.clear()

    def log_records(self, event_name: str | None = None) -> list[ReadableLogRecord]:
        """Log records emitted to ``logger_provider``, in order; only those of ``event_name`` if given."""
        return [r for r in self.log_exporter.get_finished_logs()
                if event_name is None or r.log_record.event_name == event_name]

    # --- metrics -------------------------------------------------------------------------------

    def _metrics_data(self) -> Iterator[MetricsData]:
        yield from filter(None, [self.metric_reader.get_metrics_data()])
        if self._capture is not None and self._capture.captures_metrics:
            yield from filter(None, [self._global_reader.get_metrics_data()])
        elif self._global_metrics is not None:
            yield self._global_metrics

    def _points(self, name: str, labels: dict[str, Any]) -> Iterator[Any]:
        for data in self._metrics_data():
            for resource_metrics in data.resource_metrics:
                for scope in resource_metrics.scope_metrics:
                    for metric in scope.metrics:
                        if metric.name == name:
                            yield from (p for p in metric.data.data_points
                                        if attributes_match(p.attributes, labels))

    def metric(self, name: str, /, **labels: Any) -> float:
        """A counter's sum, or a histogram's count, over the points whose labels match:
        ``recorder.metric("tracedagent.runs", stop_reason="answered")``. Zero when the
        metric was never recorded. Labels follow the alias rule (no suffix matching)."""
        total = 0.0
        for point in self._points(name, labels):
            total += point.count if isinstance(point, HistogramDataPoint) else point.value
        return total

    def histogram_sum(self, name: str, /, **labels: Any) -> float:
        """The sum of a histogram's recorded values over matching points (e.g. tokens)."""
        return sum(p.sum for p in self._points(name, labels) if isinstance(p, HistogramDataPoint))
