"""The built-in deterministic graders: each a function of its parameters returning a ``Grader``
that names itself ``tracedagent.evals:<function>`` with those parameters, so a dataset holding
it saves and loads (``Dataset.save``). Each explains a failure with the facts that failed it,
never quoting the run's content: an explanation goes on the grade's span."""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

from opentelemetry.sdk.trace import ReadableSpan

from .._core import _names as N
from .._core._budget import Stop
from ._grade import Grade, GradedRun, Grader, GraderResult, SpansNotKept

__all__ = ["stop_reason_in", "answered", "output_equals", "output_contains", "output_matches", "output_validates",
           "trajectory_contains", "trajectory_excludes", "trajectory_in_order", "no_denied_calls", "no_failed_calls",
           "no_repeated_calls", "tool_success_rate", "steps_under", "tokens_under", "cost_under", "duration_under",
           "context_growth_under", "BUILT_IN"]

_UNSET: Any = object()
BUILT_IN = "tracedagent.evals"
"""The module the built-ins are named under in a dataset file."""


def _made(function: str, check: Callable[[GradedRun], GraderResult], *, threshold: float = 1.0,
          **args: Any) -> Grader:
    return Grader(check=check, name=function, threshold=threshold, ref=f"{BUILT_IN}:{function}", args=args)


def _verdict(ok: bool, why: str) -> Grade:
    return Grade(score=1.0 if ok else 0.0, explanation=None if ok else why)


def stop_reason_in(reasons: Iterable[str | Stop]) -> Grader:
    """The run stopped for one of ``reasons`` (``Stop`` values or their strings)."""
    wanted = sorted(r.value if isinstance(r, Stop) else str(r) for r in reasons)
    return _made("stop_reason_in", lambda run: _verdict(
        run.stop_reason in wanted, f"stop reason {run.stop_reason!r} is not one of {wanted}"), reasons=wanted)


def answered() -> Grader:
    """The run answered (``Stop.ANSWERED``)."""
    return _made("answered", lambda run: _verdict(run.ok, f"the run stopped: {run.stop_reason}"))


def _expected(run: GradedRun, value: Any) -> Any:
    if value is _UNSET or value is None:
        if run.expected_output is None:
            raise LookupError("no expected output: give one to the grader or to the case (Case(expected_output=...))")
        return run.expected_output
    return value


def _plain(output: Any) -> Any:
    """A typed output as JSON-like data, to compare with an expected output read from a file."""
    if hasattr(output, "model_dump"):
        return output.model_dump(mode="json")
    import dataclasses
    return dataclasses.asdict(output) if dataclasses.is_dataclass(output) and not isinstance(output, type) else output


def output_equals(expected: Any = None) -> Grader:
    """The output equals ``expected`` (default: the case's ``expected_output``); a typed output is
    compared as itself and as its JSON data."""
    def check(run: GradedRun) -> Grade:
        want = _expected(run, expected)
        got = run.output
        return _verdict(got == want or _plain(got) == want, "the output differs from the expected output")
    return _made("output_equals", check, expected=expected)


def output_contains(text: str | None = None, *, case_sensitive: bool = True) -> Grader:
    """The answer's text contains ``text`` (default: the case's ``expected_output``)."""
    def check(run: GradedRun) -> Grade:
        want, got = str(_expected(run, text)), run.text
        found = want in got if case_sensitive else want.lower() in got.lower()
        return _verdict(found, "the answer does not contain the expected text")
    return _made("output_contains", check, text=text, case_sensitive=case_sensitive)


def output_matches(pattern: str) -> Grader:
    """The answer's text matches the regular expression ``pattern`` (``re.search``)."""
    compiled = re.compile(pattern)
    return _made("output_matches", lambda run: _verdict(
        compiled.search(run.text) is not None, f"the answer does not match the pattern {pattern!r}"), pattern=pattern)


def output_validates(type_: Any) -> Grader:
    """The output validates against a Python type (pydantic's ``TypeAdapter``): a typed output
    of that type, or a text answer that parses as JSON into it."""
    from pydantic import TypeAdapter, ValidationError

    adapter = TypeAdapter(type_)
    name = getattr(type_, "__name__", str(type_))

    def check(run: GradedRun) -> Grade:
        output = run.output
        try:
            if isinstance(output, str):
                adapter.validate_json(output)
            else:
                adapter.validate_python(output)
        except ValidationError as exc:
            return _verdict(False, f"the output is not a {name}: {exc.error_count()} error(s), first: "
                                   f"{exc.errors()[0]['msg']}")
        return _verdict(True, "")
    return Grader(check=check, name="output_validates")  # a type is no file's data: not saved


def trajectory_contains(tools: Iterable[str]) -> Grader:
    """Each of ``tools`` ran and succeeded at least once."""
    wanted = list(tools)

    def check(run: GradedRun) -> Grade:
        missing = [t for t in wanted if t not in run.trajectory]
        return _verdict(not missing, f"never ran: {missing} (trajectory {run.trajectory})")
    return _made("trajectory_contains", check, tools=wanted)


def trajectory_excludes(tools: Iterable[str]) -> Grader:
    """None of ``tools`` was even requested (a denied call counts: the security signal)."""
    unwanted = list(tools)

    def check(run: GradedRun) -> Grade:
        asked = [t for t in run.requested_tools if t in unwanted]
        return _verdict(not asked, f"requested: {asked}")
    return _made("trajectory_excludes", check, tools=unwanted)


def trajectory_in_order(tools: Iterable[str]) -> Grader:
    """``tools`` ran and succeeded in this order (others may come between)."""
    wanted = list(tools)

    def check(run: GradedRun) -> Grade:
        remaining = iter(run.trajectory)
        in_order = all(any(t == ran for ran in remaining) for t in wanted)
        return _verdict(in_order, f"{wanted} did not run in that order (trajectory {run.trajectory})")
    return _made("trajectory_in_order", check, tools=wanted)


def _no_outcomes(function: str, outcomes: set[str], what: str) -> Grader:
    def check(run: GradedRun) -> Grade:
        bad = [f"{name} ({outcome})" for name, outcome in run.tool_outcomes if outcome in outcomes]
        return _verdict(not bad, f"{what}: {bad}")
    return _made(function, check)


def no_denied_calls() -> Grader:
    """No call was denied by the registry's policy."""
    return _no_outcomes("no_denied_calls", {"denied"}, "denied calls")


def no_failed_calls() -> Grader:
    """Every dispatched call succeeded (none raised, timed out, was invalid, unknown or fatal)."""
    return _no_outcomes("no_failed_calls", {"error", "fatal", "timeout", "invalid_arguments", "unknown_tool"},
                        "failed calls")


def no_repeated_calls() -> Grader:
    """No call (name and arguments) was requested twice: the run did not stop on the repeat
    detector, and (a live run) no identical call was made twice under its limit."""
    def check(run: GradedRun) -> Grade:
        if run.stop_reason == Stop.REPEATED_CALL.value:
            return _verdict(False, "the run stopped on a repeated identical call")
        seen: set[tuple[str, str]] = set()
        for step in run.run.steps if run.run is not None else ():
            for call in step.completion.tool_calls:
                key = (call.name, repr(call.arguments))
                if key in seen:
                    # the arguments are content (on spans only with capture on): the tool's name only
                    return _verdict(False, f"{call.name} was called twice with the same arguments")
                seen.add(key)
        return _verdict(True, "")
    return _made("no_repeated_calls", check)


def tool_success_rate(threshold: float = 1.0) -> Grader:
    """The share of dispatched calls that succeeded, as the score (1.0 with no calls)."""
    def check(run: GradedRun) -> Grade:
        outcomes = [outcome for _, outcome in run.tool_outcomes]
        rate = outcomes.count("ok") / len(outcomes) if outcomes else 1.0
        return Grade(score=rate, explanation=f"{outcomes.count('ok')} of {len(outcomes)} calls succeeded")
    return _made("tool_success_rate", check, threshold=threshold)


def _under(function: str, read: Callable[[GradedRun], float | None], bound: float, unit: str) -> Grader:
    def check(run: GradedRun) -> Grade:
        value = read(run)
        if value is None:
            return Grade(score=0.0, passed=False, label="unknown", explanation=f"the run's {unit} is not known")
        return _verdict(value <= bound, f"{unit} {value:g} over the bound {bound:g}")
    return _made(function, check, bound=bound)


def steps_under(bound: int) -> Grader:
    """At most ``bound`` steps (model calls)."""
    return _under("steps_under", lambda run: run.steps, bound, "steps")


def tokens_under(bound: int) -> Grader:
    """At most ``bound`` tokens, input and output, sub-agents' included."""
    return _under("tokens_under", lambda run: run.total_tokens, bound, "tokens")


def cost_under(bound: float) -> Grader:
    """At most ``bound`` spent (the budget's prices); a run without prices fails as unknown."""
    return _under("cost_under", lambda run: run.cost, bound, "cost")


def duration_under(bound: float) -> Grader:
    """The run took at most ``bound`` seconds."""
    return _under("duration_under", lambda run: run.duration, bound, "seconds")


def _context_sizes(run: GradedRun) -> list[int]:
    """The input tokens of each of the run's own model calls, in order (a call that failed, with
    none reported, left out), read off its ``chat`` spans: a sub-agent's calls are its own
    context, and a judge's calls under an earlier grade are not the run's. Online, where only the
    run span is kept, the same numbers from the ``Run``'s own steps (what their spans said)."""
    try:
        return _chat_span_sizes(run)
    except SpansNotKept:
        if run.run is None:
            raise
        return [step.completion.usage.input_tokens for step in run.run.steps if not step.resumed]


def _chat_span_sizes(run: GradedRun) -> list[int]:
    sizes: list[int] = []

    def walk(span: ReadableSpan) -> None:
        for child in run.view.children(span):
            attributes = child.attributes or {}
            if N.GEN_AI_EVALUATION_NAME in attributes or attributes.get(N.GEN_AI_OPERATION_NAME) == N.OP_INVOKE_AGENT:
                continue
            if attributes.get(N.GEN_AI_OPERATION_NAME) == N.OP_CHAT and N.GEN_AI_USAGE_INPUT_TOKENS in attributes:
                sizes.append(int(attributes[N.GEN_AI_USAGE_INPUT_TOKENS]))
            walk(child)
    walk(run.view.span)
    return sizes


def context_growth_under(ratio: float | None = None, *, tokens: int | None = None, per_step: bool = False) -> Grader:
    """The context (each model call's input tokens, ``gen_ai.usage.input_tokens`` on its
    ``chat`` span) grew at most ``ratio`` times, or by at most ``tokens``, from the run's first
    model call to its last (``per_step``: from each call to the next). A run of one call has not
    grown; a first call that reported no input tokens leaves a ratio unknown (a failed grade)."""
    if (ratio is None) == (tokens is None):
        raise ValueError("context_growth_under takes a ratio or tokens, one of the two")
    if (ratio is not None and ratio < 1.0) or (tokens is not None and tokens < 0):
        raise ValueError(f"a growth bound is a ratio of at least 1 or a number of tokens, not {ratio or tokens}")

    def check(run: GradedRun) -> Grade:
        sizes = _context_sizes(run)
        pairs = list(zip(sizes, sizes[1:])) if per_step else [(sizes[0], sizes[-1])] if len(sizes) > 1 else []
        where = "from one call to the next" if per_step else "from the first model call to the last"
        for before, after in pairs:
            if tokens is not None and after - before > tokens:
                return _verdict(False, f"the context grew by {after - before} input tokens ({before} to {after}) "
                                       f"{where}, over the bound {tokens}")
            if ratio is not None and before == 0:
                return Grade(score=0.0, passed=False, label="unknown",
                             explanation="a model call reported no input tokens: the context's growth is not known")
            if ratio is not None and after / before > ratio:
                return _verdict(False, f"the context grew {after / before:.2f} times ({before} to {after} input "
                                       f"tokens) {where}, over the bound {ratio:g}")
        return _verdict(True, "")
    return _made("context_growth_under", check, ratio=ratio, tokens=tokens, per_step=per_step)
