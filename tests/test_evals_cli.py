"""`tracedagent eval run`: a dataset against an agent named module:attr, the table, JSON and
JUnit out, a baseline compared, the gate's exit status, bad input named (exit 2)."""

from __future__ import annotations

import json
import textwrap
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner

from tracedagent._cli._main import cli


@pytest.fixture()
def project(tmp_path, monkeypatch, request):
    """A directory with an agent module (its name unique per test: modules are cached) and a dataset."""
    module = f"evalagent_{request.node.name.replace('[', '_').replace(']', '').replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent('''
        from tracedagent import Agent
        from tracedagent.testing import FakeModel

        ANSWERS = {"good": "A1 shipped.", "bad": "no idea"}

        def make(case):
            return Agent(FakeModel([ANSWERS[case.name]]), name="shop")

        def all_good(case):
            return Agent(FakeModel(["A1 shipped."]), name="shop")

        not_an_agent = 42
    '''))
    (tmp_path / "shop.json").write_text(json.dumps({"name": "shop", "cases": [
        {"task": "where is A1?", "name": "good", "expected_output": "shipped"},
        {"task": "where is A1?", "name": "bad", "expected_output": "shipped"}],
        "graders": ["tracedagent.evals:answered", "tracedagent.evals:output_contains"]}))
    monkeypatch.chdir(tmp_path)
    return tmp_path, module


def test_eval_run_prints_the_table_and_writes_json_and_junit(project):
    path, module = project
    result = CliRunner().invoke(cli, ["eval", "run", "shop.json", "--agent", f"{module}:make", "--repeat", "2",
                                      "--json", "r.json", "--junit", "r.xml"])
    assert result.exit_code == 0, result.output
    assert "pass rate 50%" in result.output and "output_contains" in result.output
    report = json.loads((path / "r.json").read_text())
    assert report["pass_rate"] == 0.5 and [c["pass_rate"] for c in report["cases"]] == [1.0, 0.0]
    assert ET.fromstring((path / "r.xml").read_text()).get("failures") == "1"


def test_the_gate_fails_the_command_under_its_pass_rate(project):
    _, module = project
    runner = CliRunner()
    assert runner.invoke(cli, ["eval", "run", "shop.json", "--agent", f"{module}:make", "--gate", "0.5"]).exit_code == 0
    result = runner.invoke(cli, ["eval", "run", "shop.json", "--agent", f"{module}:make", "--gate", "0.9"])
    assert result.exit_code == 1 and "gate failed" in result.output


def test_a_baseline_names_the_cases_that_improved_and_fails_on_regression_when_asked(project):
    _, module = project
    runner = CliRunner()
    assert runner.invoke(cli, ["eval", "run", "shop.json", "--agent", f"{module}:all_good", "--json", "good.json"]).exit_code == 0
    result = runner.invoke(cli, ["eval", "run", "shop.json", "--agent", f"{module}:make", "--baseline", "good.json"])
    assert result.exit_code == 0 and "regressed" in result.output and "1 regressed, 0 improved" in result.output
    result = runner.invoke(cli, ["eval", "run", "shop.json", "--agent", f"{module}:make", "--baseline", "good.json",
                                 "--fail-on-regression"])
    assert result.exit_code == 1


@pytest.mark.parametrize("agent, message", [("nowhere:make", "cannot be imported"), ("{m}:not_an_agent", "not an Agent"),
                                            ("no_colon", "module:attr")])
def test_bad_input_is_exit_2_with_what_is_wrong(project, agent, message):
    _, module = project
    result = CliRunner().invoke(cli, ["eval", "run", "shop.json", "--agent", agent.format(m=module)])
    assert result.exit_code == 2 and message in result.output


def test_a_bad_baseline_is_exit_2(project):
    path, module = project
    (path / "bad.json").write_text("{}")
    result = CliRunner().invoke(cli, ["eval", "run", "shop.json", "--agent", f"{module}:make", "--baseline", "bad.json"])
    assert result.exit_code == 2 and "not a tracedagent evals report" in result.output
