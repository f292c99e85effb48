"""Temporal's payload limit, checked before a payload leaves: a named outcome, not a failed task.

Temporal refuses a payload larger than its limit (2 MB unless the server is configured
otherwise): an activity's result that large fails the activity as if its worker had died (the
model would be told only "activity failed"), and a workflow whose next model request is that
large is terminated by the server (no ``Run``, no stop reason, spans never ended). So the size
is measured first, as Temporal's JSON converter encodes the data (before any ``PayloadCodec``),
and what does not fit becomes a named outcome:

- a tool result too large is the call's ``error`` outcome with error type ``PayloadTooLarge``,
  the model told so in a bounded message (``too_large_result``, in the tool activity);
- a model request too large is for the workflow to end the run on, with a named stop
  (``too_large``, a pure function the workflow calls before it sends the request).

Standard library only: the workflow's sandbox and the activities both call it.
"""

from __future__ import annotations

import json
import os
from typing import Any

from . import _names as N
from ._records import ToolOutcome, ToolResult

__all__ = ["PayloadTooLarge", "payload_size", "too_large", "too_large_result", "max_payload_from_env"]


class PayloadTooLarge(Exception):
    """A payload larger than Temporal's limit: the facts, and a message bounded whatever the size."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        self.what = what
        """What would have been sent: ``"tool result"``, ``"model request"``."""
        self.size = size
        """Its size in bytes, as Temporal's JSON converter encodes it."""
        self.limit = limit
        """The limit it is over (``ActivitySettings.max_payload``)."""
        super().__init__(f"the {what} is {size:,} bytes, over Temporal's payload limit of {limit:,} bytes")


def payload_size(data: Any) -> int:
    """The bytes ``data`` is as a Temporal payload: its JSON as the SDK's converter writes it."""
    return len(json.dumps(data, separators=(",", ":"), sort_keys=True).encode())


def too_large(data: Any, limit: int, what: str) -> PayloadTooLarge | None:
    """``PayloadTooLarge`` if ``data`` would be over ``limit`` bytes as a payload, else ``None``.
    Pure and deterministic: a workflow may call it on replay."""
    size = payload_size(data)
    return PayloadTooLarge(what, size, limit) if size > limit else None


def too_large_result(result: ToolResult, size: int, limit: int) -> ToolResult:
    """The ``error`` outcome a result of ``size`` bytes becomes: what the model sees says why and
    what to do instead, in a few hundred characters, never the result itself."""
    name = result.name[:N.MAX_NAME_LENGTH]
    return ToolResult(call_id=result.call_id, name=result.name, outcome=ToolOutcome.ERROR,
                      error_type=PayloadTooLarge.__name__,
                      content=(f"Error: {name} returned {size:,} bytes, more than the {limit:,} bytes a tool result "
                               "may be in a durable run (PayloadTooLarge). Ask for less of it: a page, a filter, "
                               "a summary."))


def max_payload_from_env() -> int:
    """``TRACEDAGENT_TEMPORAL_MAX_PAYLOAD`` (bytes), else Temporal's default of 2 MB; a value that
    is not a positive integer is a ``ValueError`` naming the variable."""
    value = os.environ.get(N.ENV_TEMPORAL_MAX_PAYLOAD, "").strip()
    if not value:
        return N.DEFAULT_TEMPORAL_MAX_PAYLOAD
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if limit <= 0:
        raise ValueError(f"{N.ENV_TEMPORAL_MAX_PAYLOAD} must be a positive number of bytes, got {value!r}")
    return limit
