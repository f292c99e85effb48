"""An agent's telemetry as a workflow and its activities make it: once, whoever replays.

A workflow's code runs again from its history whenever a worker restarts, evicts it from its
cache, or answers a query: everything it did is done again, and a span it ends would end again.
So the run and step spans made in the workflow go through ``WorkflowTracer``:

- their ids come from the workflow's deterministic random (``TemporalIdGenerator``, from
  ``temporalio.contrib.opentelemetry``), so the replayed span *is* the first one: a chat span
  an activity made under step 2 before its worker died still has its parent when another
  worker ends step 2;
- their times are workflow time (the same on every replay, on any worker);
- a span is ended (exported) only when the workflow is not replaying: the worker that runs
  the run's last task ends the run span, started perhaps on another machine days earlier;
- metrics recorded in the workflow are dropped during replay, for the same reason.

The ids need the SDK: an id generator is the only way to say which id a span gets. It is set
on a copy of the agent's own SDK tracer, so nothing of the application's provider changes;
without the SDK (a no-op tracer) there is nothing to emit twice anyway.

Activities run once per attempt, live: their chat and tool spans are the agent's own, with
the attempt number added (``ActivityTracer``), so a retried call shows as attempt 2.

A span ended in a workflow task is ended once: a worker killed after Temporal recorded the
task, with the span still in its batch queue, loses it for good (the replay on the next worker
does not end it again). Workflow code may do no I/O, so the worker does it around the workflow
code, outside the sandbox (``FlushingRunner``): each activation's spans are exported before its
completion goes to Temporal.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterable, Sequence

from opentelemetry import trace
from opentelemetry.trace import Span, SpanContext, SpanKind
from temporalio import activity, workflow
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
# Private (not re-exported in 1.35): pyproject.toml bounds temporalio below 1.36 for it.
from temporalio.contrib.opentelemetry._id_generator import TemporalIdGenerator

from .._core import _names as N
from .._instrumentation._telemetry import AgentTelemetry, flush_spans

__all__ = ["workflow_telemetry", "activity_telemetry", "FlushingRunner", "WORKFLOW_TASK_FLUSH_LIMIT"]

WORKFLOW_TASK_FLUSH_LIMIT = 0.5
"""Seconds, at most, a workflow activation waits for its spans to be exported: the activation is
timed by Temporal's deadlock detection (2 s), so this stays well below it."""

_INSTRUMENTS = ("run_counter", "tool_call_counter", "cost_counter", "steps_histogram", "token_histogram",
                "duration_histogram", "approval_wait_histogram", "decision_counter")


def _replaying() -> bool:
    """Replaying history (a restarted or evicting worker, a query): nothing may be emitted."""
    return workflow.in_workflow() and workflow.unsafe.is_replaying()


class _WorkflowSpan(Span):
    """A span whose end is skipped while replaying and timed in workflow time. A ``Span``
    itself, so that it is the current span of the context it is set in."""

    def __init__(self, span: Span) -> None:
        self._span = span
        self._run_id = workflow.info().run_id
        """The workflow run it belongs to: only that run's code ends it."""

    def end(self, end_time: int | None = None) -> None:
        # Not from outside its run: a run a stopped worker left behind is finalized by the
        # garbage collector, maybe while another run's code is executing (that run's time and
        # state); the run goes on elsewhere and ends its span there, once.
        if not workflow.in_workflow() or _replaying() or workflow.info().run_id != self._run_id:
            return
        self._span.end(end_time if end_time is not None else workflow.time_ns())

    def get_span_context(self) -> SpanContext:
        return self._span.get_span_context()

    def set_attributes(self, attributes: Any) -> None:
        self._span.set_attributes(attributes)

    def set_attribute(self, key: str, value: Any) -> None:
        self._span.set_attribute(key, value)

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        self._span.add_event(name, attributes, timestamp if timestamp is not None else workflow.time_ns())

    def update_name(self, name: str) -> None:
        self._span.update_name(name)

    def is_recording(self) -> bool:
        return self._span.is_recording()

    def set_status(self, status: Any, description: str | None = None) -> None:
        self._span.set_status(status, description)

    def record_exception(self, exception: BaseException, attributes: Any = None, timestamp: int | None = None,
                         escaped: bool = False) -> None:
        self._span.record_exception(exception, attributes, timestamp, escaped)


class WorkflowTracer:
    """The tracer of the spans made in workflow code (run and step): deterministic ids,
    workflow time, no end while replaying."""

    def __init__(self, tracer: trace.Tracer) -> None:
        tracer = getattr(tracer, "_tracer", tracer)  # a ProxyTracer: the tracer it stands for now
        generator = getattr(tracer, "id_generator", None)
        if generator is not None and not isinstance(generator, TemporalIdGenerator):
            tracer = copy.copy(tracer)  # the SDK's: same processors, resource and sampler
            tracer.id_generator = TemporalIdGenerator(generator)  # type: ignore[attr-defined]
        self._tracer = tracer

    def start_span(self, name: str, context: Any = None, kind: SpanKind = SpanKind.INTERNAL,
                   attributes: Any = None, links: Any = None, start_time: int | None = None,
                   record_exception: bool = True, set_status_on_exception: bool = True) -> Span:
        span = self._tracer.start_span(name, context, kind, attributes, links,
                                       start_time if start_time is not None else workflow.time_ns(),
                                       record_exception, set_status_on_exception)
        return _WorkflowSpan(span)  # type: ignore[return-value]


class _ReplaySafeInstrument:
    """A counter or histogram that records nothing while the workflow replays."""

    __slots__ = ("_instrument",)

    def __init__(self, instrument: Any) -> None:
        self._instrument = instrument

    def add(self, amount: Any, attributes: Any = None) -> None:
        if not _replaying():
            self._instrument.add(amount, attributes)

    def record(self, amount: Any, attributes: Any = None) -> None:
        if not _replaying():
            self._instrument.record(amount, attributes)


def workflow_telemetry(telemetry: AgentTelemetry) -> AgentTelemetry:
    """The agent's telemetry for its workflow: same names, attributes, content settings and
    providers, made replay-safe."""
    safe = copy.copy(telemetry)
    safe.tracer = WorkflowTracer(telemetry.tracer)  # type: ignore[assignment]
    safe.run_listener = None  # no online grading inside a workflow, which does no I/O: grade its trace
    for name in _INSTRUMENTS:
        if hasattr(telemetry, name):
            setattr(safe, name, _ReplaySafeInstrument(getattr(telemetry, name)))
    return safe


class ActivityTracer:
    """The agent's tracer, adding the activity's attempt number to the spans it starts."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def start_span(self, name: str, context: Any = None, kind: SpanKind = SpanKind.INTERNAL,
                   attributes: Any = None, *args: Any, **kwargs: Any) -> Span:
        attempt = activity.info().attempt if activity.in_activity() else None
        if attempt is not None:
            attributes = {**(attributes or {}), N.TEMPORAL_ATTEMPT: attempt}
        span = self._tracer.start_span(name, context, kind, attributes, *args, **kwargs)
        if attempt is not None and attempt > 1:  # a retry: the gap before this span, in its logs
            span.add_event(N.RETRY_EVENT, {N.TEMPORAL_ATTEMPT: attempt})
        return span


def activity_telemetry(telemetry: AgentTelemetry) -> AgentTelemetry:
    """The agent's telemetry for the model and tool calls its activities make."""
    tagged = copy.copy(telemetry)
    tagged.tracer = ActivityTracer(telemetry.tracer)  # type: ignore[assignment]
    return tagged


class FlushingRunner(WorkflowRunner):
    """The worker's workflow runner, exporting the spans each activation ended before the worker
    sends its completion to Temporal: in the worker's thread, outside the sandbox, for at most
    ``timeout`` seconds (a collector out of reach costs each workflow task that, never the task)."""

    def __init__(self, runner: WorkflowRunner, providers: Callable[[], Iterable[Any]], timeout: float) -> None:
        self._runner = runner
        self._providers = providers
        """The tracer providers of the agents hosted on the worker's task queue (``None``: the global one)."""
        self.timeout = min(timeout, WORKFLOW_TASK_FLUSH_LIMIT)

    def prepare_workflow(self, defn: Any) -> None:
        self._runner.prepare_workflow(defn)

    def set_worker_level_failure_exception_types(self, types: Sequence[type[BaseException]]) -> None:
        self._runner.set_worker_level_failure_exception_types(types)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _FlushingInstance(self._runner.create_instance(det), self)

    def flush(self) -> None:
        if self.timeout <= 0:
            return
        seen: dict[int, Any] = {}
        for provider in self._providers():
            seen.setdefault(id(provider), provider)
        for provider in seen.values():
            flush_spans(provider, self.timeout)


class _FlushingInstance(WorkflowInstance):
    """A workflow instance whose every activation ends with its spans exported."""

    def __init__(self, instance: WorkflowInstance, runner: FlushingRunner) -> None:
        self._instance = instance
        self._runner = runner

    def activate(self, act: Any) -> Any:
        completion = self._instance.activate(act)
        self._runner.flush()
        return completion

    def get_info(self) -> Any:
        return self._instance.get_info()

    def get_thread_id(self) -> int | None:
        return self._instance.get_thread_id()

    def get_serialization_context(self, command_info: Any) -> Any:
        return self._instance.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        return self._instance.get_external_store_context(command_info)
