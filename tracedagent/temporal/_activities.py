"""The two activities of a run: one model call, one tool call.

Each runs in whichever worker picks it up, under the step span the workflow made (its
context arrives as a W3C ``traceparent`` in the activity's input), through the agent's own
instrumented model and registry: the chat and tool spans are those of ``arun``, plus the
attempt number. The time the run has left arrives in seconds and becomes this process's
deadline, so the call is cut as ``arun`` cuts it.

Neither raises for what a model or a tool does: a model's exception comes back as data and
the loop stops on it (``model_error``), as in ``run``; a tool's is its result. An activity
fails only as an attempt (its worker died, it stopped heartbeating), and is then retried.

Each exports the spans its call ended before it returns (``_exported``, at most
``ActivitySettings.flush_timeout``): Temporal records an activity complete once, so a worker
killed after that with the spans still queued would lose them, and no retry makes them again.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, TypeVar

from opentelemetry import context as otel_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from temporalio import activity

from .._core import _names as N
from .._agent import _acalls
from .._core._deadline import Deadline, DeadlineExceeded
from .._core._payloads import payload_size, too_large_result
from .._core._records import ToolResult
from .._core._request import ModelRequest
from .._instrumentation._spans import RUN_BUDGET
from .._instrumentation._telemetry import flush_spans
from ._codec import budget_from_data, call_from_data, completion_to_data, error_to_data, result_to_data
from ._hosting import HostedAgent, hosted

__all__ = ["model_call", "tool_call", "traceparent", "PROPAGATOR"]

T = TypeVar("T")
PROPAGATOR = TraceContextTextMapPropagator()


def traceparent() -> dict[str, str]:
    """The current span's context as W3C trace-context headers (empty without one)."""
    carrier: dict[str, str] = {}
    PROPAGATOR.inject(carrier)
    return carrier


def _deadline(seconds_left: float | None) -> Deadline | None:
    return None if seconds_left is None else Deadline.after(seconds_left)


async def _heartbeating(work: Awaitable[T]) -> T:
    """``await work`` while telling Temporal every third of the heartbeat timeout that this
    worker is alive: a worker that dies is noticed within the timeout, not the call's limit."""
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        return await work
    every = max(timeout.total_seconds() / 3, 0.1)

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    beating = asyncio.create_task(beat())
    try:
        return await work
    finally:
        beating.cancel()


def _sendable(result: ToolResult, limit: int) -> ToolResult:
    """The result, or its ``PayloadTooLarge`` error if Temporal would refuse it: checked before
    the tool span ends, so the span says what the model is told."""
    size = payload_size(result_to_data(result))
    return result if size <= limit else too_large_result(result, size, limit)


async def _exported(agent: HostedAgent, result: T) -> T:
    """``result``, once the spans ended so far are exported or ``flush_timeout`` has passed (off
    the event loop: other activities and heartbeats go on meanwhile)."""
    await asyncio.to_thread(flush_spans, agent.tracer_provider, agent.settings.flush_timeout)
    return result


@activity.defn(name=N.TEMPORAL_MODEL_ACTIVITY)
async def model_call(request: dict[str, Any]) -> dict[str, Any]:
    """``{"completion": ...}``, ``{"error": {"type", "message"}}``, or ``{"cut": true}`` when
    the run's time budget ran out during the call."""
    agent = hosted(activity.info().task_queue, request["agent"])
    context = PROPAGATOR.extract(request["traceparent"])
    if request.get("budget") is not None:  # a priced run: its chat span gets the call's cost, as under arun
        context = otel_context.set_value(RUN_BUDGET, budget_from_data(request["budget"]), context)
    token = otel_context.attach(context)
    try:
        deadline = _deadline(request["seconds_left"])
        asked = ModelRequest(messages=request["messages"], tools=agent.schemas, settings=agent.agent._settings,
                             timeout=None if deadline is None else deadline.left(), output=agent.output)
        completion = await _heartbeating(agent.model.acomplete(asked, deadline=deadline))
    except DeadlineExceeded:
        return await _exported(agent, {"cut": True})
    except Exception as exc:  # the model's failure: the loop's to act on, not a retry
        return await _exported(agent, {"error": error_to_data(exc)})
    finally:
        otel_context.detach(token)
    return await _exported(agent, {"completion": completion_to_data(completion)})


@activity.defn(name=N.TEMPORAL_TOOL_ACTIVITY)
async def tool_call(request: dict[str, Any]) -> dict[str, Any]:
    """The call's ``ToolResult`` as data, whatever the tool did."""
    agent = hosted(activity.info().task_queue, request["agent"])
    token = otel_context.attach(PROPAGATOR.extract(request["traceparent"]))
    try:
        result = await _heartbeating(_acalls.dispatch(agent.tools, call_from_data(request["call"]),
                                                      _deadline(request["seconds_left"]),
                                                      lambda result: _sendable(result, agent.settings.max_payload)))
    finally:
        otel_context.detach(token)
    return await _exported(agent, result_to_data(result))
