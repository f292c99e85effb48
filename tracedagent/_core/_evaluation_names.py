"""The names tracedagent.evals reports grades under, part of ``_names`` (which imports them all):
semconv's ``gen_ai.evaluation.*`` where it has them, tracedagent's own beside them."""

EVALUATION_RESULT_EVENT = "gen_ai.evaluation.result"
"""The event each grade is: on its evaluation span (Jaeger shows span events, not log records), and
the log record of that name in the evaluation span's context (semconv defines the event as one)."""
GEN_AI_EVALUATION_NAME = "gen_ai.evaluation.name"
"""The grader's name."""
GEN_AI_EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"
"""Why a grade is what it is (a grader's own words: a failed fact, never the run's content)."""
EVALUATION_PASSED = "tracedagent.evaluation.passed"
"""Whether the grade passed at its grader's threshold (a bool on the span, the metric's label)."""
EVALUATION_THRESHOLD = "tracedagent.evaluation.threshold"
EVALUATION_SPAN_PREFIX = "evaluate"
"""An evaluation span is named ``evaluate {grader}``, a child of the graded run's span."""
METRIC_EVALUATION_GRADES = "tracedagent.evaluation.grades"
"""Counter of grades by grader and passed (Prometheus: ``tracedagent_evaluation_grades_total``)."""
METRIC_EVALUATION_SCORE = "tracedagent.evaluation.score"
"""Histogram of grade scores by grader, in [0, 1]."""
METRIC_EVALUATION_DROPPED = "tracedagent.evaluation.dropped"
"""Counter of live runs whose online grading was dropped, its queue full (``OnlineGrading``)."""
EVALUATION_SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)
"""The score histogram's buckets: tenths, and finer near 1.0 where thresholds sit."""
MAX_EXPLANATION_LENGTH = 1024
"""An explanation is cut to this many characters on a span (it may quote the run's output)."""

__all__ = sorted(name for name in dir() if name.isupper() and not name.startswith("_"))
