"""Evals against the real stack: runs exported through the Collector to Jaeger are graded live
(each grade in the graded run's trace), graded again from Jaeger (the same grades), and the
failed ones become a dataset that replays them deterministically (#38's done-when)."""

from __future__ import annotations

import uuid

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tracedagent import Stop, configure
from tracedagent._cli._demo import SCENARIOS, build_agent, run_scenario
from tracedagent._core._records import ToolCall
from tracedagent._testing._played import played
from tracedagent.evals import (Dataset, Grade, GradedRun, answered, grade_recorded, grader, no_failed_calls,
                               recorded_runs, steps_under, stop_reason_in, tool_success_rate, trajectory_contains)
from tracedagent.evals._experiment import grade_trial
from tracedagent.evals._telemetry import GradeTelemetry
from tracedagent.testing import Recorder

from ._stack import JAEGER, OTLP_GRPC, eventually, jaeger_trace

STUCK = "step_budget_exhausted"
GRADERS = [answered(), stop_reason_in([Stop.ANSWERED]), no_failed_calls(), tool_success_rate(threshold=0.5),
           steps_under(3), trajectory_contains(["lookup_order"])]
PLAYED = ("runaway-research", "runaway-research", "no-progress", "help-desk")
"""Two runs that exhaust their step budget (the dataset's cases), and two that do not."""


def grades_of(trial) -> list[tuple]:
    return [(g.grader, g.passed, g.score, g.label) for g in trial.grades]


@grader(name="replays_recording")
def replays_recording(run: GradedRun) -> Grade:
    """The replayed run did what its recording did: stop reason, trajectory, every dispatched
    call's tool, arguments, outcome and result (the case's recording, read from Jaeger)."""
    recording = run.case.recording
    live = {"stop": run.run.stop.value, "trajectory": run.run.trajectory(),
            "calls": [(r.name, c.arguments, r.outcome.value, r.content) for s in run.run.steps
                      for c, r in zip(s.completion.tool_calls, s.tool_results)]}
    recorded = {"stop": recording.stop_reason, "trajectory": recording.tools.get("executed"),
                "calls": [(c.name, c.arguments, c.outcome, c.result) for c in recording.stubs]}
    differs = [key for key in live if live[key] != recorded[key]]
    explanation = f"differs from the recording in {differs}: live {live}, recorded {recorded}" if differs else None
    return Grade(passed=not differs, score=0.0 if differs else 1.0, explanation=explanation)


@pytest.fixture(scope="module")
def graded_live(stack_up):
    """The runs of ``PLAYED`` (content capture on) exported to the stack under a service of their
    own, and each graded live by ``GRADERS`` with its grades exported too; the recorder keeps
    the same spans for the live views."""
    service = f"tracedagent-evals-{uuid.uuid4().hex[:8]}"
    telemetry = configure(service_name=service, endpoint=OTLP_GRPC, protocol="grpc", metric_export_interval=1.0,
                          set_global=False)
    recorder = Recorder()
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(recorder.exporter))
    grades = GradeTelemetry(telemetry.tracer_provider, telemetry.meter_provider)
    live: dict[str, tuple[str, list[tuple]]] = {}
    try:
        for name in PLAYED:
            scenario = next(s for s in SCENARIOS if s.name == name)
            seen = len(recorder.spans())
            agent = build_agent(scenario, pace=0, capture_content=True, tracer_provider=telemetry.tracer_provider,
                                meter_provider=telemetry.meter_provider)
            run = run_scenario(agent, scenario)
            trial = grade_trial(GRADERS, GradedRun(played(run, recorder, seen).view, run=run), grades)
            live[trial.trace_id] = (run.stop.value, grades_of(trial))
        telemetry.force_flush(timeout=10)
        for trace_id in live:  # every run's spans and its grades' spans are in Jaeger
            spans = len([s for s in recorder.spans() if f"{s.context.trace_id:032x}" == trace_id])
            eventually(f"trace {trace_id} with {spans} spans in Jaeger",
                       lambda: (t := jaeger_trace(trace_id)) and len(t["spans"]) >= spans)
        yield service, live
    finally:
        telemetry.shutdown(timeout=5)


def test_each_live_grade_is_a_span_in_the_graded_run_s_trace_in_jaeger(graded_live):
    _, live = graded_live
    for trace_id, (_, grades) in live.items():
        spans = jaeger_trace(trace_id)["spans"]
        [run] = [s for s in spans if s["operationName"].startswith("invoke_agent")]
        evaluations = [s for s in spans if s["operationName"].startswith("evaluate ")]
        assert sorted(s["operationName"] for s in evaluations) == sorted(f"evaluate {g[0]}" for g in grades)
        for span in evaluations:
            assert span["traceID"].zfill(32) == trace_id  # the same trace id as the graded run
            assert [r["spanID"] for r in span["references"] if r["refType"] == "CHILD_OF"] == [run["spanID"]]
            assert [log for log in span["logs"]
                    if {"key": "event", "type": "string", "value": "gen_ai.evaluation.result"} in log["fields"]]


def test_grading_the_runs_found_in_jaeger_gives_their_live_grades(graded_live):
    service, live = graded_live
    report = grade_recorded(None, GRADERS, jaeger=JAEGER, service=service, since_seconds=900,
                            tracer_provider=Recorder().tracer_provider)
    recorded = {c.trials[0].trace_id: (c.trials[0].stop_reason, grades_of(c.trials[0])) for c in report.cases}
    assert recorded == live
    assert {passed for _, grades in live.values() for _, passed, _, _ in grades} == {True, False}


def test_a_dataset_of_jaeger_s_failed_runs_replays_them_deterministically(graded_live, tmp_path):
    service, live = graded_live
    stuck = sorted(trace_id for trace_id, (stop, _) in live.items() if stop == STUCK)
    assert len(stuck) == 2
    dataset = Dataset.from_traces(None, [stop_reason_in([STUCK]), no_failed_calls(), replays_recording],
                                  jaeger=JAEGER, service=service, stop_reason=STUCK, since_seconds=900, name="stuck")
    assert sorted(c.metadata["trace_id"] for c in dataset.cases) == stuck
    assert [v.trace_id for v in recorded_runs(jaeger=JAEGER, service=service, since_seconds=900, stop_reason=STUCK)]
    dataset.save(tmp_path / "stuck.json")
    dataset = Dataset.load(tmp_path / "stuck.json")  # what `tracedagent eval dataset --from-jaeger` writes

    rounds = []
    for _ in range(2):  # twice: each time the same
        report = dataset.evaluate(repeat=1)  # no agent: each case's recorded run is played again
        rounds.append({case.name: grades_of(case.trials[0]) for case in report.cases})
        assert report.pass_rate == 1.0, [(g.grader, g.explanation) for t in report.trials for g in t.grades
                                          if not g.passed]
        for case in report.cases:
            [trial] = case.trials
            assert trial.error is None and trial.stop_reason == STUCK
            assert trial.trace_id not in stuck  # a new run, not the recorded one
            assert trial.steps == 4  # the scenario's max_steps, as recorded
    assert rounds[0] == rounds[1] and len(rounds[0]) == 2

    case = dataset.cases[0]
    [call] = case.recording.stubs[:1]
    served = case.tools().dispatch(ToolCall(id="c1", name=call.name, arguments=call.arguments))
    assert (served.outcome.value, served.content) == (call.outcome, call.result)
    new = case.tools().dispatch(ToolCall(id="c2", name=call.name, arguments={"query": "not what was recorded"}))
    assert new.outcome.value == "error" and "no recorded result" in new.content  # named, not a guess
