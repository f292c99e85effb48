"""One scope per kind of span: a run, a step, a model call, a tool call.

A scope starts its span as a child of the current one and makes it current; it ends itself
exactly once, with ``end(record)`` when the work finished or ``fail(kind, description)``
when it did not, and records its metrics after its span has ended. The loop hands a scope
what it has - the step when a step ends, the ``Run`` when the run finishes - and the scope
reads attributes off those records: telemetry never writes into the loop's state.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, SpanKind, Status, StatusCode

from .._core import _names as N
from .._core._budget import Budget, Stop
from .._core._deadline import DeadlineExceeded
from .._core._checkpoint import Checkpoint
from .._core._records import Completion, Message, ToolCall, ToolOutcome, ToolResult, being_cancelled, error_type
from .._core._run import Run, Step, ToolNames
from ._status import answer_message, chat_failure, tool_failure, tool_interrupted
from ._telemetry import AgentTelemetry, bounded, ending_elsewhere_now, guard, report, tool_list_attributes

__all__ = ["Resumed", "RunScope", "StepScope", "ChatScope", "ToolScope", "failure_kind"]


def failure_kind(exc: BaseException) -> str:
    """The ``error.type`` a span that ended on ``exc`` gets: ``cancelled`` for an interruption
    (a cancelled task, ``KeyboardInterrupt``), ``timeout`` for the run's deadline, otherwise
    the exception's class name."""
    if isinstance(exc, KeyboardInterrupt) or (isinstance(exc, asyncio.CancelledError) and being_cancelled()):
        return N.ERROR_CANCELLED
    if isinstance(exc, DeadlineExceeded):
        return N.ERROR_TIMEOUT
    return error_type(exc)


class Resumed:
    """What a resumed run's span says of where it came from: a link to the paused run span,
    its trace id, the checkpoint's id, and the decisions (tool names approved and denied)."""

    __slots__ = ("checkpoint", "approved", "denied")

    def __init__(self, checkpoint: Checkpoint, approved: list[str], denied: list[str]) -> None:
        self.checkpoint = checkpoint
        self.approved = approved
        self.denied = denied

    def attributes(self) -> dict[str, Any]:
        # Values from a checkpoint (``from_dict`` checks their shape) are bounded here too.
        cp, names = self.checkpoint, lambda found: [bounded(n) for n in found[:N.MAX_LIST_ITEMS]]
        attributes: dict[str, Any] = {N.RESUMED_CHECKPOINT_ID: bounded(cp.id), N.APPROVAL_APPROVED: names(self.approved),
                                      N.APPROVAL_DENIED: names(self.denied)}
        if edited := getattr(cp, "_edited", None):  # approved with the person's corrected arguments
            attributes[N.APPROVAL_EDITED] = names(edited)
        if cp.trace_id:
            attributes[N.RESUMED_FROM] = bounded(cp.trace_id)
        return attributes

    def links(self) -> list[trace.Link] | None:
        cp = self.checkpoint
        if not cp.trace_id or not cp.span_id:
            return None
        context = trace.SpanContext(int(cp.trace_id, 16), int(cp.span_id, 16), is_remote=True,
                                    trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
        return [trace.Link(context)] if context.is_valid else None


class _Scope:
    """A span from its start to its one end, current in between.

    Every kind is used the same way: built where the work starts, ended with ``end(record)``
    by the code that has the record, and used as a context manager around the work, which
    fails the span (``failure_kind``) if the work raises, and ends it either way."""

    __slots__ = ("span", "recording", "_token", "_open")
    doing = "ending a span"

    def __init__(self, telemetry: AgentTelemetry, name: str, kind: SpanKind, attributes: dict[str, Any],
                 links: list[trace.Link] | None = None) -> None:
        try:
            self.span = telemetry.tracer.start_span(name, None, kind, attributes, links)
        except Exception as exc:
            report("starting a span", exc)
            self.span = INVALID_SPAN
        self.recording = False
        """Whether the span records: attributes are read off the records only for one that does."""
        try:
            self.recording = self.span.is_recording()
            self._token: object | None = otel_context.attach(trace.set_span_in_context(self.span))
        except Exception as exc:
            report("attaching the span context", exc)
            self._token = None
        self._open = True

    def __enter__(self):  # type: ignore[no-untyped-def]  # Self: Python 3.11
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, traceback: Any) -> None:
        if exc is not None and self._open:  # an interrupt, a cancellation, a model's or a registry's error
            self.fail(failure_kind(exc))

    def fail(self, kind: str, description: str | None = None) -> None:
        """End the span marked failed: ERROR status plus ``error.type`` (both bounded)."""
        if not self._open:
            return
        with guard(self.doing):
            self.span.set_attribute(N.ERROR_TYPE, bounded(kind))
            # The description may quote what a model chose (a repeated call's tool name).
            self.span.set_status(Status(StatusCode.ERROR, description and bounded(description, N.MAX_DESCRIPTION_LENGTH)))
        self._close()

    def _close(self) -> None:
        """Make the span's parent current again and end the span, whatever happened before."""
        self._open = False
        if self._token is not None and not ending_elsewhere_now():
            try:
                otel_context.detach(self._token)  # type: ignore[arg-type]
            except Exception as exc:
                report("detaching the span context", exc)
        try:
            self.span.end()
        except Exception as exc:
            report(self.doing, exc)


class RunScope(_Scope):
    """The ``invoke_agent`` span of one run, with the step span open inside it.

    Its tool lists are its steps' lists joined (``Run.tool_names``), so that the run span says
    exactly what its step spans say."""

    __slots__ = ("_t", "_step", "_priced")
    doing = "ending a run span"

    def __init__(self, telemetry: AgentTelemetry, budget: Budget, messages: list[Message],
                 conversation_id: str | None = None, *, asynchronous: bool = False,
                 parallel_tool_calls: bool = False, max_tool_concurrency: int | None = None,
                 resumed: Resumed | None = None) -> None:
        """``messages`` is what the run starts from (system prompt, history, task): recorded
        only with content capture on, which is what replay starts from too. The driver
        (``arun`` when ``asynchronous``) and, under ``arun``, how a turn's calls were
        dispatched are recorded so that a replay dispatches them the same way."""
        attributes = telemetry.run_start_attributes(budget)
        attributes[N.DRIVER] = N.DRIVER_ARUN if asynchronous else N.DRIVER_RUN
        if asynchronous:
            attributes[N.TOOLS_PARALLEL] = parallel_tool_calls
            if parallel_tool_calls and max_tool_concurrency is not None:
                attributes[N.TOOLS_MAX_CONCURRENCY] = max_tool_concurrency
        if conversation_id is not None:
            attributes[N.GEN_AI_CONVERSATION_ID] = bounded(conversation_id)
        if telemetry.capture is not None:
            with guard("capturing the task"):
                attributes.update(telemetry.capture.conversation(messages))
        links = None
        if resumed is not None:
            with guard("linking the paused run"):
                attributes.update(resumed.attributes())
                links = resumed.links()
        _Scope.__init__(self, telemetry, telemetry.run_span_name, SpanKind.INTERNAL, attributes, links)
        self._t = telemetry
        self._step: StepScope | None = None
        self._priced = budget.priced
        """Without prices a cost is unknown, not zero: it is left off the span and the metric."""

    @property
    def trace_id(self) -> str | None:
        """The run's trace id in hex, or ``None`` when nothing records it."""
        with guard("reading the trace id"):
            context = self.span.get_span_context()
            if context.is_valid:
                return trace.format_trace_id(context.trace_id)
        return None

    @property
    def span_id(self) -> str | None:
        """The run span's id in hex (a paused run's checkpoint keeps it for the resumed run's link)."""
        with guard("reading the span id"):
            context = self.span.get_span_context()
            if context.is_valid:
                return trace.format_span_id(context.span_id)
        return None

    def start_step(self, index: int) -> None:
        """Open the span of loop iteration ``index``: the model and tool spans nest inside it."""
        self._step = StepScope(self._t, index)

    def end_step(self, step: Step) -> None:
        """The step did its work and the run goes on."""
        self._end_step(step, None)

    def _end_step(self, step: Step | None, stop: Stop | None) -> None:
        if self._step is None:
            return
        lists = None
        if step is not None and self.recording:
            lists = step.tool_names()
        self._step.end(step, lists, stop)
        self._step = None

    def end(self, run: Run) -> None:
        """The run returned: close its last step, then the run span, then count it."""
        if self._step is not None:
            # A step whose model call failed (or was cut off) is counted but not recorded.
            call_failed = run.step_count > len(run.steps)
            self._end_step(None if call_failed else run.steps[-1], run.stop)
        with guard(self.doing):
            if self.recording:
                # gen_ai.usage.* are this agent's own model calls; the totals add its sub-agents',
                # so that summing usage over a trace's spans counts every call once.
                self.span.set_attributes({
                    N.STOP_REASON: run.stop.value, N.STEPS: run.step_count,
                    N.GEN_AI_USAGE_INPUT_TOKENS: run.own_input_tokens,
                    N.GEN_AI_USAGE_OUTPUT_TOKENS: run.own_output_tokens,
                    N.USAGE_TOTAL_INPUT_TOKENS: run.input_tokens, N.USAGE_TOTAL_OUTPUT_TOKENS: run.output_tokens,
                    **({N.COST_USD: run.own_cost, N.TOTAL_COST_USD: run.cost} if self._priced else {}),
                    **tool_list_attributes(*run.tool_names())})
                if cache_read := run.own_cache_read_input_tokens:  # as on the chat spans: when non-zero
                    self.span.set_attribute(N.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, cache_read)
                if cache_creation := run.own_cache_creation_input_tokens:
                    self.span.set_attribute(N.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, cache_creation)
                if self._t.capture is not None:  # the answer, where the run's GenAI tab shows it
                    self.span.set_attributes(self._t.capture.answer(answer_message(run)))
                if run.paused is not None:
                    self.span.set_attributes({N.CHECKPOINT_ID: run.paused.id, N.PENDING_CALLS: len(run.pending)})
                if not run.ok:  # every stopped run has its stop event in one place, whatever the reason
                    event = {N.STOP_REASON: run.stop.value, N.STEP_INDEX: (run.steps[0].index if run.steps else 0) + run.step_count - 1}
                    if run.paused is not None:
                        event[N.PENDING_CALLS] = len(run.pending)
                    self.span.add_event(N.STOP_EVENT, event)
        if run.ok or run.paused is not None:  # a pause is not a failure
            self._close()
        else:
            self.fail(run.stop.value, run.output)
        self._record_metrics(run)

    def fail(self, kind: str, description: str | None = None) -> None:
        """The run raised instead of returning: its open step and the run span end failed. An
        interruption (``kind`` is ``cancelled``) is a stop reason of its own, and is counted."""
        if self._step is not None:
            self._step.fail(kind)
            self._step = None
        cancelled = kind == N.ERROR_CANCELLED
        if cancelled:
            with guard(self.doing):
                self.span.set_attribute(N.STOP_REASON, Stop.CANCELLED.value)
        _Scope.fail(self, kind, description)
        if cancelled and self._t.metrics_on:
            with guard("recording run metrics"):
                self._t.run_counter.add(1, {N.GEN_AI_AGENT_NAME: self._t.agent_name,
                                            N.STOP_REASON: Stop.CANCELLED.value})

    def _record_metrics(self, run: Run) -> None:
        t = self._t
        if not t.metrics_on:
            return
        with guard("recording run metrics"):
            labels = {N.GEN_AI_AGENT_NAME: t.agent_name, N.STOP_REASON: run.stop.value}
            t.run_counter.add(1, labels)
            t.steps_histogram.record(run.step_count, labels)
            if self._priced:  # its own spend: each sub-agent's run counts its own
                t.cost_counter.add(run.own_cost, t.cost_labels)


class StepScope(_Scope):
    """The span of one loop iteration."""

    __slots__ = ("index",)
    doing = "ending a step span"

    def __init__(self, telemetry: AgentTelemetry, index: int) -> None:
        _Scope.__init__(self, telemetry, N.STEP_SPAN_NAME, SpanKind.INTERNAL, {N.STEP_INDEX: index})
        self.index = index

    def end(self, step: Step | None, lists: ToolNames | None, stop: Stop | None) -> None:
        """``step`` is the turn this iteration recorded, with its tool names (both ``None`` if
        its model call failed); ``stop`` is why the run ended inside it, if it did."""
        span = self.span
        try:
            if self.recording:
                if step is not None and lists is not None:
                    usage = step.completion.usage
                    span.set_attributes({
                        N.STEP_INPUT_TOKENS: usage.input_tokens, N.STEP_OUTPUT_TOKENS: usage.output_tokens,
                        **tool_list_attributes(*lists)})
                    if lists[3] and stop is not None:  # calls were not dispatched: say why
                        span.set_attribute(N.TOOLS_NOT_DISPATCHED_REASON, stop.value)
                    if step.resumed:
                        span.set_attribute(N.STEP_RESUMED, True)
                if stop is not None and stop is not Stop.ANSWERED:
                    span.add_event(N.STOP_EVENT, {N.STOP_REASON: stop.value})
        except Exception as exc:
            report(self.doing, exc)
        self._close()


class ChatScope(_Scope):
    """The ``chat`` span of one model call, and the GenAI client metrics."""

    __slots__ = ("_t", "_started", "_cut")
    doing = "ending a chat span"

    def __init__(self, telemetry: AgentTelemetry, messages: list[Message],
                 max_output_tokens: int | None, temperature: float | None) -> None:
        attributes = telemetry.chat_attributes
        if max_output_tokens is not None or temperature is not None:
            attributes = dict(attributes)
            if max_output_tokens is not None:
                attributes[N.GEN_AI_REQUEST_MAX_TOKENS] = max_output_tokens
            if temperature is not None:
                attributes[N.GEN_AI_REQUEST_TEMPERATURE] = temperature
        _Scope.__init__(self, telemetry, telemetry.chat_span_name, SpanKind.CLIENT, attributes)
        self._t = telemetry
        self._cut: list[str] = []
        """Content attributes cut at the capture limit, with the output's when it comes."""
        if telemetry.capture is not None:
            with guard("capturing input messages"):
                if self.recording:
                    captured = telemetry.capture.conversation(messages)
                    self._cut = captured.get(N.CONTENT_TRUNCATED, [])
                    self.span.set_attributes(captured)
        self._started = time.perf_counter() if telemetry.metrics_on else 0.0  # duration: a metric only

    def end(self, completion: Completion) -> None:
        seconds = time.perf_counter() - self._started if self._t.metrics_on else 0.0
        try:
            if self.recording:
                self.span.set_attributes(self._response_attributes(completion))
        except Exception as exc:
            report(self.doing, exc)
        self._close()
        t = self._t
        if t.metrics_on:
            with guard("recording model metrics"):
                labels = {**t.chat_attributes, **({N.GEN_AI_RESPONSE_MODEL: bounded(completion.model)}
                                                  if completion.model else {})}
                t.duration_histogram.record(seconds, labels)
                t.token_histogram.record(completion.usage.input_tokens,
                                         {**labels, N.GEN_AI_TOKEN_TYPE: N.TOKEN_TYPE_INPUT})
                t.token_histogram.record(completion.usage.output_tokens,
                                         {**labels, N.GEN_AI_TOKEN_TYPE: N.TOKEN_TYPE_OUTPUT})

    def fail(self, kind: str, description: str | None = None) -> None:
        """The model call raised. Only the exception's type is recorded: provider error
        messages can echo request content or key fragments."""
        seconds = time.perf_counter() - self._started if self._t.metrics_on else 0.0
        _Scope.fail(self, kind, description or chat_failure(kind))
        t = self._t
        if t.metrics_on:
            with guard("recording model metrics"):
                t.duration_histogram.record(seconds, {**t.chat_attributes, N.ERROR_TYPE: bounded(kind)})

    def _response_attributes(self, completion: Completion) -> dict[str, Any]:
        usage = completion.usage
        attributes: dict[str, Any] = {N.GEN_AI_USAGE_INPUT_TOKENS: usage.input_tokens,
                                      N.GEN_AI_USAGE_OUTPUT_TOKENS: usage.output_tokens}
        # The provider chose these strings: bounded like every other name.
        if completion.model:
            attributes[N.GEN_AI_RESPONSE_MODEL] = bounded(completion.model)
        if completion.response_id:
            attributes[N.GEN_AI_RESPONSE_ID] = bounded(completion.response_id)
        if completion.finish_reason:
            attributes[N.GEN_AI_RESPONSE_FINISH_REASONS] = [bounded(completion.finish_reason)]
        if usage.cache_read_input_tokens:
            attributes[N.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read_input_tokens
        if usage.cache_creation_input_tokens:
            attributes[N.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_creation_input_tokens
        if self._t.capture is not None:
            attributes.update(self._t.capture.output(completion))
            if self._cut:
                attributes[N.CONTENT_TRUNCATED] = self._cut + attributes.get(N.CONTENT_TRUNCATED, [])
        return attributes


class ToolScope(_Scope):
    """The ``execute_tool`` span of one dispatched call, and the tool-call counter."""

    __slots__ = ("_t", "_labels", "_cut")
    doing = "ending a tool span"

    def __init__(self, telemetry: AgentTelemetry, call: ToolCall, known: bool) -> None:
        span_name, attributes, self._labels = telemetry.tool_parts(call.name, known)
        _Scope.__init__(self, telemetry, span_name, SpanKind.INTERNAL, {**attributes, N.GEN_AI_TOOL_CALL_ID: bounded(call.id)})
        self._t = telemetry
        self._cut: list[str] = []
        """Content attributes cut at the capture limit, with the result's when it comes."""
        if telemetry.capture is not None:
            with guard("capturing tool arguments"):
                if self.recording:
                    captured = telemetry.capture.arguments(call.arguments)
                    self._cut = captured.get(N.CONTENT_TRUNCATED, [])
                    self.span.set_attributes(captured)

    def end(self, result: ToolResult) -> None:
        outcome = result.outcome.value
        try:
            self.span.set_attribute(N.TOOL_OUTCOME, outcome)
            if result.deadline_cut:
                self.span.set_attribute(N.TOOL_DEADLINE_CUT, True)
            if self._t.capture is not None and self.recording:
                captured = self._t.capture.result(result.content)
                if self._cut:
                    captured[N.CONTENT_TRUNCATED] = self._cut + captured.get(N.CONTENT_TRUNCATED, [])
                self.span.set_attributes(captured)
        except Exception as exc:
            report(self.doing, exc)
        if result.ok or result.outcome is ToolOutcome.PENDING:  # waiting is not failing
            self._close()
        else:
            _Scope.fail(self, result.error_type or outcome, tool_failure(result, self._t.capture))
        self._count(outcome)

    def fail(self, kind: str, description: str | None = None) -> None:
        """The call raised (a custom registry's bug) or was interrupted: that is its outcome."""
        with guard(self.doing):
            self.span.set_attribute(N.TOOL_OUTCOME, kind)
        _Scope.fail(self, kind, description or tool_interrupted(kind))
        self._count(kind)

    def _count(self, outcome: str) -> None:
        if self._t.metrics_on:
            with guard("recording tool metrics"):
                self._t.tool_call_counter.add(1, {**self._labels, N.TOOL_OUTCOME: outcome})
