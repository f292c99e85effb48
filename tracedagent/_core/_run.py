"""The record of a run - its steps, what it cost, why it ended - and the state that builds it.

``RunState`` holds everything one run accumulates and makes every decision the loop takes
on it: the repeat check, the budget checks, and the one finish path. A driver (``Agent.run``)
only calls the model and the tools and asks ``RunState`` what to do next, so a second
driver (an async one) shares every decision instead of copying it.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from ._budget import Budget, Stop
from ._names import MAX_NAME_LENGTH
from ._records import Completion, Message, ToolCall, ToolOutcome, ToolResult, error_type

__all__ = ["Step", "Run", "RunState", "initial_messages", "canonical_arguments", "current_run"]


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
        """Dispatched but did not succeed: denied, invalid, unknown, failed, fatal or timed out."""
        return [result.name for result in self.tool_results if not result.ok]

    @property
    def not_dispatched_names(self) -> list[str]:
        """Requested but never dispatched, because the run stopped first (the repeat check, the
        tool-call ceiling, or an earlier call's fatal error): the calls after the last result."""
        return [call.name for call in self.completion.tool_calls[len(self.tool_results):]]


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
    step_count: int = -1
    """Model calls attempted, one a loop iteration: ``len(steps)``, plus one when the run
    ended on a call that failed or was cut off (``model_error``, or ``time_budget_exhausted``
    in ``arun``). Each is a step span; defaults to ``len(steps)``."""
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
    sub_runs: list[Run] = field(default_factory=list)
    """The runs of sub-agents started during this one (``Agent.as_tool``), in the order they
    ended. Their tokens and cost are included in this run's totals."""
    conversation_id: str | None = None
    """``gen_ai.conversation.id`` of the run, given to ``run`` or inherited from a parent run."""

    def __post_init__(self) -> None:
        if self.step_count < 0:
            self.step_count = len(self.steps)

    @property
    def ok(self) -> bool:
        return self.stop is Stop.ANSWERED

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def own_input_tokens(self) -> int:
        """Input tokens of this agent's own model calls, without its sub-agents'."""
        return self.input_tokens - sum(run.input_tokens for run in self.sub_runs)

    @property
    def own_output_tokens(self) -> int:
        return self.output_tokens - sum(run.output_tokens for run in self.sub_runs)

    @property
    def own_cost(self) -> float:
        return self.cost - sum(run.cost for run in self.sub_runs)

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

    def not_dispatched_tools(self) -> list[str]:
        """Tools requested but never dispatched, because the run stopped first. Every requested
        call is in exactly one of ``trajectory``, ``blocked_tools`` and this list."""
        return [name for step in self.steps for name in step.not_dispatched_names]

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
        except (RecursionError, ValueError):  # too deep, or an int too long to print: never a repeat
            return f"<arguments at {id(arguments):#x}>"


current_run: contextvars.ContextVar[RunState | None] = contextvars.ContextVar("tracedagent_run", default=None)
"""The run whose loop is running in this context: a run started while it is set (by a tool,
typically ``Agent.as_tool``) is its sub-run. Tasks and ``asyncio.to_thread`` carry it."""


class RunState:
    """Everything one run accumulates, and the decisions made on it."""

    def __init__(self, budget: Budget, messages: list[Message], *, trace_id: str | None = None,
                 conversation_id: str | None = None, parent: RunState | None = None) -> None:
        self.budget = budget
        self.messages = messages
        self.trace_id = trace_id
        self.conversation_id = conversation_id
        self.parent = parent
        """The run that started this one from a tool (a team's sub-agent), if any."""
        self.deadline = None if budget.max_seconds is None else time.monotonic() + budget.max_seconds
        """``time.monotonic()`` at which the time budget runs out, if there is one."""
        self.steps: list[Step] = []
        self.sub_runs: list[Run] = []
        self.tool_calls = 0
        self._lock = threading.Lock()
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
        cost = self.budget.cost_of(completion.usage.input_tokens, completion.usage.output_tokens)
        self.cost += cost
        if self.parent is not None:
            self.parent.charge(completion.usage.input_tokens, completion.usage.output_tokens, cost)
        return step

    def charge(self, input_tokens: int, output_tokens: int, cost: float) -> None:
        """Count a sub-agent's model call in this run's totals, and its parent's, as it happens:
        sub-agents running side by side each see what the others spent (a team's ceiling holds)."""
        with self._lock:  # sub-agents may run in worker threads
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens
            self.cost += cost
        if self.parent is not None:
            self.parent.charge(input_tokens, output_tokens, cost)

    def child_budget(self, budget: Budget) -> Budget:
        """The budget of a sub-agent's run: its own ceilings, lowered to what this run has left
        of its tokens, cost and time. Without prices of its own it takes this run's: a spend
        it cannot price would pass the team's cost ceiling as free. (Sub-agents side by side
        are also held to the team's ceilings as they spend: ``over_budget``.)"""
        b, changes = self.budget, {}
        if b.max_tokens is not None:
            left = max(0, b.max_tokens - self.input_tokens - self.output_tokens)
            changes["max_tokens"] = left if budget.max_tokens is None else min(budget.max_tokens, left)
        if b.max_cost is not None:
            left_usd = max(0.0, b.max_cost - self.cost)
            changes["max_cost"] = left_usd if budget.max_cost is None else min(budget.max_cost, left_usd)
        if (left_s := self.seconds_left()) is not None:
            changes["max_seconds"] = left_s if budget.max_seconds is None else min(budget.max_seconds, left_s)
        if b.priced and not budget.priced:
            changes.update(price_per_1k_input=b.price_per_1k_input, price_per_1k_output=b.price_per_1k_output)
        return dataclasses.replace(budget, **changes) if changes else budget

    def absorb(self, sub_run: Run) -> None:
        """Keep a finished sub-agent's run (its spend was counted as it happened: ``charge``)."""
        with self._lock:  # sub-agents may run in worker threads
            self.sub_runs.append(sub_run)

    def seconds_left(self) -> float | None:
        """What is left of the time budget (never negative), or ``None`` without one."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def out_of_time(self) -> Run | None:
        """The time budget, checked before each model call (and with the other ceilings after
        each step's tools)."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return self.finish(Stop.TIME_BUDGET)
        return None

    def model_failed(self, error: BaseException | None, received: Completion | None = None) -> Run:
        """A model call that raised, or (``None``) was cut off at the deadline: out of time if
        the time budget ran out meanwhile (the adapter was given what was left as its
        timeout), else the model's error. The failed call still counts as a step; what a
        streamed call had delivered before it broke or was cut (``received``) is kept as it."""
        out_of_time = error is None or (self.deadline is not None and time.monotonic() >= self.deadline)
        if received is not None:
            self.record(len(self.steps), received)
        return self.finish(Stop.TIME_BUDGET if out_of_time else Stop.MODEL_ERROR, error=error,
                           call_failed=received is None)

    def append(self, step: Step, *results: ToolResult) -> Run | None:
        """Keep dispatched calls' results on their step, in call order, and show each to the
        model; a fatal one ends the run once every result is kept (the model never learns of it)."""
        fatal = False
        for result in results:
            step.tool_results.append(result)
            if result.outcome is ToolOutcome.FATAL:
                fatal = True
            else:
                self.messages.append(result.as_message())
        return self.finish(Stop.TOOL_FATAL) if fatal else None

    def check_turn(self, calls: Sequence[ToolCall]) -> Run | None:
        """Before anything of a turn is dispatched: the tool-call ceilings, then the repeat
        check, which stops a stuck agent before it pays for the same call again."""
        b = self.budget
        self.tool_calls += len(calls)
        if b.max_tool_calls_per_step is not None and len(calls) > b.max_tool_calls_per_step:
            return self.finish(Stop.TOOL_CALL_BUDGET, detail=f"{len(calls)} tool calls in one turn, over the "
                                                             f"limit of {b.max_tool_calls_per_step}")
        if b.max_tool_calls is not None and self.tool_calls > b.max_tool_calls:
            return self.finish(Stop.TOOL_CALL_BUDGET, detail=f"{self.tool_calls} tool calls in the run, over "
                                                             f"the limit of {b.max_tool_calls}")
        for call in calls:
            key = (call.name, canonical_arguments(call.arguments))
            times = self._seen_calls[key] = self._seen_calls.get(key, 0) + 1
            if times > b.repeat_limit:
                return self.finish(Stop.REPEATED_CALL, detail=(call.name, times))
        return None

    def over_budget(self) -> Run | None:
        """Time, token, cost and progress ceilings, checked once the step's work is done."""
        b = self.budget
        if stopped := self.out_of_time():
            return stopped
        if b.max_tokens is not None and self.input_tokens + self.output_tokens > b.max_tokens:
            return self.finish(Stop.TOKEN_BUDGET)
        if b.max_cost is not None and self.cost > b.max_cost:
            return self.finish(Stop.COST_BUDGET)
        if self.parent is not None and (stopped := self._team_over_budget()):
            return stopped
        if b.no_progress_limit is not None:
            progressed = bool(self.steps and self.steps[-1].succeeded_names)
            self._steps_without_progress = 0 if progressed else self._steps_without_progress + 1
            if self._steps_without_progress >= b.no_progress_limit:
                return self.finish(Stop.NO_PROGRESS)
        return None

    def _team_over_budget(self) -> Run | None:
        """A sub-agent's runs above it count every sibling's spend as it happens: when one of
        them is over its ceiling, the team is, and this run stops too."""
        run = self.parent
        while run is not None:
            b = run.budget
            if b.max_tokens is not None and run.input_tokens + run.output_tokens > b.max_tokens:
                return self.finish(Stop.TOKEN_BUDGET, detail=f"its team used {run.input_tokens + run.output_tokens} "
                                                             f"tokens, over the team's {b.max_tokens}-token budget")
            if b.max_cost is not None and run.cost > b.max_cost:
                return self.finish(Stop.COST_BUDGET, detail=f"its team spent ${run.cost:.4f}, over the team's "
                                                            f"${b.max_cost:.4f} cost budget")
            run = run.parent
        return None

    def finish(self, stop: Stop, *, error: BaseException | None = None, detail: Any = None,
               call_failed: bool = False) -> Run:
        """The one exit: every stop produces a ``Run`` with a named reason."""
        output = self.steps[-1].completion.text if stop is Stop.ANSWERED else self._explain(stop, error, detail)
        return Run(output=output, stop=stop, steps=self.steps, step_count=len(self.steps) + call_failed,
                   messages=self.messages,
                   input_tokens=self.input_tokens, output_tokens=self.output_tokens, cost=self.cost,
                   trace_id=self.trace_id, error=error, sub_runs=list(self.sub_runs),
                   conversation_id=self.conversation_id)

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
        if stop in (Stop.TOKEN_BUDGET, Stop.COST_BUDGET) and detail is not None:  # the team's ceiling
            return f"Stopped: {detail}."
        if stop is Stop.TOKEN_BUDGET:
            return (f"Stopped: used {self.input_tokens + self.output_tokens} tokens, "
                    f"over the {b.max_tokens}-token budget.")
        if stop is Stop.COST_BUDGET:
            return f"Stopped: spent ${self.cost:.4f}, over the ${b.max_cost:.4f} cost budget."
        if stop is Stop.NO_PROGRESS:
            return f"Stopped: {self._steps_without_progress} steps in a row without a successful tool call."
        if stop is Stop.MODEL_ERROR:
            return f"Stopped: the model call failed ({error_type(error)})."
        if stop is Stop.TIME_BUDGET:
            return f"Stopped: ran out of the {b.max_seconds:g}-second time budget."
        if stop is Stop.TOOL_CALL_BUDGET:
            return f"Stopped: the model asked for {detail}."
        if stop is Stop.CANCELLED:  # a stream whose consumer stopped reading: stream.run
            return "Stopped: the run was cancelled before it ended."
        raise AssertionError(f"no explanation for {stop!r}")  # pragma: no cover - Stop is closed
