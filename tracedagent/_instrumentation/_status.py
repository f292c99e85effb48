"""What a span says to a person reading it: the status description of a failed call, and the
run's answer on the run span.

Jaeger's GenAI tab (and most trace UIs) shows a span's status description beside its name,
so a failed ``chat`` or ``execute_tool`` span says what went wrong there, not only in the
attribute table. The facts stay attributes (``error.type``, ``tracedagent.tool.outcome``);
these sentences are for display only, and nothing parses them. Without content capture they
hold no content: only an exception's class and the outcome; with it, a failed tool call's
description adds what the model was shown (redacted and bounded like every captured string).
"""

from __future__ import annotations

from typing import Any

from .._core import _names as N
from .._core._records import ToolOutcome, ToolResult
from .._core._run import Run
from ._content import ContentCapture
from ._telemetry import report

__all__ = ["chat_failure", "tool_failure", "tool_interrupted", "answer_message", "stop_message"]

_TOOL_FAILURES = {
    ToolOutcome.ERROR: "the tool raised {error}",
    ToolOutcome.DENIED: "the registry's policy denied the call",
    ToolOutcome.INVALID_ARGUMENTS: "the call's arguments did not match the tool's schema",
    ToolOutcome.UNKNOWN_TOOL: "no tool of that name is registered",
    ToolOutcome.FATAL: "the tool raised {error}, which ends the run",
    ToolOutcome.TIMEOUT: "the call ran past the tool's timeout and was cancelled",
}


def _interrupted(kind: str, what: str) -> str | None:
    if kind == N.ERROR_TIMEOUT:
        return f"the run's time budget ran out during the {what}, which was cancelled"
    if kind == N.ERROR_CANCELLED:
        return f"the run was cancelled during the {what}"
    return None


def chat_failure(kind: str) -> str:
    """A failed model call's description: its exception's class, never the provider's message
    (which can echo request content or fragments of a key)."""
    return _interrupted(kind, "model call") or f"the model call raised {kind}"


def tool_failure(result: ToolResult, capture: ContentCapture | None) -> str:
    """A dispatched call that did not succeed; with capture on, plus what the model was told."""
    sentence = _TOOL_FAILURES.get(result.outcome, "the call failed").format(error=result.error_type or "an error")
    if capture is not None and result.content:
        try:
            sentence = f"{sentence}: {capture.text(result.content)}"
        except Exception as exc:  # a redactor that raises costs the sentence its content, not the span
            report("describing a failed tool call", exc)
    return sentence


def tool_interrupted(kind: str) -> str:
    """A tool call that raised out of the registry or was interrupted."""
    return _interrupted(kind, "tool call") or f"the call raised {kind}"


def answer_message(run: Run) -> list[dict[str, Any]]:
    """``gen_ai.output.messages`` of the run span, so that the run's GenAI tab shows how it ended.
    An answer is one assistant message. A stopped run's output is tracedagent's own sentence
    ("Stopped: ...", "Paused: ..."), not the model's: it is a ``system`` message (a GenAI view
    shows any other role as an assistant's), with a ``tracedagent.stop`` part carrying the stop
    reason (and, for a pause, how many calls wait), and the stop reason as its finish reason."""
    if run.ok:
        return [{"role": "assistant", "parts": [{"type": "text", "content": run.output}], "finish_reason": "stop"}]
    return stop_message(run.stop.value, run.output, len(run.pending) if run.paused is not None else None)


def stop_message(reason: str, sentence: str | None, pending: int | None = None) -> list[dict[str, Any]]:
    """A run that did not answer, as the one message its run span's GenAI tab shows: the sentence
    it returned (if any) and a ``tracedagent.stop`` part saying why (a generic part a GenAI view
    renders as it is)."""
    stop: dict[str, Any] = {"type": N.STOP_PART, N.STOP_PART_REASON: reason}
    if pending is not None:
        stop[N.STOP_PART_PENDING] = pending
    parts: list[dict[str, Any]] = [{"type": "text", "content": sentence}] if sentence else []
    return [{"role": N.STOP_ROLE, "parts": [*parts, stop], "finish_reason": reason}]
