"""tracedagent: an agent loop you can see into.

Every run, step, model call and tool call is an OpenTelemetry span carrying the run's
named stop reason, tokens, cost, and requested-versus-executed tools.

The names below are imported on first use (PEP 562), not with the package: ``import
tracedagent`` - which every ``tracedagent.*`` import and the pytest plugin's entry point do
first - costs next to nothing, and a program pays for the OpenTelemetry SDK and the agent loop
only once it uses them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from ._core._attributes import BadAttributes
    from ._core._budget import Budget, Stop
    from ._core._events import PartialOutput, RunEnd, StepEnd, StreamEvent, TextDelta, ToolCallEvent, ToolResultEvent
    from ._core._streaming import ToolCallDelta, TurnEnd
    from ._export._configure import Telemetry, configure
    from ._agent._loop import Agent
    from ._agent._stream import AgentStream, AsyncAgentStream, StreamNotEnded
    from ._core._records import Completion, Message, ToolCall, ToolOutcome, ToolResult, Usage
    from ._core._request import Model, ModelRequest, ModelSettings
    from ._core._run import Run, Step
    from ._core._secrets import Redactor
    from ._core._checkpoint import (AlreadyResumed, BadDecisions, Checkpoint, CheckpointError, DecisionMismatch,
                                    ExpiredCheckpoint, MalformedCheckpoint, PendingCall, TamperedCheckpoint,
                                    UnknownCheckpointVersion, UnsignedCheckpoint, WrongAgent)
    from ._core._decisions import Approve, approve
    from ._core._messages import MalformedMessage
    from ._core._signing import WeakCheckpointKey
    from ._core._tools import FatalToolError, Policy, Tool, ToolError, ask
    from ._typed._tools import Registry, tool

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(["BadAttributes"], "._core._attributes"),
    **dict.fromkeys(["Budget", "Stop"], "._core._budget"),
    **dict.fromkeys(["PartialOutput", "RunEnd", "StepEnd", "StreamEvent", "TextDelta", "ToolCallEvent", "ToolResultEvent"],
                    "._core._events"),
    **dict.fromkeys(["ToolCallDelta", "TurnEnd"], "._core._streaming"),
    **dict.fromkeys(["Telemetry", "configure"], "._export._configure"),
    **dict.fromkeys(["Agent"], "._agent._loop"),
    **dict.fromkeys(["AgentStream", "AsyncAgentStream", "StreamNotEnded"], "._agent._stream"),
    **dict.fromkeys(["Completion", "Message", "ToolCall", "ToolOutcome", "ToolResult", "Usage"], "._core._records"),
    **dict.fromkeys(["Model", "ModelRequest", "ModelSettings"], "._core._request"),
    **dict.fromkeys(["Run", "Step"], "._core._run"),
    **dict.fromkeys(["Redactor"], "._core._secrets"),
    **dict.fromkeys(["AlreadyResumed", "BadDecisions", "Checkpoint", "CheckpointError", "DecisionMismatch",
                     "ExpiredCheckpoint", "MalformedCheckpoint", "PendingCall", "TamperedCheckpoint",
                     "UnknownCheckpointVersion", "UnsignedCheckpoint", "WrongAgent"], "._core._checkpoint"),
    **dict.fromkeys(["Approve", "approve"], "._core._decisions"),
    **dict.fromkeys(["MalformedMessage"], "._core._messages"),
    **dict.fromkeys(["WeakCheckpointKey"], "._core._signing"),
    **dict.fromkeys(["FatalToolError", "Policy", "Tool", "ToolError", "ask"], "._core._tools"),
    **dict.fromkeys(["Registry", "tool"], "._typed._tools"),
}
"""Each public name and the module that defines it."""

__all__ = [
    "AlreadyResumed", "BadDecisions", "Checkpoint", "CheckpointError", "MalformedCheckpoint", "PendingCall",
    "UnknownCheckpointVersion", "WrongAgent", "ask", "Approve", "approve", "DecisionMismatch", "ExpiredCheckpoint",
    "TamperedCheckpoint", "UnsignedCheckpoint", "WeakCheckpointKey", "MalformedMessage",
    "Agent", "BadAttributes", "Budget", "Completion", "FatalToolError", "Message", "Model", "ModelRequest", "ModelSettings", "Policy",
    "Registry",
    "Redactor", "Run", "Step", "Stop", "Telemetry", "Tool", "ToolCall", "ToolError", "ToolOutcome", "ToolResult", "Usage",
    "__version__", "configure", "tool",
    # streaming: Agent.stream / astream, their events, and what a streaming model yields
    "AgentStream", "AsyncAgentStream", "StreamNotEnded", "StreamEvent", "TextDelta", "ToolCallEvent",
    "ToolResultEvent", "StepEnd", "RunEnd", "ToolCallDelta", "TurnEnd", "PartialOutput",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept as the package's attribute."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tracedagent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
