"""A dataset as pytest tests: one test per case, named after it, each case played against the
agent with the test's recorder and failing with the explanations of the grades that failed.

::

    dataset = Dataset.load("support.json")

    @parametrize(dataset)                       # test_support[help-desk], test_support[refund], ...
    def test_support(case, tracedagent_eval):   # the pytest plugin's fixture: check_case + the recorder
        tracedagent_eval(dataset, case, make_agent)

``check_case`` plays one case the way ``Dataset.evaluate`` does (the same graders, the grades in
the run's trace), so a case passes in pytest exactly when it passes in a report. pytest itself is
imported only by ``parametrize``: the rest needs no test runner.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from ._case import Case
from ._dataset import Dataset
from ._report import CaseResult, TrialResult

if TYPE_CHECKING:
    from .._agent._loop import Agent
    from .._testing._recorder import Recorder

__all__ = ["CaseFailed", "check_case", "parametrize"]


def _trial_lines(number: int, trial: TrialResult) -> list[str]:
    where = f"trace {trial.trace_id}, stop reason {trial.stop_reason}" if trial.trace_id else "no run"
    lines = [f"  trial {number} ({where}):"]
    if trial.error:
        lines.append(f"    the run raised: {trial.error}")
    for grade in trial.grades:
        if not grade.passed:
            why = grade.explanation or (f"score {grade.score:g}" if grade.score is not None else grade.label or "failed")
            lines.append(f"    {grade.grader}: {why}" + (f" ({grade.error})" if grade.error else ""))
    return lines


class CaseFailed(AssertionError):
    """A case with a trial that did not pass every grader: the message names each failed grade
    with its explanation, trial by trial (with its trace id, to find it in Jaeger)."""

    __module__ = "tracedagent.evals"  # where a failed test's report says it comes from: the public name

    def __init__(self, result: CaseResult) -> None:
        self.result = result
        """The case's trials and grades."""
        failed = [(i, t) for i, t in enumerate(result.trials, 1) if not t.passed]
        lines = [f"case {result.name!r} failed {len(failed)} of {len(result.trials)} trial(s):"]
        for number, trial in failed:
            lines += _trial_lines(number, trial)
        if not result.trials:
            lines.append("  no trial ran (the experiment's max_cost was reached)")
        super().__init__("\n".join(lines))


def _name_in(dataset: Dataset, case: Case) -> str:
    """The case's name in ``dataset``'s reports (``case-N`` for an unnamed one)."""
    for index, candidate in enumerate(dataset.cases):
        if candidate is case:
            return dataset.case_names()[index]
    return case.name or "case"


def check_case(dataset: Dataset, case: Case, agent: Agent | Callable[[Case], Agent] | None = None, *,
               recorder: Recorder | None = None, repeat: int = 1) -> CaseResult:
    """Play ``case`` ``repeat`` times against ``agent`` (an ``Agent``, a factory of one, or
    ``None`` to replay a recorded case), grade each run by ``dataset``'s graders, and return its
    result; ``CaseFailed`` (an ``AssertionError``) when a trial failed. ``recorder``: the test's
    (``tracedagent_recorder``), which records agents on the global providers while it is started."""
    __tracebackhide__ = True
    single = Dataset([replace(case, name=_name_in(dataset, case))], dataset.graders, name=dataset.name)
    [result] = single.evaluate(agent, repeat=repeat, recorder=recorder).cases
    if not result.passed:
        raise CaseFailed(result)
    return result


def parametrize(dataset: Dataset, argname: str = "case") -> Any:
    """``pytest.mark.parametrize`` over ``dataset``'s cases: one test per case, its id the case's
    name (``case-N`` for an unnamed one); the test receives the ``Case`` as ``argname``."""
    import pytest  # only here: a dataset is usable without pytest installed

    return pytest.mark.parametrize(argname, list(dataset.cases), ids=dataset.case_names())
