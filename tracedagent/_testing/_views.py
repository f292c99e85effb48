"""One run as its spans tell it: ``RunView`` over an ``invoke_agent`` span and its descendants."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import format_trace_id

from .._core import _names as N
from .._core._budget import Stop
from ._match import find_spans

__all__ = ["RunView", "render_tree", "is_run_span"]


def is_run_span(span: ReadableSpan) -> bool:
    return (span.attributes or {}).get(N.GEN_AI_OPERATION_NAME) == N.OP_INVOKE_AGENT


def _by_start(spans: Iterable[ReadableSpan]) -> list[ReadableSpan]:
    return sorted(spans, key=lambda s: s.start_time or 0)


def render_tree(root: ReadableSpan, children: Callable[[ReadableSpan], list[ReadableSpan]]) -> str:
    """Span names indented two spaces per level, children in start order."""
    lines: list[str] = []

    def walk(span: ReadableSpan, depth: int) -> None:
        lines.append("  " * depth + span.name)
        for child in children(span):
            walk(child, depth + 1)

    walk(root, 0)
    return "\n".join(lines)


class RunView:
    """One run: the facts its ``invoke_agent`` span carries, and the spans beneath it.

    The properties read the run span's attributes, so they say what the telemetry says
    (which is what a dashboard or an alert will see), not what ``Agent.run`` returned.
    """

    def __init__(self, span: ReadableSpan, all_spans: Iterable[ReadableSpan]) -> None:
        """``all_spans`` may hold other traces' spans; only this run's trace is kept."""
        self.span = span
        """The raw ``invoke_agent`` span."""
        trace_id = span.context.trace_id
        self._children: dict[int, list[ReadableSpan]] = {}
        for s in all_spans:
            if s.context.trace_id == trace_id and s.parent is not None:
                self._children.setdefault(s.parent.span_id, []).append(s)
        self.descendants: list[ReadableSpan] = self._below(span)
        """Every span under the run span, depth first, siblings in start order."""

    def _below(self, span: ReadableSpan) -> list[ReadableSpan]:
        found = []
        for child in self.children(span):
            found.append(child)
            found.extend(self._below(child))
        return found

    def children(self, span: ReadableSpan | None = None) -> list[ReadableSpan]:
        """The direct children of ``span`` (default: the run span), in start order."""
        span = span or self.span
        return _by_start(self._children.get(span.context.span_id, []))

    def spans(self, name: str | None = None, **attributes: Any) -> list[ReadableSpan]:
        """This run's spans (the run span first) matching a name and attributes;
        keywords follow the ``tracedagent.testing`` alias rule (``tool_name=``, ``outcome=``, ...)."""
        return find_spans([self.span, *self.descendants], name, **attributes)

    def tree(self) -> str:
        """The run's span names as an indented tree, as ``assert_span_tree`` prints it."""
        return render_tree(self.span, self.children)

    def _attr(self, key: str, default: Any = None) -> Any:
        return (self.span.attributes or {}).get(key, default)

    # --- the run span's facts ------------------------------------------------------------

    @property
    def trace_id(self) -> str:
        """32 hex digits, the same as ``Run.trace_id``."""
        return format_trace_id(self.span.context.trace_id)

    @property
    def agent_name(self) -> str | None:
        return self._attr(N.GEN_AI_AGENT_NAME)

    @property
    def stop_reason(self) -> str | None:
        """A ``Stop`` value such as ``"answered"``; ``None`` if the run crashed."""
        return self._attr(N.STOP_REASON)

    @property
    def ok(self) -> bool:
        return self.stop_reason == Stop.ANSWERED.value

    @property
    def stop_message(self) -> str | None:
        """The sentence saying why a stopped run stopped (the run span's status
        description); ``None`` for an answered run: its answer is content, which spans
        carry only when content capture is on."""
        return self.span.status.description

    @property
    def steps(self) -> int | None:
        return self._attr(N.STEPS)

    @property
    def input_tokens(self) -> int | None:
        return self._attr(N.GEN_AI_USAGE_INPUT_TOKENS)

    @property
    def output_tokens(self) -> int | None:
        return self._attr(N.GEN_AI_USAGE_OUTPUT_TOKENS)

    @property
    def cost(self) -> float | None:
        """This agent's own spend; ``None`` when the budget had no prices (unknown, not free)."""
        return self._attr(N.COST_USD)

    @property
    def total_input_tokens(self) -> int | None:
        """Input tokens with every sub-agent's; ``input_tokens`` is this agent's own calls only."""
        return self._attr(N.USAGE_TOTAL_INPUT_TOKENS)

    @property
    def total_output_tokens(self) -> int | None:
        return self._attr(N.USAGE_TOTAL_OUTPUT_TOKENS)

    @property
    def conversation_id(self) -> str | None:
        return self._attr(N.GEN_AI_CONVERSATION_ID)

    @property
    def sub_runs(self) -> list[RunView]:
        """The runs of the sub-agents this run called (each a ``RunView``), in start order;
        their sub-runs are theirs, not this run's."""
        found: list[RunView] = []

        def walk(span: ReadableSpan) -> None:
            for child in self.children(span):
                if is_run_span(child):
                    found.append(RunView(child, [child, *self._below(child)]))
                else:
                    walk(child)

        walk(self.span)
        return found

    @property
    def not_dispatched_tools(self) -> list[str]:
        """Tools requested but never dispatched because the run stopped first."""
        return list(self._attr(N.TOOLS_NOT_DISPATCHED, ()))

    @property
    def requested_tools(self) -> list[str]:
        """Every tool the model asked for, denied calls included: the security signal."""
        return list(self._attr(N.TOOLS_REQUESTED, ()))

    @property
    def executed_tools(self) -> list[str]:
        """Tools that ran and succeeded: the correctness signal."""
        return list(self._attr(N.TOOLS_EXECUTED, ()))

    @property
    def blocked_tools(self) -> list[str]:
        """Tools dispatched without success: denied, invalid, unknown, failed or fatal."""
        return list(self._attr(N.TOOLS_BLOCKED, ()))

    # --- child spans -----------------------------------------------------------------------

    @property
    def step_spans(self) -> list[ReadableSpan]:
        return [s for s in self.descendants if s.name == N.STEP_SPAN_NAME]

    @property
    def chat_spans(self) -> list[ReadableSpan]:
        return self.spans(operation_name=N.OP_CHAT)

    @property
    def tool_spans(self) -> list[ReadableSpan]:
        return self.spans(operation_name=N.OP_EXECUTE_TOOL)

    @property
    def tool_outcomes(self) -> list[tuple[str, str]]:
        """``(tool name, outcome)`` for every dispatched call, in order: ``("refund", "denied")``."""
        return [(str(s.attributes.get(N.GEN_AI_TOOL_NAME)), str(s.attributes.get(N.TOOL_OUTCOME)))
                for s in self.tool_spans]

    def summary(self) -> str:
        """A few lines describing the run, for assertion messages."""
        message = self.stop_message if self.stop_message is not None else "(none: the run answered)"
        calls = ", ".join(f"{name} -> {outcome}" for name, outcome in self.tool_outcomes) or "none"
        return "\n".join([
            f"  run:          {self.span.name} (trace {self.trace_id})",
            f"  stop reason:  {self.stop_reason}",
            f"  stop message: {message}",
            f"  steps:        {self.steps}",
            f"  tokens:       {self.input_tokens} in, {self.output_tokens} out",
            f"  tool calls:   {calls}",
        ])

    def __repr__(self) -> str:
        return (f"<RunView {self.span.name!r} stop_reason={self.stop_reason!r} steps={self.steps} "
                f"requested={self.requested_tools} executed={self.executed_tools}>")
