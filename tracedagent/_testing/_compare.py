"""Comparing two runs step by step, as replay's ``check`` and the ``diff`` command do.

A step is compared on what a recording holds whatever the capture setting (the calls, their
outcomes, the tokens) and on content only where both sides have it.
"""

from __future__ import annotations

import json
from typing import Any

from .._core._records import ToolOutcome
from .._traces._printable import printable
from .._traces._recorded import RecordedCall, RecordedStep

__all__ = ["first_divergence", "describe_step"]


def first_divergence(expected: list[RecordedStep], actual: list[RecordedStep], *,
                     results: bool = True) -> tuple[int, str, str] | None:
    """The first step at which two runs differ, as ``(index, expected, actual)`` descriptions;
    ``None`` when they agree on every step. A field either side lacks (no content) is not
    compared; an ``invalid_arguments`` reply's text is not either (see the module's notes)."""
    for index in range(max(len(expected), len(actual))):
        want = expected[index] if index < len(expected) else None
        got = actual[index] if index < len(actual) else None
        if want is None or got is None or not _same_step(want, got, results):
            return index, describe_step(want), describe_step(got)
    return None


def _same_step(a: RecordedStep, b: RecordedStep, results: bool) -> bool:
    if a.error != b.error or len(a.calls) != len(b.calls) or not _agree(a.text, b.text):
        return False
    if any(a.usage.get(k) != b.usage.get(k) for k in ("input_tokens", "output_tokens")):
        return False
    return all(_same_call(x, y, results) for x, y in zip(a.calls, b.calls))


def _same_call(a: RecordedCall, b: RecordedCall, results: bool) -> bool:
    if a.name != b.name or a.outcome != b.outcome or not _agree(a.arguments, b.arguments):
        return False
    approximate = a.outcome == ToolOutcome.INVALID_ARGUMENTS.value
    return not results or approximate or _agree(a.result, b.result)


def _agree(a: Any, b: Any) -> bool:
    return a is None or b is None or a == b


def describe_step(step: RecordedStep | None) -> str:
    """One line for a step: its tool calls and what became of each, or its text."""
    if step is None:
        return "(no such step)"
    if step.error is not None:
        return printable(f"the model call failed ({step.error})")
    tokens = f" [{step.usage.get('input_tokens', '?')} in / {step.usage.get('output_tokens', '?')} out]"
    if not step.calls:
        return printable(f"answered {step.text!r}" if step.text is not None else "answered") + tokens
    return "; ".join(_describe_call(c) for c in step.calls) + tokens


def _describe_call(call: RecordedCall) -> str:
    arguments = "" if call.arguments is None else json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
    fate = "not dispatched" if call.outcome is None else call.outcome
    result = "" if call.result is None else f": {call.result!r}"
    return printable(f"{call.name}({arguments}) -> {fate}", limit=120) + printable(result, limit=80)
