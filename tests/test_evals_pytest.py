"""A dataset as pytest tests (``tracedagent.evals.parametrize`` and the plugin's
``tracedagent_eval`` fixture), tested as a user meets it: whole pytest sessions run by ``pytester``.
One test per case, named after it; a failing case's test fails with its failed grades' explanations;
the grades are in the test's recorder, beside the run they grade."""

from __future__ import annotations

import pytest

# Imported before pytester's in-process sessions start (see tests/test_pytest_plugin.py): each
# session restores sys.modules when it ends, and would otherwise drop the toolkit's span router.
import tracedagent.testing  # noqa: F401
from tracedagent import Agent
from tracedagent.evals import (Case, CaseFailed, Dataset, answered, check_case, output_contains, parametrize)
from tracedagent.testing import FakeModel, Recorder

SUPPORT = '''
import json
from tracedagent import Agent
from tracedagent.evals import Dataset
from tracedagent.testing import FakeModel

ANSWERS = {"where-is-a1": "Order A1 shipped on Monday.", "where-is-b2": "Order B2 shipped today.",
           "refund-c3": "I cannot help with that."}

def make_agent(case):
    return Agent(FakeModel([ANSWERS[case.name]]), name="shop")

DATASET = Dataset.from_dict(json.loads(\'\'\'{"name": "shop", "cases": [
    {"name": "where-is-a1", "task": "Where is A1?", "expected_output": "shipped"},
    {"name": "where-is-b2", "task": "Where is B2?", "expected_output": "shipped"},
    {"name": "refund-c3", "task": "Refund C3", "expected_output": "refunded"}],
  "graders": ["tracedagent.evals:answered", "tracedagent.evals:output_contains"]}\'\'\'))
'''


@pytest.fixture(autouse=True)
def lean_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Child sessions skip hypothesis's plugin, which adds over a second to each session."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest")


def test_one_test_per_case_named_after_it_the_failing_one_says_why(pytester: pytest.Pytester):
    pytester.makepyfile(support=SUPPORT)
    pytester.makepyfile(test_shop='''
        from tracedagent.evals import parametrize
        from support import DATASET, make_agent

        @parametrize(DATASET)
        def test_shop(case, tracedagent_eval, tracedagent_recorder):
            result = tracedagent_eval(DATASET, case, make_agent)
            assert result.name == case.name and result.passed
            # the run and its grades, in this test's recorder: one evaluate span per grader
            assert [s.name for s in tracedagent_recorder.spans() if s.name.startswith("evaluate")] == [
                "evaluate answered", "evaluate output_contains"]
    ''')
    result = pytester.runpytest("-v", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_shop.py::test_shop?where-is-a1? PASSED*",
                                 "*test_shop.py::test_shop?where-is-b2? PASSED*",
                                 "*test_shop.py::test_shop?refund-c3? FAILED*"])
    result.stdout.fnmatch_lines(["E * tracedagent.evals.CaseFailed: case 'refund-c3' failed 1 of 1 trial(s):*",
                                 "*trial 1 (trace *, stop reason answered):*",
                                 "*output_contains: the answer does not contain the expected text*"])
    assert "answered:" not in result.stdout.str()  # only the grades that failed are listed
    result.stdout.fnmatch_lines(["FAILED test_shop.py::test_shop[[]refund-c3[]] - tracedagent.evals.Case*"])


def test_unnamed_cases_are_named_by_their_place_and_a_raising_agent_is_a_failed_test(pytester: pytest.Pytester):
    pytester.makepyfile(test_plain='''
        from tracedagent import Agent
        from tracedagent.evals import Dataset, answered, parametrize
        from tracedagent.testing import FakeModel

        DATASET = Dataset(["say hi", "crash"], [answered()])

        def make_agent(case):
            if case.task == "crash":
                raise RuntimeError("no model for this case")
            return Agent(FakeModel(["hi"]))

        @parametrize(DATASET, "task_case")
        def test_plain(task_case, tracedagent_eval):
            tracedagent_eval(DATASET, task_case, make_agent)
    ''')
    result = pytester.runpytest("-v", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_plain?case-0? PASSED*", "*test_plain?case-1? FAILED*",
                                 "*case 'case-1' failed 1 of 1 trial(s):*", "*trial 1 (no run):*",
                                 "*the run raised: RuntimeError: no model for this case*"])


def test_check_case_outside_pytest_returns_the_result_or_raises_with_every_failed_grade():
    dataset = Dataset([Case(task="Where is A1?", name="a1", expected_output="shipped")],
                      [answered(), output_contains()], name="shop")
    recorder = Recorder()
    ok = check_case(dataset, dataset.cases[0], lambda case: Agent(FakeModel(["A1 shipped."]), **recorder.providers),
                    recorder=recorder, repeat=2)
    assert ok.name == "a1" and ok.pass_rate == 1.0 and len(ok.trials) == 2
    script = ["A1 shipped.", "no idea"]  # the second trial's answer misses the expected text
    with pytest.raises(CaseFailed) as failed:
        check_case(dataset, dataset.cases[0],
                   lambda case: Agent(FakeModel([script.pop(0)]), **recorder.providers), recorder=recorder, repeat=2)
    assert failed.value.result.pass_rate == 0.5
    message = str(failed.value)
    assert message.startswith("case 'a1' failed 1 of 2 trial(s):\n  trial 2 (trace ")
    assert message.endswith("output_contains: the answer does not contain the expected text")
    assert isinstance(failed.value, AssertionError)  # pytest reports it as a test failure, not an error
