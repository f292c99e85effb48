"""One scope per kind of span: a step, a model call, a tool call (a run's: ``_observer.py``).

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
from .._core._records import Completion, ToolCall, ToolOutcome, ToolResult, being_cancelled, error_type
from .._core._request import ModelRequest
from .._core._run import Step, ToolNames
from ._status import chat_failure, tool_failure, tool_interrupted
from ._telemetry import AgentTelemetry, bounded, ending_elsewhere_now, guard, report, tool_list_attributes

__all__ = ["StepScope", "ChatScope", "ToolScope", "failure_kind", "RUN_BUDGET"]

RUN_BUDGET = otel_context.create_key("tracedagent.run_budget")
"""The context key under which a priced run's span (``RunScope``) puts its budget, so that each
``chat`` span inside it prices its own call exactly as the run does (``Budget.cost_of``); a
call made outside a priced run has no cost attribute (unknown, not free)."""

_SUPPRESS_KEY = getattr(otel_context, "_SUPPRESS_INSTRUMENTATION_KEY", None)
"""OpenTelemetry's suppression flag (the API's key, which ``suppress_instrumentation()`` sets),
read by provider instrumentations - OpenInference's, the opentelemetry-instrumentation-* ones -
before they open a span. The plain ``"suppress_instrumentation"`` string, which only
instrumentations older than the API's key read, is not set: one context copy less a call."""
_SUPPRESSED = ((_SUPPRESS_KEY, True),) if _SUPPRESS_KEY is not None else ()


def failure_kind(exc: BaseException) -> str:
    """The ``error.type`` a span that ended on ``exc`` gets: ``cancelled`` for an interruption
    (a cancelled task, ``KeyboardInterrupt``, a generator closed by whoever read it: a stream's
    consumer that stopped reading), ``timeout`` for the run's deadline, otherwise the
    exception's class name."""
    if isinstance(exc, (KeyboardInterrupt, GeneratorExit)) or (isinstance(exc, asyncio.CancelledError)
                                                               and being_cancelled()):
        return N.ERROR_CANCELLED
    if isinstance(exc, DeadlineExceeded):
        return N.ERROR_TIMEOUT
    return error_type(exc)


class _Scope:
    """A span from its start to its one end, current in between.

    Every kind is used the same way: built where the work starts, ended with ``end(record)``
    by the code that has the record, and used as a context manager around the work, which
    fails the span (``failure_kind``) if the work raises, and ends it either way."""

    __slots__ = ("span", "recording", "_token", "_open")
    doing = "ending a span"

    def __init__(self, telemetry: AgentTelemetry, name: str, kind: SpanKind, attributes: dict[str, Any],
                 links: list[trace.Link] | None = None, values: tuple[tuple[str, Any], ...] = ()) -> None:
        """``values`` are set in the context the span is current in, with it (and gone with it)."""
        try:
            self.span = telemetry.tracer.start_span(name, None, kind, attributes, links)
        except Exception as exc:
            report("starting a span", exc)
            self.span = INVALID_SPAN
        self.recording = False
        """Whether the span records: attributes are read off the records only for one that does."""
        try:
            self.recording = self.span.is_recording()
            context = trace.set_span_in_context(self.span)
            for key, value in values:
                context = otel_context.set_value(key, value, context)
            self._token: object | None = otel_context.attach(context)
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
    """The ``chat`` span of one model call, and the GenAI client metrics.

    Its cost is priced with the budget of the run it is in (``RUN_BUDGET``). While it is open,
    provider instrumentations underneath are suppressed unless the agent keeps their spans
    (``Agent(provider_spans="keep")``): one call, one LLM span, so no backend counts it twice."""

    __slots__ = ("_t", "_started", "_cut", "_budget")
    doing = "ending a chat span"

    def __init__(self, telemetry: AgentTelemetry, request: ModelRequest) -> None:
        attributes = telemetry.chat_span_attributes
        settings = request.settings
        max_output_tokens, temperature = settings.max_output_tokens, settings.temperature
        if max_output_tokens is not None or temperature is not None:
            attributes = dict(attributes)
            if max_output_tokens is not None:
                attributes[N.GEN_AI_REQUEST_MAX_TOKENS] = max_output_tokens
            if temperature is not None:
                attributes[N.GEN_AI_REQUEST_TEMPERATURE] = temperature
        self._budget: Budget | None = otel_context.get_value(RUN_BUDGET)  # type: ignore[assignment]
        _Scope.__init__(self, telemetry, telemetry.chat_span_name, SpanKind.CLIENT, attributes,
                        values=_SUPPRESSED if telemetry.suppress_provider_spans else ())
        self._t = telemetry
        self._cut: list[str] = []
        """Content attributes cut at the capture limit, with the output's when it comes."""
        if telemetry.capture is not None:
            with guard("capturing input messages"):
                if self.recording:
                    captured = telemetry.capture.conversation(request.messages)
                    if request.output is not None:  # the schema sent, whichever way it was sent
                        schema = telemetry.capture.schema(request.output.schema)
                        cut = [*captured.get(N.CONTENT_TRUNCATED, ()), *schema.pop(N.CONTENT_TRUNCATED, ())]
                        captured.update(schema)
                        if cut:
                            captured[N.CONTENT_TRUNCATED] = cut
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
        if usage.reasoning_output_tokens:
            attributes[N.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning_output_tokens
        if self._budget is not None:  # priced as the run prices it: the run's cost is its calls' sum
            cost = self._budget.cost_of(usage.input_tokens, usage.output_tokens,
                                        cache_read_input_tokens=usage.cache_read_input_tokens,
                                        cache_creation_input_tokens=usage.cache_creation_input_tokens)
            attributes[N.USAGE_COST_USD] = cost
            if self._t.gen_ai_usage_cost:
                attributes[N.GEN_AI_USAGE_COST] = cost
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
