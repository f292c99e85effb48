"""The record of a run: its steps, what it cost, why it ended (``RunState`` builds it).

``Run`` is what every driver returns, however the run ended; ``Step`` is one model turn and
what its tool calls did; ``ToolNames`` is a step's or run's tool names, four ways.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Iterable, NamedTuple, TypeVar

from ._budget import Stop
from ._checkpoint import Checkpoint
from ._pausing import PausedRun, step_fates
from ._records import Completion, Message, ToolResult, Usage
from ._usage import Spent

__all__ = ["ToolNames", "Step", "Run", "usage_of", "joined", "OutputT"]

OutputT = TypeVar("OutputT")
"""A run's output type: ``str`` for an agent without ``output_type``."""


class ToolNames(NamedTuple):
    """A step's (or a run's) tool names, five ways: every requested call is in ``requested``
    and in exactly one of the other four."""

    requested: list[str]
    """What the model asked for, denials included: the security signal."""
    executed: list[str]
    """What ran and returned successfully: the correctness signal."""
    blocked: list[str]
    """Dispatched but did not succeed: denied, invalid, unknown, failed, fatal or timed out."""
    not_dispatched: list[str]
    """Requested but never dispatched, because the run stopped first."""
    pending: list[str]
    """Waiting for a person's decision: the run paused (``approval_required``)."""


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
    waiting: dict[int, str] = field(default_factory=dict)
    """Calls held for a person's decision and not dispatched: their position in the turn, and why."""
    paused: bool = False
    """The run paused on this turn: its held calls are pending, not merely not dispatched."""
    resumed: bool = False
    """Not a model turn: a resumed run's decided calls (``completion`` holds them, with no usage)."""

    def tool_names(self) -> ToolNames:
        """The step's five lists of tool names, in one pass over its calls and results."""
        return ToolNames(*step_fates(self))

    @property
    def requested_names(self) -> list[str]:
        """What the model asked for, including calls that were denied or never dispatched."""
        return [call.name for call in self.completion.tool_calls]

    @property
    def succeeded_names(self) -> list[str]:
        """What actually ran and returned successfully."""
        return self.tool_names().executed

    @property
    def blocked_names(self) -> list[str]:
        """Dispatched but did not succeed: denied, invalid, unknown, failed, fatal or timed out."""
        return self.tool_names().blocked

    @property
    def not_dispatched_names(self) -> list[str]:
        """Requested but never dispatched, because the run stopped first (the repeat check, the
        tool-call ceiling, or an earlier call's fatal error)."""
        return self.tool_names().not_dispatched

    @property
    def pending_names(self) -> list[str]:
        """Waiting for a person's decision when the run paused (a sub-agent's waiting call too)."""
        return self.tool_names().pending


@dataclass(kw_only=True)
class Run(PausedRun, Generic[OutputT]):
    """What ``Agent.run`` returns, however the run ended.

    ``run`` always returns; it does not raise on budget exhaustion. A caller has to look
    at ``stop`` (or ``ok``) before trusting ``output``, which on a stopped run is a
    plausible English sentence: silent truncation is the failure this design prevents.
    """

    output: OutputT
    """The answer when ``ok`` (with ``Agent(output_type=T)``, the value of ``T`` it validated to);
    otherwise a sentence saying why the run stopped (a ``str``, whatever the output type)."""
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
    paused: Checkpoint | None = None
    """With ``Stop.APPROVAL_REQUIRED``: what resuming needs (``checkpoint()`` is its JSON)."""
    resumed: Checkpoint | None = None
    """For a run ``Agent.resume`` continued: the checkpoint it continued from."""
    carried: Spent = field(default_factory=Spent)
    """What the run had spent before it was resumed (zero for a run that was not): the
    totals above include it, the ``own_*`` figures (one trace's spans) do not."""

    text: str = ""
    """The last model turn's text: the answer's text when ``ok`` (an untyped run's ``output``), the
    answer that did not validate with ``Stop.INVALID_OUTPUT``."""
    output_retries: int = 0
    """Answers sent back to the model because they did not validate against the output type."""

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
        """Input tokens of this agent's own model calls, without its sub-agents' nor what was
        spent before a pause (another trace's)."""
        return _own(self, lambda run: run.input_tokens - run.carried.input_tokens)

    @property
    def own_output_tokens(self) -> int:
        return _own(self, lambda run: run.output_tokens - run.carried.output_tokens)

    @property
    def own_cache_read_input_tokens(self) -> int:
        """Of ``own_input_tokens``, those the providers served from their prompt caches (this
        run's own recorded model turns)."""
        return sum(step.completion.usage.cache_read_input_tokens for step in self.steps)

    @property
    def own_cache_creation_input_tokens(self) -> int:
        """Of ``own_input_tokens``, those written to the providers' prompt caches."""
        return sum(step.completion.usage.cache_creation_input_tokens for step in self.steps)

    @property
    def own_cost(self) -> float:
        return _own(self, lambda run: run.cost - run.carried.cost)

    def tool_names(self) -> ToolNames:
        """Its steps' five lists of tool names, joined (what the run span holds: ``joined``)."""
        return joined((step, step.tool_names()) for step in self.steps)

    def requested_tools(self) -> list[str]:
        """Every tool the model asked for, denials included: the security signal."""
        return self.tool_names().requested

    def trajectory(self) -> list[str]:
        """Tools that executed successfully: the correctness signal.

        A call the registry denied is not part of the trajectory, because nothing
        happened - asserting ``not run.used_tool("refund")`` must pass when a guardrail
        blocks an injected refund attempt, otherwise the eval punishes the defence.
        """
        return self.tool_names().executed

    def blocked_tools(self) -> list[str]:
        """Tools that were dispatched but did not succeed."""
        return self.tool_names().blocked

    def not_dispatched_tools(self) -> list[str]:
        """Tools requested but never dispatched, because the run stopped first. Every requested
        call is in exactly one of ``trajectory``, ``blocked_tools``, ``pending_tools`` and this list."""
        return self.tool_names().not_dispatched

    def used_tool(self, name: str) -> bool:
        return name in self.trajectory()

    def requested_tool(self, name: str) -> bool:
        return name in self.requested_tools()


def _own(run: Run, of: Any) -> Any:
    """``of(run)`` without its sub-runs' share: one trace's spans each count their own."""
    return of(run) - sum(of(sub) for sub in run.sub_runs)


def usage_of(run: Run) -> Usage:
    """The tokens a finished run used, its sub-runs' and what it carried from a pause included,
    as one ``Usage``: what a run that ran elsewhere (a child workflow) is charged to the runs
    above it (``RunState.charge``), cache tokens with the rest."""
    cache_read = run.carried.cache_read_input_tokens + run.own_cache_read_input_tokens
    cache_creation = run.carried.cache_creation_input_tokens + run.own_cache_creation_input_tokens
    for sub in run.sub_runs:
        used = usage_of(sub)
        cache_read += used.cache_read_input_tokens
        cache_creation += used.cache_creation_input_tokens
    return Usage(input_tokens=run.input_tokens, output_tokens=run.output_tokens,
                 cache_read_input_tokens=cache_read, cache_creation_input_tokens=cache_creation)


def joined(steps: Iterable[tuple[Step, ToolNames]]) -> ToolNames:
    """A run's tool names from its steps' lists. A call decided within the run (a durable run
    that waited) is in the paused turn and in the decided step: the model asked for it once,
    so it is requested once, as a paused and a resumed run count it once each."""
    names = ToolNames([], [], [], [], [])
    asked: set[str] = set()
    for step, lists in steps:
        calls = step.completion.tool_calls
        if step.resumed and asked:
            lists = lists._replace(requested=[c.name for c in calls if c.id not in asked])
        asked.update(c.id for c in calls)
        for run_list, step_list in zip(names, lists):
            run_list += step_list
    return names
