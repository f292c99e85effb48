"""What a run has used: tokens, cost and calls, summed in one place.

A run's ``RunUsage`` is added to by each of its model calls and by its sub-agents' as they
happen (``incr``, through ``RunState.record`` and ``RunState.charge``); the run span, the run metrics and the
``Run`` a driver returns all read it, so a total is computed once (compare pydantic-ai's
``RunUsage.incr``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._records import Usage

__all__ = ["RunUsage"]


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
