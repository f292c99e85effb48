"""Where telemetry goes: one resolved OTLP target per signal, the URL helpers every module
that shows or asks an endpoint shares, and how to start what should be listening there.

``configure()`` builds its exporters from ``export_target`` and ``tracedagent doctor``
checks the same targets, so the two can never disagree about where telemetry goes. The
command line and the Jaeger client use the URL helpers. None of them needs the SDK for
this, so this module imports no part of it (and no exporter): the standard library, the
names in ``_names`` and the OpenTelemetry API's header parser, the one the SDK exporters use.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple
from urllib.parse import SplitResult, urlsplit

from opentelemetry.util.re import parse_env_headers

from . import _names as N

__all__ = ["COMPOSE_UP", "LOG_START_HINT", "PROTOCOLS", "START_THE_STACK", "ExportTarget", "export_target",
           "metrics_wanted", "secret_values", "split_url", "start_service", "traces_wanted", "without_credentials"]

_log = logging.getLogger("tracedagent")

PROTOCOLS = (N.PROTOCOL_GRPC, N.PROTOCOL_HTTP)
"""The OTLP protocols tracedagent exports with (the SDK has one exporter class for each)."""


class _Variables(NamedTuple):
    """One signal's standard variables; each falls back to its ``OTEL_EXPORTER_OTLP_*`` form."""

    protocol: str
    endpoint: str
    headers: str
    timeout: str


_SIGNAL_VARIABLES = {
    "traces": _Variables(N.ENV_OTLP_TRACES_PROTOCOL, N.ENV_OTLP_TRACES_ENDPOINT, N.ENV_OTLP_TRACES_HEADERS,
                         N.ENV_OTLP_TRACES_TIMEOUT),
    "metrics": _Variables(N.ENV_OTLP_METRICS_PROTOCOL, N.ENV_OTLP_METRICS_ENDPOINT, N.ENV_OTLP_METRICS_HEADERS,
                          N.ENV_OTLP_METRICS_TIMEOUT),
}
_HTTP_PATH = {"traces": N.HTTP_TRACES_PATH, "metrics": N.HTTP_METRICS_PATH}


# --- how to start what should answer -----------------------------------------------------

COMPOSE_UP = "docker compose up -d"
"""Starts the whole stack from the repository's ``docker-compose.yml``."""
_MAKE_STACK_UP = "make stack-up"
"""Starts the same stack as native processes, from a checkout of the repository (no Docker)."""
START_THE_STACK = f"`{_MAKE_STACK_UP}` (no Docker) or `{COMPOSE_UP}`"
"""The command line's words for starting the whole stack (collector/README.md's)."""
LOG_START_HINT = f"start it with `{COMPOSE_UP}` (`tracedagent doctor` checks every endpoint)"
"""A library log line's words: an application installed with pip has no Makefile to run."""


def start_service(compose_service: str) -> str:
    """The command line's words for starting one service of the stack."""
    return f"start it: `{_MAKE_STACK_UP}` (no Docker) or `{COMPOSE_UP} {compose_service}`"


# --- one signal's target ------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ExportTarget:
    """Where one signal's OTLP exporter sends, and with what, as ``configure()`` resolves it."""

    signal: str
    """``"traces"`` or ``"metrics"``."""
    protocol: str
    """``"grpc"`` or ``"http/protobuf"``."""
    url: str
    """Where exports go: for HTTP the full signal URL (``.../v1/traces``). It may carry
    ``user:password@``; show ``shown_url`` instead."""
    parts: SplitResult = field(repr=False, compare=False)
    """``url`` parsed (by ``split_url``), once."""
    sdk_endpoint: str | None
    """What ``configure`` passes to the SDK exporter: ``None`` when a variable names the
    endpoint, which the SDK then reads itself."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Every header sent: ``OTEL_EXPORTER_OTLP_[SIGNAL_]HEADERS`` with the ``headers``
    argument merged over it (they may hold API keys: never shown)."""
    sdk_headers: Mapping[str, str] | None = field(default=None, repr=False)
    """What ``configure`` passes to the SDK exporter: ``None`` when no argument gave headers
    (the SDK reads the variables itself); else all of ``headers``, since the gRPC exporter
    would drop the variable's headers rather than merge them."""
    sdk_timeout: float | None = None
    """Seconds per export that ``configure`` passes to the SDK exporter: ``None`` when a
    variable names it, which the SDK then reads itself."""
    endpoint_named: bool
    """An argument or variable named the endpoint (``False``: tracedagent's default)."""
    protocol_named: bool
    """An argument or variable named the protocol (``False``: the default, gRPC)."""

    @property
    def shown_url(self) -> str:
        """``url`` without its ``user:password@``."""
        return _credentials_removed(self.url, self.parts)

    @property
    def where(self) -> str:
        """``scheme://host:port``, for messages: no path, no ``user:password@``."""
        host = self.parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        return f"{self.parts.scheme}://{host}" + (f":{self.parts.port}" if self.parts.port else "")

    @property
    def secrets(self) -> frozenset[str]:
        """What a message about this target must not show: header values and URL credentials."""
        return _secrets(self.parts, self.headers)


def export_target(signal: str, *, endpoint: str | None = None, protocol: str | None = None,
                  headers: Mapping[str, str] | None = None, timeout: float | None = None) -> ExportTarget:
    """Where, how and with what ``configure(endpoint=..., protocol=..., headers=...,
    export_timeout=...)`` sends ``signal`` (``"traces"`` or ``"metrics"``): an argument, else
    the standard variables, else tracedagent's default.

    Raises ``ValueError`` naming the argument or variable when the endpoint is not a URL.
    """
    variables = _SIGNAL_VARIABLES[signal]
    env_protocol = None if protocol else _protocol_from_env(variables.protocol)
    resolved = protocol or env_protocol or N.DEFAULT_PROTOCOL
    http = resolved == N.PROTOCOL_HTTP

    def signal_url(base: str) -> str:
        return f"{base.rstrip('/')}/{_HTTP_PATH[signal]}" if http else base

    # What to pass: an argument, else nothing when a variable names the endpoint (the SDK
    # reads it, appending the signal path to a base URL), else tracedagent's default.
    sdk_endpoint: str | None
    if endpoint:
        source, sdk_endpoint = "endpoint", signal_url(endpoint)
        url = sdk_endpoint
    elif os.environ.get(variables.endpoint):
        source, sdk_endpoint, url = variables.endpoint, None, os.environ[variables.endpoint]
    elif os.environ.get(N.ENV_OTLP_ENDPOINT):
        source, sdk_endpoint, url = N.ENV_OTLP_ENDPOINT, None, signal_url(os.environ[N.ENV_OTLP_ENDPOINT])
    else:
        source, sdk_endpoint = "the default", signal_url(N.DEFAULT_HTTP_ENDPOINT if http else N.DEFAULT_GRPC_ENDPOINT)
        url = sdk_endpoint
    try:
        parts = split_url(url)
    except ValueError as exc:  # say where the bad URL came from, not what it is: it may hold credentials
        raise ValueError(f"{source} is {exc}") from None

    from_variables = parse_env_headers(os.environ.get(variables.headers) or os.environ.get(N.ENV_OTLP_HEADERS, ""),
                                       liberal=True)
    sdk_headers = {**from_variables, **{k.lower(): v for k, v in headers.items()}} if headers else None
    if timeout is None and not (os.environ.get(variables.timeout) or os.environ.get(N.ENV_OTLP_TIMEOUT)):
        timeout = N.DEFAULT_EXPORT_TIMEOUT
    return ExportTarget(signal=signal, protocol=resolved, url=url, parts=parts, sdk_endpoint=sdk_endpoint,
                        headers=sdk_headers if sdk_headers is not None else from_variables, sdk_headers=sdk_headers,
                        sdk_timeout=timeout, endpoint_named=bool(endpoint) or sdk_endpoint is None,
                        protocol_named=bool(protocol) or env_protocol is not None)


def _protocol_from_env(signal_variable: str) -> str | None:
    """The protocol a variable names (a wrong value is warned about and means the default);
    ``None`` when neither variable is set."""
    for variable in (signal_variable, N.ENV_OTLP_PROTOCOL):
        value = os.environ.get(variable, "").strip()
        if value:
            if value in PROTOCOLS:
                return value
            _log.warning("tracedagent: %s=%r is not one of %s; using %s", variable, value, PROTOCOLS,
                         N.DEFAULT_PROTOCOL)
            return N.DEFAULT_PROTOCOL
    return None


def metrics_wanted(metrics: bool | None) -> bool:
    """The ``metrics`` argument, else on unless ``OTEL_METRICS_EXPORTER=none``."""
    if metrics is not None:
        return metrics
    return os.environ.get(N.ENV_METRICS_EXPORTER, "").strip().lower() != "none"


def traces_wanted() -> bool:
    """Spans are exported unless ``OTEL_TRACES_EXPORTER=none``, which (as in the SDK's own
    auto-configuration) keeps the tracer provider and drops only its exporter."""
    return os.environ.get(N.ENV_TRACES_EXPORTER, "").strip().lower() != "none"


# --- URLs ---------------------------------------------------------------------------------

def split_url(url: str) -> SplitResult:
    """``url`` in parts, ``http://`` assumed when it names no scheme: an OTLP gRPC endpoint is
    often written ``host:4317``, and ``urlsplit`` would take ``host`` for the scheme.

    Raises ``ValueError`` when ``url`` is not one (an unclosed IPv6 ``[``, a port out of
    range...), with a message that quotes no part of it: it may hold credentials.
    """
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
    except ValueError:
        raise ValueError("not a usable URL (expected scheme://host:port)") from None
    try:
        parts.port  # urlsplit checks the port only when it is read
    except ValueError:
        raise ValueError("not a usable URL (its port is not a number from 0 to 65535)") from None
    return parts


def without_credentials(url: str) -> str:
    """``url`` without its ``user:password@``, if it has one."""
    return _credentials_removed(url, split_url(url))


def secret_values(url: str, headers: Mapping[str, str]) -> frozenset[str]:
    """What a message must not carry: header values and URL credentials (``_secrets.redact``
    blanks those long enough to be secrets)."""
    return _secrets(split_url(url), headers)


def _credentials_removed(url: str, parts: SplitResult) -> str:
    if not (parts.username or parts.password):
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def _secrets(parts: SplitResult, headers: Mapping[str, str]) -> frozenset[str]:
    return frozenset(headers.values()) | {part for part in (parts.username, parts.password) if part}
