"""Why a run ends, and the ceilings that make it end."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Stop", "Budget"]


class Stop(str, enum.Enum):
    """Why a run ended. Every terminal state is named - there is no 'just fell out'.

    Subclassing ``str`` makes ``Stop.ANSWERED.value == "answered"`` the value that goes
    into the ``tracedagent.stop_reason`` span attribute and metric label.
    """

    ANSWERED = "answered"
    STEP_BUDGET = "step_budget_exhausted"
    TOKEN_BUDGET = "token_budget_exhausted"
    COST_BUDGET = "cost_budget_exhausted"
    REPEATED_CALL = "repeated_identical_call"
    TOOL_FATAL = "fatal_tool_error"
    NO_PROGRESS = "no_progress"
    MODEL_ERROR = "model_error"
    TIME_BUDGET = "time_budget_exhausted"
    TOOL_CALL_BUDGET = "tool_call_budget_exhausted"
    APPROVAL_REQUIRED = "approval_required"
    """Calls wait for a person's decision (``Run.pending``): not a failure, a pause. The run's
    ``checkpoint()`` is what ``Agent.resume`` continues from, once they are decided."""
    INVALID_OUTPUT = "invalid_output"
    """The agent has an output type (``Agent(output_type=...)``) and its answers did not validate,
    ``Budget.max_output_retries`` times retried: ``run.text`` is the last answer's text."""
    PAYLOAD_LIMIT = "payload_limit"
    """The conversation grew past what a durable run may send in one payload (Temporal's limit,
    ``ActivitySettings.max_payload``): the next model request was not sent. Only a run on
    Temporal stops so (``run``/``arun`` send no payloads); the conversation cannot go on there:
    start a new one with less of it."""
    CANCELLED = "cancelled"
    """The run was interrupted (its task cancelled, or ``KeyboardInterrupt``), or the consumer of
    its stream stopped reading before it ended. ``run``/``arun`` return no ``Run`` for it - the
    interruption propagates - but its spans and metrics carry this name; a stream's ``run`` is
    a ``Run`` with this stop."""


@dataclass(frozen=True, kw_only=True)
class Budget:
    """The loop's meter: independent ceilings, each of which ends a run with its own ``Stop``.

    A loop with no ceiling is not an agent, it is an unbounded while-loop with a credit
    card attached. The library ships no prices: they change, and a stale constant is
    worse than an obvious zero, so cost is zero until you pass your model's prices.
    """

    max_steps: int = 10
    """Model calls at most; the loop is ``for i in range(max_steps)``."""
    max_tokens: int | None = None
    """Input plus output tokens over the whole run; ``None`` means no ceiling."""
    max_cost: float | None = None
    """USD over the whole run, from the prices below; ``None`` means no ceiling."""
    repeat_limit: int = 3
    """How often one identical call (same name and arguments) may be made; the next one
    stops the run with ``Stop.REPEATED_CALL`` before it is dispatched."""
    price_per_1k_input: float = 0.0
    """USD per 1,000 input tokens of your model. No default price is shipped."""
    price_per_1k_output: float = 0.0
    """USD per 1,000 output tokens of your model. No default price is shipped."""
    no_progress_limit: int | None = None
    """Stop with ``Stop.NO_PROGRESS`` after this many consecutive tool-requesting steps in
    which no tool call succeeded; ``None`` turns the check off."""

    max_seconds: float | None = None
    """Wall-clock seconds for the whole run; ``None`` means no ceiling. ``arun`` enforces it as
    a deadline that cancels a model or tool call still running; ``run`` checks it before each
    tool call and after each step's tools, and gives the model adapter the time left as its
    request timeout (a running synchronous call cannot be interrupted)."""
    max_tool_calls_per_step: int | None = 64
    """Tool calls one model turn may request; a turn asking for more stops the run with
    ``Stop.TOOL_CALL_BUDGET`` before any of them is dispatched. ``None`` means no ceiling."""
    max_tool_calls: int | None = None
    """Tool calls over the whole run; the turn that would pass it stops the run with
    ``Stop.TOOL_CALL_BUDGET`` before any of its calls is dispatched. ``None`` means no ceiling."""
    price_per_1k_cache_read: float | None = None
    """USD per 1,000 input tokens read from the provider's prompt cache; ``None`` prices them
    as ordinary input (``price_per_1k_input``). No default price is shipped."""
    price_per_1k_cache_write: float | None = None
    """USD per 1,000 input tokens written to the provider's prompt cache; ``None`` prices them
    as ordinary input. No default price is shipped."""

    max_output_retries: int = 1
    """How often an answer that does not validate against the agent's output type is sent back
    to the model with the problem (each retry a model call and a step within ``max_steps``);
    past it the run stops with ``Stop.INVALID_OUTPUT``. Untyped agents never retry."""

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {self.max_steps}")
        if self.repeat_limit < 1:
            raise ValueError(f"repeat_limit must be at least 1, got {self.repeat_limit}")
        if self.no_progress_limit is not None and self.no_progress_limit < 1:
            raise ValueError(f"no_progress_limit must be at least 1, got {self.no_progress_limit}")
        for name in ("max_tokens", "max_cost", "price_per_1k_input", "price_per_1k_output", "max_seconds",
                     "price_per_1k_cache_read", "price_per_1k_cache_write"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must not be negative, got {value}")
        if self.max_output_retries < 0:
            raise ValueError(f"max_output_retries must not be negative, got {self.max_output_retries}")
        for name in ("max_tool_calls_per_step", "max_tool_calls"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")

    @property
    def priced(self) -> bool:
        """Whether the budget has prices: without them a run's cost is unknown, not zero."""
        return bool(self.price_per_1k_input or self.price_per_1k_output
                    or self.price_per_1k_cache_read or self.price_per_1k_cache_write)

    def cost_of(self, input_tokens: int, output_tokens: int, *, cache_read_input_tokens: int = 0,
                cache_creation_input_tokens: int = 0) -> float:
        """USD for that many tokens at this budget's prices. ``input_tokens`` includes the cache
        reads and writes (as ``Usage`` counts them); those with a price of their own are taken
        out of it and priced at theirs. One model call's cost (its ``chat`` span's) and a run's
        (the sum of its calls') both come from here, so the run's total is its calls' sum."""
        ordinary, cost = input_tokens, output_tokens * self.price_per_1k_output
        if self.price_per_1k_cache_read is not None:
            ordinary -= cache_read_input_tokens
            cost += cache_read_input_tokens * self.price_per_1k_cache_read
        if self.price_per_1k_cache_write is not None:
            ordinary -= cache_creation_input_tokens
            cost += cache_creation_input_tokens * self.price_per_1k_cache_write
        # A provider's cache counts past its input count would make a negative charge.
        return (max(ordinary, 0) * self.price_per_1k_input + cost) / 1000.0

    def prices(self) -> dict[str, float]:
        """The budget's prices by field name (a sub-agent without prices of its own takes its
        parent's: ``RunState.child_budget``); a cache price of ``None`` is left out."""
        return {name: value for name in _PRICES if (value := getattr(self, name)) is not None}


_PRICES = ("price_per_1k_input", "price_per_1k_output", "price_per_1k_cache_read", "price_per_1k_cache_write")
