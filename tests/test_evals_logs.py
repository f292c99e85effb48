"""Each grade as semconv's ``gen_ai.evaluation.result`` log record (the event it is defined as),
beside the span event Jaeger shows: same attributes, in the evaluation span's trace and span."""

from __future__ import annotations

from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor

from tracedagent import Agent
from tracedagent.evals import Case, Dataset, OnlineGrading, answered, grade_recorded, output_contains
from tracedagent.testing import FakeModel, Recorder, play

EVENT = "gen_ai.evaluation.result"


def _evaluate(recorder: Recorder):
    def make(case: Case) -> Agent:
        answer = "A1 shipped." if case.name == "good" else "no idea"
        return Agent(FakeModel([answer]), name="shop", **recorder.providers)
    cases = [Case(task="where is A1?", name="good", expected_output="shipped"),
             Case(task="and B2?", name="bad", expected_output="shipped")]
    return Dataset(cases, [answered(), output_contains()]).evaluate(make, recorder=recorder)


def test_each_grade_is_also_a_log_record_in_its_evaluation_span_s_context():
    recorder = Recorder()
    _evaluate(recorder)
    spans = {s.context.span_id: s for s in recorder.spans() if s.name.startswith("evaluate ")}
    records = recorder.log_records(EVENT)
    assert len(records) == len(spans) == 4
    for readable in records:
        record = readable.log_record
        span = spans[record.span_id]  # the evaluation span's context: same span, same trace
        assert record.trace_id == span.context.trace_id
        (event,) = [e for e in span.events if e.name == EVENT]
        assert dict(record.attributes) == dict(event.attributes)
        assert readable.instrumentation_scope.name == "tracedagent"
    failed = [r.log_record.attributes for r in records if r.log_record.attributes["gen_ai.evaluation.score.value"] == 0.0]
    assert [(a["gen_ai.evaluation.name"], a["gen_ai.evaluation.score.label"]) for a in failed] == [("output_contains", "fail")]


def test_grading_a_recorded_run_logs_its_grades_to_the_logger_provider_given():
    recorder = Recorder()
    played = play(Agent(FakeModel(["A1 shipped."]), name="shop", **recorder.providers), "where?", recorder=recorder)
    logs = Recorder()  # its logger provider only
    grade_recorded(None, [answered()], runs=[played.view], logger_provider=logs.logger_provider,
                   tracer_provider=recorder.tracer_provider)
    (readable,) = logs.log_records(EVENT)
    (span,) = recorder.spans("evaluate answered")
    assert (readable.log_record.trace_id, readable.log_record.span_id) == (span.context.trace_id, span.context.span_id)
    assert readable.log_record.trace_id == played.view.span.context.trace_id


def test_online_grading_logs_its_grades_to_the_logger_provider_given():
    recorder, logs = Recorder(), Recorder()
    grading = OnlineGrading([answered()], **recorder.providers, logger_provider=logs.logger_provider)
    Agent(FakeModel(["A1 shipped."]), name="shop", graders=grading, **recorder.providers).run("where?")
    assert grading.flush(10)
    (readable,) = logs.log_records(EVENT)
    (span,) = recorder.spans("evaluate answered")
    assert (readable.log_record.trace_id, readable.log_record.span_id) == (span.context.trace_id, span.context.span_id)


class _Broken(LogRecordProcessor):
    def on_emit(self, log_record):
        raise OSError("log pipeline down")

    def shutdown(self):
        pass

    def force_flush(self, timeout_millis=30000):
        return True


def test_a_failing_log_pipeline_loses_no_grade():
    recorder = Recorder()
    broken = LoggerProvider(shutdown_on_exit=False)
    broken.add_log_record_processor(_Broken())
    recorder.logger_provider = broken
    report = _evaluate(recorder)
    assert [c.pass_rate for c in report.cases] == [1.0, 0.0]
    spans = [s for s in recorder.spans() if s.name.startswith("evaluate ")]
    assert len(spans) == 4 and all(len(s.events) == 1 for s in spans)
    assert recorder.metric("tracedagent.evaluation.grades") == 4
