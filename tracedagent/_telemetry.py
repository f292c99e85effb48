"""OpenTelemetry beside the loop: run and step spans, an instrumented model, instrumented dispatch.

The loop never calls the OpenTelemetry API itself. ``AgentTelemetry`` hands it three
things: a context manager per run (with one per step inside it), a model wrapper that
emits ``chat`` spans, and a dispatch wrapper that emits ``execute_tool`` spans. Span
attributes are read off the loop's own records when a span ends, and metrics are recorded
after their span has ended.

Only the OpenTelemetry *API* is used here, with the providers the caller passed or the
global ones; the SDK is touched only by ``configure()`` and the testing toolkit.

Telemetry must never change a run's result: every call into OpenTelemetry goes through
``_guard``, which logs the first failure of each kind and lets the run go on.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any, Callable

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode

from . import _names as N
from ._budget import Budget, Stop
from ._records import (OUTCOME_OK, Completion, Message, Model, ToolCall, ToolResult, check_completion,
                       error_type)
from ._tools import to_text
from ._version import __version__

if TYPE_CHECKING:
    from ._loop import RunState
    from ._tools import Registry

__all__ = ["AgentTelemetry", "capture_content_from_env"]

_log = logging.getLogger("tracedagent")

# Read on every call, so module constants: Python 3.11 looks enum members up slowly.
_INTERNAL, _CLIENT = SpanKind.INTERNAL, SpanKind.CLIENT
_reported: set[tuple[str, str]] = set()


class _guard:
    """Swallow a telemetry failure, logging the first one of each kind (not one per run).

    A class rather than a ``@contextmanager`` generator: it runs several times per step,
    and a generator-based context manager costs several times as much.
    """

    __slots__ = ("doing",)

    def __init__(self, doing: str) -> None:
        self.doing = doing

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None or not isinstance(exc, Exception):
            return False
        _report(self.doing, exc)
        return True


def _report(doing: str, exc: Exception) -> None:
    """Log a swallowed telemetry failure, once per kind."""
    key = (doing, type(exc).__name__)
    if key not in _reported:
        _reported.add(key)
        _log.warning("tracedagent: telemetry failed while %s (%s); runs are unaffected, "
                     "but their telemetry may be incomplete", doing, type(exc).__name__, exc_info=exc)


def _close(span: Span, token: object | None, doing: str) -> None:
    """Undo ``AgentTelemetry._open``: make the span's parent current again, and end the span,
    whatever happened while its attributes were being set."""
    if token is not None:
        try:
            otel_context.detach(token)  # type: ignore[arg-type]
        except Exception as exc:
            _report("detaching the span context", exc)
    try:
        span.end()
    except Exception as exc:
        _report(doing, exc)


def capture_content_from_env() -> bool:
    """The GenAI instrumentations' opt-in switch for recording prompts and tool payloads."""
    return os.environ.get(N.ENV_CAPTURE_CONTENT, "").strip().lower() in ("true", "1", "yes", "on")


def _content_limit() -> int:
    try:
        return max(16, int(os.environ.get(N.ENV_CONTENT_MAX_LENGTH, N.DEFAULT_CONTENT_MAX_LENGTH)))
    except ValueError:
        return N.DEFAULT_CONTENT_MAX_LENGTH


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 15] + "...[truncated]"


def _name(text: str) -> str:
    """A model-chosen identifier, bounded so a hostile model cannot bloat a span."""
    if type(text) is str and len(text) <= N.MAX_NAME_LENGTH:
        return text
    return _truncate(str(text), N.MAX_NAME_LENGTH)


def _names(items: list[str]) -> list[str]:
    """A list of model-chosen names, bounded in length and count (as it is when it fits)."""
    for item in items:
        if type(item) is not str or len(item) > N.MAX_NAME_LENGTH:
            break
    else:
        if len(items) <= N.MAX_LIST_ITEMS:
            return items
    return [_name(i) for i in items[: N.MAX_LIST_ITEMS]]


def _fail(span: Span, kind: str, description: str | None = None) -> None:
    """The one way a span is marked failed: ERROR status plus ``error.type`` (bounded)."""
    span.set_attribute(N.ERROR_TYPE, _name(kind))
    span.set_status(Status(StatusCode.ERROR, description and _truncate(description, N.MAX_DESCRIPTION_LENGTH)))


class AgentTelemetry:
    """The spans and metrics of one ``Agent``."""

    def __init__(self, *, agent_name: str, model: Model,
                 tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: metrics.MeterProvider | None = None,
                 capture_content: bool | None = None) -> None:
        self.agent_name = agent_name
        self.provider_name = str(getattr(model, "provider_name", None) or "unknown")
        self.model_name: str | None = getattr(model, "model_name", None)
        self.capture_content = capture_content_from_env() if capture_content is None else capture_content
        self.content_limit = _content_limit()
        server = {N.SERVER_ADDRESS: getattr(model, "server_address", None),
                  N.SERVER_PORT: getattr(model, "server_port", None)}
        # Computed once: the chat span's fixed attributes, and the labels the client metrics share.
        self.chat_attributes: dict[str, Any] = {
            N.GEN_AI_OPERATION_NAME: N.OP_CHAT, N.GEN_AI_PROVIDER_NAME: self.provider_name,
            **{k: v for k, v in server.items() if v is not None}}
        if self.model_name:
            self.chat_attributes[N.GEN_AI_REQUEST_MODEL] = self.model_name
        self.chat_span_name = f"{N.OP_CHAT} {self.model_name or self.provider_name}"
        self.run_span_name = f"{N.OP_INVOKE_AGENT} {agent_name}"
        self.run_attributes: dict[str, Any] = {
            N.GEN_AI_OPERATION_NAME: N.OP_INVOKE_AGENT, N.GEN_AI_AGENT_NAME: agent_name,
            N.GEN_AI_PROVIDER_NAME: self.provider_name,
            **({N.GEN_AI_REQUEST_MODEL: self.model_name} if self.model_name else {})}
        self._metric_labels: dict[str | None, tuple[dict[str, Any], ...]] = {}
        self.tracer: trace.Tracer = trace.NoOpTracer()
        with _guard("getting a tracer"):
            self.tracer = trace.get_tracer(N.TRACER_NAME, __version__, tracer_provider)
        self.metrics_on = False
        """Instruments exist and record somewhere: a no-op meter skips building their labels."""
        with _guard("creating metric instruments"):
            meter = metrics.get_meter(N.TRACER_NAME, __version__, meter_provider)
            self._create_instruments(meter)
            self.metrics_on = not isinstance(meter, metrics.NoOpMeter)

    def _create_instruments(self, meter: metrics.Meter) -> None:
        self.runs = meter.create_counter(N.METRIC_RUNS, unit="{run}", description="Agent runs, by stop reason.")
        self.tool_calls = meter.create_counter(
            N.METRIC_TOOL_CALLS, unit="{call}", description="Dispatched tool calls, by tool and outcome.")
        self.cost = meter.create_counter(N.METRIC_COST, unit="USD",
                                         description="Model spend at the budget's prices.")
        self.run_steps = meter.create_histogram(
            N.METRIC_RUN_STEPS, unit="{step}", description="Model turns per run.",
            explicit_bucket_boundaries_advisory=N.RUN_STEPS_BUCKETS)
        self.token_usage = meter.create_histogram(
            N.METRIC_TOKEN_USAGE, unit="{token}", description="Tokens used per model call.",
            explicit_bucket_boundaries_advisory=N.TOKEN_USAGE_BUCKETS)
        self.duration = meter.create_histogram(
            N.METRIC_OPERATION_DURATION, unit="s", description="Duration of model calls.",
            explicit_bucket_boundaries_advisory=N.OPERATION_DURATION_BUCKETS)

    def metric_labels(self, response_model: str | None) -> tuple[dict[str, Any], ...]:
        """The client metrics' labels for a response model: duration, input and output tokens.
        Cached, as they are the same for every call a model answers."""
        cached = self._metric_labels.get(response_model)
        if cached is None:
            labels = {**self.chat_attributes, **({N.GEN_AI_RESPONSE_MODEL: response_model} if response_model else {})}
            cached = (labels, {**labels, N.GEN_AI_TOKEN_TYPE: N.TOKEN_TYPE_INPUT},
                      {**labels, N.GEN_AI_TOKEN_TYPE: N.TOKEN_TYPE_OUTPUT})
            if len(self._metric_labels) < 64:  # bounded: the provider names the response model
                self._metric_labels[response_model] = cached
        return cached

    # --- spans ------------------------------------------------------------------------

    def _open(self, name: str, kind: SpanKind, attributes: dict[str, Any]) -> tuple[Span, object | None]:
        """Start a span as a child of the current one and make it current: the span (a no-op
        one if starting failed), and the token ``_close`` takes to restore its parent."""
        try:
            span = self.tracer.start_span(name, None, kind, attributes)
        except Exception as exc:
            _report("starting a span", exc)
            span = INVALID_SPAN
        try:
            return span, otel_context.attach(trace.set_span_in_context(span))
        except Exception as exc:
            _report("attaching the span context", exc)
            return span, None

    def run(self, state: RunState) -> _RunSpan:
        """The ``invoke_agent`` span around one run (``with telemetry.run(state) as traced``);
        sets ``state.trace_id``. ``traced.step(i)`` opens each step's span inside it."""
        return _RunSpan(self, state)

    def _run_attributes(self, budget: Budget) -> dict[str, Any]:
        ceilings = {N.BUDGET_MAX_STEPS: budget.max_steps, N.BUDGET_MAX_TOKENS: budget.max_tokens,
                    N.BUDGET_MAX_COST: budget.max_cost, N.BUDGET_REPEAT_LIMIT: budget.repeat_limit,
                    N.BUDGET_NO_PROGRESS_LIMIT: budget.no_progress_limit}
        return {**self.run_attributes, **{k: v for k, v in ceilings.items() if v is not None}}

    def _end_run_span(self, traced: _RunSpan) -> None:
        run, span = traced.state.run, traced.span
        if run is not None and span.is_recording():
            span.set_attributes({
                N.STOP_REASON: run.stop.value, N.STEPS: run.step_count,
                N.GEN_AI_USAGE_INPUT_TOKENS: run.input_tokens,
                N.GEN_AI_USAGE_OUTPUT_TOKENS: run.output_tokens,
                N.COST_USD: run.cost,
                # Gathered from the steps as they ended: run.requested_tools() and the others,
                # without walking every step again.
                N.TOOLS_REQUESTED: _names(traced.requested),
                N.TOOLS_EXECUTED: _names(traced.executed),
                N.TOOLS_BLOCKED: _names(traced.blocked),
            })
            if not run.ok:
                _fail(span, run.stop.value, run.output)

    def _record_run_metrics(self, state: RunState) -> None:
        run = state.run
        if run is None or not self.metrics_on:
            return
        labels = {N.GEN_AI_AGENT_NAME: self.agent_name}
        self.runs.add(1, {**labels, N.STOP_REASON: run.stop.value})
        self.run_steps.record(run.step_count, {**labels, N.STOP_REASON: run.stop.value})
        self.cost.add(run.cost, {**labels, N.GEN_AI_PROVIDER_NAME: self.provider_name,
                                 **({N.GEN_AI_REQUEST_MODEL: self.model_name} if self.model_name else {})})


    # --- the model --------------------------------------------------------------------

    def instrument_model(self, model: Model) -> Model:
        return _InstrumentedModel(model, self)

    # --- tools ------------------------------------------------------------------------

    def instrument_dispatch(self, registry: Registry) -> Callable[[ToolCall], ToolResult]:
        """``registry.dispatch`` wrapped in an ``execute_tool`` span and the tool-call counter."""
        return _InstrumentedDispatch(registry, self).dispatch

    def _content(self, value: Any) -> str:
        return _truncate(to_text(value), self.content_limit)


class _RunSpan:
    """The run span as a context manager; it ends once the loop has returned its ``Run``.

    Its steps report the tools they requested, executed and blocked as they end, so that the
    run span's lists are the concatenation of its step spans' (and equal the ``Run``'s)."""

    __slots__ = ("telemetry", "state", "span", "token", "recording", "requested", "executed", "blocked")

    def __init__(self, telemetry: AgentTelemetry, state: RunState) -> None:
        self.telemetry, self.state = telemetry, state
        self.requested: list[str] = []
        self.executed: list[str] = []
        self.blocked: list[str] = []

    def __enter__(self) -> _RunSpan:
        t, state = self.telemetry, self.state
        self.span, self.token = t._open(t.run_span_name, _INTERNAL, t._run_attributes(state.budget))
        self.recording = False
        with _guard("reading the trace id"):
            self.recording = self.span.is_recording()
            ctx = self.span.get_span_context()
            if ctx.is_valid:
                state.trace_id = trace.format_trace_id(ctx.trace_id)
        return self

    def step(self, index: int) -> _StepSpan:
        """The span of loop iteration ``index``; the model and tool spans nest inside it."""
        return _StepSpan(self, index)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        t, span = self.telemetry, self.span
        if exc is not None:  # a bug or an interrupt: the span still ends, marked failed
            with _guard("ending a run span"):
                _fail(span, error_type(exc))
            _close(span, self.token, "ending a run span")
            return
        with _guard("ending a run span"):
            t._end_run_span(self)
        _close(span, self.token, "ending a run span")
        if t.metrics_on:
            with _guard("recording run metrics"):
                t._record_run_metrics(self.state)


class _StepSpan:
    """The step span as a context manager: a class, not a generator, as it runs every step."""

    __slots__ = ("run", "index", "span", "token")

    def __init__(self, run: _RunSpan, index: int) -> None:
        self.run, self.index = run, index

    def __enter__(self) -> None:
        self.span, self.token = self.run.telemetry._open(N.STEP_SPAN_NAME, _INTERNAL, {N.STEP_INDEX: self.index})

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        span, run, state = self.span, self.run, self.run.state
        try:
            step = state.steps[-1] if state.steps else None
            recording = span.is_recording()
            # No turn if the model call failed; no names gathered if no span would carry them.
            if step is not None and step.index == self.index and (recording or run.recording):
                requested, executed, blocked = step.tool_names()
                run.requested += requested
                run.executed += executed
                run.blocked += blocked
                if recording:
                    usage = step.completion.usage
                    span.set_attributes({
                        N.STEP_INPUT_TOKENS: usage.input_tokens, N.STEP_OUTPUT_TOKENS: usage.output_tokens,
                        N.TOOLS_REQUESTED: _names(requested), N.TOOLS_EXECUTED: _names(executed),
                        N.TOOLS_BLOCKED: _names(blocked)})
            if recording and state.run is not None and state.run.stop is not Stop.ANSWERED:
                span.add_event(N.STOP_EVENT, {N.STOP_REASON: state.run.stop.value})
        except Exception as error:  # not ``exc``: that names the exception the step ended with
            _report("ending a step span", error)
        _close(span, self.token, "ending a step span")


class _InstrumentedDispatch:
    """``registry.dispatch`` inside an ``execute_tool`` span, then the tool-call counter."""

    __slots__ = ("registry", "_t", "_by_name")

    def __init__(self, registry: Registry, telemetry: AgentTelemetry) -> None:
        self.registry = registry
        self._t = telemetry
        self._by_name: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {}

    def _fixed(self, name: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """A tool's span name, fixed span attributes and metric labels, built once per
        registered tool. A name the registry does not know is the model's invention: bounded
        on the span, and never a span name or metric label, which would explode their
        cardinality; it is not cached either, so a hostile model cannot grow the cache."""
        fixed = self._by_name.get(name)
        if fixed is None:
            known = name in self.registry
            label = _name(name) if known else N.UNKNOWN_TOOL_LABEL
            fixed = (f"{N.OP_EXECUTE_TOOL} {label}",
                     {N.GEN_AI_OPERATION_NAME: N.OP_EXECUTE_TOOL, N.GEN_AI_TOOL_NAME: _name(name),
                      N.GEN_AI_TOOL_TYPE: N.TOOL_TYPE_FUNCTION},
                     {N.GEN_AI_AGENT_NAME: self._t.agent_name, N.GEN_AI_TOOL_NAME: label})
            if known:
                self._by_name[name] = fixed
        return fixed

    def dispatch(self, call: ToolCall) -> ToolResult:
        t = self._t
        span_name, attributes, labels = self._by_name.get(call.name) or self._fixed(call.name)
        span, token = t._open(span_name, _INTERNAL, {**attributes, N.GEN_AI_TOOL_CALL_ID: _name(call.id)})
        if t.capture_content:
            with _guard("capturing tool arguments"):
                if span.is_recording():
                    span.set_attribute(N.GEN_AI_TOOL_CALL_ARGUMENTS, t._content(call.arguments))
        try:
            result = self.registry.dispatch(call)
        except BaseException as exc:  # a custom registry that raises, or an interrupt
            with _guard("ending a tool span"):
                _fail(span, error_type(exc))
            _close(span, token, "ending a tool span")
            raise
        outcome = result.outcome._value_  # not ``.value``: an enum property costs a call
        try:
            span.set_attribute(N.TOOL_OUTCOME, outcome)
            if t.capture_content and span.is_recording():
                span.set_attribute(N.GEN_AI_TOOL_CALL_RESULT, t._content(result.content))
            if result.outcome is not OUTCOME_OK:
                _fail(span, result.error_type or outcome)
        except Exception as exc:
            _report("ending a tool span", exc)
        _close(span, token, "ending a tool span")
        if t.metrics_on:
            with _guard("recording tool metrics"):
                t.tool_calls.add(1, {**labels, N.TOOL_OUTCOME: outcome})
        return result


class _InstrumentedModel:
    """A ``Model`` that wraps each call in a ``chat`` span and records the GenAI client metrics."""

    def __init__(self, model: Model, telemetry: AgentTelemetry) -> None:
        self.wrapped = model
        self._t = telemetry

    def complete(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                 max_output_tokens: int | None = None, temperature: float | None = None) -> Completion:
        t = self._t
        attributes = t.chat_attributes
        if max_output_tokens is not None or temperature is not None:
            attributes = dict(attributes)
            if max_output_tokens is not None:
                attributes[N.GEN_AI_REQUEST_MAX_TOKENS] = max_output_tokens
            if temperature is not None:
                attributes[N.GEN_AI_REQUEST_TEMPERATURE] = temperature
        span, token = t._open(t.chat_span_name, _CLIENT, attributes)
        if t.capture_content:
            with _guard("capturing input messages"):
                if span.is_recording():
                    span.set_attribute(N.GEN_AI_INPUT_MESSAGES, t._content(messages))
        started = time.perf_counter()
        try:
            completion = check_completion(self.wrapped.complete(
                messages, tools=tools, max_output_tokens=max_output_tokens, temperature=temperature))
        except BaseException as exc:  # the model failed, or an interrupt arrived during the call
            # Only the type: provider error messages can echo request content or key fragments.
            with _guard("ending a chat span"):
                _fail(span, error_type(exc))
            _close(span, token, "ending a chat span")
            self._record_metrics(time.perf_counter() - started, None, error_type(exc))
            raise
        try:
            self._set_response_attributes(span, completion)
        except Exception as exc:
            _report("ending a chat span", exc)
        _close(span, token, "ending a chat span")
        if t.metrics_on:
            self._record_metrics(time.perf_counter() - started, completion, None)
        return completion

    def _set_response_attributes(self, span: Span, completion: Completion) -> None:
        if span.is_recording():
            usage = completion.usage
            attributes: dict[str, Any] = {N.GEN_AI_USAGE_INPUT_TOKENS: usage.input_tokens,
                                          N.GEN_AI_USAGE_OUTPUT_TOKENS: usage.output_tokens}
            # The provider chose these strings: bounded like every other name.
            if completion.model:
                attributes[N.GEN_AI_RESPONSE_MODEL] = _name(completion.model)
            if completion.response_id:
                attributes[N.GEN_AI_RESPONSE_ID] = _name(completion.response_id)
            if completion.finish_reason:
                attributes[N.GEN_AI_RESPONSE_FINISH_REASONS] = [_name(completion.finish_reason)]
            if usage.cache_read_input_tokens:
                attributes[N.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read_input_tokens
            if usage.cache_creation_input_tokens:
                attributes[N.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_creation_input_tokens
            if self._t.capture_content:
                attributes[N.GEN_AI_OUTPUT_MESSAGES] = self._t._content([completion.as_message()])
            span.set_attributes(attributes)  # one call: the SDK takes a lock per call

    def _record_metrics(self, seconds: float, completion: Completion | None, error_type: str | None) -> None:
        t = self._t
        if not t.metrics_on:
            return
        with _guard("recording model metrics"):
            if completion is None:
                t.duration.record(seconds, {**t.chat_attributes, N.ERROR_TYPE: error_type})
                return
            labels, input_labels, output_labels = t.metric_labels(completion.model)
            t.duration.record(seconds, labels)
            t.token_usage.record(completion.usage.input_tokens, input_labels)
            t.token_usage.record(completion.usage.output_tokens, output_labels)
