"""tracedagent: an agent loop you can see into.

Every run, step, model call and tool call is an OpenTelemetry span carrying the run's
named stop reason, tokens, cost, and requested-versus-executed tools.
"""

from ._core._budget import Budget, Stop
from ._core._events import RunEnd, StepEnd, StreamEvent, TextDelta, ToolCallEvent, ToolResultEvent
from ._core._streaming import ToolCallDelta, TurnEnd
from ._export._configure import Telemetry, configure
from ._agent._loop import Agent
from ._agent._stream import AgentStream, AsyncAgentStream, StreamNotEnded
from ._core._records import Completion, Message, Model, ToolCall, ToolOutcome, ToolResult, Usage
from ._core._run import Run, Step
from ._core._secrets import Redactor
from ._core._checkpoint import (AlreadyResumed, BadDecisions, Checkpoint, CheckpointError, DecisionMismatch,
                                ExpiredCheckpoint, MalformedCheckpoint, PendingCall, TamperedCheckpoint,
                                UnknownCheckpointVersion, UnsignedCheckpoint, WrongAgent)
from ._core._decisions import Approve, approve
from ._core._messages import MalformedMessage
from ._core._signing import WeakCheckpointKey
from ._core._tools import FatalToolError, Policy, Registry, Tool, ToolError, ask, tool
from ._version import __version__

__all__ = [
    "AlreadyResumed", "BadDecisions", "Checkpoint", "CheckpointError", "MalformedCheckpoint", "PendingCall",
    "UnknownCheckpointVersion", "WrongAgent", "ask", "Approve", "approve", "DecisionMismatch", "ExpiredCheckpoint",
    "TamperedCheckpoint", "UnsignedCheckpoint", "WeakCheckpointKey", "MalformedMessage",
    "Agent", "Budget", "Completion", "FatalToolError", "Message", "Model", "Policy", "Registry",
    "Redactor", "Run", "Step", "Stop", "Telemetry", "Tool", "ToolCall", "ToolError", "ToolOutcome", "ToolResult", "Usage",
    "__version__", "configure", "tool",
    # streaming: Agent.stream / astream, their events, and what a streaming model yields
    "AgentStream", "AsyncAgentStream", "StreamNotEnded", "StreamEvent", "TextDelta", "ToolCallEvent",
    "ToolResultEvent", "StepEnd", "RunEnd", "ToolCallDelta", "TurnEnd",
]
