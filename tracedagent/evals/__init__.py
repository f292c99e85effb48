"""Evals: grade an agent's runs, over a dataset of cases, into a report; each grade in the run's trace.

Owns: ``Case`` and ``Dataset`` (cases and graders, saved as JSON or YAML), the graded run's
one view (``GradedRun``: live from a ``Run`` and its spans, or recorded from a trace), ``Grade``
and ``Grader`` (a callable with a name and a threshold), the built-in deterministic graders,
an LLM judge (``llm_judge``: its calls traced under its grade, its cost reported apart),
experiments (``Dataset.evaluate`` / ``aevaluate``: each case played ``repeat`` times through
the testing toolkit's ``play`` / ``aplay``), the ``Report`` (pass rates, pass^k, pass@k,
distributions, ``compare`` with what k trials allow one to claim, JSON and JUnit XML;
``plot_comparison``: a PNG of two reports), the grades' telemetry (an evaluation span
under the graded run's span with the ``gen_ai.evaluation.result`` event, and the metrics), and
online grading (``OnlineGrading``: ``Agent(graders=...)`` grades live runs as they end, off their time).

May import: ``_core``, ``_typed``, ``_instrumentation``, ``_agent``, ``_traces`` and
``_testing`` (it sits above the testing toolkit, whose ``play`` is the seam it grades through),
the OpenTelemetry API and SDK, and lazily (the ``evals`` extra) PyYAML for YAML datasets and
matplotlib for the comparison picture.
"""

from ._case import Case
from ._dataset import Dataset, DatasetError
from ._grade import ContentNotRecorded, Grade, GradedRun, Grader, SpansNotKept, grader
from ._graders import (answered, context_growth_under, cost_under, duration_under, no_denied_calls, no_failed_calls,
                       no_repeated_calls, output_contains, output_equals, output_matches, output_validates,
                       steps_under, stop_reason_in, tokens_under, tool_success_rate, trajectory_contains,
                       trajectory_excludes, trajectory_in_order)
from ._report import CaseChange, CaseResult, Comparison, GradeResult, Report, TrialResult
from ._experiment import aevaluate, evaluate
from ._judge import JudgeAnswerInvalid, llm_judge
from ._recorded import RecordedRunsError, grade_recorded, recorded_runs
from ._plot import PlotUnavailable, plot_comparison
from ._pytest import CaseFailed, check_case, parametrize
from ._online import OnlineCounts, OnlineGrading, sampled

__all__ = [
    "Case", "Dataset", "DatasetError", "ContentNotRecorded", "Grade", "GradedRun", "Grader", "grader",
    "answered", "cost_under", "duration_under", "no_denied_calls", "no_failed_calls", "no_repeated_calls",
    "output_contains", "output_equals", "output_matches", "output_validates", "steps_under", "stop_reason_in",
    "tokens_under", "tool_success_rate", "trajectory_contains", "trajectory_excludes", "trajectory_in_order",
    "CaseChange", "CaseResult", "Comparison", "GradeResult", "Report", "TrialResult", "aevaluate", "evaluate",
    "RecordedRunsError", "grade_recorded", "recorded_runs",
    "PlotUnavailable", "plot_comparison",
    "CaseFailed", "check_case", "parametrize",
    "OnlineCounts", "OnlineGrading", "SpansNotKept", "sampled",
    "context_growth_under", "llm_judge", "JudgeAnswerInvalid",
]
