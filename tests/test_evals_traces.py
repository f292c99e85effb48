"""Grading recorded runs (an OTLP/JSON file, Jaeger) without re-running them: the same grades as
the live runs; each grade in the recorded trace; datasets built from traces replay deterministically."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from opentelemetry.trace import format_span_id

from tracedagent._cli._demo import SCENARIOS, build_agent, run_scenario
from tracedagent._core._budget import Stop
from tracedagent._traces._otlp_json import encode
from tracedagent._testing._played import played
from tracedagent.evals import (GradedRun, RecordedRunsError, answered, grade_recorded, no_denied_calls,
                               no_failed_calls, no_repeated_calls, output_contains, recorded_runs, steps_under,
                               stop_reason_in, tokens_under, tool_success_rate, trajectory_contains)
from tracedagent.evals._experiment import grade_trial
from tracedagent.evals._telemetry import GradeTelemetry
from tracedagent.testing import Recorder

GRADERS = [answered(), stop_reason_in([Stop.ANSWERED, Stop.STEP_BUDGET]), no_denied_calls(), no_failed_calls(),
           no_repeated_calls(), tool_success_rate(threshold=0.5), steps_under(3), tokens_under(400),
           trajectory_contains(["lookup_order"]), output_contains("shipped")]


def grades_of(trial) -> list[tuple]:
    return [(g.grader, g.passed, g.score, g.label) for g in trial.grades]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, list[tuple]], Path]:
    """Every demo scenario played live with content capture on, graded live; and the OTLP/JSON
    file of the same spans, as ``tracedagent demo --out`` writes it (``encode``)."""
    recorder = Recorder()
    telemetry = GradeTelemetry(*recorder.providers.values())
    live: dict[str, list[tuple]] = {}
    for scenario in SCENARIOS:
        seen = len(recorder.spans())
        run = run_scenario(build_agent(scenario, pace=0, capture_content=True, **recorder.providers), scenario)
        trial = grade_trial(GRADERS, GradedRun(played(run, recorder, seen).view, run=run), telemetry)
        live[trial.trace_id] = grades_of(trial)
    runs = [s for s in recorder.spans() if not s.name.startswith("evaluate ")]  # the runs' spans, not the grades'
    path = tmp_path_factory.mktemp("demo") / "demo.otlp.json"
    path.write_text(json.dumps(encode(runs)))
    return live, path


def test_grading_the_demo_file_gives_the_live_runs_grades(demo):
    live, path = demo
    report = grade_recorded(path, GRADERS, tracer_provider=Recorder().tracer_provider)
    recorded = {case.trials[0].trace_id: grades_of(case.trials[0]) for case in report.cases}
    assert set(live) <= set(recorded)  # the file also holds resumptions' traces, graded too
    for trace_id, grades in live.items():
        assert recorded[trace_id] == grades, trace_id
    # the graders tell the runs apart: some pass, some fail
    assert 0.0 < report.pass_rate < 1.0
    assert {passed for grades in recorded.values() for _, passed, _, _ in grades} == {True, False}


def test_each_grade_of_a_recorded_run_is_a_new_span_under_the_recorded_run_span(demo):
    _, path = demo
    recorder = Recorder()
    [first] = recorded_runs(path, agent="help-desk")
    for _ in range(2):
        grade_recorded(None, [answered()], runs=[first], tracer_provider=recorder.tracer_provider)
    spans = recorder.spans("evaluate answered")
    assert len(spans) == 2  # grading again adds a span, beside the first
    for span in spans:
        assert format_span_id(span.parent.span_id) == format_span_id(first.span.context.span_id)
        assert span.context.trace_id == first.span.context.trace_id


def test_filters_pick_runs_by_agent_and_stop_reason(demo):
    _, path = demo
    stuck = recorded_runs(path, stop_reason="step_budget_exhausted")
    assert stuck and {v.stop_reason for v in stuck} == {"step_budget_exhausted"}
    # the outermost runs only, unless an agent is named: a sub-agent's runs too
    assert "writer" not in {v.agent_name for v in recorded_runs(path)}
    [writer] = recorded_runs(path, agent="writer")
    assert writer.stop_reason == "step_budget_exhausted"


def without_content(tmp_path: Path) -> Path:
    """The help desk's run recorded with content capture off, as an OTLP/JSON file."""
    recorder = Recorder()
    scenario = SCENARIOS[0]
    run_scenario(build_agent(scenario, pace=0, capture_content=False, **recorder.providers), scenario)
    path = tmp_path / "plain.otlp.json"
    path.write_text(json.dumps(encode(recorder.spans())))
    return path


def test_a_recorded_run_without_content_says_its_output_was_not_recorded(tmp_path):
    report = grade_recorded(without_content(tmp_path), [answered(), output_contains("shipped")])
    [case] = report.cases
    grades = {g.grader: g for g in case.trials[0].grades}
    assert grades["answered"].passed
    assert not grades["output_contains"].passed and grades["output_contains"].error == "ContentNotRecorded"


def test_a_source_that_cannot_be_read_is_a_named_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(RecordedRunsError):
        grade_recorded(bad, [answered()])
    with pytest.raises(RecordedRunsError):
        recorded_runs(tmp_path / "missing.json")
    with pytest.raises(RecordedRunsError, match="service"):
        recorded_runs(jaeger="http://127.0.0.1:9")


def test_a_jaeger_search_grades_the_runs_it_finds_by_service_and_stop_reason():
    import urllib.parse
    from _fake_servers import RoutedServer
    from tracedagent._core import _names as N
    traces = json.loads((Path(__file__).parent / "data" / "demo-jaeger.json").read_text())["data"]
    jaeger = RoutedServer()
    try:
        jaeger.answer("/api/traces", {"data": traces, "errors": None})
        report = grade_recorded(None, [answered()], jaeger=jaeger.url, service="shop", stop_reason="model_error",
                                since_seconds=7200, tracer_provider=Recorder().tracer_provider)
        query = dict(urllib.parse.parse_qsl(jaeger.requests[0].query))
    finally:
        jaeger.close()
    assert query["service"] == "shop" and json.loads(query["tags"]) == {N.STOP_REASON: "model_error"}
    # Jaeger's answer is filtered again: only the model_error runs are graded, and none answered
    assert report.cases and {c.trials[0].stop_reason for c in report.cases} == {"model_error"}
    assert report.pass_rate == 0.0


# --- datasets from traces ------------------------------------------------------------------

def test_a_dataset_of_the_failed_runs_of_a_file_replays_them_deterministically(demo, tmp_path):
    from tracedagent.evals import Dataset, stop_reason_in
    _, path = demo
    failed = recorded_runs(path, stop_reason="step_budget_exhausted")
    dataset = Dataset.from_traces(path, [stop_reason_in(["step_budget_exhausted"]), no_failed_calls()],
                                  stop_reason="step_budget_exhausted", name="stuck")
    assert [c.metadata["trace_id"] for c in dataset.cases] == [v.trace_id for v in failed]
    assert all(c.task and c.recording is not None for c in dataset.cases)
    dataset.save(tmp_path / "stuck.json")  # the recording goes into the file, and comes back
    loaded = Dataset.load(tmp_path / "stuck.json")
    assert [c.recording for c in loaded.cases] == [c.recording for c in dataset.cases]

    report = loaded.evaluate(repeat=2)  # no agent: each case's recorded run is played again
    recorded = {v.trace_id: v for v in failed}
    for case in report.cases:
        view = recorded[case.name.split()[-1]]
        for trial in case.trials:
            assert trial.error is None, trial.error
            assert trial.stop_reason == "step_budget_exhausted" and trial.steps == view.steps
        assert [grades_of(t) for t in case.trials][0] == [grades_of(t) for t in case.trials][1]
        assert case.trials[0].grades[0].passed  # stop_reason_in: it stopped as recorded
    assert {t.trace_id for t in report.trials}.isdisjoint(recorded)  # new runs, not the recorded ones


def test_a_recorded_case_serves_recorded_results_and_names_a_call_with_new_arguments(demo):
    from tracedagent._core._records import ToolCall
    from tracedagent.evals import Case
    from tracedagent.evals._recorded import recordings
    _, path = demo
    [recording] = recordings(path, agent="help-desk")
    case = Case.from_recorded(recording)
    [call] = [c for c in recording.stubs if c.name == "lookup_order"]
    assert call.outcome == "ok"
    served = case.tools().dispatch(ToolCall(id="c1", name="lookup_order", arguments=call.arguments))
    assert (served.outcome.value, served.content) == ("ok", call.result)
    new = case.tools().dispatch(ToolCall(id="c2", name="lookup_order", arguments={"order_id": "Z-9"}))
    assert new.outcome.value == "error" and "no recorded result" in new.content  # named, not a guess


def test_a_run_recorded_without_content_cannot_be_a_case(tmp_path):
    from tracedagent.evals import Dataset
    with pytest.raises(RecordedRunsError, match="content|captur") as raised:
        Dataset.from_traces(without_content(tmp_path))
    assert re.search(r"run of '[^']+' in trace [0-9a-f]{32}: ", str(raised.value))  # which of the runs found


# --- the command line ----------------------------------------------------------------------

def test_eval_grade_grades_a_file_and_writes_the_report(demo, tmp_path):
    from click.testing import CliRunner
    from tracedagent._cli._main import cli
    from tracedagent.evals import Report
    live, path = demo
    out = tmp_path / "graded.json"
    result = CliRunner().invoke(cli, ["eval", "grade", str(path), "--grader", "tracedagent.evals:answered",
                                      "--grader", "tracedagent.evals:no_denied_calls", "--json", str(out),
                                      "--gate", "1"])
    assert result.exit_code == 1, result.output  # some demo runs stop without answering: the gate fails
    report = Report.from_json(out.read_text())
    assert report.graders == ["answered", "no_denied_calls"]
    by_trace = {c.trials[0].trace_id: c for c in report.cases}
    for trace_id, grades in live.items():
        assert [g.passed for g in by_trace[trace_id].trials[0].grades] == [grades[0][1], grades[2][1]]
    assert "gate failed" in result.output


def test_eval_dataset_writes_the_failed_runs_as_cases(demo, tmp_path):
    from click.testing import CliRunner
    from tracedagent._cli._main import cli
    from tracedagent.evals import Dataset
    _, path = demo
    out = tmp_path / "stuck.json"
    result = CliRunner().invoke(cli, ["eval", "dataset", str(path), "--stop-reason", "step_budget_exhausted",
                                      "-o", str(out), "--name", "stuck"])
    assert result.exit_code == 0, result.output
    dataset = Dataset.load(out)
    expected = [v.trace_id for v in recorded_runs(path, stop_reason="step_budget_exhausted")]
    assert dataset.name == "stuck" and [c.metadata["trace_id"] for c in dataset.cases] == expected
    bad = CliRunner().invoke(cli, ["eval", "grade", str(path), "--grader", "nowhere:nothing"])
    assert bad.exit_code == 2 and "cannot be imported" in bad.output


def test_a_jaeger_span_whose_ids_are_not_hex_is_a_named_error():
    from _fake_servers import RoutedServer
    [trace] = json.loads((Path(__file__).parent / "data" / "demo-jaeger.json").read_text())["data"][:1]
    trace["spans"][0]["spanID"] = "not-hex"
    jaeger = RoutedServer()
    try:
        jaeger.answer("/api/traces", {"data": [trace], "errors": None})
        with pytest.raises(RecordedRunsError, match="ids cannot be read"):
            recorded_runs(jaeger=jaeger.url, service="shop")
    finally:
        jaeger.close()


def test_grading_the_file_tracedagent_demo_writes_gives_the_live_runs_grades(demo, tmp_path):
    """The done-when of #38: the demo's own OTLP/JSON file (a separate process, content capture
    on) graded gives each scenario the grades of its live run."""
    import os
    import subprocess
    import sys
    live, path = demo
    agent_of = {v.trace_id: v.agent_name for v in recorded_runs(path)}
    out = tmp_path / "tracedagent-demo.otlp.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
    done = subprocess.run([sys.executable, "-m", "tracedagent", "demo", "--pace", "0", "--out", str(out)],
                          cwd=Path(__file__).parent.parent, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = grade_recorded(out, GRADERS, tracer_provider=Recorder().tracer_provider)
    from_file: dict[str, list[list[tuple]]] = {}
    for case in report.cases:  # a scenario resumed after a pause has a second run (trace) of its agent
        from_file.setdefault(case.name.split()[0], []).append(grades_of(case.trials[0]))
    assert len(live) == len(SCENARIOS)
    for trace_id, grades in live.items():
        assert grades in from_file[agent_of[trace_id]], agent_of[trace_id]
    assert any("output_contains" == g[0] and g[1] for grades in live.values() for g in grades)  # content graded


def test_runs_that_cannot_be_cases_are_skipped_by_name_when_asked_and_the_others_are_cases(demo, tmp_path):
    from click.testing import CliRunner
    from tracedagent._cli._main import cli
    from tracedagent.evals import Dataset
    _, path = demo
    with pytest.raises(RecordedRunsError):  # the demo has a cancelled run: by default the first such stops it
        Dataset.from_traces(path)
    skipped: list[RecordedRunsError] = []
    dataset = Dataset.from_traces(path, skipped=skipped)
    every = recorded_runs(path)
    assert skipped and all(isinstance(e, RecordedRunsError) for e in skipped)
    assert len(dataset.cases) + len(skipped) == len(every)
    assert {v.trace_id for v in every} >= {c.metadata["trace_id"] for c in dataset.cases}
    assert all(any(v.trace_id in str(e) for v in every) for e in skipped), "each skipped run named by its trace"
    out = tmp_path / "all.json"
    assert CliRunner().invoke(cli, ["eval", "dataset", str(path), "-o", str(out)]).exit_code == 2
    result = CliRunner().invoke(cli, ["eval", "dataset", str(path), "-o", str(out), "--skip-unplayable"])
    assert result.exit_code == 0, result.output
    assert result.output.count("skipped: ") == len(skipped)
    assert f"{len(dataset.cases)} case(s) written" in result.output and len(Dataset.load(out).cases) == len(dataset.cases)
