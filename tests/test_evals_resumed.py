"""A run that resumed a pause is a case too: it has no task of its own (its conversation is all
history), so playing it resumes the recorded pause again with the recorded decisions."""

from __future__ import annotations

import json

import pytest

from tracedagent._cli._demo import SCENARIOS, build_agent, run_scenario
from tracedagent._traces._otlp_json import encode
from tracedagent.evals import Case, Dataset, answered, no_denied_calls, recorded_runs, stop_reason_in
from tracedagent.testing import Recorder

REFUND = next(s for s in SCENARIOS if s.decisions)


@pytest.fixture(scope="module")
def paused_then_resumed(tmp_path_factory):
    """The refund-approval scenario (a run that pauses, then its resumption: two traces) as the
    OTLP/JSON file ``tracedagent demo --out`` writes, content capture on."""
    recorder = Recorder()
    run_scenario(build_agent(REFUND, pace=0, capture_content=True, **recorder.providers), REFUND)
    path = tmp_path_factory.mktemp("resumed") / "refund.otlp.json"
    path.write_text(json.dumps(encode(recorder.spans())))
    return path


def test_a_resumed_run_is_a_case_that_resumes_the_recorded_pause(paused_then_resumed, tmp_path):
    [resumed] = recorded_runs(paused_then_resumed, stop_reason="answered")
    dataset = Dataset.from_traces(paused_then_resumed, [answered(), stop_reason_in(["answered"]), no_denied_calls()],
                                  stop_reason="answered")
    [case] = dataset.cases
    assert case.resumes and case.task == "" and case.metadata["trace_id"] == resumed.trace_id
    dataset.save(tmp_path / "resumed.json")
    [loaded] = Dataset.load(tmp_path / "resumed.json").cases
    assert loaded.resumes and loaded.recording == case.recording

    recorder = Recorder()
    reports = [Dataset([loaded], dataset.graders).evaluate(recorder=recorder) for _ in range(2)]
    for report in reports:
        [trial] = report.trials
        assert trial.error is None, trial.error
        assert report.pass_rate == 1.0 and trial.stop_reason == "answered" and trial.trace_id != resumed.trace_id
    runs = {r.trace_id: r for r in recorder.runs()}
    for report in reports:  # the decided refund ran again, as recorded; nothing before the pause ran again
        view = runs[report.trials[0].trace_id]
        assert view.executed_tools == resumed.executed_tools == ["refund"]
        assert view.tool_outcomes == resumed.tool_outcomes


def test_the_paused_run_itself_stays_a_case_of_its_own_task(paused_then_resumed):
    [case] = Dataset.from_traces(paused_then_resumed, stop_reason="approval_required").cases
    assert not case.resumes and case.task == REFUND.task


def test_a_case_that_does_not_resume_says_so():
    with pytest.raises(ValueError, match="does not resume"):
        Case(task="hi").resumption(None)


def test_a_resumed_case_resumes_with_the_agent_given(paused_then_resumed):
    from tracedagent import Agent
    from tracedagent.testing import FakeModel
    dataset = Dataset.from_traces(paused_then_resumed, [answered()], stop_reason="answered")
    [resumed] = recorded_runs(paused_then_resumed, stop_reason="answered")
    recorder = Recorder()

    def new_version(case: Case) -> Agent:  # its own last words; the case's recorded tool results
        return Agent(FakeModel(["Refund done."]), case.tools(), name="refund-approval", **recorder.providers)

    report = dataset.evaluate(new_version, recorder=recorder)
    [trial] = report.trials
    assert trial.error is None and trial.stop_reason == "answered" and report.pass_rate == 1.0
    [run] = recorder.runs()
    assert run.executed_tools == ["refund"]  # the decided call, served its recorded result
    assert run.steps == resumed.steps  # counted from the pause, as the recorded resumption was
