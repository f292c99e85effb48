"""The record of a run: its steps, what it cost, and why it ended."""

from __future__ import annotations

from dataclasses import dataclass, field

from ._budget import Stop
from ._records import OUTCOME_OK, Completion, Message, ToolResult

__all__ = ["Step", "Run"]


@dataclass(kw_only=True)
class Step:
    """One model turn plus whatever the tools did with it.

    Three lists, not one: what the model asked for, what actually ran, and what was
    requested but did not happen (denied, invalid, unknown, failed or fatal).
    """

    index: int
    """Zero-based position in the run."""
    completion: Completion
    """The model's turn."""
    tool_results: list[ToolResult] = field(default_factory=list)
    """Results of the calls that were dispatched, in call order."""

    @property
    def requested_names(self) -> list[str]:
        """What the model asked for, including calls that were denied or never dispatched."""
        return self.tool_names()[0]

    @property
    def succeeded_names(self) -> list[str]:
        """What actually ran and returned successfully."""
        return self.tool_names()[1]

    @property
    def blocked_names(self) -> list[str]:
        """Dispatched but did not succeed: denied, invalid, unknown, failed or fatal."""
        return self.tool_names()[2]

    def tool_names(self) -> tuple[list[str], list[str], list[str]]:
        """``(requested_names, succeeded_names, blocked_names)`` in one pass over the results,
        for a reader that wants all three: the telemetry, at the end of every step."""
        requested: list[str] = []
        succeeded: list[str] = []
        blocked: list[str] = []
        for call in self.completion.tool_calls:  # loops, not comprehensions: on 3.11 each is a call
            requested.append(call.name)
        for result in self.tool_results:
            (succeeded if result.outcome is OUTCOME_OK else blocked).append(result.name)
        return requested, succeeded, blocked


@dataclass(kw_only=True)
class Run:
    """What ``Agent.run`` returns, however the run ended.

    ``run`` always returns; it does not raise on budget exhaustion. A caller has to look
    at ``stop`` (or ``ok``) before trusting ``output``, which on a stopped run is a
    plausible English sentence: silent truncation is the failure this design prevents.
    """

    output: str
    """The answer when ``ok``; otherwise a sentence saying why the run stopped."""
    stop: Stop
    """Why the run ended."""
    steps: list[Step]
    """Every completed model turn, in order."""
    messages: list[Message]
    """The whole conversation as last sent to, or received from, the model."""
    input_tokens: int = 0
    """Input tokens summed over every model call (it grows with the square of the steps)."""
    output_tokens: int = 0
    """Output tokens summed over every model call."""
    cost: float = 0.0
    """USD at the budget's prices (zero unless you gave prices)."""
    trace_id: str | None = None
    """32 lowercase hex digits of the run span's trace, for finding it in Jaeger;
    ``None`` when no OpenTelemetry SDK is recording."""
    error: BaseException | None = None
    """The exception behind ``Stop.MODEL_ERROR``, kept for the caller (telemetry records
    only its type)."""

    @property
    def ok(self) -> bool:
        return self.stop is Stop.ANSWERED

    @property
    def step_count(self) -> int:
        return len(self.steps)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def requested_tools(self) -> list[str]:
        """Every tool the model asked for, denials included: the security signal."""
        return [name for step in self.steps for name in step.requested_names]

    def trajectory(self) -> list[str]:
        """Tools that executed successfully: the correctness signal.

        A call the registry denied is not part of the trajectory, because nothing
        happened - asserting ``not run.used_tool("refund")`` must pass when a guardrail
        blocks an injected refund attempt, otherwise the eval punishes the defence.
        """
        return [name for step in self.steps for name in step.succeeded_names]

    def blocked_tools(self) -> list[str]:
        """Tools that were dispatched but did not succeed."""
        return [name for step in self.steps for name in step.blocked_names]

    def used_tool(self, name: str) -> bool:
        return name in self.trajectory()

    def requested_tool(self, name: str) -> bool:
        return name in self.requested_tools()
