"""The agents a worker process hosts, by task queue and name, and how their calls are retried.

The workflow and the activities find an agent here by the name the client gave: an agent is
code, deployed with the worker, like a workflow's definition. Every worker of a task queue
must host the same agents (same model, tools, budget and prompt): a replay on another
worker makes the same decisions only from the same definition.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio.common import RetryPolicy

from .._agent._loop import Agent
from .._core._output import output_request
from .._core._payloads import max_payload_from_env
from .._core._tools import Tool
from .._instrumentation._instrumented import InstrumentedModel, InstrumentedRegistry
from .._instrumentation._telemetry import AgentTelemetry
from ._telemetry import activity_telemetry, workflow_telemetry

__all__ = ["ActivitySettings", "HostedAgent", "host", "hosted", "is_hosted", "unhost", "tracer_providers"]


@dataclass(frozen=True, kw_only=True)
class ActivitySettings:
    """How a run's model and tool calls are run as activities: their time limits and retries.

    A call is retried when its attempt failed as an attempt - its worker died, it ran past its
    time limit, it stopped heartbeating - never because the model or the tool failed: those
    are results the loop acts on, as in ``run``. So a retry is what Temporal promises for
    activities: at least once. A tool with side effects must tolerate running twice (an
    idempotency key, the call's id, is in ``ToolCall.id``)."""

    model_timeout: float = 300.0
    """Seconds one model call's attempt may take (``start_to_close``), capped by what is left
    of the run's time budget."""
    tool_timeout: float = 300.0
    """Seconds one tool call's attempt may take, for a tool without a ``timeout`` of its own
    (one with it gets that plus ``grace``); capped by what is left of the time budget."""
    heartbeat_timeout: float = 30.0
    """An attempt silent this long is taken for a dead worker and retried on another. The
    activity heartbeats every third of it while the call runs."""
    max_attempts: int = 3
    """Attempts per call, the first included (Temporal's ``maximum_attempts``)."""
    retry_interval: float = 1.0
    """Seconds before the second attempt (doubling after)."""
    grace: float = 5.0
    """Seconds an attempt has beyond its call's own limit (the tool's ``timeout``, the time
    budget), to cut the call itself and report it: the call's limit is the loop's decision."""
    flush_timeout: float = 2.0
    """Seconds an activity waits, at most, for the spans its call ended (chat, tool) to be
    exported before it reports its result: once Temporal has recorded the activity complete, a
    worker SIGKILLed with those spans still in its batch queue would lose them for good. A
    collector out of reach costs each activity this much, never its result; 0 turns it off."""
    max_payload: int = field(default_factory=max_payload_from_env)
    """Bytes a tool result may be, as Temporal encodes it (the server's payload limit: 2 MB
    unless it is configured otherwise; else ``TRACEDAGENT_TEMPORAL_MAX_PAYLOAD``). A larger one
    is the call's ``error`` outcome, error type ``PayloadTooLarge``, checked before the activity
    returns; the workflow checks each model request against it too."""

    def __post_init__(self) -> None:
        if type(self.max_payload) is not int or self.max_payload <= 0:
            raise ValueError(f"max_payload must be a positive number of bytes, got {self.max_payload!r}")

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(initial_interval=timedelta(seconds=self.retry_interval), maximum_attempts=self.max_attempts)

    def limit(self, own: float | None, seconds_left: float | None, default: float) -> timedelta:
        """An attempt's ``start_to_close``: the call's own limit plus grace, else ``default``;
        never past the time budget (plus grace)."""
        seconds = default if own is None else own + self.grace
        if seconds_left is not None:
            seconds = min(seconds, seconds_left + self.grace)
        return timedelta(seconds=max(seconds, 1.0))


class HostedAgent:
    """One agent as a worker runs it: the workflow's replay-safe telemetry, and the model and
    registry its activities call, instrumented with the attempt number."""

    def __init__(self, agent: Agent, settings: ActivitySettings, search_attributes: bool = True) -> None:
        self.agent = agent
        self.settings = settings
        self.search_attributes = search_attributes
        """Whether its runs upsert the search attributes (``worker(search_attributes=...)``;
        the worker checked they are registered)."""
        telemetry: AgentTelemetry = agent._telemetry  # the agent's own settings and providers
        self.workflow_telemetry = workflow_telemetry(telemetry)
        calls = activity_telemetry(telemetry)
        self.model = InstrumentedModel(agent.model, calls)
        self.tools = InstrumentedRegistry(agent.registry, calls)
        self.schemas: list[dict[str, Any]] | None = agent.registry.schemas() or None
        self.output = output_request(agent._output, agent.output_mode)
        """What the model activity asks each call to answer with (a typed agent), as the machine asks."""
        self.tracer_provider = telemetry.tracer_provider
        """The agent's tracer provider (``None``: the global one), flushed after each activity."""

    def tool(self, name: str) -> Tool | None:
        return self.agent.registry.get(name)


_hosted: dict[tuple[str, str], HostedAgent] = {}
_lock = threading.Lock()


def host(task_queue: str, agent: Agent, settings: ActivitySettings, *, search_attributes: bool = True) -> None:
    with _lock:
        _hosted[(task_queue, agent.name)] = HostedAgent(agent, settings, search_attributes)


def unhost(task_queue: str, name: str) -> None:
    with _lock:
        _hosted.pop((task_queue, name), None)


def is_hosted(task_queue: str, name: str | None) -> bool:
    return (task_queue, name) in _hosted


def hosted(task_queue: str, name: str) -> HostedAgent:
    found = _hosted.get((task_queue, name))
    if found is None:
        raise LookupError(f"no agent named {name!r} is hosted for task queue {task_queue!r} in this worker")
    return found


def tracer_providers(task_queue: str) -> list[Any]:
    """The tracer providers of the agents hosted for ``task_queue`` (``None`` for the global one)."""
    with _lock:
        return [agent.tracer_provider for (queue, _), agent in _hosted.items() if queue == task_queue]
