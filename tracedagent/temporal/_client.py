"""Starting a run on Temporal, and hosting agents in a worker.

``run_on_temporal(client, "support", task)`` returns the same ``Run`` that ``agent.arun(task)``
would, from whichever workers ran it. The caller's span (``run_on_temporal support``) is the
run span's parent: its context travels in the workflow's input, and the workflow's in each
activity's, so the client, the run, its steps and every model and tool call are one trace.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterable, Mapping, Sequence

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from .._agent._loop import Agent, output_spec_of
from .._core import _names as N
from .._core._attributes import check_attributes
from .._core._budget import Budget
from .._core._decisions import Decision, check_reasons, decisions_to_data
from .._core._records import Message
from .._core._run import Run
from .._version import __version__
from ._activities import model_call, tool_call, traceparent
from ._codec import budget_to_data, request_from_data, run_from_data
from ._hosting import ActivitySettings, host, tracer_providers
from ._search import CheckingWorker
from ._telemetry import FlushingRunner
from ._workflow import AgentRun

__all__ = ["run_on_temporal", "start_on_temporal", "result_of", "worker", "approve_on_temporal", "waiting_on_temporal"]


def worker(client: Client, agents: Iterable[Agent], *, task_queue: str = N.TEMPORAL_DEFAULT_TASK_QUEUE,
           settings: ActivitySettings | None = None, search_attributes: bool = True,
           **worker_options: Any) -> Worker:
    """A Temporal ``Worker`` that runs these agents' runs (the workflow and both activities) on
    ``task_queue``; ``async with worker(...):`` runs it. Every worker of a task queue must host
    the same agents, with the same ``search_attributes``: with it, the worker checks before it
    polls that the namespace has registered tracedagent's search attributes
    (``SearchAttributesNotRegistered`` otherwise) and its runs upsert them. ``worker_options`` go
    to ``temporalio.worker.Worker``."""
    settings = settings or ActivitySettings()  # made now: its payload limit reads the environment
    for agent in agents:
        host(task_queue, agent, settings, search_attributes=search_attributes)
    # The workflow's code runs in Temporal's sandbox; tracedagent and OpenTelemetry are passed
    # through (imported once, shared with the activities), which the determinism above needs.
    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(
        "tracedagent", "opentelemetry", "pydantic", "pydantic_core"))  # pydantic: typed tools and outputs (_typed)
    # Around it, outside the sandbox: each workflow task's spans exported before Temporal records it.
    worker_options["workflow_runner"] = FlushingRunner(worker_options.get("workflow_runner", runner),
                                                       lambda: tracer_providers(task_queue), settings.flush_timeout)
    return CheckingWorker(client, check=search_attributes, task_queue=task_queue, workflows=[AgentRun],
                          activities=[model_call, tool_call], **worker_options)


def _request(agent: str, task: str, history: Sequence[Message] | None, budget: Budget | None,
             conversation_id: str | None, approval_timeout: float | None = None,
             attributes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The workflow's input, checked here as the workflow checks it (``ValueError`` before
    anything starts: a NaN ``approval_timeout``, a task that is not a string, ``BadAttributes``).
    Your own ``attributes`` travel as checked (cut, credential shapes blanked), and only when
    given, so a request without them is the one workers before them read."""
    request = {"agent": agent, "task": task, "history": [dict(m) for m in history or ()],
               "budget": None if budget is None else budget_to_data(budget), "conversation_id": conversation_id,
               "traceparent": traceparent(), "approval_timeout": approval_timeout}
    if attributes is not None:
        request["attributes"] = dict(check_attributes(attributes))  # JSON writes a tuple as a list
    try:
        request_from_data(request)
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    return request


async def approve_on_temporal(client: Client, workflow_id: str, decisions: Mapping[str, Decision]) -> list[str]:
    """Send a person's decisions to a run waiting for them (``waiting_on_temporal``): each
    waiting call's id to ``Approve(digest=call["digest"])`` (runs only if it is still the call
    the person saw), ``True``, ``False`` or the denial the model is shown, as ``Agent.resume``
    takes them. The run goes on in its workflow; returns the ids decided. A bad set of
    decisions, or a run that does not wait, is rejected before anything runs:
    ``temporalio.client.WorkflowUpdateFailedError`` whose ``cause`` is an ``ApplicationError``
    of type ``BadDecisions``, ``DecisionMismatch`` (an ``Approve`` of another call) or
    ``NotWaiting``; a reason longer than ``MAX_REASON_LENGTH`` is ``BadDecisions`` here, before it is sent."""
    check_reasons(decisions)  # here too: sent, a reason of megabytes passes Temporal's payload limit
    handle = client.get_workflow_handle(workflow_id)
    return await handle.execute_update(N.TEMPORAL_DECIDE_UPDATE, decisions_to_data(decisions))


async def waiting_on_temporal(client: Client, workflow_id: str) -> list[dict[str, Any]]:
    """The calls a run waits for a decision on (``id``, ``name``, ``arguments``, ``reason``, and
    ``digest``, which an ``Approve`` carries); empty when it does not wait."""
    return await client.get_workflow_handle(workflow_id).query(N.TEMPORAL_WAITING_QUERY)


def default_workflow_id(agent: str) -> str:
    """A run's workflow id unless the caller names it: the agent's name and 12 random hex
    digits (``support-3f9a1c2b7d4e``), short enough to read and say. A clash with a running
    workflow's id is refused by Temporal (``WorkflowAlreadyStartedError``), never a run joined."""
    return f"{agent}-{uuid.uuid4().hex[:12]}"


async def start_on_temporal(client: Client, agent: str, task: str, history: Sequence[Message] | None = None, *,
                            budget: Budget | None = None, conversation_id: str | None = None,
                            task_queue: str = N.TEMPORAL_DEFAULT_TASK_QUEUE,
                            workflow_id: str | None = None, approval_timeout: float | None = None,
                            attributes: Mapping[str, Any] | None = None) -> WorkflowHandle[Any, Any]:
    """Start the run and return its workflow's handle (``result_of(handle)`` waits for the
    ``Run``). The current span, if any, is the run span's parent. A run waiting for approval
    (``approve_on_temporal``) waits at most ``approval_timeout`` seconds, then ends
    ``approval_required`` with a checkpoint for ``Agent.resume``; without it, as long as it takes.
    ``attributes``: your own on the run span, over the hosted agent's, as ``Agent.arun`` takes them
    (``BadAttributes`` here, before anything starts)."""
    return await client.start_workflow(
        N.TEMPORAL_WORKFLOW, _request(agent, task, history, budget, conversation_id, approval_timeout, attributes),
        id=workflow_id or default_workflow_id(agent), task_queue=task_queue)


async def result_of(handle: WorkflowHandle[Any, Any], *, output_type: Any = None) -> Run:
    """The ``Run`` of a started run, once it has ended. An agent with an output type answers with
    JSON text across Temporal: name the type (``output_type``, the worker agent's) and an ok run's
    ``output`` is its value, as ``arun`` returns it; without it, the text."""
    return run_from_data(await handle.result(), output_spec_of(output_type))


async def run_on_temporal(client: Client, agent: str, task: str, history: Sequence[Message] | None = None, *,
                          budget: Budget | None = None, conversation_id: str | None = None,
                          task_queue: str = N.TEMPORAL_DEFAULT_TASK_QUEUE, workflow_id: str | None = None,
                          tracer_provider: trace.TracerProvider | None = None,
                          approval_timeout: float | None = None, attributes: Mapping[str, Any] | None = None,
                          output_type: Any = None) -> Run:
    """Run the agent named ``agent`` on Temporal and wait for its ``Run``, as ``agent.arun``
    would return it: never raising on a budget, a model's or a tool's failure. Inside a span
    of its own (``run_on_temporal AGENT``, kind client) that is the run span's parent. A run
    that waits for approval waits as ``start_on_temporal`` says (``approval_timeout``); ``attributes``
    as there (on the run span, not on this client span); ``output_type`` decodes a typed answer
    (``result_of``)."""
    workflow_id = workflow_id or default_workflow_id(agent)
    check_attributes(attributes)  # a refusal is the caller's error, before the client span
    tracer = trace.get_tracer(N.TRACER_NAME, __version__, tracer_provider)
    with tracer.start_as_current_span(f"{N.TEMPORAL_CLIENT_SPAN} {agent}", kind=SpanKind.CLIENT, attributes={
            N.GEN_AI_AGENT_NAME: agent, N.TEMPORAL_WORKFLOW_ID: workflow_id,
            N.TEMPORAL_TASK_QUEUE: task_queue}) as span:
        handle = await start_on_temporal(client, agent, task, history, budget=budget,
                                         conversation_id=conversation_id, task_queue=task_queue,
                                         workflow_id=workflow_id, approval_timeout=approval_timeout,
                                         attributes=attributes)
        run = await result_of(handle, output_type=output_type)
        span.set_attribute(N.STOP_REASON, run.stop.value)
        if not run.ok:
            span.set_status(Status(StatusCode.ERROR))
    return run
