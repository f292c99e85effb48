"""Every span, attribute, event, metric and environment-variable name tracedagent emits.

One module so that the telemetry contract can be read (and reviewed) in one place (its
Temporal part in ``_temporal_names``, re-exported here: every name is ``N.NAME``).
Names the OpenTelemetry GenAI semantic conventions define are theirs, and the standard
environment variables are the SDK's; everything they lack lives under ``tracedagent.*``.
``docs/telemetry.md`` documents each of them.

Written out as strings rather than imported: ``_core`` imports only the standard library (the semantic-
conventions package keeps the GenAI names in a private ``_incubating`` module, and the environment
variables' names are the SDK's); ``tests/test_names.py`` holds each to the package it comes from.
"""

from __future__ import annotations

TRACER_NAME = "tracedagent"
"""The fixed instrumentation scope of every span and metric (``otel.scope.name``)."""

# --- Span names (the semconv pattern is "{operation} {target}") --------------------
OP_INVOKE_AGENT = "invoke_agent"
OP_CHAT = "chat"
OP_EXECUTE_TOOL = "execute_tool"
STEP_SPAN_NAME = "step"
"""Step spans share one low-cardinality name; the index is an attribute."""

# --- GenAI semantic-convention attributes ----------------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
"""``Agent(agent_id=...)``, else a UUID of the agent's name and version: stable across processes."""
GEN_AI_AGENT_DESCRIPTION = "gen_ai.agent.description"
GEN_AI_AGENT_VERSION = "gen_ai.agent.version"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
"""On every ``invoke_agent`` span of a conversation's runs; never a metric label (unbounded)."""
GEN_AI_OUTPUT_TYPE = "gen_ai.output.type"
"""``json`` on the ``chat`` and ``invoke_agent`` spans of an agent with an output type (only there)."""
OUTPUT_TYPE_JSON = "json"
OUTPUT_TYPE_NAME = "tracedagent.output.type_name"
"""The output type's name (``Weather``, ``list[int]``) on a typed agent's run spans."""
OUTPUT_TYPE_PATH = "tracedagent.output.type_path"
"""Where it lives, ``module:qualname``, for replay to import; only for a class importable by it."""
OUTPUT_MODE = "tracedagent.output.mode"
"""How a typed answer was asked for (``prompted``, ``native``, ``tool``), on its run spans."""
OUTPUT_SCHEMA = "tracedagent.output.schema"
"""With content capture on: the JSON schema a typed agent's chat call asked its answer to match."""
OUTPUT_RETRIES = "tracedagent.output.retries"
"""Answers a typed run sent back because they did not validate (on its run span, at its end)."""
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
# Content attributes: only ever set when the user opted in to content capture.
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
GEN_AI_REQUEST_STREAM = "gen_ai.request.stream"
"""``true`` on the ``chat`` span of a streamed model call (the conventions: set if and only if streaming)."""
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
"""Seconds from the streamed request to its first chunk, on the ``chat`` span (absent if none came)."""
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

TOOL_TYPE_FUNCTION = "function"
TOKEN_TYPE_INPUT = "input"
TOKEN_TYPE_OUTPUT = "output"

# --- tracedagent attributes ------------------------------------------------------
STOP_REASON = "tracedagent.stop_reason"
STEPS = "tracedagent.steps"
COST_USD = "tracedagent.cost_usd"
"""This agent's own model spend (absent when the budget has no prices: unknown, not free)."""
TOTAL_COST_USD = "tracedagent.total_cost_usd"
"""``COST_USD`` plus every sub-agent's, on an ``invoke_agent`` span."""
USAGE_COST_USD = "tracedagent.usage.cost_usd"
"""On a ``chat`` span: that one model call's cost at the run's budget prices (absent without
prices); the run's ``COST_USD`` is the sum of its calls'."""
GEN_AI_USAGE_COST = "gen_ai.usage.cost"
"""The GenAI proposal's per-call cost (semantic-conventions-genai PR #443, not in the pinned
conventions): written beside ``USAGE_COST_USD`` only when ``ENV_GEN_AI_USAGE_COST`` asks."""
USAGE_TOTAL_INPUT_TOKENS = "tracedagent.usage.total_input_tokens"
"""Input tokens of the agent's own calls and its sub-agents'; ``gen_ai.usage.input_tokens`` is its own."""
USAGE_TOTAL_OUTPUT_TOKENS = "tracedagent.usage.total_output_tokens"
SUB_AGENT_STOP_REASON = "tracedagent.sub_agent.stop_reason"
"""On the ``execute_tool`` span of a sub-agent call: why the sub-agent's run ended."""
TOOLS_REQUESTED = "tracedagent.tools.requested"
TOOLS_EXECUTED = "tracedagent.tools.executed"
TOOLS_BLOCKED = "tracedagent.tools.blocked"
TOOLS_NOT_DISPATCHED = "tracedagent.tools.not_dispatched"
"""Requested calls that were never dispatched because the run stopped first: with executed and
blocked, every requested call has exactly one fate on the span."""
TOOLS_NOT_DISPATCHED_REASON = "tracedagent.tools.not_dispatched_reason"
"""Why they were not: the stop reason that ended the run in that step."""
TOOLS_PENDING = "tracedagent.tools.pending"
"""Requested calls waiting for a person's decision when the run paused (``approval_required``):
the fifth fate."""
PENDING_CALLS = "tracedagent.pending_calls"
"""On a paused run's span and its ``tracedagent.stop`` event: how many calls wait (sub-agents' included)."""
CHECKPOINT_ID = "tracedagent.checkpoint.id"
"""On a paused run's span: the id of the checkpoint it paused with (``Run.checkpoint_id``)."""
RESUMED_CHECKPOINT_ID = "tracedagent.resumed_checkpoint.id"
"""On a resumed run's span: the checkpoint it continued from. Two spans with the same value: a
checkpoint resumed twice."""
RESUMED_FROM = "tracedagent.resumed_from"
"""On a resumed run's span: the trace id of the paused run (also a span link to its run span)."""
APPROVAL_APPROVED = "tracedagent.approval.approved"
"""On a resumed run's span: the tool names of the calls a person approved."""
APPROVAL_DENIED = "tracedagent.approval.denied"
"""On a resumed run's span: the tool names of the calls a person denied."""
APPROVAL_EDITED = "tracedagent.approval.edited"
"""On a resumed run's span: the tool names of the calls a person approved with arguments they
corrected (``approve(call, arguments=...)``): those calls ran with the person's arguments."""
STEP_RESUMED = "tracedagent.step.resumed"
"""On the step span of a resumed run's decided calls: a step without a model call."""
DECISION = "tracedagent.approval.decision"
"""Label of the decisions counter: ``approved`` or ``denied``."""
DECISION_APPROVED = "approved"
DECISION_DENIED = "denied"
COUNT_SUFFIX = "_count"
"""Appended to a tool-list attribute's name for its full length, set only when the list was cut."""
BUDGET_MAX_STEPS = "tracedagent.budget.max_steps"
BUDGET_MAX_TOKENS = "tracedagent.budget.max_tokens"
BUDGET_MAX_COST = "tracedagent.budget.max_cost_usd"
BUDGET_REPEAT_LIMIT = "tracedagent.budget.repeat_limit"
BUDGET_NO_PROGRESS_LIMIT = "tracedagent.budget.no_progress_limit"
BUDGET_MAX_SECONDS = "tracedagent.budget.max_seconds"
BUDGET_MAX_TOOL_CALLS_PER_STEP = "tracedagent.budget.max_tool_calls_per_step"
BUDGET_MAX_TOOL_CALLS = "tracedagent.budget.max_tool_calls"
BUDGET_MAX_OUTPUT_RETRIES = "tracedagent.budget.max_output_retries"
"""Set on a typed agent's run spans only (an untyped run never retries)."""
BUDGET_PRICE_PER_1K_INPUT = "tracedagent.budget.price_per_1k_input"
"""Set only when the budget has prices (as are ``BUDGET_PRICE_PER_1K_OUTPUT`` and ``COST_USD``)."""
BUDGET_PRICE_PER_1K_OUTPUT = "tracedagent.budget.price_per_1k_output"
BUDGET_PRICE_PER_1K_CACHE_READ = "tracedagent.budget.price_per_1k_cache_read"
"""Set only when the budget names a price for prompt-cache reads (as is ``..._CACHE_WRITE``)."""
BUDGET_PRICE_PER_1K_CACHE_WRITE = "tracedagent.budget.price_per_1k_cache_write"
DRIVER = "tracedagent.driver"
"""On an ``invoke_agent`` span: ``run``, ``arun``, ``stream`` or ``astream``, the method that drove the run."""
TOOLS_PARALLEL = "tracedagent.tools.parallel"
"""On an ``arun`` run's span: whether a turn's tool calls were dispatched concurrently."""
TOOLS_MAX_CONCURRENCY = "tracedagent.tools.max_concurrency"
"""On an ``arun`` run's span, when parallel calls were limited: at most this many at once."""
DRIVER_RUN = "run"
DRIVER_ARUN = "arun"
DRIVER_STREAM = "stream"
DRIVER_ASTREAM = "astream"
RESPONSE_CHUNKS = "tracedagent.response.chunks"
"""On the ``chat`` span of a streamed model call: how many chunks arrived (text deltas, tool-call
fragments and the provider's closing report); nothing is recorded per chunk."""
REQUEST_TOOL_CHOICE = "tracedagent.request.tool_choice"
"""On the ``chat`` span, set by a model adapter whose request carried a ``tool_choice``: what it
asked, as ``auto``, ``none``, ``required`` (Anthropic's ``any``) or ``function`` (one named tool)."""
REQUEST_TOOL_CHOICE_NAME = "tracedagent.request.tool_choice_name"
"""With ``tracedagent.request.tool_choice`` = ``function``: the tool the request named."""
RESPONSE_TOOL_CHOICE_FOLLOWED = "tracedagent.response.tool_choice_followed"
"""Whether the answer did what ``tracedagent.request.tool_choice`` asked (a call when one was
required, only the named tool, no call for ``none``); absent for ``auto``. Servers that ignore a
``tool_choice`` (llama.cpp's treats a named function as ``auto``) show here as ``false``."""

from ._temporal_names import *  # noqa: E402,F401,F403 - tracedagent.temporal's names, kept beside these
STEP_INDEX = "tracedagent.step.index"
STEP_INPUT_TOKENS = "tracedagent.step.input_tokens"
STEP_OUTPUT_TOKENS = "tracedagent.step.output_tokens"
TOOL_OUTCOME = "tracedagent.tool.outcome"
TOOL_DEADLINE_CUT = "tracedagent.tool.deadline_cut"
"""``true`` on a tool span whose call the run's deadline cut off (``ToolResult.deadline_cut``):
the fact, where a reader would otherwise match the result's sentence."""

ERROR_CANCELLED = "cancelled"
"""``error.type`` of a span whose work was interrupted (a cancelled task, ``KeyboardInterrupt``)."""
ERROR_TIMEOUT = "timeout"
"""``error.type`` of a span whose call the run's time budget cut off."""

STOP_EVENT = "tracedagent.stop"
"""Event on the step span inside which the run stopped (any reason but ``answered``)."""
# What a trace viewer shows of a run's story (docs/telemetry.md "In a trace viewer"; semconv/):
STOP_PART, STOP_PART_REASON, STOP_PART_PENDING = STOP_EVENT, "stop_reason", "pending_calls"  # a stopped run's output part
STOP_ROLE = "system"  # its output message's role: tracedagent's sentence, never the assistant's
APPROVAL_EVENT = "tracedagent.approval"  # one per decided call, on the span of the run going on
RESUME_SPAN_NAME, RESUMED_TRACE_ID = "tracedagent.resume", "tracedagent.resumed.trace_id"  # in the paused trace
RESPONSE_PARTIAL = "tracedagent.response.partial"  # a stream that ended early: what had arrived
PARTIAL_PART, PARTIAL_PART_REASON = "tracedagent.partial", "reason"  # its output message's last part
RETRY_EVENT = "tracedagent.retry"  # a retried Temporal activity's span (its attempt)

# --- MCP (tracedagent.mcp): the MCP semantic conventions' names -------------------------
# Written out rather than imported: the semantic-conventions package has them only from 0.66b0,
# and the lowest version tracedagent supports is older. docs/mcp.md says where each is set.
MCP_METHOD_NAME = "mcp.method.name"
MCP_SESSION_ID = "mcp.session.id"
"""The server's ``Mcp-Session-Id`` over HTTP; over stdio, where the protocol has none, an id
tracedagent gives the connection (one per server process), so spans of one session group."""
MCP_PROTOCOL_VERSION = "mcp.protocol.version"
JSONRPC_REQUEST_ID = "jsonrpc.request.id"
RPC_RESPONSE_STATUS_CODE = "rpc.response.status_code"
"""The JSON-RPC error code a server answered with, as a string."""
NETWORK_TRANSPORT = "network.transport"
NETWORK_TRANSPORT_PIPE = "pipe"
"""``network.transport`` of a stdio server, as the MCP conventions say."""
NETWORK_TRANSPORT_TCP = "tcp"
"""``network.transport`` of a streamable-HTTP server."""
MCP_INITIALIZE = "initialize"
MCP_TOOLS_LIST = "tools/list"
MCP_TOOLS_CALL = "tools/call"
MCP_SERVER = "tracedagent.mcp.server"
"""The name an ``MCPServer`` was given (or its command's, or its URL's host): which server, where
a stdio server has no address."""
MCP_TOOL_NAME = "tracedagent.mcp.tool_name"
"""On an MCP tool's ``execute_tool`` span when the registry knows it under a prefixed name: the
name the server knows it by."""
MCP_CONNECT_SPAN_NAME = "mcp.connect"
"""The span a session's ``initialize`` and first ``tools/list`` nest in when it is opened outside
any span (outside a run); inside one they nest there instead."""
MCP_RESTART = "tracedagent.mcp.restart"
"""On a session's ``mcp.connect`` / ``initialize`` span: ``true`` when the connection replaces one
that was lost (a stdio server that exited is started again)."""

# --- Metrics -----------------------------------------------------------------------
METRIC_RUNS = "tracedagent.runs"
METRIC_TOOL_CALLS = "tracedagent.tool.calls"
METRIC_COST = "tracedagent.cost"
METRIC_RUN_STEPS = "tracedagent.run.steps"
METRIC_APPROVAL_WAIT = "tracedagent.approval.wait"
"""Seconds from a run's pause for approval to its resumption (recorded as it resumes)."""
METRIC_APPROVAL_DECISIONS = "tracedagent.approval.decisions"
"""Decisions on waiting calls, by agent, tool and ``tracedagent.approval.decision``."""
METRIC_TOKEN_USAGE = "gen_ai.client.token.usage"
METRIC_OPERATION_DURATION = "gen_ai.client.operation.duration"
METRIC_TIME_TO_FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
"""Streamed model calls only, as the conventions say; its buckets are the duration's."""

TOKEN_USAGE_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576,
                       4194304, 16777216, 67108864)
"""Bucket boundaries the GenAI semantic conventions specify for ``gen_ai.client.token.usage``."""
OPERATION_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12,
                              10.24, 20.48, 40.96, 81.92)
"""Bucket boundaries the GenAI semantic conventions specify for ``gen_ai.client.operation.duration``."""
RUN_STEPS_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100)
APPROVAL_WAIT_BUCKETS = (1, 10, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 259200, 604800)
"""A second to a week: people answer in minutes to days."""

UNKNOWN_TOOL_LABEL = "_OTHER"
"""Metric label for a tool name the registry does not know: the model chooses such names,
so recording them verbatim would let a model (or an injection) explode metric cardinality."""

# --- Environment variables ---------------------------------------------------------
ENV_CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
ENV_CONTENT_MAX_LENGTH = "TRACEDAGENT_CONTENT_MAX_LENGTH"
ENV_GEN_AI_USAGE_COST = "TRACEDAGENT_GEN_AI_USAGE_COST"
"""``true`` (``1``, ``yes``, ``on``) also writes the proposal's ``gen_ai.usage.cost`` on chat spans."""
ENV_PROVIDER_SPANS = "TRACEDAGENT_PROVIDER_SPANS"
"""``suppress`` (the default) or ``keep``: whether a provider instrumentation's spans under a
chat span are suppressed; ``Agent(provider_spans=...)`` wins."""
PROVIDER_SPANS_SUPPRESS = "suppress"
PROVIDER_SPANS_KEEP = "keep"
ENV_CHECKPOINT_KEY = "TRACEDAGENT_CHECKPOINT_KEY"
"""The keys that sign and verify checkpoints when ``Agent(checkpoint_key=...)`` is not given:
comma-separated, each at least 32 bytes; the first signs, every one verifies (rotation)."""
ENV_ATTRIBUTE_VALUE_LENGTH_LIMIT = "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"
ENV_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT = "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT"
"""The SDK cuts every string attribute at these (the span one first): captured content is cut
to fit inside them, so that the SDK's cut never breaks its JSON."""
# The standard variables ``configure()`` reads itself (endpoints, protocols, timeouts,
# compression and whether gRPC uses TLS are resolved here and passed to the exporters).
# Others it leaves to the SDK, which reads them on its own: OTEL_BSP_*,
# OTEL_METRIC_EXPORT_*, certificates (docs/configure.md).
ENV_SERVICE_NAME = "OTEL_SERVICE_NAME"
ENV_OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
ENV_OTLP_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
ENV_OTLP_METRICS_ENDPOINT = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
ENV_OTLP_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
ENV_OTLP_TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
ENV_OTLP_METRICS_PROTOCOL = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"
ENV_OTLP_HEADERS = "OTEL_EXPORTER_OTLP_HEADERS"
ENV_OTLP_TRACES_HEADERS = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
ENV_OTLP_METRICS_HEADERS = "OTEL_EXPORTER_OTLP_METRICS_HEADERS"
ENV_OTLP_TIMEOUT = "OTEL_EXPORTER_OTLP_TIMEOUT"
ENV_OTLP_TRACES_TIMEOUT = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
ENV_OTLP_METRICS_TIMEOUT = "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"
ENV_OTLP_COMPRESSION = "OTEL_EXPORTER_OTLP_COMPRESSION"
ENV_OTLP_TRACES_COMPRESSION = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"
ENV_OTLP_METRICS_COMPRESSION = "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION"
ENV_OTLP_INSECURE = "OTEL_EXPORTER_OTLP_INSECURE"
ENV_OTLP_TRACES_INSECURE = "OTEL_EXPORTER_OTLP_TRACES_INSECURE"
ENV_OTLP_METRICS_INSECURE = "OTEL_EXPORTER_OTLP_METRICS_INSECURE"
ENV_METRICS_EXPORTER = "OTEL_METRICS_EXPORTER"
ENV_TRACES_EXPORTER = "OTEL_TRACES_EXPORTER"

ENV_HANDLE_SIGTERM = "TRACEDAGENT_HANDLE_SIGTERM"
"""``false`` (or ``0``, ``no``, ``off``): ``configure()`` installs no SIGTERM handler; its
``handle_sigterm`` argument overrides it."""

# --- Export defaults (configure) -------------------------------------------------------
PROTOCOL_GRPC = "grpc"
PROTOCOL_HTTP = "http/protobuf"
DEFAULT_PROTOCOL = PROTOCOL_GRPC
"""The Python SDK's default OTLP protocol (its ``otlp`` exporter is the gRPC one)."""
DEFAULT_GRPC_ENDPOINT = "http://127.0.0.1:4317"
DEFAULT_HTTP_ENDPOINT = "http://127.0.0.1:4318"
"""127.0.0.1 rather than the SDK's ``localhost``, which may resolve to ``::1`` first while
the local collector listens on IPv4 loopback only."""
HTTP_TRACES_PATH = "v1/traces"
HTTP_METRICS_PATH = "v1/metrics"
DEFAULT_SERVICE_NAME = "tracedagent"
"""``service.name`` when none is given: what ``configure()`` uses and ``tracedagent traces`` searches."""
DEFAULT_EXPORT_TIMEOUT = 2.0
"""Seconds one OTLP export may take, retries included, unless the standard timeout variables
say otherwise (the SDK's default is 10 s)."""
DEFAULT_SHUTDOWN_TIMEOUT = 2.0
"""Seconds an explicit ``Telemetry.shutdown()`` or ``force_flush()`` waits at most."""
EXIT_FLUSH_TIMEOUT = 1.5
"""Seconds the ``atexit`` shutdown waits at most: closing the exporters and tearing down the
interpreter take ~0.1 s more, and process exit must stay within 2 s of a run without telemetry."""
EXPORT_PROBE_TIMEOUT = 1.0
"""Seconds the exporters' wrapper waits, after a failed export, for the endpoint to answer
the empty export that tells what happened (once per outage)."""

# --- Bounds ------------------------------------------------------------------------
DEFAULT_CONTENT_MAX_LENGTH = 32768
"""Captured content (when opted in) is cut to this many characters per attribute, inside its
JSON. Measured (docs/benchmarks.md): every demo run replays at it, the call flood's 200-call
turn (about 15,000 characters) and a 20 KB model turn included; 4096 cut the call flood."""
MAX_NAME_LENGTH = 128
"""Model-chosen strings (tool names, call ids) are truncated to this length in telemetry."""
MAX_LIST_ITEMS = 256
"""Tool-name arrays on spans keep at most this many entries."""
TRUNCATION_MARK = "...[truncated]"
"""Ends a name or a status description tracedagent had to cut (captured content is cut inside
its JSON instead, and says so with ``CONTENT_TRUNCATED``)."""
CONTENT_TRUNCATED = "tracedagent.content.truncated"
"""On a span with captured content: the names of its content attributes that were cut at the
capture limit (still JSON; replay refuses what it lists)."""
CONTENT_CUT_MARK = " [cut: {shown:,} of {length:,} characters shown]"  # ends a cut string
CONTENT_OMITTED_PART = "omitted"
"""The type of the message part standing for content left out at the capture limit (its
``count`` says how many messages)."""
TOO_DEEP_MARK = "[content nested too deeply to serialise]"
MAX_DESCRIPTION_LENGTH = 1024
"""A span status description (a stopped run's output sentence) is truncated to this length."""

# Your own attributes on a run (``attributes=``, ``Agent(attributes_from_baggage=...)``): the
# keys are the user's, never named here; these bound them (``_core/_attributes.py``).
MAX_RUN_ATTRIBUTES = 32
"""At most this many of your own attributes on one run span (the agent's defaults and the
call's together): more is ``BadAttributes`` at the call."""
MAX_ATTRIBUTE_KEY_LENGTH = MAX_NAME_LENGTH
"""A longer key is refused (cut, two keys could become one)."""
MAX_ATTRIBUTE_VALUE_LENGTH = MAX_DESCRIPTION_LENGTH
"""A longer string value is cut to this, ending with ``TRUNCATION_MARK``, as a description is."""
MAX_ATTRIBUTE_ITEMS = 32
"""A sequence value holds at most this many items: more is refused."""
RESERVED_ATTRIBUTE_PREFIXES = ("gen_ai.", "tracedagent.", "otel.")
"""Keys under these prefixes are the conventions', tracedagent's and OpenTelemetry's own: refused
(compared without case), so that your attributes never shadow what a run span says of itself."""

# --- Command line ------------------------------------------------------------------
DEFAULT_JAEGER_URL = "http://localhost:16686"
"""Where ``tracedagent traces``/``trace`` query Jaeger, and the base of the links ``demo`` prints."""
ENV_JAEGER_URL = "TRACEDAGENT_JAEGER_URL"
"""Overrides ``DEFAULT_JAEGER_URL`` for the command line (``--jaeger`` overrides both)."""

# ``tracedagent doctor``: the rest of the local stack (collector/README.md lists the ports)
DEFAULT_COLLECTOR_HEALTH_URL = "http://127.0.0.1:13133/"
"""The collector's ``health_check`` extension."""
ENV_COLLECTOR_HEALTH_URL = "TRACEDAGENT_COLLECTOR_HEALTH_URL"
"""Overrides ``DEFAULT_COLLECTOR_HEALTH_URL`` (``--collector-health`` overrides both)."""
DEFAULT_PROMETHEUS_URL = "http://127.0.0.1:9090"
ENV_PROMETHEUS_URL = "TRACEDAGENT_PROMETHEUS_URL"
"""Overrides ``DEFAULT_PROMETHEUS_URL`` (``--prometheus`` overrides both)."""
DEFAULT_ALERTMANAGER_URL = "http://127.0.0.1:9093"
ENV_ALERTMANAGER_URL = "TRACEDAGENT_ALERTMANAGER_URL"
"""Overrides ``DEFAULT_ALERTMANAGER_URL`` (``--alertmanager`` overrides both)."""
ENV_TEMPORAL_MAX_PAYLOAD = "TRACEDAGENT_TEMPORAL_MAX_PAYLOAD"
"""Bytes one payload a run's workflow or activity sends may have (``ActivitySettings.max_payload``
when not given): the Temporal server's own limit, which is its configuration (``limit.blobSize.error``)."""
DEFAULT_TEMPORAL_MAX_PAYLOAD = 2 * 1024 * 1024
"""Temporal's default payload limit: 2 MB."""
ENV_TEMPORAL_ADDRESS = "TRACEDAGENT_TEMPORAL_ADDRESS"
"""The Temporal frontend (``HOST:PORT``, gRPC) that ``tracedagent.temporal``'s workers and clients
use; when it is set (or ``--temporal`` is given), ``tracedagent doctor`` checks it too."""
DEFAULT_TEMPORAL_ADDRESS = "127.0.0.1:7233"
"""The development server ``make stack-up`` starts (``temporal server start-dev``)."""
TEMPORAL_HEALTH_SERVICE = "temporal.api.workflowservice.v1.WorkflowService"
"""The service name Temporal's frontend answers the standard gRPC health check for."""
DOCTOR_TIMEOUT = 2.0
"""Seconds each of ``tracedagent doctor``'s checks may take; they run at once, so this bounds the whole."""

from ._evaluation_names import *  # noqa: E402,F403 - tracedagent.evals' names (_evaluation_names.py)
__all__ = sorted(name for name in dir() if name.isupper() and not name.startswith("_"))
