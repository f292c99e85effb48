"""Grading without re-running: the runs recorded in an OTLP/JSON file or found in Jaeger, each
a ``GradedRun`` over its recorded view, graded as a live run is (``grade_trial``).

A trace is read as ``SpanRecord`` (``_traces``), then turned into the SDK's ``ReadableSpan`` so
that the recorded run's ``RunView`` is the very class a live run's is: a grader cannot tell them
apart except by what only a live run has (the typed output; the task and the answer unless
content capture was on: ``ContentNotRecorded``).

Grading a recorded run adds an ``evaluate {grader}`` span to the recorded trace each time, parented
by the recorded run span's context (its trace id and span id, as read from the file or Jaeger).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from opentelemetry import _logs, metrics, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .._core import _names as N
from .._traces._jaeger import JaegerClient, JaegerError
from .._traces._otlp_json import OtlpJsonError, read_file
from .._traces._recorded import Recording, ReplayError
from .._traces._trace import SpanRecord, Trace, group_traces
from .._testing._views import RunView, is_run_span
from ._experiment import grade_trial
from ._grade import GradedRun, Grader, as_grader
from ._report import CaseResult, Report, numbered
from ._telemetry import GradeTelemetry

__all__ = ["RecordedRunsError", "recorded_runs", "recordings", "grade_recorded", "readable"]


class RecordedRunsError(ValueError):
    """The recorded runs could not be read: a file that is not OTLP/JSON, Jaeger not answering,
    a trace id that is not there. The message says which."""


_KINDS = {"client": SpanKind.CLIENT, "server": SpanKind.SERVER, "producer": SpanKind.PRODUCER,
          "consumer": SpanKind.CONSUMER}


def readable(record: SpanRecord) -> ReadableSpan:
    """A recorded span as the SDK's ``ReadableSpan`` (the shape ``RunView`` reads): its ids as a
    remote ``SpanContext``, its status, events and service."""
    trace_id = int(record.trace_id, 16)
    context = SpanContext(trace_id, int(record.span_id, 16), is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    parent = None if record.parent_id is None else SpanContext(trace_id, int(record.parent_id, 16), is_remote=True)
    status = (Status(StatusCode.ERROR, record.status_message) if record.status == "error"
              else Status(StatusCode.OK if record.status == "ok" else StatusCode.UNSET))
    return ReadableSpan(name=record.name, context=context, parent=parent, attributes=dict(record.attributes),
                        events=[Event(e.name, dict(e.attributes), e.time_ns) for e in record.events],
                        kind=_KINDS.get(record.kind, SpanKind.INTERNAL), status=status, start_time=record.start_ns,
                        end_time=record.end_ns,
                        resource=Resource({"service.name": record.service} if record.service else {}))


@dataclass(frozen=True, kw_only=True)
class _Filters:
    agent: str | None
    stop_reason: str | None
    conversation: str | None

    def keep(self, view: RunView) -> bool:
        return ((self.agent is None or view.agent_name == self.agent)
                and (self.stop_reason is None or view.stop_reason == self.stop_reason)
                and (self.conversation is None or view.conversation_id == self.conversation))


def _runs_of(trace_: Trace, filters: _Filters) -> list[RunView]:
    """The runs of one trace: its outermost runs, or with ``agent`` every run of that agent
    (a sub-agent's too), kept when they match the filters."""
    spans = [readable(s) for s in trace_.spans]
    by_id = {s.context.span_id: s for s in spans}

    def under_a_run(span: ReadableSpan) -> bool:
        seen: set[int] = set()
        while span.parent is not None and span.parent.span_id in by_id and span.parent.span_id not in seen:
            seen.add(span.parent.span_id)  # a tampered file's cycle of parent ids ends the walk
            span = by_id[span.parent.span_id]
            if is_run_span(span):
                return True
        return False

    runs = [s for s in spans if is_run_span(s) and (filters.agent is not None or not under_a_run(s))]
    return [view for view in (RunView(s, spans) for s in runs) if filters.keep(view)]


def recorded_runs(source: str | Path | None = None, **found: Any) -> list[RunView]:
    """The recorded runs, each a ``RunView`` over its trace's spans, in start order.

    From an OTLP/JSON file (``source``), or from Jaeger (``jaeger=`` its URL): one trace
    (``trace_id=``), or a search of ``service=`` over the last ``since_seconds=`` (default an
    hour; at most ``limit=`` traces, default 20). Kept: the outermost run of each trace (with
    ``agent=``, every run of that agent, a sub-agent's included), whose stop reason is
    ``stop_reason=`` and conversation ``conversation=`` when given. ``RecordedRunsError`` when
    the source cannot be read."""
    return [view for _, view in _found(source, **found)]


def _found(source: str | Path | None = None, *, trace_id: str | None = None, jaeger: str | None = None,
           service: str | None = None, since_seconds: float = 3600.0, limit: int = 20, agent: str | None = None,
           stop_reason: str | None = None, conversation: str | None = None) -> list[tuple[Trace, RunView]]:
    """``recorded_runs``, each run with its trace (whose ``SpanRecord`` a ``Recording`` reads)."""
    filters = _Filters(agent=agent, stop_reason=stop_reason, conversation=conversation)
    try:
        if jaeger is not None:
            client = JaegerClient(jaeger)
            if trace_id is not None:
                records: list[list[SpanRecord]] = [client.trace(trace_id.lower())]
            elif service:
                tags = {k: v for k, v in ((N.GEN_AI_AGENT_NAME, agent), (N.STOP_REASON, stop_reason),
                                          (N.GEN_AI_CONVERSATION_ID, conversation)) if v is not None}
                records = client.search(service=service, limit=limit, since_seconds=since_seconds, tags=tags)
            else:
                raise RecordedRunsError("a Jaeger search needs a service (service=) or a trace id (trace_id=)")
        elif source is not None:
            records = [t.spans for t in group_traces(read_file(Path(source)))]
        else:
            raise RecordedRunsError("give a trace file (source) or Jaeger's URL (jaeger=)")
    except (JaegerError, OtlpJsonError, OSError) as exc:
        raise RecordedRunsError(str(exc)) from None
    traces = [Trace(spans) for spans in records if spans]
    if trace_id is not None:
        traces = [t for t in traces if t.trace_id == trace_id.lower().zfill(32)]
        if not traces:
            raise RecordedRunsError(f"{source or jaeger}: no trace {trace_id}")
    try:
        found = [(t, view) for t in traces for view in _runs_of(t, filters)]
    except ValueError as exc:  # an id that is not hex, from a source that did not check it
        raise RecordedRunsError(f"{source or jaeger}: a span's ids cannot be read: {exc}") from None
    return sorted(found, key=lambda pair: pair[1].span.start_time or 0)


def recordings(source: str | Path | None = None, *, skipped: list[RecordedRunsError] | None = None,
               **found: Any) -> list[Recording]:
    """The runs ``recorded_runs(source, **found)`` finds, as replay's ``Recording`` (the task,
    the model's turns, the tool calls with their results). A run that resumed a pause is one too:
    its case resumes that pause with the recorded decisions (``Case.resumes``). A run that cannot
    be a case (recorded without content, cancelled) is a ``RecordedRunsError`` naming it: raised,
    or with ``skipped`` (a list) appended there and the search goes on - a day of production
    traces has such runs, and each other run is still a case."""
    made = []
    for t, view in _found(source, **found):
        try:
            recording = Recording.of(t.spans, agent=view.agent_name if found.get("agent") else None,
                                     source=str(source or found.get("jaeger")))
        except ReplayError as exc:  # which run: a search finds many, and the error alone may not say
            error = RecordedRunsError(f"run of {view.agent_name!r} in trace {view.trace_id}: {exc}")
            if skipped is None:
                raise error from None
            skipped.append(error)
            continue
        made.append(recording)
    return made


def grade_recorded(source: str | Path | None, graders: Sequence[Any], *, runs: Iterable[RunView] | None = None,
                   tracer_provider: trace.TracerProvider | None = None,
                   meter_provider: metrics.MeterProvider | None = None, name: str | None = None,
                   logger_provider: _logs.LoggerProvider | None = None, **found: Any) -> Report:
    """Grade recorded runs without re-running them: each run of ``recorded_runs(source, **found)``
    (or ``runs``) is one case of one trial, named ``{agent} {trace id}`` (a repeat numbered: ``#2``), graded by every grader as
    ``evaluate`` grades a live run; each grade also goes into the recorded trace (a new
    ``evaluate {grader}`` span under the recorded run span, each time it is graded; its log event
    to ``logger_provider``, by default the global one)."""
    checks: list[Grader] = [as_grader(g) for g in graders]
    views = list(runs) if runs is not None else recorded_runs(source, **found)
    telemetry = GradeTelemetry(tracer_provider, meter_provider, logger_provider)
    cases = []
    for view, case_name in zip(views, numbered([f"{view.agent_name} {view.trace_id}" for view in views])):
        graded = GradedRun(view)
        try:
            task = graded.task
        except LookupError:  # ContentNotRecorded: the report names the run, not its task
            task = ""
        cases.append(CaseResult(name=case_name, task=task, trials=[grade_trial(checks, graded, telemetry)]))
    return Report(cases=cases, graders=[g.name for g in checks], repeat=1,
                  dataset=name or (str(source) if source is not None else None))
