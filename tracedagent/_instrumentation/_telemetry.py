"""One agent's telemetry settings and instruments, and the rules every span follows.

``AgentTelemetry`` holds configuration only: the tracer, the metric instruments, whether
content is captured, and the attributes that are the same for every span an agent emits.
The spans themselves are scopes (``_spans.py``) that start from it and end themselves.

Only the OpenTelemetry *API* is used here, with the providers the caller passed or the
global ones; the SDK is touched only by ``configure()`` and the testing toolkit.

Telemetry must never change a run's result: every call into OpenTelemetry that could fail
goes through ``guard`` (or ``report``), which logs the first failure of each kind and lets
the run go on.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import threading
import uuid
from typing import Any, Callable, Iterator, Protocol

from opentelemetry import metrics, trace

from .._core import _names as N
from .._core._budget import Budget
from ._content import ContentCapture, capture_content_from_env, encodable, truncate
from .._core._output import OutputSpec, type_path
from .._core._request import Model
from .._core._run import Run
from .._version import __version__

__all__ = ["AgentTelemetry", "RunEnded", "capture_content_from_env", "guard", "report", "ending_elsewhere", "ending_elsewhere_now", "bounded",
           "tool_list_attributes", "default_agent_id", "flush_spans"]

_log = logging.getLogger("tracedagent")
_reported: set[tuple[str, str]] = set()


def report(doing: str, exc: Exception) -> None:
    """Log a swallowed telemetry failure, once per kind (not once per run)."""
    key = (doing, type(exc).__name__)
    if key not in _reported:
        _reported.add(key)
        _log.warning("tracedagent: telemetry failed while %s (%s); runs are unaffected, "
                     "but their telemetry may be incomplete", doing, type(exc).__name__, exc_info=exc)


_ELSEWHERE: contextvars.ContextVar[bool] = contextvars.ContextVar("tracedagent_ending_elsewhere", default=False)
"""Set while spans end from a context that is not the one they were made current in."""


@contextlib.contextmanager
def ending_elsewhere() -> Iterator[None]:
    """Spans ended inside this block end without restoring the span context they replaced: they
    are ended from another context than their own (asyncio's, closing an async generator left
    open when ``asyncio.run`` ends), where that context cannot be restored - it went with the
    context it was in - and OpenTelemetry would log each attempt as an error."""
    token = _ELSEWHERE.set(True)
    try:
        yield
    finally:
        _ELSEWHERE.reset(token)


ending_elsewhere_now = _ELSEWHERE.get
"""Whether spans ending now are ``ending_elsewhere``: then they do not restore a span context."""


class guard:
    """``with guard("doing X"):`` swallows a telemetry failure (an ``Exception``, never an
    interrupt) and reports it."""

    __slots__ = ("doing",)

    def __init__(self, doing: str) -> None:
        self.doing = doing

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if isinstance(exc, Exception):
            report(self.doing, exc)
            return True
        return False


def flush_spans(provider: trace.TracerProvider | None, timeout: float) -> bool:
    """Export the spans ``provider`` (else the global provider) has ended, waiting at most
    ``timeout`` seconds; whether they went in time. Nothing happens with a provider that
    cannot flush (the API's no-op and proxy providers).

    A Temporal worker calls it before an activity reports its result: once Temporal has
    recorded the activity complete, nothing calls it again, so spans still queued in a
    worker that is then SIGKILLed would be lost for good. The SDK's ``force_flush`` ignores
    its timeout (each queued batch is exported, each export retried for the exporter's own
    timeout, when the collector is down), so it runs on a daemon thread waited for at most
    ``timeout``: a collector out of reach costs that much time, never the caller's result."""
    flush = getattr(provider if provider is not None else trace.get_tracer_provider(), "force_flush", None)
    if flush is None or timeout <= 0:
        return False
    done = threading.Event()

    def run() -> None:
        with guard("flushing spans"):
            flush(max(1, int(timeout * 1000)))
        done.set()

    with guard("flushing spans"):
        threading.Thread(target=run, name="tracedagent-span-flush", daemon=True).start()
        return done.wait(timeout)
    return False


def _content_limit_from_env() -> int:
    """``TRACEDAGENT_CONTENT_MAX_LENGTH`` (else the default), lowered to the SDK's own attribute
    length limit if one is set, which would otherwise cut the JSON in the middle."""
    limit = _int_from_env(N.ENV_CONTENT_MAX_LENGTH) or N.DEFAULT_CONTENT_MAX_LENGTH
    sdk = _int_from_env(N.ENV_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT) or _int_from_env(N.ENV_ATTRIBUTE_VALUE_LENGTH_LIMIT)
    return max(16, min(limit, sdk) if sdk else limit)


def _int_from_env(name: str) -> int | None:
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return None
    return value if value > 0 else None


_SURROGATES_AND_CONTROLS = {**dict.fromkeys(range(0xD800, 0xE000), "\ufffd"),
                            **dict.fromkeys([*range(0x20), *range(0x7F, 0xA0)], "\ufffd")}


def bounded(text: Any, limit: int = N.MAX_NAME_LENGTH) -> str:
    """A model- or provider-chosen identifier (or text that quotes one), bounded and encodable
    so that it can neither bloat a span nor cost the span the attribute that holds it (see
    ``encodable``)."""
    if type(text) is str and len(text) <= limit and text.isprintable():
        return text  # the common case, checked in C
    # Control characters go too: a name is shown on a terminal, where they are escapes.
    return truncate(str(text), limit).translate(_SURROGATES_AND_CONTROLS)


def _fits(names: list[str]) -> bool:
    """Whether a list of names (strings: ``check_completion`` saw to that) can be recorded as
    it is: few enough, each short and printable, as they nearly always are."""
    return (len(names) <= N.MAX_LIST_ITEMS and max(map(len, names), default=0) <= N.MAX_NAME_LENGTH
            and "".join(names).isprintable())


def tool_list_attributes(requested: list[str], executed: list[str], blocked: list[str],
                         not_dispatched: list[str], pending: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    """The tool-name lists of a step or run span, each bounded; where one had to be cut,
    ``<name>_count`` says how long it really was, so a list is never silently short.
    ``not_dispatched`` is there only when a call was not dispatched. The other three lists
    hold names drawn from ``requested``, so when it fits, they do too."""
    lists = {N.TOOLS_REQUESTED: requested, N.TOOLS_EXECUTED: executed, N.TOOLS_BLOCKED: blocked}
    if not_dispatched:
        lists[N.TOOLS_NOT_DISPATCHED] = not_dispatched
    if pending:
        lists[N.TOOLS_PENDING] = pending
    if _fits(requested):
        return lists
    attributes: dict[str, Any] = {}
    for key, names in lists.items():
        attributes[key] = [bounded(name) for name in names[: N.MAX_LIST_ITEMS]]
        if len(names) > N.MAX_LIST_ITEMS:
            attributes[key + N.COUNT_SUFFIX] = len(names)
    return attributes


_AGENT_ID_NAMESPACE = uuid.UUID("5b0f4d1e-7a43-4c4e-9a55-2f6f8e1c7d10")
"""Fixed forever: changing it would change every agent's default id."""


def default_agent_id(name: str, version: str | None) -> str:
    """``gen_ai.agent.id`` when the user gives none: a UUID (v5) of the agent's name and version,
    so that it is the same for one agent definition in every process and on every machine,
    and changes when its version does. Not secret, and not unique to a process: an id that
    identifies a running instance would be ``service.instance.id``'s job."""
    return str(uuid.uuid5(_AGENT_ID_NAMESPACE, f"{name}\x00{version or ''}"))


INT64_MAX = 2**63 - 1


def provider_spans_setting(value: str | None) -> bool:
    """Whether a provider instrumentation's spans under a chat span are suppressed:
    ``Agent(provider_spans=...)``, else ``TRACEDAGENT_PROVIDER_SPANS``, else ``suppress``. A
    wrong argument is a ``ValueError``; a wrong variable is logged once and the default holds."""
    choices = (N.PROVIDER_SPANS_SUPPRESS, N.PROVIDER_SPANS_KEEP)
    if value is not None:
        if value not in choices:
            raise ValueError(f"provider_spans must be one of {choices}, got {value!r}")
        return value == N.PROVIDER_SPANS_SUPPRESS
    raw = os.environ.get(N.ENV_PROVIDER_SPANS, "").strip().lower()
    if raw and raw not in choices and ("env", raw) not in _reported:
        _reported.add(("env", raw))
        _log.warning("tracedagent: %s=%r is not one of %s; provider spans are suppressed",
                     N.ENV_PROVIDER_SPANS, raw[:40], choices)
    return raw != N.PROVIDER_SPANS_KEEP


def _int64(value: Any) -> Any:
    """A budget's ceiling as OTLP can carry it: an int past int64 (which the encoder would drop,
    and the span lose) is recorded as ``INT64_MAX``, a ceiling no run reaches either."""
    return INT64_MAX if type(value) is int and value > INT64_MAX else value


class RunEnded(Protocol):
    """Told of each run of an agent that returned, once its run span has ended (``Agent(graders=...)``:
    ``tracedagent.evals.OnlineGrading`` grades it). Called on the run's own thread before the
    driver returns, so it only hands the run on (a queue, a thread of its own); what it raises
    is logged, never the run's."""

    def run_ended(self, run: Run, span: trace.Span) -> None:
        """``run`` as the driver returns it; ``span`` its ended run span (an SDK span can be read)."""
        ...


class AgentTelemetry:
    """What one ``Agent``'s spans and metrics are made with: fixed for the agent's lifetime."""

    def __init__(self, *, agent_name: str, model: Model, description: str | None = None,
                 version: str | None = None, agent_id: str | None = None,
                 tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: metrics.MeterProvider | None = None,
                 capture_content: bool | None = None, redact: Callable[[str], str] | None = None,
                 provider_spans: str | None = None) -> None:
        self.agent_name = agent_name
        self.suppress_provider_spans = provider_spans_setting(provider_spans)
        """Whether a chat span suppresses the provider instrumentations underneath it."""
        self.gen_ai_usage_cost = os.environ.get(N.ENV_GEN_AI_USAGE_COST, "").strip().lower() in ("true", "1", "yes", "on")
        """Whether chat spans also carry the proposal's ``gen_ai.usage.cost`` (not yet a convention)."""
        self.provider_name = str(getattr(model, "provider_name", None) or "unknown")
        self.model_name: str | None = getattr(model, "model_name", None)
        capture = capture_content_from_env() if capture_content is None else capture_content
        self.capture: ContentCapture | None = ContentCapture(redact, _content_limit_from_env()) if capture else None
        """Set only when the user opted in to content capture."""

        model_attributes = {N.GEN_AI_PROVIDER_NAME: self.provider_name,
                            **({N.GEN_AI_REQUEST_MODEL: self.model_name} if self.model_name else {})}
        server = {N.SERVER_ADDRESS: getattr(model, "server_address", None),
                  N.SERVER_PORT: getattr(model, "server_port", None)}
        self.run_span_name = f"{N.OP_INVOKE_AGENT} {agent_name}"
        # The user's own strings, but bounded and encodable all the same (a description may be
        # long, and keeps its line breaks; an id or version is a name).
        identity = {N.GEN_AI_AGENT_ID: bounded(agent_id or default_agent_id(agent_name, version)),
                    **({N.GEN_AI_AGENT_VERSION: bounded(version)} if version is not None else {}),
                    **({N.GEN_AI_AGENT_DESCRIPTION: encodable(truncate(description, N.MAX_DESCRIPTION_LENGTH))}
                       if description is not None else {})}
        self.run_attributes: dict[str, Any] = {
            N.GEN_AI_OPERATION_NAME: N.OP_INVOKE_AGENT, N.GEN_AI_AGENT_NAME: agent_name, **identity,
            **model_attributes}
        self.chat_span_name = f"{N.OP_CHAT} {self.model_name or self.provider_name}"
        self.chat_attributes: dict[str, Any] = {
            N.GEN_AI_OPERATION_NAME: N.OP_CHAT, **model_attributes,
            **{k: v for k, v in server.items() if v is not None}}
        """The chat span's fixed attributes, which are also the client metrics' labels."""
        self.chat_span_attributes = self.chat_attributes
        """What a chat span starts with: ``chat_attributes``, and a typed agent's output type."""
        self.typed = False
        """Whether the agent has an output type (its run spans say how many answers were retried)."""
        self.cost_labels: dict[str, Any] = {N.GEN_AI_AGENT_NAME: agent_name, **model_attributes}
        self.run_listener: RunEnded | None = None
        """Told of each returned run after its span ended (``Agent(graders=...)``); ``None``: nobody."""
        self._tool_parts: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {}

        self.tracer_provider = tracer_provider
        """The provider given, else ``None``: the global one, looked up when flushing (``flush_spans``)."""
        self.tracer: trace.Tracer = trace.NoOpTracer()
        with guard("getting a tracer"):
            self.tracer = trace.get_tracer(N.TRACER_NAME, __version__, tracer_provider)
        self.metrics_on = False
        """Instruments exist and record somewhere: with a no-op meter, no labels are built."""
        with guard("creating metric instruments"):
            meter = metrics.get_meter(N.TRACER_NAME, __version__, meter_provider)
            self._create_instruments(meter)
            self.metrics_on = not isinstance(meter, metrics.NoOpMeter)

    def _create_instruments(self, meter: metrics.Meter) -> None:
        self.run_counter = meter.create_counter(
            N.METRIC_RUNS, unit="{run}", description="Agent runs, by stop reason.")
        self.tool_call_counter = meter.create_counter(
            N.METRIC_TOOL_CALLS, unit="{call}", description="Dispatched tool calls, by tool and outcome.")
        self.cost_counter = meter.create_counter(
            N.METRIC_COST, unit="USD", description="Model spend at the budget's prices.")
        self.steps_histogram = meter.create_histogram(
            N.METRIC_RUN_STEPS, unit="{step}", description="Model turns per run.",
            explicit_bucket_boundaries_advisory=N.RUN_STEPS_BUCKETS)
        self.token_histogram = meter.create_histogram(
            N.METRIC_TOKEN_USAGE, unit="{token}", description="Tokens used per model call.",
            explicit_bucket_boundaries_advisory=N.TOKEN_USAGE_BUCKETS)
        self.approval_wait_histogram = meter.create_histogram(
            N.METRIC_APPROVAL_WAIT, unit="s", description="Time from a run's pause for approval to its resumption.",
            explicit_bucket_boundaries_advisory=N.APPROVAL_WAIT_BUCKETS)
        self.decision_counter = meter.create_counter(
            N.METRIC_APPROVAL_DECISIONS, unit="{decision}", description="Approval decisions, by tool and outcome.")
        self.duration_histogram = meter.create_histogram(
            N.METRIC_OPERATION_DURATION, unit="s", description="Duration of model calls.",
            explicit_bucket_boundaries_advisory=N.OPERATION_DURATION_BUCKETS)
        self.first_chunk_histogram = meter.create_histogram(
            N.METRIC_TIME_TO_FIRST_CHUNK, unit="s", description="Time to the first chunk of streamed model calls.",
            explicit_bucket_boundaries_advisory=N.OPERATION_DURATION_BUCKETS)

    def output_typed(self, spec: OutputSpec | None, mode: str) -> None:
        """An agent with an output type: ``gen_ai.output.type`` on its chat and run spans, and the
        type's name and how it is asked for on its run spans (fixed, so no call builds them)."""
        if spec is None:
            return
        self.typed = True
        self.chat_span_attributes = {**self.chat_attributes, N.GEN_AI_OUTPUT_TYPE: N.OUTPUT_TYPE_JSON}
        self.run_attributes = {**self.run_attributes, N.GEN_AI_OUTPUT_TYPE: N.OUTPUT_TYPE_JSON,
                               N.OUTPUT_TYPE_NAME: bounded(spec.name), N.OUTPUT_MODE: mode}
        if (path := type_path(spec)) is not None:  # where replay imports the type from
            self.run_attributes[N.OUTPUT_TYPE_PATH] = path

    def run_start_attributes(self, budget: Budget) -> dict[str, Any]:
        """The run span's attributes at its start: the agent, its model and the run's ceilings and
        prices (every field of its ``Budget``: replay rebuilds the budget from them)."""
        ceilings = {N.BUDGET_MAX_STEPS: budget.max_steps, N.BUDGET_MAX_TOKENS: budget.max_tokens,
                    N.BUDGET_MAX_COST: budget.max_cost, N.BUDGET_REPEAT_LIMIT: budget.repeat_limit,
                    N.BUDGET_NO_PROGRESS_LIMIT: budget.no_progress_limit, N.BUDGET_MAX_SECONDS: budget.max_seconds,
                    N.BUDGET_MAX_TOOL_CALLS_PER_STEP: budget.max_tool_calls_per_step,
                    N.BUDGET_MAX_TOOL_CALLS: budget.max_tool_calls,
                    N.BUDGET_PRICE_PER_1K_INPUT: budget.price_per_1k_input or None,
                    N.BUDGET_PRICE_PER_1K_OUTPUT: budget.price_per_1k_output or None,
                    N.BUDGET_PRICE_PER_1K_CACHE_READ: budget.price_per_1k_cache_read,
                    N.BUDGET_PRICE_PER_1K_CACHE_WRITE: budget.price_per_1k_cache_write}
        if self.typed:
            ceilings[N.BUDGET_MAX_OUTPUT_RETRIES] = budget.max_output_retries
        return {**self.run_attributes, **{k: _int64(v) for k, v in ceilings.items() if v is not None}}

    def tool_parts(self, name: str, known: bool) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """A tool call's span name, fixed span attributes and metric labels, built once per
        registered tool. A name the registry does not know is the model's invention: bounded on
        the span, and never a span name or metric label, where it would explode their
        cardinality; nor is it kept, so a hostile model cannot grow this cache."""
        parts = self._tool_parts.get(name)
        if parts is None:
            label = bounded(name) if known else N.UNKNOWN_TOOL_LABEL
            parts = (f"{N.OP_EXECUTE_TOOL} {label}",
                     {N.GEN_AI_OPERATION_NAME: N.OP_EXECUTE_TOOL, N.GEN_AI_TOOL_NAME: bounded(name),
                      N.GEN_AI_TOOL_TYPE: N.TOOL_TYPE_FUNCTION},
                     {N.GEN_AI_AGENT_NAME: self.agent_name, N.GEN_AI_TOOL_NAME: label})
            if known:
                self._tool_parts[name] = parts
        return parts
