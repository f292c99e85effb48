"""Grades in the telemetry: each grade a short ``evaluate {grader}`` span under the graded run's
span (in its trace, although that span has ended: parented by its ``SpanContext``), carrying
semconv's ``gen_ai.evaluation.result`` as a span event (Jaeger shows span events, not log
records), your own run attributes, and two metrics: grades by grader and passed, and scores.
The same event also goes out as the log record semconv defines it as (``_log_event``), in the
evaluation span's context, through the logs API: exported wherever a ``LoggerProvider`` is set
(none set: the API's no-op one, which costs nothing).

The grader runs *inside* its span (``GradeTelemetry.grade``): what it does that is traced (an
LLM judge's model calls, ``chat`` spans) is under its grade in the run's trace, and the span
lasts as long as the grading did. The span is current while the grader runs, with this
``GradeTelemetry`` under ``GRADING`` in the context, so a judge's calls go to the same
providers as the grade. A grade's own model usage and cost are on its span
(``gen_ai.usage.*``, ``tracedagent.usage.cost_usd``): the grade's, never the run's.

Grading a recorded run again adds new grade spans to its trace beside the old ones: each grade
span is one grading, stamped with its own time. Telemetry never fails an evaluation, and the
span ends however the grading ends.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from opentelemetry import _logs, metrics, trace
from opentelemetry import context as otel_context
from opentelemetry.trace import NonRecordingSpan, Status, StatusCode

from .._core import _names as N
from .._instrumentation._content import encodable, truncate
from .._instrumentation._telemetry import bounded, guard
from .._version import __version__
from ._grade import Grade, GradedRun, Grader

__all__ = ["GradeTelemetry", "GRADING"]

_log = logging.getLogger(__name__)

GRADING = otel_context.create_key("tracedagent.grading")
"""The context key under which the ``GradeTelemetry`` grading now is found while a grader runs
(an LLM judge reports its calls to its providers)."""


def _cut(text: str) -> str:
    """A grader's (or a judge model's) words, bounded and encodable: a lone surrogate would cost
    the span the attribute (the OTLP encoder drops it)."""
    return encodable(truncate(text, N.MAX_EXPLANATION_LENGTH))


class GradeTelemetry:
    """Where grades are reported: the given providers, or OpenTelemetry's global ones."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: metrics.MeterProvider | None = None,
                 logger_provider: _logs.LoggerProvider | None = None) -> None:
        self.tracer_provider, self.meter_provider = tracer_provider, meter_provider
        """The providers given (``None``: the global ones), which a judge's calls report to too."""
        # a provider that fails costs the grades that part of their telemetry, never the grading
        self.tracer: trace.Tracer = trace.NoOpTracer()
        self.logger: _logs.Logger = _logs.NoOpLogger(N.TRACER_NAME)
        self.grades, self.scores = self._instruments(metrics.NoOpMeter(N.TRACER_NAME))
        with guard("getting the grades' tracer"):
            self.tracer = trace.get_tracer(N.TRACER_NAME, __version__, tracer_provider)
        with guard("getting the grades' logger"):
            self.logger = _logs.get_logger(N.TRACER_NAME, __version__, logger_provider)
        with guard("creating the grades' metric instruments"):
            self.grades, self.scores = self._instruments(metrics.get_meter(N.TRACER_NAME, __version__, meter_provider))

    @staticmethod
    def _instruments(meter: metrics.Meter) -> tuple[metrics.Counter, metrics.Histogram]:
        grades = meter.create_counter(N.METRIC_EVALUATION_GRADES, unit="{grade}",
                                      description="Grades of agent runs, by grader and whether they passed.")
        scores = meter.create_histogram(N.METRIC_EVALUATION_SCORE, unit="1", description="Grade scores in [0, 1], by grader.",
                                        explicit_bucket_boundaries_advisory=N.EVALUATION_SCORE_BUCKETS)
        return grades, scores

    @staticmethod
    def attributes(g: Grader, grade: Grade) -> dict[str, Any]:
        """The ``gen_ai.evaluation.result`` event's attributes (and the span's)."""
        found: dict[str, Any] = {N.GEN_AI_EVALUATION_NAME: bounded(g.name)}
        if grade.score is not None:
            found[N.GEN_AI_EVALUATION_SCORE_VALUE] = float(grade.score)
        if grade.label is not None:
            found[N.GEN_AI_EVALUATION_SCORE_LABEL] = _cut(grade.label)
        if grade.explanation and grade.explanation_on_span:
            found[N.GEN_AI_EVALUATION_EXPLANATION] = _cut(grade.explanation)
        if grade.error is not None:
            found[N.ERROR_TYPE] = grade.error
        return found

    @staticmethod
    def usage_attributes(grade: Grade) -> dict[str, Any]:
        """The grade's own model usage and cost (an LLM judge's), for its span."""
        found: dict[str, Any] = {}
        if grade.usage is not None:
            found[N.GEN_AI_USAGE_INPUT_TOKENS] = grade.usage.input_tokens
            found[N.GEN_AI_USAGE_OUTPUT_TOKENS] = grade.usage.output_tokens
        if grade.cost is not None:
            found[N.USAGE_COST_USD] = float(grade.cost)
        return found

    def grade(self, g: Grader, graded: GradedRun, decide: Callable[[Grader, GradedRun], Grade]) -> Grade:
        """``decide(g, graded)`` (which never raises) run inside the grade's span, then the grade
        on that span (with the event) and in the metrics."""
        span, token = self._open(g, graded)
        grade: Grade | None = None
        try:
            grade = decide(g, graded)
            return grade
        finally:
            self._close(g, graded, span, token, grade)

    def _open(self, g: Grader, graded: GradedRun) -> tuple[trace.Span | None, object | None]:
        """The grade's span, current (with ``GRADING``) until ``_close``; ``(None, None)`` if
        telemetry failed (the grading goes on without it)."""
        span = token = None
        try:
            parent = trace.set_span_in_context(NonRecordingSpan(graded.span_context))
            span = self.tracer.start_span(f"{N.EVALUATION_SPAN_PREFIX} {bounded(g.name)}", context=parent,
                                          kind=trace.SpanKind.INTERNAL,
                                          attributes={**graded.attributes, N.GEN_AI_EVALUATION_NAME: bounded(g.name),
                                                      N.EVALUATION_THRESHOLD: float(g.threshold)})
            token = otel_context.attach(otel_context.set_value(GRADING, self, trace.set_span_in_context(span)))
        except Exception:  # noqa: BLE001 - a grade's telemetry never fails the evaluation
            _log.warning("could not open the span of grade %s of trace %s", g.name, graded.trace_id, exc_info=True)
        return span, token

    def _close(self, g: Grader, graded: GradedRun, span: trace.Span | None, token: object | None,
               grade: Grade | None) -> None:
        try:
            if token is not None:
                otel_context.detach(token)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - the span ends all the same
            _log.warning("could not detach the span of grade %s", g.name, exc_info=True)
        try:
            if span is not None:
                self._end(g, span, grade)
            if grade is not None:
                labels = {N.GEN_AI_EVALUATION_NAME: bounded(g.name), N.EVALUATION_PASSED: bool(grade.passed)}
                self.grades.add(1, labels)
                if grade.score is not None:
                    self.scores.record(float(grade.score), {N.GEN_AI_EVALUATION_NAME: labels[N.GEN_AI_EVALUATION_NAME]})
        except Exception:  # noqa: BLE001 - a grade's telemetry never fails the evaluation
            _log.warning("could not report grade %s of trace %s", g.name, graded.trace_id, exc_info=True)

    def _end(self, g: Grader, span: trace.Span, grade: Grade | None) -> None:
        """The grade on its span, which ends whatever happens here (a grading interrupted ends
        it failed: ``cancelled``)."""
        try:
            if grade is None:
                span.set_attribute(N.ERROR_TYPE, N.ERROR_CANCELLED)
                span.set_status(Status(StatusCode.ERROR, "the grading was interrupted"))
                return
            event = self.attributes(g, grade)
            span.set_attributes({**event, N.EVALUATION_PASSED: bool(grade.passed), **self.usage_attributes(grade)})
            span.add_event(N.EVALUATION_RESULT_EVENT, attributes=event)
            self._log_event(span, event)
            if grade.error is not None:
                shown = grade.explanation if grade.explanation_on_span else None  # withheld: withheld here too
                span.set_status(Status(StatusCode.ERROR, _cut(shown or grade.error)))
        finally:
            span.end()

    def report(self, g: Grader, graded: GradedRun, grade: Grade) -> None:
        """A grade decided elsewhere, as its span (with the event) under the run's span, and in the metrics."""
        self.grade(g, graded, lambda _g, _graded: grade)

    def _log_event(self, span: trace.Span, event: dict[str, Any]) -> None:
        """The grade as semconv's ``gen_ai.evaluation.result`` log record, in the evaluation
        span's context (its trace id and span id), with the span event's attributes."""
        try:
            self.logger.emit(_logs.LogRecord(timestamp=time.time_ns(), event_name=N.EVALUATION_RESULT_EVENT,
                                             attributes=event, context=trace.set_span_in_context(span),
                                             severity_number=_logs.SeverityNumber.INFO))
        except Exception:  # noqa: BLE001 - a log exporter's failure never loses the span's grade
            _log.warning("could not log grade %s", event.get(N.GEN_AI_EVALUATION_NAME), exc_info=True)
