"""The demo's evals: the dataset shipped in the package (``tracedagent/_cli/eval_demo``) over
the demo's scripted agents, `tracedagent eval demo` (its short form) and the long form a fresh
clone can type, and the same dataset as pytest tests. A pip user's wheel carrying the file is
tests/test_release.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import tracedagent.testing  # noqa: F401  (before pytester's sessions: see tests/test_pytest_plugin.py)
from tracedagent._cli._eval_demo import AGENT, DATASET, demo_agent
from tracedagent._cli._main import cli
from tracedagent._cli._scenarios import SCENARIOS
from tracedagent.evals import Case, Dataset

ROOT = Path(__file__).resolve().parents[1]
PASSING = {"help-desk", "parallel-tracking", "live-answer", "planner", "prompt-injection"}
FAILING = {"runaway-research": {"stop_reason_in", "output_contains"},
           "stuck-status-check": {"stop_reason_in", "no_repeated_calls", "output_contains"}}


def test_the_shipped_dataset_plays_the_demo_scenarios_it_names():
    dataset = Dataset.load(DATASET)
    scenarios = {s.name: s for s in SCENARIOS}
    assert set(dataset.case_names()) == PASSING | set(FAILING)
    for case in dataset.cases:  # each case is its scenario's task: the file cannot drift from the demo
        assert case.task == scenarios[case.metadata["scenario"]].task
    assert [g.ref for g in dataset.graders] == ["tracedagent.evals:stop_reason_in", "tracedagent.evals:no_repeated_calls",
                                                "tracedagent.evals:steps_under", "tracedagent.evals:output_contains"]


def test_most_cases_pass_and_the_budget_and_repeat_stops_fail_with_their_reasons():
    report = Dataset.load(DATASET).evaluate(demo_agent, repeat=2)
    by_name = {c.name: c for c in report.cases}
    assert {n for n, c in by_name.items() if c.pass_rate == 1.0} == PASSING
    for name, graders in FAILING.items():
        assert by_name[name].pass_rate == 0.0
        for trial in by_name[name].trials:
            assert {g.grader for g in trial.grades if not g.passed} == graders
    [trial] = by_name["runaway-research"].trials[:1]
    assert trial.stop_reason == "step_budget_exhausted"
    assert "stop reason 'step_budget_exhausted' is not one of ['answered']" in [g.explanation for g in trial.grades]
    assert report.pass_rate == pytest.approx(5 / 7)


def test_a_case_naming_no_demo_scenario_is_a_failed_trial_that_says_which_exist():
    report = Dataset([Case(task="hi", name="nope")], []).evaluate(demo_agent)
    [trial] = report.cases[0].trials
    assert trial.error.startswith("LookupError: the demo has no scenario 'nope': one of ['help-desk'")


def test_eval_demo_is_eval_run_of_the_shipped_file_and_takes_its_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    short = runner.invoke(cli, ["eval", "demo", "--json", "short.json", "--repeat", "2"])
    assert short.exit_code == 0, short.output
    assert "demo-support" in short.output and "71%" in short.output and "runaway-research" in short.output
    # The long form, as a fresh clone types it (README): the file in the package, the agent by module:attr.
    monkeypatch.chdir(ROOT)
    long = runner.invoke(cli, ["eval", "run", "tracedagent/_cli/eval_demo/support.json", "--agent",
                               "tracedagent._cli._eval_demo:demo_agent", "--json", str(tmp_path / "long.json")])
    assert long.exit_code == 0, long.output
    rates = [{c["name"]: c["pass_rate"] for c in json.loads((tmp_path / f).read_text())["cases"]}
             for f in ("short.json", "long.json")]
    assert rates[0] == rates[1] and rates[0]["help-desk"] == 1.0 and rates[0]["stuck-status-check"] == 0.0
    gated = runner.invoke(cli, ["eval", "demo", "--gate", "0.9"])
    assert gated.exit_code == 1 and "gate failed: pass rate 71% is under 90%" in gated.output
    shown = runner.invoke(cli, ["eval", "demo", "--path"])
    assert shown.output.splitlines() == [str(DATASET), f"--agent {AGENT}"] and DATASET.is_file()
    assert runner.invoke(cli, ["eval", "demo", "--repeat", "0"]).exit_code == 2  # eval run's own checks


def test_the_demo_dataset_as_pytest_tests(pytester: pytest.Pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest")
    pytester.makepyfile(test_demo_evals='''
        from tracedagent._cli._eval_demo import DATASET, demo_agent
        from tracedagent.evals import Dataset, parametrize

        dataset = Dataset.load(DATASET)

        @parametrize(dataset)
        def test_demo(case, tracedagent_eval):
            tracedagent_eval(dataset, case, demo_agent)
    ''')
    result = pytester.runpytest("-v", "-p", "no:randomly")
    result.assert_outcomes(passed=len(PASSING), failed=len(FAILING))
    result.stdout.fnmatch_lines(["*test_demo?runaway-research? FAILED*", "*test_demo?stuck-status-check? FAILED*"])
    result.stdout.fnmatch_lines(["*stop_reason_in: stop reason 'step_budget_exhausted' is not one of ?'answered'?*"])


@pytest.mark.parametrize("doc", ["README.md", "docs/evals.md"])
def test_the_docs_show_what_eval_demo_really_prints(doc):
    """The README's first screen and the walkthrough paste `tracedagent eval demo`'s table: each
    row they show has the case's real pass rate and failed graders, and the title its pass rate."""
    text = (ROOT / doc).read_text()
    block = text[text.index("$ tracedagent eval demo\n"):]
    block = block[:block.index("```")]
    report = Dataset.load(DATASET).evaluate(demo_agent)
    assert f"pass rate {report.pass_rate:.0%} ({len(report.cases)} cases x 1)" in block
    rows = {cells[0]: cells[1:] for line in block.splitlines() if line.startswith("│")
            for cells in [[c.strip() for c in line.strip("│").split("│")]] if cells[0]}
    assert {"help-desk", "runaway-research", "stuck-status-check"} <= set(rows)
    for case in report.cases:
        if case.name in rows:
            failed = {g.grader for t in case.trials for g in t.grades if not g.passed}
            assert rows[case.name][0] == f"{case.pass_rate:.0%}"
            assert set(rows[case.name][-1].replace(",", " ").split()) - {"-"} == failed
