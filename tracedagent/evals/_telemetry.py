"""Grades in the telemetry: each grade a short ``evaluate {grader}`` span under the graded run's
span (in its trace, although that span has ended: parented by its ``SpanContext``), carrying
semconv's ``gen_ai.evaluation.result`` as a span event (Jaeger shows span events, not log
records), your own run attributes, and two metrics: grades by grader and passed, and scores.
The same event also goes out as the log record semconv defines it as (``_log_event``), in the
evaluation span's context, through the logs API: exported wherever a ``LoggerProvider`` is set
(none set: the API's no-op one, which costs nothing).

Grading a recorded run again adds new grade spans to its trace beside the old ones: each grade
span is one grading, stamped with its own time. Telemetry never fails an evaluation.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from opentelemetry import _logs, metrics, trace
from opentelemetry.trace import NonRecordingSpan, Status, StatusCode

from .._core import _names as N
from .._version import __version__
from ._grade import Grade, GradedRun, Grader

__all__ = ["GradeTelemetry"]

_log = logging.getLogger(__name__)


def _cut(text: str) -> str:
    limit = N.MAX_EXPLANATION_LENGTH
    return text if len(text) <= limit else text[: limit - len(N.TRUNCATION_MARK)] + N.TRUNCATION_MARK


class GradeTelemetry:
    """Where grades are reported: the given providers, or OpenTelemetry's global ones."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: metrics.MeterProvider | None = None,
                 logger_provider: _logs.LoggerProvider | None = None) -> None:
        self.tracer = trace.get_tracer(N.TRACER_NAME, __version__, tracer_provider)
        self.logger = _logs.get_logger(N.TRACER_NAME, __version__, logger_provider)
        meter = metrics.get_meter(N.TRACER_NAME, __version__, meter_provider)
        self.grades = meter.create_counter(N.METRIC_EVALUATION_GRADES, unit="{grade}",
                                           description="Grades of agent runs, by grader and whether they passed.")
        self.scores = meter.create_histogram(N.METRIC_EVALUATION_SCORE, unit="1",
                                             description="Grade scores in [0, 1], by grader.",
                                             explicit_bucket_boundaries_advisory=N.EVALUATION_SCORE_BUCKETS)

    @staticmethod
    def attributes(g: Grader, grade: Grade) -> dict[str, Any]:
        """The ``gen_ai.evaluation.result`` event's attributes (and the span's)."""
        found: dict[str, Any] = {N.GEN_AI_EVALUATION_NAME: g.name}
        if grade.score is not None:
            found[N.GEN_AI_EVALUATION_SCORE_VALUE] = float(grade.score)
        if grade.label is not None:
            found[N.GEN_AI_EVALUATION_SCORE_LABEL] = _cut(grade.label)
        if grade.explanation:
            found[N.GEN_AI_EVALUATION_EXPLANATION] = _cut(grade.explanation)
        if grade.error is not None:
            found[N.ERROR_TYPE] = grade.error
        return found

    def report(self, g: Grader, graded: GradedRun, grade: Grade) -> None:
        """One grade as its span (with the event) under the run's span, and in the metrics."""
        try:
            self._report(g, graded, grade)
        except Exception:  # noqa: BLE001 - a grade's telemetry never fails the evaluation
            _log.warning("could not report grade %s of trace %s", g.name, graded.trace_id, exc_info=True)

    def _report(self, g: Grader, graded: GradedRun, grade: Grade) -> None:
        event = self.attributes(g, grade)
        parent = trace.set_span_in_context(NonRecordingSpan(graded.span_context))
        span_attributes = {**graded.attributes, **event, N.EVALUATION_PASSED: bool(grade.passed),
                           N.EVALUATION_THRESHOLD: float(g.threshold)}
        span = self.tracer.start_span(f"{N.EVALUATION_SPAN_PREFIX} {g.name}", context=parent,
                                      kind=trace.SpanKind.INTERNAL, attributes=span_attributes)
        try:
            span.add_event(N.EVALUATION_RESULT_EVENT, attributes=event)
            self._log_event(span, event)
            if grade.error is not None:
                span.set_status(Status(StatusCode.ERROR, _cut(grade.explanation or grade.error)))
        finally:
            span.end()
        labels = {N.GEN_AI_EVALUATION_NAME: g.name, N.EVALUATION_PASSED: bool(grade.passed)}
        self.grades.add(1, labels)
        if grade.score is not None:
            self.scores.record(float(grade.score), {N.GEN_AI_EVALUATION_NAME: g.name})

    def _log_event(self, span: trace.Span, event: dict[str, Any]) -> None:
        """The grade as semconv's ``gen_ai.evaluation.result`` log record, in the evaluation
        span's context (its trace id and span id), with the span event's attributes."""
        try:
            self.logger.emit(_logs.LogRecord(timestamp=time.time_ns(), event_name=N.EVALUATION_RESULT_EVENT,
                                             attributes=event, context=trace.set_span_in_context(span),
                                             severity_number=_logs.SeverityNumber.INFO))
        except Exception:  # noqa: BLE001 - a log exporter's failure never loses the span's grade
            _log.warning("could not log grade %s", event.get(N.GEN_AI_EVALUATION_NAME), exc_info=True)
