"""A grade, the graded run's one view, and a grader: a callable with a name and a threshold.

A grader reads a ``GradedRun`` and returns a ``bool``, a score in [0, 1], or a ``Grade``;
``decide`` turns any of these (or the grader's exception) into a ``Grade`` that has passed or
not at the grader's threshold, so that no grader can stop an evaluation.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Union

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from .._core import _names as N
from .._core._records import Usage
from .._core._run import Run
from .._testing._match import find_spans
from .._testing._views import RunView

__all__ = ["Grade", "GradedRun", "Grader", "ContentNotRecorded", "SpansNotKept", "GraderResult", "grader", "decide",
           "as_grader", "own_attributes"]


class ContentNotRecorded(LookupError):
    """A grader asked a recorded run for its task or output, which its trace holds only when it
    was recorded with content capture on (``Agent(capture_content=True)``)."""


class SpansNotKept(LookupError):
    """An online grader asked for the spans under the run span (``spans()``, the chat or tool
    spans), which were exported as the run went: grade those with ``evaluate`` or from the
    trace (``grade_recorded``)."""


@dataclass(frozen=True, kw_only=True)
class Grade:
    """What one grader said of one run."""

    score: float | None = None
    """In [0, 1]; ``None`` for a grade that is only a label."""
    label: str | None = None
    """A word for the grade (``"pass"``, ``"fail"``, ``"relevant"``): ``gen_ai.evaluation.score.label``."""
    explanation: str | None = None
    """Why: for a failed grade, what was wrong (a raising grader's error)."""
    passed: bool | None = None
    """Whether the run passes this grader; ``None``: decided by the score at the grader's threshold."""
    error: str | None = None
    """The exception's type when the grader raised (the grade then failed); an LLM judge's named
    failure (``JudgeAnswerInvalid``, the model's error type)."""
    usage: Usage | None = None
    """The tokens this grade's own model calls used (an LLM judge's); ``None``: it made none.
    Reported apart (``Report.judge_tokens``), never added to the graded run's."""
    explanation_on_span: bool = True
    """Whether the explanation may go on the grade's span: an LLM judge's own words may quote the
    run's content, so its explanation is there only with content capture on (the report has it)."""
    cost: float | None = None
    """What this grade's model calls cost at the prices the judge was given (``None``: no
    prices, or no calls). Reported apart (``Report.judge_cost``), never the graded run's."""


GraderResult = Union[bool, float, int, Grade]
"""What a grader may return."""


def own_attributes(span: ReadableSpan) -> dict[str, Any]:
    """Your own attributes on a run span (``attributes=``): every key outside the conventions'
    and tracedagent's own namespaces."""
    skip = (*N.RESERVED_ATTRIBUTE_PREFIXES, "error.", "server.")
    return {k: v for k, v in (span.attributes or {}).items() if not k.lower().startswith(skip)}


def _message_text(raw: Any, role: str, last: bool) -> str | None:
    """The text of the first (or last) message of ``role`` in a captured ``gen_ai.*.messages`` value."""
    try:
        messages = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    texts = [" ".join(str(p.get("content", "")) for p in m.get("parts", ()) if p.get("type") == "text")
             for m in messages or () if isinstance(m, dict) and m.get("role") == role]
    return (texts[-1] if last else texts[0]) if texts else None


class GradedRun:
    """One run as a grader sees it, live or recorded: the ``RunView`` facts (what its spans
    say), the case it ran, and the task and output (a recorded run's only with content capture).

    Live: ``GradedRun(view, run=run, case=case)``. Recorded: ``GradedRun(view, case=case)``,
    from a trace file or Jaeger; asking for ``task`` or ``output`` then raises
    ``ContentNotRecorded`` unless its spans captured content.
    """

    def __init__(self, view: RunView, *, run: Run | None = None, case: Any = None) -> None:
        self.view = view
        """The run's spans (its ``invoke_agent`` span and those under it)."""
        self.run = run
        """What the agent returned, for a live run; ``None`` for a recorded one."""
        self.case = case
        """The ``Case`` the run played, if any."""
        self._own: list[ReadableSpan] | None = None

    # --- the facts the spans carry --------------------------------------------------------
    ok = property(lambda self: self.view.ok, doc="Whether the run answered.")
    stop_reason = property(lambda self: self.view.stop_reason, doc="A ``Stop`` value, as on the run span.")
    steps = property(lambda self: self.view.steps, doc="Model calls attempted.")
    input_tokens = property(lambda self: self.view.input_tokens)
    output_tokens = property(lambda self: self.view.output_tokens)
    cost = property(lambda self: self.view.cost, doc="Spend at the budget's prices; ``None`` without prices.")
    requested_tools = property(lambda self: self.view.requested_tools, doc="Every tool the model asked for.")
    executed_tools = property(lambda self: self.view.executed_tools, doc="Tools that ran and succeeded.")
    blocked_tools = property(lambda self: self.view.blocked_tools, doc="Dispatched without success.")
    not_dispatched_tools = property(lambda self: self.view.not_dispatched_tools)
    tool_outcomes = property(lambda self: self.view.tool_outcomes, doc="``(tool, outcome)`` per dispatched call.")
    trace_id = property(lambda self: self.view.trace_id)

    @property
    def total_tokens(self) -> int:
        """Input and output tokens, sub-agents' included."""
        view = self.view
        return int((view.total_input_tokens or view.input_tokens or 0) + (view.total_output_tokens or view.output_tokens or 0))

    @property
    def trajectory(self) -> list[str]:
        """The tools that ran and succeeded, in order (not what was requested: ``requested_tools``)."""
        return self.executed_tools

    @property
    def duration(self) -> float | None:
        """Seconds the run span lasted."""
        span = self.view.span
        return None if span.end_time is None or span.start_time is None else (span.end_time - span.start_time) / 1e9

    @property
    def attributes(self) -> dict[str, Any]:
        """Your own attributes on the run span (``attributes=``)."""
        return own_attributes(self.view.span)

    @property
    def span_context(self) -> SpanContext:
        """The run span's context: a grade's span is its child although the run span has ended."""
        return self.view.span.context

    def spans(self, name: str | None = None, **attributes: Any) -> list[ReadableSpan]:
        """The run's own spans (the run span first) matching a name and attributes, as
        ``RunView.spans`` matches them; not its grades' (an ``evaluate`` span and the judge's
        calls under it, in the trace of a run graded before)."""
        return find_spans(self._own_spans(), name, **attributes)

    @property
    def chat_spans(self) -> list[ReadableSpan]:
        """The run's own model calls (``chat`` spans, sub-agents' included), in order: a
        judge's calls under an earlier grade are not the run's."""
        return self.spans(operation_name=N.OP_CHAT)

    def _own_spans(self) -> list[ReadableSpan]:
        if self._own is None:
            own = [self.view.span]

            def walk(span: ReadableSpan) -> None:
                for child in self.view.children(span):
                    if N.GEN_AI_EVALUATION_NAME not in (child.attributes or {}):  # a grade, not the run
                        own.append(child)
                        walk(child)
            walk(self.view.span)
            self._own = own
        return self._own

    # --- content: the case's, the live run's, or captured ----------------------------------
    @property
    def expected_output(self) -> Any:
        return getattr(self.case, "expected_output", None)

    @property
    def metadata(self) -> Mapping[str, Any]:
        return getattr(self.case, "metadata", None) or {}

    def _captured(self, what: str, key: str, role: str) -> str:
        spans = [self.view.span, *reversed(self.chat_spans)]
        for span in spans:
            found = _message_text((span.attributes or {}).get(key), role, last=role == "assistant")
            if found is not None:
                return found
        raise ContentNotRecorded(f"this recorded run's {what} is not in its trace: record it with content capture "
                                 f"on (Agent(capture_content=True)) to grade its {what}")

    @property
    def task(self) -> str:
        """The task the run was given: the case's, else the captured first user message."""
        if self.case is not None and getattr(self.case, "task", None) is not None:
            return self.case.task
        return self._captured("task", N.GEN_AI_INPUT_MESSAGES, "user")

    @property
    def text(self) -> str:
        """The answer's text: the live run's, else the captured last assistant message."""
        if self.run is not None:
            return self.run.text
        return self._captured("output", N.GEN_AI_OUTPUT_MESSAGES, "assistant")

    @property
    def output(self) -> Any:
        """The typed output of a live run (``Run.output``); a recorded run's answer text."""
        return self.run.output if self.run is not None else self.text

    def __repr__(self) -> str:
        return f"<GradedRun stop_reason={self.stop_reason!r} steps={self.steps} trace={self.trace_id}>"


@dataclass(frozen=True, kw_only=True)
class Grader:
    """A grader with a name (``gen_ai.evaluation.name``) and a threshold."""

    check: Callable[[GradedRun], GraderResult]
    """The callable that grades."""
    name: str
    """What the grade is called in reports, spans and metrics."""
    threshold: float = 1.0
    """A score passes at or above this."""
    ref: str | None = None
    """``module:attr`` naming it in a dataset file (``None``: a grader that cannot be saved)."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """The arguments ``ref`` is called with to make it (a built-in's bound, set, pattern)."""
    sample: float = 1.0
    """The share of live runs it grades online (``sampled``, ``OnlineGrading``); an evaluation grades every run."""

    def __call__(self, graded: GradedRun) -> GraderResult:
        return self.check(graded)

    def with_threshold(self, threshold: float) -> Grader:
        return replace(self, threshold=float(threshold))


def as_grader(value: Any, *, threshold: float | None = None, name: str | None = None) -> Grader:
    """Any callable as a ``Grader`` (a ``Grader`` kept, its threshold or name replaced if given)."""
    if not isinstance(value, Grader):
        if not callable(value):
            raise TypeError(f"a grader is a callable taking a GradedRun, not {value!r}")
        qualname = getattr(value, "__qualname__", "")
        module = getattr(value, "__module__", None)
        ref = f"{module}:{qualname}" if module and qualname and "<" not in qualname else None
        value = Grader(check=value, name=getattr(value, "__name__", None) or type(value).__name__, ref=ref)
    if threshold is not None:
        value = value.with_threshold(threshold)
    return replace(value, name=name) if name else value


def grader(name: Any = None, *, threshold: float = 1.0) -> Any:
    """A decorator: ``@grader(threshold=0.8) def polite(run): ...`` makes ``polite`` a ``Grader``;
    bare ``@grader`` too (threshold 1.0), as a user writes it by habit: without this, the bare form
    made ``polite`` the inner decorator, failing only later, when graded or loaded from a file."""
    if callable(name):
        return as_grader(name, threshold=threshold)

    def wrap(check: Callable[[GradedRun], GraderResult]) -> Grader:
        return as_grader(check, threshold=threshold, name=name)
    return wrap


def decide(g: Grader, graded: GradedRun) -> Grade:
    """``g``'s grade of ``graded``, always a ``Grade`` with ``passed`` and a score or label
    decided: a raising grader is a failed grade carrying its error."""
    try:
        result = g.check(graded)
    except Exception as exc:  # a grader's bug or a missing fact is that grade's failure, never the evaluation's
        return Grade(score=0.0, label="error", passed=False, error=type(exc).__name__,
                     explanation=f"{type(exc).__name__}: {exc}")
    if isinstance(result, Grade):
        grade = result
    elif isinstance(result, bool):
        grade = Grade(score=1.0 if result else 0.0)
    elif isinstance(result, (int, float)) and math.isfinite(result) and 0.0 <= result <= 1.0:
        grade = Grade(score=float(result))
    else:
        return Grade(score=0.0, label="error", passed=False, error="BadGrade",
                     explanation=f"BadGrade: a grader returns a bool, a score in [0, 1] or a Grade, not {result!r}")
    if grade.score is not None and not (0.0 <= grade.score <= 1.0):
        return replace(grade, passed=False, label="error", error="BadGrade",
                       explanation=f"BadGrade: score {grade.score} is outside [0, 1]")
    passed = grade.passed if grade.passed is not None else (grade.score is not None and grade.score >= g.threshold)
    return replace(grade, passed=passed, label=grade.label or ("pass" if passed else "fail"))
