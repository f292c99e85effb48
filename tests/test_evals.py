"""tracedagent.evals: experiments over a dataset (pass rates, pass^k / pass@k, a raising grader),
each grade in the graded run's trace with semconv's gen_ai.evaluation.* and in the metrics,
reports compared and written out, datasets saved and loaded."""

from __future__ import annotations

import asyncio
import itertools
import json
from xml.etree import ElementTree as ET

import pytest
from opentelemetry.trace import format_trace_id

from tracedagent import Agent, Registry, tool
from tracedagent.evals import (Case, CaseResult, ContentNotRecorded, Dataset, DatasetError, Grade, GradedRun, Grader,
                               Report, TrialResult, answered, grade_recorded, grader, output_contains, stop_reason_in,
                               steps_under)
from tracedagent.evals._report import GradeResult, distribution, pass_at_k, pass_hat_k
from tracedagent.testing import FakeModel, Recorder, play, tool_call


@tool
def lookup(order_id: str) -> str:
    """Looks an order up."""
    return f"{order_id}: shipped"


def scripted(recorder: Recorder, answers: dict[str, list[str]]):
    """A factory: each case's agent answers from ``answers[case.name]`` in turn (one per trial)."""
    turns = {name: itertools.cycle(script) for name, script in answers.items()}

    def make(case: Case) -> Agent:
        return Agent(FakeModel([tool_call("lookup", {"order_id": "A1"}), next(turns[case.name])]), [lookup],
                     name="shop", attributes={"team": "support"}, **recorder.providers)
    return make


CASES = [Case(task="where is A1?", name="good", expected_output="shipped"),
         Case(task="where is A1, again?", name="bad", expected_output="shipped"),
         Case(task="and now?", name="flaky", expected_output="shipped")]


def experiment(repeat=3, **options):
    recorder = Recorder()
    make = scripted(recorder, {"good": ["A1 shipped."], "bad": ["I do not know."],
                               "flaky": ["A1 shipped.", "A1 shipped.", "no idea"]})
    dataset = Dataset(CASES, [answered(), output_contains()], name="shop")
    return recorder, dataset.evaluate(make, repeat=repeat, recorder=recorder, **options)


def test_a_scripted_agent_passing_some_cases_gives_the_right_pass_rate():
    _, report = experiment()
    rates = {c.name: c.pass_rate for c in report.cases}
    assert rates == {"good": 1.0, "bad": 0.0, "flaky": pytest.approx(2 / 3)}
    assert report.pass_rate == pytest.approx((1.0 + 0.0 + 2 / 3) / 3)
    flaky = report.cases[2]
    assert [t.passed for t in flaky.trials] == [True, True, False]
    assert flaky.pass_at(3) == 1.0 and flaky.pass_hat(3) == 0.0
    assert flaky.pass_hat(1) == pytest.approx(2 / 3)
    bad = report.cases[1].trials[0]
    assert [(g.grader, g.passed) for g in bad.grades] == [("answered", True), ("output_contains", False)]
    assert report.grader_scores()["answered"] == {"pass_rate": 1.0, "mean_score": 1.0}
    assert report.grader_scores()["output_contains"]["pass_rate"] == pytest.approx(5 / 9)  # good 3 + flaky 2
    assert report.distributions()["steps"] == {"min": 2, "median": 2, "p90": 2, "max": 2}
    assert report.distributions()["cost"] is None  # no prices: unknown, not free


def test_aevaluate_gives_the_same_report_with_runs_side_by_side():
    recorder = Recorder()
    make = scripted(recorder, {"good": ["A1 shipped."], "bad": ["I do not know."], "flaky": ["A1 shipped.", "no"]})
    dataset = Dataset(CASES, [output_contains()])
    report = asyncio.run(dataset.aevaluate(make, repeat=2, concurrency=3, recorder=recorder))
    assert {c.name: c.pass_rate for c in report.cases} == {"good": 1.0, "bad": 0.0, "flaky": 0.5}
    assert len({t.trace_id for t in report.trials}) == 6


def test_threads_give_each_trial_its_own_run():
    recorder = Recorder()
    make = scripted(recorder, {"good": ["A1 shipped."], "bad": ["nope"], "flaky": ["A1 shipped."]})
    report = Dataset(CASES, [output_contains()]).evaluate(make, repeat=2, concurrency=2, recorder=recorder)
    assert [c.pass_rate for c in report.cases] == [1.0, 0.0, 1.0]


def test_a_raising_grader_is_a_failed_grade_with_its_error_never_an_exception():
    def broken(run: GradedRun) -> bool:
        raise KeyError("no such fact")

    def out_of_range(run: GradedRun) -> float:
        return 1.5

    recorder = Recorder()
    make = scripted(recorder, {"good": ["A1 shipped."]})
    report = Dataset([CASES[0]], [answered(), broken, out_of_range]).evaluate(make, recorder=recorder)
    grades = {g.grader: g for g in report.cases[0].trials[0].grades}
    assert grades["answered"].passed
    assert not grades["broken"].passed and grades["broken"].error == "KeyError"
    assert "no such fact" in grades["broken"].explanation
    assert not grades["out_of_range"].passed and grades["out_of_range"].error == "BadGrade"
    assert report.pass_rate == 0.0


def test_an_agent_factory_that_raises_is_a_failed_trial():
    def factory(case: Case) -> Agent:
        raise RuntimeError("no model")

    report = Dataset(CASES[:1], [answered()]).evaluate(factory, recorder=Recorder())
    trial = report.cases[0].trials[0]
    assert not trial.passed and trial.error.startswith("RuntimeError")


def test_thresholds_and_grades_with_labels():
    @grader(threshold=0.5)
    def half(run: GradedRun) -> float:
        return 0.6

    @grader(name="strict", threshold=0.9)
    def strict(run: GradedRun) -> float:
        return 0.6

    def labelled(run: GradedRun) -> Grade:
        return Grade(label="polite", passed=True)

    recorder = Recorder()
    report = Dataset([CASES[0]], [half, strict, labelled]).evaluate(scripted(recorder, {"good": ["ok"]}),
                                                                     recorder=recorder)
    grades = {g.grader: g for g in report.cases[0].trials[0].grades}
    assert grades["half"].passed and not grades["strict"].passed
    assert grades["labelled"].passed and grades["labelled"].label == "polite" and grades["labelled"].score is None


def test_max_cost_stops_starting_runs_and_says_how_many_were_skipped():
    recorder = Recorder()
    from tracedagent import Budget

    def make(case: Case) -> Agent:
        return Agent(FakeModel(["A1 shipped."]), budget=Budget(price_per_1k_input=1.0, price_per_1k_output=1.0),
                     **recorder.providers)

    report = Dataset(CASES, [answered()]).evaluate(make, repeat=2, max_cost=0.000001, recorder=recorder)
    assert report.cost_exhausted and report.skipped == 5
    assert sum(len(c.trials) for c in report.cases) == 1
    # pass@2 of one trial is not defined: the report still writes (a baseline), that figure None
    assert report.pass_at() is None and report.pass_hat() is None and report.pass_at(1) == 1.0
    assert Report.from_json(report.to_json()).skipped == 5


def test_a_report_with_no_trial_run_still_writes():
    report = Dataset(CASES, [answered()]).evaluate(Agent(FakeModel(["A1 shipped."])), max_cost=0)
    assert report.skipped == len(CASES) and not report.trials
    assert json.loads(report.to_json())["pass_at_k"] is None


@pytest.mark.parametrize("concurrency", [1, 3])
def test_runs_go_in_the_callers_context_whatever_the_concurrency(concurrency):
    """An experiment under a span of yours: each run is its child, in a worker thread or not."""
    recorder = Recorder()
    with recorder.tracer_provider.get_tracer("test").start_as_current_span("experiment") as parent:
        Dataset(CASES, [answered()]).evaluate(scripted(recorder, {"good": ["ok"], "bad": ["ok"], "flaky": ["ok"]}),
                                              concurrency=concurrency, recorder=recorder)
    runs = [s for s in recorder.spans() if s.name.startswith("invoke_agent")]
    assert len(runs) == len(CASES)
    assert {r.parent.span_id if r.parent else None for r in runs} == {parent.get_span_context().span_id}


# --- grades in the telemetry ---------------------------------------------------------------

def test_each_grade_is_a_span_in_the_graded_runs_trace_with_the_evaluation_event():
    recorder, report = experiment(repeat=1)
    runs = recorder.spans("invoke_agent shop")
    grade_spans = [s for s in recorder.spans() if s.name.startswith("evaluate ")]
    assert len(grade_spans) == 3 * 2
    run_by_trace = {s.context.trace_id: s for s in runs}
    for span in grade_spans:
        run = run_by_trace[span.context.trace_id]  # same trace id as a graded run
        assert span.parent.span_id == run.context.span_id
        assert span.start_time >= run.end_time  # graded after the run span ended
        (event,) = [e for e in span.events if e.name == "gen_ai.evaluation.result"]
        assert event.attributes["gen_ai.evaluation.name"] == span.name.removeprefix("evaluate ")
        assert event.attributes["gen_ai.evaluation.score.value"] in (0.0, 1.0)
        assert event.attributes["gen_ai.evaluation.score.label"] in ("pass", "fail")
        assert span.attributes["team"] == "support"  # your own run attributes reach the grade
    trial_traces = {t.trace_id for t in report.trials}
    assert {format_trace_id(s.context.trace_id) for s in grade_spans} == trial_traces
    failed = [s for s in grade_spans if s.attributes["tracedagent.evaluation.passed"] is False]
    assert [s.name for s in failed] == ["evaluate output_contains"]
    assert failed[0].attributes["gen_ai.evaluation.explanation"] == "the answer does not contain the expected text"


def test_grades_are_counted_by_grader_and_passed_and_their_scores_recorded():
    recorder, _ = experiment(repeat=3)
    grades = "tracedagent.evaluation.grades"
    assert recorder.metric(grades, **{"gen_ai.evaluation.name": "output_contains",
                                      "tracedagent.evaluation.passed": True}) == 5
    assert recorder.metric(grades, **{"gen_ai.evaluation.name": "output_contains",
                                      "tracedagent.evaluation.passed": False}) == 4
    assert recorder.histogram_sum("tracedagent.evaluation.score", **{"gen_ai.evaluation.name": "answered"}) == 9


def test_a_raising_grader_marks_its_span_an_error():
    def broken(run: GradedRun) -> bool:
        raise ValueError("boom")

    recorder = Recorder()
    Dataset([CASES[0]], [broken]).evaluate(scripted(recorder, {"good": ["ok"]}), recorder=recorder)
    (span,) = recorder.spans("evaluate broken")
    assert span.attributes["error.type"] == "ValueError" and span.status.description == "ValueError: boom"


def test_a_grades_words_and_its_graders_name_are_bounded_and_encodable_on_its_span():
    """A judge model's label may hold a lone surrogate (JSON's "\\ud800"), which the OTLP encoder
    would drop the attribute for; a grader's name comes from a file: both bounded like any name."""
    odd = Grader(check=lambda run: Grade(score=1.0, label="ok\ud800", explanation="why\ud800"), name="n" * 5000)
    recorder = Recorder()
    Dataset([CASES[0]], [odd]).evaluate(scripted(recorder, {"good": ["ok"]}), recorder=recorder)
    (span,) = [s for s in recorder.spans() if s.name.startswith("evaluate ")]
    attributes = span.attributes
    assert attributes["gen_ai.evaluation.score.label"] == "ok\ufffd"
    assert attributes["gen_ai.evaluation.explanation"] == "why\ufffd"
    assert len(attributes["gen_ai.evaluation.name"]) < 5000 and len(span.name) < 5000
    name = {"gen_ai.evaluation.name": attributes["gen_ai.evaluation.name"]}
    assert recorder.metric("tracedagent.evaluation.grades", **name) == 1


def test_an_explanation_withheld_from_the_span_is_withheld_from_its_status_and_log_record_too():
    """explanation_on_span=False (an LLM judge's words without capture): not on the span's
    attributes, its event, its status description or its log record; the report has it."""
    quoting = Grader(check=lambda run: Grade(score=0.0, error="Refused", explanation="it said A1 shipped",
                                             explanation_on_span=False), name="quoting")
    recorder = Recorder()
    report = Dataset([CASES[0]], [quoting]).evaluate(scripted(recorder, {"good": ["ok"]}), recorder=recorder)
    assert report.trials[0].grades[0].explanation == "it said A1 shipped"
    (span,) = recorder.spans("evaluate quoting")
    (record,) = recorder.log_records("gen_ai.evaluation.result")
    told = [span.status.description, *map(str, span.attributes.values()), *map(str, span.events[0].attributes.values()),
            *map(str, record.log_record.attributes.values())]
    assert span.status.description == "Refused" and not any("A1" in t for t in told)


def test_a_failing_meter_provider_costs_the_grades_their_metrics_never_the_evaluation():
    from opentelemetry.metrics import MeterProvider

    class Broken(MeterProvider):
        def get_meter(self, *args, **kwargs):
            raise RuntimeError("meter down")

    recorder = Recorder()
    report = Dataset([CASES[0]], [answered()]).evaluate(scripted(recorder, {"good": ["ok"]}), recorder=recorder,
                                                        meter_provider=Broken())
    [trial] = report.trials
    assert trial.error is None and trial.passed
    assert recorder.spans("evaluate answered")  # the grade's span and event still there


# --- a recorded run ------------------------------------------------------------------------

def test_a_recorded_run_without_content_says_so_when_a_grader_asks_for_its_output():
    recorder = Recorder()
    played = play(Agent(FakeModel(["A1 shipped."]), **recorder.providers), "where?", recorder=recorder)
    graded = GradedRun(played.view)  # recorded: no Run
    assert graded.ok and graded.steps == 1
    with pytest.raises(ContentNotRecorded, match="capture_content=True"):
        graded.text
    with pytest.raises(ContentNotRecorded):
        graded.task


def test_a_recorded_run_with_content_capture_gives_its_task_and_output():
    recorder = Recorder()
    agent = Agent(FakeModel(["A1 shipped."]), capture_content=True, **recorder.providers)
    graded = GradedRun(play(agent, "where is A1?", recorder=recorder).view)
    assert graded.task == "where is A1?"
    assert graded.text == "A1 shipped."


# --- arithmetic, compare, out ---------------------------------------------------------------

def test_pass_at_k_and_pass_hat_k():
    assert pass_at_k(5, 0, 1) == 0.0 and pass_at_k(5, 5, 3) == 1.0
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_hat_k(4, 3, 2) == pytest.approx(3 / 6)  # C(3,2)/C(4,2)
    assert pass_hat_k(3, 2, 3) == 0.0 and pass_hat_k(3, 3, 3) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)
    assert distribution([3, 1, None, 2, 10]) == {"min": 1, "median": 2.5, "p90": 10, "max": 10}


def _report(**rates: tuple[int, int]) -> Report:
    def trial(ok: bool) -> TrialResult:
        return TrialResult(trace_id=None, stop_reason="answered", grades=[GradeResult(grader="g", passed=ok)])
    cases = [CaseResult(name=n, task=n, trials=[trial(i < passed) for i in range(n_)]) for n, (passed, n_) in rates.items()]
    return Report(cases=cases, graders=["g"], repeat=max(n_ for _, n_ in rates.values()))


def test_compare_names_the_cases_that_regressed_and_improved():
    before = _report(a=(3, 3), b=(1, 3), c=(2, 3), gone=(1, 1))
    after = _report(a=(1, 3), b=(3, 3), c=(2, 3), new=(0, 1))
    diff = after.compare(before)
    assert [(c.name, c.before, c.after) for c in diff.regressed] == [("a", 1.0, pytest.approx(1 / 3))]
    assert [c.name for c in diff.improved] == ["b"] and diff.improved[0].trials == (3, 3)
    assert diff.unchanged == ["c"] and diff.added == ["new"] and diff.removed == ["gone"]


def test_a_report_round_trips_through_json_and_writes_junit():
    _, report = experiment(repeat=3)
    data = json.loads(report.to_json())
    assert data["pass_rate"] == report.pass_rate and data["cases"][1]["pass_rate"] == 0.0
    again = Report.from_json(report.to_json())
    assert again.pass_rate == report.pass_rate and again.compare(report).regressed == []
    with pytest.raises(ValueError, match="not a tracedagent evals report"):
        Report.from_json('{"cases": 1}')
    suite = ET.fromstring(report.to_junit())
    assert suite.get("tests") == "3" and suite.get("failures") == "2"
    failure = suite.find("testcase[@name='bad']/failure")
    assert failure is not None and "output_contains" in failure.text
    assert suite.find("testcase[@name='good']/failure") is None


def test_junit_holds_words_xml_cannot_as_a_replacement_character():
    """A judge's explanation or a case name with a control character or a lone surrogate: the
    JUnit file still parses (and encodes as UTF-8) for the CI that reads it."""
    words = "bad \x1b[31m\x00 \ud800 é"
    trial = TrialResult(trace_id="x", stop_reason="answered", grades=[GradeResult(grader="g", passed=False,
                                                                                 explanation=words)])
    report = Report(cases=[CaseResult(name="bell\x07", task="t", trials=[trial])], graders=["g"], repeat=1)
    [case] = ET.fromstring(report.to_junit().encode("utf-8"))
    assert case.get("name") == "bell\ufffd"
    assert case.find("failure").text.endswith("g: bad \ufffd[31m\ufffd \ufffd é")
    # the JSON keeps the words as they were, in a file UTF-8 can write
    again = Report.from_json(report.to_json().encode("utf-8").decode("utf-8"))
    assert again.cases[0].trials[0].grades[0].explanation == words and again.cases[0].name == "bell\x07"


# --- datasets saved and loaded -------------------------------------------------------------

def polite(run: GradedRun) -> bool:
    """A user's grader, named in a file as test_evals:polite."""
    return "please" in run.text


@grader(threshold=0.5)
def brief(run: GradedRun) -> float:
    """A decorated grader: a Grader already, named in a file as test_evals:brief."""
    return 1.0 if len(run.text) < 100 else 0.0


@grader
def terse(run: GradedRun) -> bool:
    """Decorated bare, as pytest's fixtures are: a Grader all the same."""
    return len(run.text) < 100


def test_a_bare_decorated_grader_is_a_grader_that_grades_saves_and_loads(tmp_path):
    assert isinstance(terse, Grader) and terse.name == "terse" and terse.threshold == 1.0
    Dataset(["t"], [terse]).save(tmp_path / "d.json")
    (loaded,) = Dataset.load(tmp_path / "d.json").graders
    assert loaded.name == "terse" and loaded.check is terse.check


def test_a_decorated_grader_saves_and_loads_with_its_threshold(tmp_path):
    Dataset(["t"], [brief]).save(tmp_path / "d.json")
    assert json.loads((tmp_path / "d.json").read_text())["graders"] == [{"grader": "test_evals:brief", "threshold": 0.5}]
    (loaded,) = Dataset.load(tmp_path / "d.json").graders
    assert loaded.name == "brief" and loaded.threshold == 0.5 and loaded.check is brief.check


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_dataset_round_trips_with_its_graders_named(tmp_path, suffix):
    dataset = Dataset([Case(task="where is A1?", name="a1", expected_output="shipped", metadata={"tier": 1}), "hi"],
                      [stop_reason_in(["answered", "approval_required"]), steps_under(3).with_threshold(1.0),
                       polite, output_contains("x", case_sensitive=False)], name="shop")
    path = tmp_path / f"shop{suffix}"
    dataset.save(path)
    loaded = Dataset.load(path)
    assert loaded.cases == dataset.cases
    assert loaded.name == "shop"
    assert [(g.name, g.ref, dict(g.args), g.threshold) for g in loaded.graders] == \
           [(g.name, g.ref, dict(g.args), g.threshold) for g in dataset.graders]
    assert loaded.graders[2].check is polite


def test_a_dataset_file_names_graders_with_thresholds_and_builtins_without_args(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"cases": [{"task": "t"}], "graders": [
        "tracedagent.evals:answered", {"grader": "tracedagent.evals:tool_success_rate", "args": {"threshold": 0.8}},
        {"grader": "test_evals:polite", "threshold": 0.5, "name": "kind"}]}))
    graders = Dataset.load(path).graders
    assert [(g.name, g.threshold) for g in graders] == [("answered", 1.0), ("tool_success_rate", 0.8), ("kind", 0.5)]


@pytest.mark.parametrize("content, message", [
    ("{", "not valid json"),
    ('{"cases": [{"name": "x"}]}', "case 0"),
    ('{"cases": [{"task": "t", "expect": 1}]}', "unknown case field"),
    ('{"cases": [], "graders": ["nowhere:thing"]}', "cannot be imported"),
    ('{"cases": [], "graders": ["no_colon"]}', "module:attr"),
])
def test_a_bad_dataset_file_is_a_named_error(tmp_path, content, message):
    path = tmp_path / "d.json"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        Dataset.load(path)


def test_a_lambda_grader_cannot_be_saved_and_says_why(tmp_path):
    with pytest.raises(DatasetError, match="cannot be saved"):
        Dataset(["t"], [lambda run: True]).save(tmp_path / "d.json")


def test_two_graders_with_one_name_are_refused():
    with pytest.raises(DatasetError, match="share a name"):
        Dataset(["t"], [answered(), answered()])



def test_two_cases_of_one_name_are_a_named_error_not_one_case_hiding_the_other():
    """A report's cases are compared by name: two of one name would be one in a comparison."""
    with pytest.raises(DatasetError, match=r"two cases share a name \(\['refund'\]\)"):
        Dataset([Case(task="a", name="refund"), Case(task="b", name="refund")])
    with pytest.raises(DatasetError, match="case-1"):  # a name given, and an unnamed case's
        Dataset([Case(task="a", name="case-1"), Case(task="b")])


def test_recorded_runs_of_one_agent_in_one_trace_are_each_a_case_of_their_own():
    recorder = Recorder()
    played = play(Agent(FakeModel(["A1 shipped."]), name="shop", **recorder.providers), "where?", recorder=recorder)
    report = grade_recorded(None, [answered()], runs=[played.view, played.view],
                            tracer_provider=recorder.tracer_provider)
    name = f"shop {played.view.trace_id}"
    assert [c.name for c in report.cases] == [name, f"{name} #2"]
    assert len(report.compare(report).unchanged) == 2