"""The record of a run - its steps, what it cost, why it ended - and the state that builds it.

``RunState`` holds everything one run accumulates and makes every decision the loop takes
on it: the repeat check, the budget checks, and the one finish path. A driver (``Agent.run``)
only calls the model and the tools and asks ``RunState`` what to do next, so a second
driver (an async one) shares every decision instead of copying it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from ._budget import Budget, Stop
from ._names import MAX_NAME_LENGTH
from ._records import Completion, Message, ToolCall, ToolOutcome, ToolResult, error_type

__all__ = ["Step", "Run", "RunState", "initial_messages", "canonical_arguments"]


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
        return [call.name for call in self.completion.tool_calls]

    @property
    def succeeded_names(self) -> list[str]:
        """What actually ran and returned successfully."""
        return [result.name for result in self.tool_results if result.ok]

    @property
    def blocked_names(self) -> list[str]:
        """Dispatched but did not succeed: denied, invalid, unknown, failed or fatal."""
        return [result.name for result in self.tool_results if not result.ok]


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


def initial_messages(system_prompt: str | None, history: Sequence[Message] | None, task: str) -> list[Message]:
    """System prompt first if there is one, then the history, then the task."""
    messages: list[Message] = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.extend(dict(m) for m in history or ())
    messages.append({"role": "user", "content": task})
    return messages


_CANONICAL_JSON = json.JSONEncoder(sort_keys=True, default=str)  # what json.dumps(v, sort_keys=True, default=str) builds


def canonical_arguments(arguments: Any) -> str:
    """Arguments' identity for the repeat check: key order does not make a call new, and what
    JSON tells apart (1, 1.0, true, "1") stays apart."""
    try:
        return _CANONICAL_JSON.encode(arguments)
    except (TypeError, ValueError, RecursionError):  # unsortable keys (a custom model's tuples), a cycle
        try:
            return repr(arguments)
        except RecursionError:  # nested past the interpreter's limit: never counted as a repeat
            return f"<arguments at {id(arguments):#x}>"


class RunState:
    """Everything one run accumulates, and the decisions made on it."""

    def __init__(self, budget: Budget, messages: list[Message], *, trace_id: str | None = None) -> None:
        self.budget = budget
        self.messages = messages
        self.trace_id = trace_id
        self.steps: list[Step] = []
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0.0
        self._seen_calls: dict[tuple[str, str], int] = {}
        self._steps_without_progress = 0

    def record(self, index: int, completion: Completion) -> Step:
        """Account for a model turn and append it to the conversation."""
        step = Step(index=index, completion=completion)
        self.steps.append(step)
        self.messages.append(completion.as_message())
        self.input_tokens += completion.usage.input_tokens
        self.output_tokens += completion.usage.output_tokens
        self.cost = self.budget.cost_of(self.input_tokens, self.output_tokens)
        return step

    def append(self, step: Step, result: ToolResult) -> Run | None:
        """Keep a dispatched call's result on its step and show it to the model; a fatal
        result ends the run instead (the model never learns of it)."""
        step.tool_results.append(result)
        if result.outcome is ToolOutcome.FATAL:
            return self.finish(Stop.TOOL_FATAL)
        self.messages.append(result.as_message())
        return None

    def repeated_call(self, calls: Sequence[ToolCall]) -> Run | None:
        """Stop a stuck agent before it pays for the same call again: runs before dispatch."""
        for call in calls:
            key = (call.name, canonical_arguments(call.arguments))
            times = self._seen_calls[key] = self._seen_calls.get(key, 0) + 1
            if times > self.budget.repeat_limit:
                return self.finish(Stop.REPEATED_CALL, detail=(call.name, times))
        return None

    def over_budget(self) -> Run | None:
        """Token, cost and progress ceilings, checked once the step's work is done."""
        b = self.budget
        if b.max_tokens is not None and self.input_tokens + self.output_tokens > b.max_tokens:
            return self.finish(Stop.TOKEN_BUDGET)
        if b.max_cost is not None and self.cost > b.max_cost:
            return self.finish(Stop.COST_BUDGET)
        if b.no_progress_limit is not None:
            progressed = bool(self.steps and self.steps[-1].succeeded_names)
            self._steps_without_progress = 0 if progressed else self._steps_without_progress + 1
            if self._steps_without_progress >= b.no_progress_limit:
                return self.finish(Stop.NO_PROGRESS)
        return None

    def finish(self, stop: Stop, *, error: BaseException | None = None, detail: Any = None) -> Run:
        """The one exit: every stop produces a ``Run`` with a named reason."""
        output = self.steps[-1].completion.text if stop is Stop.ANSWERED else self._explain(stop, error, detail)
        return Run(output=output, stop=stop, steps=self.steps, messages=self.messages,
                   input_tokens=self.input_tokens, output_tokens=self.output_tokens, cost=self.cost,
                   trace_id=self.trace_id, error=error)

    def _explain(self, stop: Stop, error: BaseException | None, detail: Any) -> str:
        b = self.budget
        if stop is Stop.STEP_BUDGET:
            return f"Stopped: reached the {b.max_steps}-step limit without an answer."
        if stop is Stop.REPEATED_CALL:
            name, times = detail
            name = name if len(name) <= MAX_NAME_LENGTH else name[:MAX_NAME_LENGTH] + "..."  # the model chose it
            return f"Stopped: repeated the same {name} call {times} times without progress."
        if stop is Stop.TOOL_FATAL:
            return "Stopped: the run hit an unrecoverable tool error."
        if stop is Stop.TOKEN_BUDGET:
            return (f"Stopped: used {self.input_tokens + self.output_tokens} tokens, "
                    f"over the {b.max_tokens}-token budget.")
        if stop is Stop.COST_BUDGET:
            return f"Stopped: spent ${self.cost:.4f}, over the ${b.max_cost:.4f} cost budget."
        if stop is Stop.NO_PROGRESS:
            return f"Stopped: {self._steps_without_progress} steps in a row without a successful tool call."
        if stop is Stop.MODEL_ERROR:
            return f"Stopped: the model call failed ({error_type(error)})."
        raise AssertionError(f"no explanation for {stop!r}")  # pragma: no cover - Stop is closed
