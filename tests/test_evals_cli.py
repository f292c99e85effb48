"""`tracedagent eval run` and `eval compare`: a dataset against an agent named module:attr, the
table, JSON and JUnit out, a baseline compared with what k allows one to claim, the gates' exit
statuses (1 a gate failed, 2 bad input, 3 spans not exported), the PNG, the progress bar, and the
runs and grades exported through configure() to a real OTLP receiver."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner
from rich.console import Console

from otlp_receivers import HttpReceiver
from tracedagent._cli._main import cli
from tracedagent._cli._progress import counting
from tracedagent._core import _names as N

ROOT = Path(__file__).resolve().parent.parent
PNG = b"\x89PNG\r\n\x1a\n"


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

        def broken(case):
            raise RuntimeError("no model key")

        not_an_agent = 42
    '''))
    (tmp_path / "shop.json").write_text(json.dumps({"name": "shop", "cases": [
        {"task": "where is A1?", "name": "good", "expected_output": "shipped"},
        {"task": "where is A1?", "name": "bad", "expected_output": "shipped"}],
        "graders": ["tracedagent.evals:answered", "tracedagent.evals:output_contains"]}))
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("OTEL_")]:  # in-process: never configure() the test's globals
        monkeypatch.delenv(name)
    monkeypatch.setenv("COLUMNS", "200")  # the tables' cells unwrapped, whatever runs the tests
    return tmp_path, module


def run(module: str, *args: str, agent: str = "make"):
    return CliRunner().invoke(cli, ["eval", "run", "shop.json", "--agent", f"{module}:{agent}", *args])


def test_eval_run_prints_the_table_and_writes_json_and_junit(project):
    path, module = project
    result = CliRunner().invoke(cli, ["eval", "run", "shop.json", "--agent", f"{module}:make", "--repeat", "2",
                                      "--json", "r.json", "--junit", "r.xml"])
    assert result.exit_code == 0, result.output
    assert "pass rate 50%" in result.output and "output_contains" in result.output
    report = json.loads((path / "r.json").read_text())
    assert report["pass_rate"] == 0.5 and [c["pass_rate"] for c in report["cases"]] == [1.0, 0.0]
    assert ET.fromstring((path / "r.xml").read_text()).get("failures") == "1"


def test_tracing_turned_off_is_bad_input_not_a_zero_pass_rate(project, monkeypatch):
    """Each run is graded from its spans: with the SDK disabled every trial failed RunNotRecorded
    and the command printed 0% and exited 0."""
    _, module = project
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    result = run(module, "--no-export")
    assert result.exit_code == 2 and "OTEL_SDK_DISABLED=true turns tracing off" in result.output
    assert "pass rate" not in result.output


def test_the_table_says_why_a_run_raised(project):
    """It said only "(run raised)": a broken factory read as a bad agent."""
    _, module = project
    result = run(module, agent="broken")
    assert result.exit_code == 0, result.output
    assert "the run raised RuntimeError: no model key (2 cases, e.g. good)" in result.output


def test_the_gate_fails_the_command_under_its_pass_rate(project):
    _, module = project
    runner = CliRunner()
    assert runner.invoke(cli, ["eval", "run", "shop.json", "--agent", f"{module}:make", "--gate", "0.5"]).exit_code == 0
    result = runner.invoke(cli, ["eval", "run", "shop.json", "--agent", f"{module}:make", "--gate", "0.9"])
    assert result.exit_code == 1 and "gate failed" in result.output


def test_at_k_1_a_regression_is_inconclusive_and_says_what_repeat_would_tell(project):
    _, module = project
    assert run(module, "--json", "good.json", agent="all_good").exit_code == 0
    result = run(module, "--baseline", "good.json")
    assert result.exit_code == 0, "one trial each is no claim: the default gate fails on significant regressions only"
    assert "1 regressed (0 significant at alpha 0.05)" in result.output
    assert "inconclusive at k=1: 1/1 -> 0/1" in result.output and "--repeat >= 4 to tell" in result.output
    assert run(module, "--baseline", "good.json", "--fail-on-regression").exit_code == 1, "the bare flag: any regression"
    assert run(module, "--baseline", "good.json", "--fail-on-regression", "any").exit_code == 1


def test_a_significant_regression_fails_the_run_against_its_baseline(project):
    _, module = project
    assert run(module, "--repeat", "5", "--json", "good.json", agent="all_good").exit_code == 0
    result = run(module, "--repeat", "5", "--baseline", "good.json", "--json", "now.json")
    assert result.exit_code == 1
    assert "regressed: 5/5 -> 0/5, p=0.0079" in result.output and "gate failed: 1 case(s) regressed significantly: bad" in result.output
    assert run(module, "--repeat", "5", "--baseline", "good.json", "--fail-on-regression", "never").exit_code == 0
    assert run(module, "--repeat", "5", "--baseline", "good.json", "--alpha", "0.001").exit_code == 0, "p=0.008 > 0.001"
    # the same two reports, compared alone
    result = CliRunner().invoke(cli, ["eval", "compare", "good.json", "now.json"])
    assert result.exit_code == 1 and "regressed: 5/5 -> 0/5" in result.output
    assert "pass rate 100% -> 50% (-50%, 95% interval" in result.output
    assert CliRunner().invoke(cli, ["eval", "compare", "good.json", "good.json"]).exit_code == 0


def test_min_pass_rate_and_its_old_name_gate(project):
    _, module = project
    assert run(module, "--min-pass-rate", "0.5").exit_code == 0
    result = run(module, "--min-pass-rate", "0.6")
    assert result.exit_code == 1 and "gate failed: pass rate 50% is under 60%" in result.output
    assert run(module, "--gate", "0.6").exit_code == 1


def test_compare_draws_a_png_that_changes_with_the_reports(project):
    path, module = project
    assert run(module, "--repeat", "3", "--json", "good.json", agent="all_good").exit_code == 0
    assert run(module, "--repeat", "3", "--json", "now.json").exit_code == 0
    runner = CliRunner()
    result = runner.invoke(cli, ["eval", "compare", "good.json", "now.json", "--png", "a.png", "--fail-on-regression", "never"])
    assert result.exit_code == 0, result.output
    assert "comparison drawn in a.png" in result.output
    same = runner.invoke(cli, ["eval", "compare", "good.json", "good.json", "--png", "b.png"])
    assert same.exit_code == 0, same.output
    a, b = (path / "a.png").read_bytes(), (path / "b.png").read_bytes()
    assert a.startswith(PNG) and b.startswith(PNG) and a != b
    width, height = int.from_bytes(a[16:20], "big"), int.from_bytes(a[20:24], "big")  # the IHDR chunk
    assert width == 1100 and height > 400
    # eval run draws the same picture against its baseline
    result = run(module, "--repeat", "3", "--baseline", "good.json", "--png", "c.png", "--fail-on-regression", "never")
    assert result.exit_code == 0 and (path / "c.png").read_bytes().startswith(PNG)


def test_png_without_a_baseline_or_without_matplotlib_is_exit_2(project, monkeypatch):
    path, module = project
    result = run(module, "--png", "x.png")
    assert result.exit_code == 2 and "--png draws a comparison" in result.output
    assert run(module, "--json", "r.json").exit_code == 0
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    result = CliRunner().invoke(cli, ["eval", "compare", "r.json", "r.json", "--png", "x.png"])
    assert result.exit_code == 2 and "pip install 'tracedagent[evals]'" in result.output
    assert not (path / "x.png").exists()


def test_the_progress_bar_draws_on_a_terminal_only():
    for terminal in (True, False):
        out = io.StringIO()
        with counting(3, "trials", Console(file=out, force_terminal=terminal, width=80)) as tick:
            for _ in range(3):
                tick()
        assert ("trials" in out.getvalue() and "3/3" in out.getvalue()) is terminal


def test_eval_run_exports_the_runs_and_their_grades_through_configure(project):
    path, module = project
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="200")
    command = [sys.executable, "-m", "tracedagent", "eval", "run", "shop.json", "--agent", f"{module}:make"]
    with HttpReceiver() as receiver:
        result = subprocess.run([*command, "--service", "shop-evals"], cwd=path, capture_output=True, text=True, timeout=120,
                                env={**env, N.ENV_OTLP_ENDPOINT: receiver.endpoint, N.ENV_OTLP_PROTOCOL: N.PROTOCOL_HTTP})
        assert result.returncode == 0, result.stderr
        spans = receiver.spans()
        metrics = receiver.metric_names()
        assert subprocess.run([*command, "--no-export"], cwd=path, capture_output=True, text=True, timeout=120,
                              env={**env, N.ENV_OTLP_ENDPOINT: receiver.endpoint}).returncode == 0
        assert len(receiver.spans()) == len(spans), "--no-export sent nothing"
    runs = {s.trace_id for s in spans if s.attributes.get(N.GEN_AI_OPERATION_NAME) == N.OP_INVOKE_AGENT}
    grades = [s for s in spans if s.name.startswith(N.EVALUATION_SPAN_PREFIX + " ")]
    assert len(runs) == 2 and len(grades) == 4, "two runs, two graders each"
    assert {g.trace_id for g in grades} == runs, "each grade is in its run's trace"
    assert {s.resource["service.name"] for s in spans} == {"shop-evals"}
    assert N.METRIC_EVALUATION_GRADES in metrics
    assert f"{len(spans)} of {len(spans)} spans exported to {receiver.endpoint}/v1/traces" in result.stdout
    assert "\x1b[" not in result.stderr, "no progress bar when stderr is not a terminal"


def test_a_collector_that_is_not_there_is_exit_3_after_the_report(project):
    from _fake_servers import closed_port
    path, module = project
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    result = subprocess.run([sys.executable, "-m", "tracedagent", "eval", "run", "shop.json", "--agent", f"{module}:make",
                             "--otlp", f"http://127.0.0.1:{closed_port()}", "--json", "r.json"], cwd=path,
                            capture_output=True, text=True, timeout=120, env={**env, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
    assert result.returncode == 3, result.stdout + result.stderr
    assert "pass rate 50%" in result.stdout and (path / "r.json").exists(), "the report stands"
    assert "0 of " in result.stdout


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


def test_an_llm_judge_s_spend_is_printed_apart_from_the_runs(project):
    tmp_path, module = project
    (tmp_path / f"{module}_judge.py").write_text(textwrap.dedent('''
        import json
        from tracedagent import Budget
        from tracedagent.evals import llm_judge
        from tracedagent.testing import FakeModel

        verdict = json.dumps({"score": 1.0, "label": "ok", "explanation": "says where"})
        judge = llm_judge(FakeModel([verdict, verdict]), "The answer says where the order is.",
                          pricing=Budget(price_per_1k_input=3.0, price_per_1k_output=15.0))
    '''))
    (tmp_path / "judged.json").write_text(json.dumps({"name": "judged", "cases": [
        {"task": "where is A1?", "name": "good"}, {"task": "where is A1?", "name": "bad"}],
        "graders": [f"{module}_judge:judge"]}))
    result = CliRunner().invoke(cli, ["eval", "run", "judged.json", "--agent", f"{module}:make", "--json", "r.json"])
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["judge_tokens"] > 0 and saved["judge_cost"] > 0
    assert f"judges: {saved['judge_tokens']} tokens, ${saved['judge_cost']:.4f}" in result.output
    assert "judges:" not in run(module).output  # no judge, no line


def test_eval_grade_puts_each_grade_in_its_recorded_run_s_trace_through_a_collector(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="200")
    recorded = tmp_path / "demo.otlp.json"
    made = subprocess.run([sys.executable, "-m", "tracedagent", "demo", "--pace", "0", "--out", str(recorded)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert made.returncode == 0, made.stderr[-2000:]
    runs = {s["traceId"] for r in json.loads(recorded.read_text())["resourceSpans"] for ss in r["scopeSpans"]
            for s in ss["spans"] if s["name"].startswith(N.OP_INVOKE_AGENT)
            and not s.get("parentSpanId")}
    command = [sys.executable, "-m", "tracedagent", "eval", "grade", str(recorded), "--grader", "tracedagent.evals:answered"]
    with HttpReceiver() as receiver:
        result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                                env={**env, N.ENV_OTLP_ENDPOINT: receiver.endpoint, N.ENV_OTLP_PROTOCOL: N.PROTOCOL_HTTP})
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        grades = [s for s in receiver.spans() if s.name == f"{N.EVALUATION_SPAN_PREFIX} answered"]
        assert subprocess.run([*command, "--no-export"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={**env, N.ENV_OTLP_ENDPOINT: receiver.endpoint}).returncode == 0
        assert len(receiver.spans()) == len(grades), "--no-export sent nothing"
    assert runs and {g.trace_id for g in grades} == runs, "one grade in each recorded top-level run's trace"
    assert f"{len(grades)} of {len(grades)} spans exported to {receiver.endpoint}/v1/traces" in result.stdout
