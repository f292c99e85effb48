"""The names ``_core/_names.py`` spells out are the ones the OpenTelemetry packages define.

``_core`` imports only the standard library, so the semantic conventions' attribute and metric
names and the SDK's environment variables are written there as strings; this holds each to its
source, so that a typo, or a name the conventions renamed, fails here rather than in a backend.
"""

from __future__ import annotations

from opentelemetry import environment_variables as api_env
from opentelemetry.sdk import environment_variables as sdk_env
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics as gen_ai_metrics
from opentelemetry.semconv.attributes import error_attributes as error
from opentelemetry.semconv.attributes import network_attributes as network
from opentelemetry.semconv.attributes import server_attributes as server

from tracedagent._core import _names as N

SOURCES = {
    "GEN_AI_OPERATION_NAME": (gen_ai, "GEN_AI_OPERATION_NAME"),
    "GEN_AI_PROVIDER_NAME": (gen_ai, "GEN_AI_PROVIDER_NAME"),
    "GEN_AI_AGENT_NAME": (gen_ai, "GEN_AI_AGENT_NAME"),
    "GEN_AI_AGENT_ID": (gen_ai, "GEN_AI_AGENT_ID"),
    "GEN_AI_AGENT_DESCRIPTION": (gen_ai, "GEN_AI_AGENT_DESCRIPTION"),
    "GEN_AI_AGENT_VERSION": (gen_ai, "GEN_AI_AGENT_VERSION"),
    "GEN_AI_REQUEST_MODEL": (gen_ai, "GEN_AI_REQUEST_MODEL"),
    "GEN_AI_REQUEST_MAX_TOKENS": (gen_ai, "GEN_AI_REQUEST_MAX_TOKENS"),
    "GEN_AI_REQUEST_TEMPERATURE": (gen_ai, "GEN_AI_REQUEST_TEMPERATURE"),
    "GEN_AI_RESPONSE_MODEL": (gen_ai, "GEN_AI_RESPONSE_MODEL"),
    "GEN_AI_RESPONSE_ID": (gen_ai, "GEN_AI_RESPONSE_ID"),
    "GEN_AI_RESPONSE_FINISH_REASONS": (gen_ai, "GEN_AI_RESPONSE_FINISH_REASONS"),
    "GEN_AI_USAGE_INPUT_TOKENS": (gen_ai, "GEN_AI_USAGE_INPUT_TOKENS"),
    "GEN_AI_USAGE_OUTPUT_TOKENS": (gen_ai, "GEN_AI_USAGE_OUTPUT_TOKENS"),
    "GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS": (gen_ai, "GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS"),
    "GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS": (gen_ai, "GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS"),
    "GEN_AI_TOKEN_TYPE": (gen_ai, "GEN_AI_TOKEN_TYPE"),
    "GEN_AI_CONVERSATION_ID": (gen_ai, "GEN_AI_CONVERSATION_ID"),
    "GEN_AI_OUTPUT_TYPE": (gen_ai, "GEN_AI_OUTPUT_TYPE"),
    "GEN_AI_TOOL_NAME": (gen_ai, "GEN_AI_TOOL_NAME"),
    "GEN_AI_TOOL_CALL_ID": (gen_ai, "GEN_AI_TOOL_CALL_ID"),
    "GEN_AI_TOOL_TYPE": (gen_ai, "GEN_AI_TOOL_TYPE"),
    "GEN_AI_INPUT_MESSAGES": (gen_ai, "GEN_AI_INPUT_MESSAGES"),
    "GEN_AI_OUTPUT_MESSAGES": (gen_ai, "GEN_AI_OUTPUT_MESSAGES"),
    "GEN_AI_SYSTEM_INSTRUCTIONS": (gen_ai, "GEN_AI_SYSTEM_INSTRUCTIONS"),
    "GEN_AI_TOOL_CALL_ARGUMENTS": (gen_ai, "GEN_AI_TOOL_CALL_ARGUMENTS"),
    "GEN_AI_TOOL_CALL_RESULT": (gen_ai, "GEN_AI_TOOL_CALL_RESULT"),
    "GEN_AI_REQUEST_STREAM": (gen_ai, "GEN_AI_REQUEST_STREAM"),
    "GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK": (gen_ai, "GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK"),
    "ERROR_TYPE": (error, "ERROR_TYPE"),
    "SERVER_ADDRESS": (server, "SERVER_ADDRESS"),
    "SERVER_PORT": (server, "SERVER_PORT"),
    "NETWORK_TRANSPORT": (network, "NETWORK_TRANSPORT"),
    "METRIC_TOKEN_USAGE": (gen_ai_metrics, "GEN_AI_CLIENT_TOKEN_USAGE"),
    "METRIC_OPERATION_DURATION": (gen_ai_metrics, "GEN_AI_CLIENT_OPERATION_DURATION"),
    "METRIC_TIME_TO_FIRST_CHUNK": (gen_ai_metrics, "GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK"),
    "ENV_ATTRIBUTE_VALUE_LENGTH_LIMIT": (sdk_env, "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
    "ENV_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": (sdk_env, "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT"),
    "ENV_SERVICE_NAME": (sdk_env, "OTEL_SERVICE_NAME"),
    "ENV_OTLP_ENDPOINT": (sdk_env, "OTEL_EXPORTER_OTLP_ENDPOINT"),
    "ENV_OTLP_TRACES_ENDPOINT": (sdk_env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
    "ENV_OTLP_METRICS_ENDPOINT": (sdk_env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
    "ENV_OTLP_PROTOCOL": (sdk_env, "OTEL_EXPORTER_OTLP_PROTOCOL"),
    "ENV_OTLP_TRACES_PROTOCOL": (sdk_env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
    "ENV_OTLP_METRICS_PROTOCOL": (sdk_env, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"),
    "ENV_OTLP_HEADERS": (sdk_env, "OTEL_EXPORTER_OTLP_HEADERS"),
    "ENV_OTLP_TRACES_HEADERS": (sdk_env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
    "ENV_OTLP_METRICS_HEADERS": (sdk_env, "OTEL_EXPORTER_OTLP_METRICS_HEADERS"),
    "ENV_OTLP_TIMEOUT": (sdk_env, "OTEL_EXPORTER_OTLP_TIMEOUT"),
    "ENV_OTLP_TRACES_TIMEOUT": (sdk_env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"),
    "ENV_OTLP_METRICS_TIMEOUT": (sdk_env, "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"),
    "ENV_OTLP_COMPRESSION": (sdk_env, "OTEL_EXPORTER_OTLP_COMPRESSION"),
    "ENV_OTLP_TRACES_COMPRESSION": (sdk_env, "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"),
    "ENV_OTLP_METRICS_COMPRESSION": (sdk_env, "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION"),
    "ENV_OTLP_INSECURE": (sdk_env, "OTEL_EXPORTER_OTLP_INSECURE"),
    "ENV_OTLP_TRACES_INSECURE": (sdk_env, "OTEL_EXPORTER_OTLP_TRACES_INSECURE"),
    "ENV_OTLP_METRICS_INSECURE": (sdk_env, "OTEL_EXPORTER_OTLP_METRICS_INSECURE"),
    "ENV_METRICS_EXPORTER": (api_env, "OTEL_METRICS_EXPORTER"),
    "ENV_TRACES_EXPORTER": (api_env, "OTEL_TRACES_EXPORTER"),
}
"""Each name ``_names`` takes from an OpenTelemetry package: the module and its constant."""

NEWER = {"GEN_AI_REQUEST_STREAM", "GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK", "METRIC_TIME_TO_FIRST_CHUNK"}
"""Names only newer releases of the semantic-conventions package define (than the lowest
tracedagent supports): checked where the installed one has them."""


def test_every_name_taken_from_opentelemetry_is_spelled_as_it_defines_it() -> None:
    wrong = {}
    for name, (module, constant) in SOURCES.items():
        if name in NEWER and not hasattr(module, constant):
            continue
        if getattr(N, name) != getattr(module, constant):
            wrong[name] = (getattr(N, name), getattr(module, constant))
    assert wrong == {}

