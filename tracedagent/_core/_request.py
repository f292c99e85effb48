"""What the loop asks of a model: one value instead of parameters threaded through every layer.

A driver hands the model a ``ModelRequest`` and gets a ``Completion`` back. New settings (an
output schema, a provider's own options) become fields here, so adding one touches the code
that sets it and the adapters that read it, and nothing in between.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ._records import Message

__all__ = ["ModelSettings", "ModelRequest"]


@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    """How the agent asks the model to generate, the same for every call of a run."""

    max_output_tokens: int | None = None
    """The most tokens one answer may have (``gen_ai.request.max_tokens``); ``None``: the
    provider's default."""
    temperature: float | None = None
    """Sampling temperature (``gen_ai.request.temperature``); ``None``: the provider's default."""


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """One model call: the conversation so far, the tools on offer and the settings."""

    messages: Sequence[Message]
    """The whole conversation, resent each call (the endpoint is stateless)."""
    tools: list[dict[str, Any]] | None = None
    """The registry's tool schemas, or ``None`` for a request with no tool calling (not ``[]``:
    "zero tools" and "no tool calling" are different requests)."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    """Generation settings."""
    timeout: float | None = None
    """Seconds the run's budget has left for this call, or ``None`` for no time budget; a model
    that can bound its request passes it on, so no model is asked whether it takes a timeout."""
