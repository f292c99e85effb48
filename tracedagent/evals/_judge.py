"""An LLM judge: a grader that asks a model to grade a run against your rubric.

``llm_judge(model, rubric)`` is a ``Grader`` like any other: it reads a ``GradedRun`` (the parts
``include`` names: the task and the answer by default), asks ``model`` (any ``Model``: the
adapters in ``tracedagent.models``, ``FakeModel`` in tests) for a verdict, a score in [0, 1]
with a label and an explanation, and returns it as a ``Grade`` that passes at its threshold.

The verdict is asked for as structured output, the way the model says it can take it (its
``output_modes``: OpenAI's JSON schema, Anthropic's output tool, else the schema in the
prompt); whatever the mode, the answer's text is read as JSON. An answer that is not a verdict
is a failed grade, ``JudgeAnswerInvalid``; a model call that fails (the provider's error, its
timeout) is a failed grade named by the error's type: never an exception out of ``evaluate``.

Its calls are the library's own ``chat`` spans (``InstrumentedModel``), made while the grade's
``evaluate {grader}`` span is current, so they sit under the grade in the graded run's trace,
sent to the providers the grade goes to; content is captured on them only if you opt in, as
for a run. Its tokens, and its cost at the prices you give (``pricing``: the library ships
none), are the grade's (``Grade.usage``, ``Grade.cost``), summed apart in the report
(``Report.judge_tokens``, ``judge_cost``), never added to the graded run's.
"""

from __future__ import annotations

import json
import math
import re
import threading
import weakref
from typing import Any, Callable, Iterable

from opentelemetry import context as otel_context

from .._core._budget import Budget
from .._core._output import OutputCheck, OutputRequest, output_mode, with_instruction
from .._core._records import Message
from .._core._request import Model, ModelRequest, ModelSettings
from .._instrumentation._instrumented import InstrumentedModel
from .._instrumentation._spans import RUN_BUDGET, failure_kind
from .._instrumentation._telemetry import AgentTelemetry
from ._grade import Grade, GradedRun, Grader
from ._telemetry import GRADING

__all__ = ["llm_judge", "JudgeAnswerInvalid", "JUDGE_PARTS", "VERDICT_SCHEMA"]

JUDGE_PARTS = ("task", "output", "expected_output", "stop_reason", "trajectory", "tool_outcomes", "metadata")
"""What of a run a judge may be shown (``include``)."""

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "description": "From 0 (fails the rubric) to 1 (meets it fully)."},
        "label": {"type": "string", "description": "One word for the grade."},
        "explanation": {"type": "string", "description": "Why, in a sentence or two."},
    },
    "required": ["score", "label", "explanation"],
}
"""The judge's answer: every property required, so OpenAI can hold the model to it (strict)."""

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


class JudgeAnswerInvalid(ValueError):
    """The judge model's answer was not a verdict (not JSON, or no score in [0, 1]): the grade's
    ``error``, a failed grade."""


class _Verdict:
    """The verdict as an ``OutputSpec``: its schema sent, its ``validate`` the judge's parser."""

    name = "Verdict"
    schema = VERDICT_SCHEMA

    def validate(self, text: str) -> OutputCheck:
        """A dict with a ``score`` in [0, 1] (and a ``label`` and ``explanation``, strings or
        absent) read from the answer: bare JSON, JSON in a code fence, or the one object in it."""
        text = (text or "").strip()
        fenced = _FENCE.match(text)
        candidates = [fenced.group(1) if fenced else text]
        if "{" in text and "}" in text:  # prose around the object: the outermost braces
            candidates.append(text[text.index("{"): text.rindex("}") + 1])
        for candidate in candidates:
            try:
                value = json.loads(candidate)
            except ValueError:
                continue
            return self._checked(value)
        return OutputCheck(problem=f"the answer is not JSON ({len(text)} characters)")

    @staticmethod
    def _checked(value: Any) -> OutputCheck:
        if not isinstance(value, dict):
            return OutputCheck(problem=f"the answer is a JSON {type(value).__name__}, not an object")
        score = value.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) \
                or not 0.0 <= score <= 1.0:
            return OutputCheck(problem="the answer has no score in [0, 1]")
        for key in ("label", "explanation"):
            if value.get(key) is not None and not isinstance(value[key], str):
                return OutputCheck(problem=f"the answer's {key} is not a string")
        return OutputCheck(value={"score": float(score), "label": value.get("label") or None,
                                  "explanation": value.get("explanation") or None})


def _shown(graded: GradedRun, part: str) -> str:
    """One part of the run as the judge reads it (the task and the output may raise
    ``ContentNotRecorded`` for a recorded run: a failed grade that says so)."""
    if part == "task":
        return graded.task
    if part == "output":
        return graded.text
    if part == "expected_output":
        expected = graded.expected_output
        return "(none given)" if expected is None else expected if isinstance(expected, str) else json.dumps(expected)
    if part == "stop_reason":
        return str(graded.stop_reason)
    if part == "trajectory":
        return json.dumps(graded.trajectory)
    if part == "tool_outcomes":
        return json.dumps([f"{name}: {outcome}" for name, outcome in graded.tool_outcomes])
    return json.dumps(dict(graded.metadata), default=str)


def _system_prompt(rubric: str, mode: str) -> str:
    prompt = (f"You grade one run of an AI agent against a rubric.\n\nRubric:\n{rubric}\n\n"
              f"Give a score from 0 (the run fails the rubric) to 1 (it meets it fully), a one-word label "
              f"and a short explanation, as a JSON object with the keys score, label and explanation.")
    return with_instruction(prompt, _Verdict(), mode) or prompt


class _Judge:
    """The judge's check: what it asks, and the instrumented model per grade's providers."""

    def __init__(self, model: Model, rubric: str, *, name: str, include: tuple[str, ...], pricing: Budget | None,
                 capture_content: bool | None, redact: Callable[[str], str] | None, max_output_tokens: int | None,
                 temperature: float | None, timeout: float | None, mode: str) -> None:
        self.model, self.name, self.include, self.pricing = model, name, include, pricing
        self.capture_content, self.redact, self.timeout = capture_content, redact, timeout
        self.mode = output_mode(mode, model)  # a mode the model does not take is a ValueError now, not per grade
        self.settings = ModelSettings(max_output_tokens=max_output_tokens, temperature=temperature)
        self.system = _system_prompt(rubric, self.mode)
        self.output = OutputRequest(name=_Verdict.name, schema=VERDICT_SCHEMA, mode=self.mode)
        # per grading's telemetry, held weakly: an experiment's providers (a Recorder's spans) go
        # when it ends, not when the judge does
        self._models: weakref.WeakKeyDictionary[Any, tuple[InstrumentedModel, bool]] = weakref.WeakKeyDictionary()
        self._global: tuple[InstrumentedModel, bool] | None = None
        self._lock = threading.Lock()

    def _made(self, grading: Any) -> tuple[InstrumentedModel, bool]:
        telemetry = AgentTelemetry(agent_name=self.name, model=self.model,
                                   tracer_provider=getattr(grading, "tracer_provider", None),
                                   meter_provider=getattr(grading, "meter_provider", None),
                                   capture_content=self.capture_content, redact=self.redact)
        return InstrumentedModel(self.model, telemetry), telemetry.capture is not None

    def instrumented(self) -> tuple[InstrumentedModel, bool]:
        """The model, its calls reported where the grade being made goes (``GRADING``), else to
        the global providers (one ``AgentTelemetry`` per grading's telemetry, made once); and
        whether its spans capture content."""
        grading = otel_context.get_value(GRADING)
        with self._lock:
            if grading is None:
                self._global = self._global or self._made(None)
                return self._global
            if grading not in self._models:
                self._models[grading] = self._made(grading)
            return self._models[grading]

    def request(self, graded: GradedRun) -> ModelRequest:
        shown = "\n\n".join(f"## {part.replace('_', ' ').capitalize()}\n{_shown(graded, part)}" for part in self.include)
        messages: list[Message] = [{"role": "system", "content": self.system},
                                   {"role": "user", "content": f"Grade this run.\n\n{shown}"}]
        return ModelRequest(messages=messages, settings=self.settings, timeout=self.timeout, output=self.output)

    def __call__(self, graded: GradedRun) -> Grade:
        request = self.request(graded)  # the content missing raises: decide's failed grade names it
        model, captures = self.instrumented()
        priced = self.pricing if self.pricing is not None and self.pricing.priced else None
        token = otel_context.attach(otel_context.set_value(RUN_BUDGET, priced))  # the chat span prices its call so
        try:
            completion = model.complete(request)
        except Exception as exc:  # the provider's error or timeout: this grade failed, named by its type
            kind = failure_kind(exc)
            return Grade(score=0.0, label="error", passed=False, error=kind,
                         explanation=f"{kind}: the judge's model call failed")
        finally:
            otel_context.detach(token)
        usage = completion.usage
        cost = priced.cost_of(usage.input_tokens, usage.output_tokens,
                              cache_read_input_tokens=usage.cache_read_input_tokens,
                              cache_creation_input_tokens=usage.cache_creation_input_tokens) if priced else None
        verdict = _Verdict().validate(completion.text)
        if verdict.problem is not None:
            return Grade(score=0.0, label="error", passed=False, error=JudgeAnswerInvalid.__name__,
                         explanation=f"{JudgeAnswerInvalid.__name__}: {verdict.problem}", usage=usage, cost=cost)
        # the judge's words may quote the run: on the grade's span only with content capture on
        return Grade(**verdict.value, usage=usage, cost=cost, explanation_on_span=captures)


def llm_judge(model: Model, rubric: str, *, name: str = "llm_judge", threshold: float = 0.5,
              include: Iterable[str] = ("task", "output"), pricing: Budget | None = None,
              capture_content: bool | None = None, redact: Callable[[str], str] | None = None,
              max_output_tokens: int | None = None, temperature: float | None = None,
              timeout: float | None = None, output_mode: str = "auto") -> Grader:
    """A grader asking ``model`` to grade each run against ``rubric``: its score passes at
    ``threshold``.

    ``include``: what of the run the judge is shown (``JUDGE_PARTS``; a recorded run's task and
    output need content capture). ``pricing``: a ``Budget`` whose prices (``price_per_1k_*``) the
    judge's calls are priced at (its ceilings are not used); without it their cost is unknown.
    ``capture_content`` / ``redact``: as for an ``Agent``, for the judge's ``chat`` spans
    (default: ``TRACEDAGENT_CAPTURE_CONTENT``; off). ``timeout``: seconds each call may take,
    passed to the model as the request's (the adapters bound their HTTP call with it).
    ``output_mode``: how the verdict is asked for (``auto``: the model's first declared mode).
    A judge cannot be saved in a dataset file (its model is no file's data)."""
    parts = tuple(include)
    unknown = [part for part in parts if part not in JUDGE_PARTS]
    if unknown or not parts:
        raise ValueError(f"include names parts of {JUDGE_PARTS}, not {unknown or 'nothing'}")
    if not isinstance(rubric, str) or not rubric.strip():
        raise ValueError("a judge needs a rubric: what a good run is")
    check = _Judge(model, rubric, name=name, include=parts, pricing=pricing, capture_content=capture_content,
                   redact=redact, max_output_tokens=max_output_tokens, temperature=temperature, timeout=timeout,
                   mode=output_mode)
    return Grader(check=check, name=name, threshold=float(threshold))
