"""What a run has used: tokens, cost and calls, summed in one place.

A run's ``RunUsage`` is added to by each of its model calls and by its sub-agents' as they
happen (``incr``, through ``RunState.record`` and ``RunState.charge``); the run span, the run metrics and the
``Run`` a driver returns all read it, so a total is computed once (compare pydantic-ai's
``RunUsage.incr``). ``Spent`` is its snapshot: what a paused run carries in its checkpoint,
and what a resumed run starts from (``add``), cache tokens included.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._records import Usage

__all__ = ["RunUsage", "Spent"]


@dataclass(frozen=True, kw_only=True)
class Spent:
    """What a run used of its budget up to a point (``RunUsage.snapshot``): a paused run's,
    which bounds the resumed run by the rest (the checkpoint's ``spent``)."""

    steps: int = 0
    """Model calls made."""
    input_tokens: int = 0
    """Input tokens, its sub-agents' included."""
    output_tokens: int = 0
    """Output tokens, its sub-agents' included."""
    cost: float = 0.0
    """USD at the budget's prices."""
    cache_read_input_tokens: int = 0
    """Of ``input_tokens``, those read from the providers' prompt caches (0 in a version-1 checkpoint)."""
    cache_creation_input_tokens: int = 0
    """Of ``input_tokens``, those written to the providers' prompt caches (0 in a version-1 checkpoint)."""
    tool_calls: int = 0
    """Tool calls requested (``Budget.max_tool_calls`` counts these)."""
    seconds: float = 0.0
    """Time running: waiting for a person does not count against ``max_seconds``."""


@dataclass(kw_only=True, slots=True)
class RunUsage:
    """A run's totals, its sub-agents' included."""

    input_tokens: int = 0
    """Input tokens of every model call (cache reads and writes included)."""
    output_tokens: int = 0
    """Output tokens of every model call."""
    cache_read_input_tokens: int = 0
    """Of ``input_tokens``, those the providers served from their prompt caches."""
    cache_creation_input_tokens: int = 0
    """Of ``input_tokens``, those written to the providers' prompt caches."""
    cost: float = 0.0
    """USD at the budget's prices; meaningless unless ``cost_known``."""
    cost_known: bool = False
    """Whether the run had prices: without them a cost is unknown, not zero, and is left off
    spans and metrics."""
    tool_calls: int = 0
    """Tool calls this run's model asked for (checked against ``Budget.max_tool_calls``; a
    sub-agent's calls count against its own run's ceiling, not this one's)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def incr(self, usage: Usage, cost: float) -> None:
        """Count one model call, this run's or a sub-agent's: its tokens and what they cost."""
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_input_tokens += usage.cache_read_input_tokens
        self.cache_creation_input_tokens += usage.cache_creation_input_tokens
        self.cost += cost

    def count_tool_calls(self, calls: int) -> None:
        """Count a turn's requested tool calls (before the ceilings are checked)."""
        self.tool_calls += calls

    def add(self, spent: Spent) -> None:
        """Add what was used elsewhere: a paused run's spend, which its resumed run starts from."""
        self.input_tokens += spent.input_tokens
        self.output_tokens += spent.output_tokens
        self.cache_read_input_tokens += spent.cache_read_input_tokens
        self.cache_creation_input_tokens += spent.cache_creation_input_tokens
        self.cost += spent.cost
        self.tool_calls += spent.tool_calls

    def snapshot(self, *, steps: int = 0, seconds: float = 0.0) -> Spent:
        """These totals as they are now, with the run's ``steps`` and running ``seconds``."""
        return Spent(steps=steps, input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                     cache_read_input_tokens=self.cache_read_input_tokens,
                     cache_creation_input_tokens=self.cache_creation_input_tokens,
                     cost=self.cost, tool_calls=self.tool_calls, seconds=seconds)

