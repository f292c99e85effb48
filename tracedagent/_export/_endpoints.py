"""Where telemetry goes: one resolved OTLP target per signal, the URL helpers every module
that shows or asks an endpoint shares, and how to start what should be listening there.

``configure()`` builds its exporters from ``export_target`` and ``tracedagent doctor``
checks the same targets, so the two can never disagree about where telemetry goes. The
command line and the Jaeger client use the URL helpers. None of them needs the SDK for
this, so this module imports no part of it (and no exporter): the standard library, the
names in ``_names``, ``_secrets``' rule for which names mark a credential (itself standard
library only), and the OpenTelemetry API's header parser, the one the SDK exporters use.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence
from urllib.parse import SplitResult, unquote_plus, urlsplit

from opentelemetry.util.re import parse_env_headers

from .._core import _names as N
from .._core._secrets import MASK, Redactor

__all__ = ["COMPOSE_UP", "LOG_START_HINT", "PROTOCOLS", "TLS_ADVICE", "ExportTarget", "export_target",
           "in_a_clone", "metrics_wanted", "secret_values", "shown_url", "split_url", "start_service", "start_the_stack",
           "traces_wanted", "warn_about", "without_credentials"]

_log = logging.getLogger("tracedagent")

PROTOCOLS = (N.PROTOCOL_GRPC, N.PROTOCOL_HTTP)
"""The OTLP protocols tracedagent exports with (the SDK has one exporter class for each)."""


class _Variables(NamedTuple):
    """One signal's standard variables; each falls back to its ``OTEL_EXPORTER_OTLP_*`` form."""

    protocol: str
    endpoint: str
    headers: str
    timeout: str
    compression: str
    insecure: str


_SIGNAL_VARIABLES = {
    "traces": _Variables(N.ENV_OTLP_TRACES_PROTOCOL, N.ENV_OTLP_TRACES_ENDPOINT, N.ENV_OTLP_TRACES_HEADERS,
                         N.ENV_OTLP_TRACES_TIMEOUT, N.ENV_OTLP_TRACES_COMPRESSION, N.ENV_OTLP_TRACES_INSECURE),
    "metrics": _Variables(N.ENV_OTLP_METRICS_PROTOCOL, N.ENV_OTLP_METRICS_ENDPOINT, N.ENV_OTLP_METRICS_HEADERS,
                          N.ENV_OTLP_METRICS_TIMEOUT, N.ENV_OTLP_METRICS_COMPRESSION, N.ENV_OTLP_METRICS_INSECURE),
}
_HTTP_PATH = {"traces": N.HTTP_TRACES_PATH, "metrics": N.HTTP_METRICS_PATH}
_COMPRESSIONS = {N.PROTOCOL_GRPC: ("gzip", "none"), N.PROTOCOL_HTTP: ("gzip", "deflate", "none")}
"""What each protocol's SDK exporter can compress with (the specification names gzip and none)."""


# --- how to start what should answer -----------------------------------------------------

COMPOSE_UP = "docker compose up -d"
"""Starts the whole stack, in a folder holding its ``docker-compose.yml``."""
_MAKE_STACK_UP = "make stack-up"
"""Starts the same stack as native processes, from a checkout of the repository (no Docker)."""
_WRITE_THE_STACK = "tracedagent stack tracedagent-stack && cd tracedagent-stack"
"""A pip user's way to the compose file: ``tracedagent stack`` writes it (and its configs) into a folder."""
_REPOSITORY = Path(__file__).resolve().parents[2]
"""Where the package sits: the root of a clone (an editable install, or the source tree), or
site-packages for a pip user."""
LOG_START_HINT = f"start it with `{COMPOSE_UP}` (`tracedagent doctor` checks every endpoint)"
"""A library log line's words: an application installed with pip has no Makefile to run."""


def in_a_clone() -> bool:
    """Whether tracedagent runs from a clone of its repository, where ``make stack-up`` and
    collector/README.md exist; a pip user has neither, and is told ``tracedagent stack``."""
    return (_REPOSITORY / "Makefile").is_file() and (_REPOSITORY / "scripts" / "stack.sh").is_file()


def start_the_stack() -> str:
    """The command line's words for starting the whole stack, for a clone or a pip install."""
    if in_a_clone():
        return f"`{_MAKE_STACK_UP}` (no Docker) or `{COMPOSE_UP}`; see collector/README.md"
    return f"`{_WRITE_THE_STACK} && {COMPOSE_UP}` (Docker; the folder's README.md names every service)"


def start_service(compose_service: str) -> str:
    """The command line's words for starting one service of the stack."""
    if in_a_clone():
        return f"start it: `{_MAKE_STACK_UP}` (no Docker) or `{COMPOSE_UP} {compose_service}`"
    return f"start it: `{COMPOSE_UP} {compose_service}` in the folder `tracedagent stack` writes"


TLS_ADVICE = (f"does it serve TLS? for a plaintext collector write http://HOST:PORT, or set "
              f"{N.ENV_OTLP_INSECURE}=true for an endpoint written without a scheme")
"""What to do when a gRPC endpoint asked with TLS does not answer with it."""


# --- one signal's target ------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ExportTarget:
    """Where one signal's OTLP exporter sends, and with what, as ``configure()`` resolves it.

    Everything the SDK exporter would otherwise read from a variable and could not parse
    (a timeout, a compression) or would read differently from the specification (whether
    a gRPC endpoint without a scheme uses TLS) is resolved here and passed to it, so that
    what is shown, what ``tracedagent doctor`` asks and what is exported are the same.
    """

    signal: str
    """``"traces"`` or ``"metrics"``."""
    protocol: str
    """``"grpc"`` or ``"http/protobuf"``."""
    url: str
    """Where exports go. For HTTP the full signal URL (``.../v1/traces``), which may carry
    ``user:password@`` and a query with credentials: show ``shown_url`` instead. For gRPC
    ``http://host:port`` (plaintext) or ``https://host:port`` (TLS): what the exporter dials,
    and how."""
    parts: SplitResult = field(repr=False, compare=False)
    """``url`` parsed (by ``split_url``), once."""
    sdk_endpoint: str
    """What ``configure`` passes to the SDK exporter: the URL for HTTP, ``host:port`` for gRPC
    (whose exporter would dial a ``user:password@`` as part of the host name)."""
    insecure: bool | None = None
    """gRPC: ``True`` for plaintext, ``False`` for TLS, passed to the SDK exporter (``None`` for HTTP,
    where the scheme decides)."""
    compression: str | None = None
    """``"gzip"`` or ``"deflate"``, passed to the SDK exporter; ``None``: uncompressed."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Every header sent: ``OTEL_EXPORTER_OTLP_[SIGNAL_]HEADERS`` with the ``headers``
    argument merged over it (they may hold API keys: never shown)."""
    sdk_headers: Mapping[str, str] | None = field(default=None, repr=False)
    """What ``configure`` passes to the SDK exporter: ``None`` when no argument gave headers
    (the SDK reads the variables itself); else all of ``headers``, since the gRPC exporter
    would drop the variable's headers rather than merge them."""
    sdk_timeout: float
    """Seconds per export that ``configure`` passes to the SDK exporter."""
    secrets: frozenset[str] = field(default=frozenset(), repr=False)
    """What a message about this target must not show: header values, the endpoint's
    ``user:password`` and its query values that name a credential (``?api_key=...``)."""
    notes: tuple[str, ...] = field(default=(), compare=False)
    """Settings that could not be used as given, and what is done instead: one warning each
    (``warn_about``), never quoting an endpoint (it may hold credentials)."""
    endpoint_named: bool
    """An argument or variable named the endpoint (``False``: tracedagent's default)."""
    protocol_named: bool
    """An argument or variable named the protocol (``False``: the default, gRPC)."""

    @property
    def shown_url(self) -> str:
        """``url`` without secrets (``shown_url``)."""
        return _shown(self.url, self.parts)

    @property
    def where(self) -> str:
        """``scheme://host:port``, for messages: no path, no ``user:password@``."""
        host = self.parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        return f"{self.parts.scheme}://{host}" + (f":{self.parts.port}" if self.parts.port else "")


def export_target(signal: str, *, endpoint: str | None = None, protocol: str | None = None,
                  headers: Mapping[str, str] | None = None, timeout: float | None = None) -> ExportTarget:
    """Where, how and with what ``configure(endpoint=..., protocol=..., headers=...,
    export_timeout=...)`` sends ``signal`` (``"traces"`` or ``"metrics"``): an argument, else
    the standard variables, else tracedagent's default. A variable set to an empty string
    counts as unset, as the specification says.

    Raises ``ValueError`` naming the argument or variable when the endpoint is not a URL.
    A variable whose value cannot be used is not an error - the application must not fail
    for its telemetry - but a note on the target (``warn_about`` logs it) and the default.
    """
    variables = _SIGNAL_VARIABLES[signal]
    notes: list[str] = []
    env_protocol = None if protocol else _protocol_from_env(variables.protocol, notes)
    resolved = protocol or env_protocol or N.DEFAULT_PROTOCOL
    http = resolved == N.PROTOCOL_HTTP

    def signal_url(base: str) -> str:
        """For HTTP, the signal's path appended to the base URL's path, before its query."""
        if not http:
            return base
        url, mark, query = base.partition("?")
        return f"{url.rstrip('/')}/{_HTTP_PATH[signal]}{mark}{query}"

    # An argument, else the signal's variable (used as it is), else the base variable (the
    # signal path appended for HTTP), else tracedagent's default.
    if endpoint:
        source, given = "endpoint", signal_url(endpoint)
    elif os.environ.get(variables.endpoint):
        source, given = variables.endpoint, os.environ[variables.endpoint]
    elif os.environ.get(N.ENV_OTLP_ENDPOINT):
        source, given = N.ENV_OTLP_ENDPOINT, signal_url(os.environ[N.ENV_OTLP_ENDPOINT])
    else:
        source, given = "the default", signal_url(N.DEFAULT_HTTP_ENDPOINT if http else N.DEFAULT_GRPC_ENDPOINT)
    try:
        given_parts = split_url(given)
    except ValueError as exc:  # say where the bad URL came from, not what it is: it may hold credentials
        raise ValueError(f"{source} is {exc}") from None

    from_variables = parse_env_headers(os.environ.get(variables.headers) or os.environ.get(N.ENV_OTLP_HEADERS, ""),
                                       liberal=True)
    sdk_headers = {**from_variables, **{k.lower(): v for k, v in headers.items()}} if headers else None
    sent_headers = sdk_headers if sdk_headers is not None else from_variables

    insecure = None
    url, sdk_endpoint = given, given
    if not http:
        url, sdk_endpoint, insecure = _grpc_address(given, given_parts, source, variables, notes)
    return ExportTarget(signal=signal, protocol=resolved, url=url, parts=split_url(url), sdk_endpoint=sdk_endpoint,
                        insecure=insecure, compression=_compression(variables.compression, resolved, notes),
                        headers=sent_headers, sdk_headers=sdk_headers,
                        sdk_timeout=timeout if timeout is not None else _timeout(variables.timeout, notes),
                        secrets=_secrets(given_parts, sent_headers), notes=tuple(notes),
                        endpoint_named=source != "the default",
                        protocol_named=bool(protocol) or env_protocol is not None)


def warn_about(targets: Sequence[ExportTarget]) -> None:
    """Log each distinct note of ``targets`` once: a variable both signals read is one warning."""
    for note in dict.fromkeys(note for target in targets for note in target.notes):
        _log.warning("%s", note)


def _grpc_address(given: str, parts: SplitResult, source: str, variables: _Variables,
                  notes: list[str]) -> tuple[str, str, bool]:
    """A gRPC endpoint as the SDK exporter dials it: ``(url, host:port, insecure)``.

    The exporter dials ``host:port``. ``https://`` means TLS and ``http://`` plaintext; without
    either (``host:4317``), TLS unless ``OTEL_EXPORTER_OTLP_[SIGNAL_]INSECURE`` is true - the
    specification's rule, which the SDK follows only in part (it applies the variable to
    ``http://`` endpoints too), so the answer is passed to it. A ``user:password@`` has no
    place in a gRPC call and would be dialled as part of the host name: it is left out.
    Another scheme (``unix:``, ``dns:``) is a gRPC target passed on as it is.
    """
    scheme = given.partition("://")[0].lower() if "://" in given else ""
    if scheme not in ("", "http", "https"):
        return given, given, _insecure_from_env(variables.insecure, notes)
    address = parts.netloc.rpartition("@")[2]
    if parts.username or parts.password:
        notes.append(f"tracedagent: the gRPC endpoint ({source}) carries user:password@, which a gRPC call has "
                     f"no place for: exporting without them; send credentials as a header (headers=..., or "
                     f"{N.ENV_OTLP_HEADERS})")
    insecure = scheme == "http" if scheme else _insecure_from_env(variables.insecure, notes)
    return f"{'http' if insecure else 'https'}://{address}", address, insecure


def _first_set(signal_variable: str, base_variable: str) -> tuple[str, str] | None:
    """``(variable, value)`` of the first of the two that is set and not empty."""
    for variable in (signal_variable, base_variable):
        value = os.environ.get(variable, "").strip()
        if value:
            return variable, value
    return None


def _protocol_from_env(signal_variable: str, notes: list[str]) -> str | None:
    """The protocol a variable names (a wrong value is noted and means the default);
    ``None`` when neither variable is set."""
    found = _first_set(signal_variable, N.ENV_OTLP_PROTOCOL)
    if found is None:
        return None
    variable, value = found
    if value in PROTOCOLS:
        return value
    notes.append(f"tracedagent: {variable}={value!r} is not one of {PROTOCOLS}; using {N.DEFAULT_PROTOCOL}")
    return N.DEFAULT_PROTOCOL


def _timeout(signal_variable: str, notes: list[str]) -> float:
    """Seconds per export from the variables (seconds, as the Python SDK reads them), else
    tracedagent's default; a value that is not a positive number is noted and means the default."""
    found = _first_set(signal_variable, N.ENV_OTLP_TIMEOUT)
    if found is None:
        return N.DEFAULT_EXPORT_TIMEOUT
    variable, value = found
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if math.isfinite(seconds) and seconds > 0:
        return seconds
    notes.append(f"tracedagent: {variable}={value!r} is not a number of seconds above 0; "
                 f"using {N.DEFAULT_EXPORT_TIMEOUT:g} s")
    return N.DEFAULT_EXPORT_TIMEOUT


def _compression(signal_variable: str, protocol: str, notes: list[str]) -> str | None:
    """The compression the variables name, if the protocol's exporter has it; else none (noted)."""
    found = _first_set(signal_variable, N.ENV_OTLP_COMPRESSION)
    if found is None:
        return None
    variable, value = found
    if value.lower() in _COMPRESSIONS[protocol]:
        return None if value.lower() == "none" else value.lower()
    notes.append(f"tracedagent: {variable}={value!r} is not one of {_COMPRESSIONS[protocol]} for {protocol}; "
                 f"exporting uncompressed")
    return None


def _insecure_from_env(signal_variable: str, notes: list[str]) -> bool:
    """``OTEL_EXPORTER_OTLP_[SIGNAL_]INSECURE``: true (any case) or else false, as the
    specification reads a boolean; a value that is neither true nor false is noted."""
    found = _first_set(signal_variable, N.ENV_OTLP_INSECURE)
    if found is None:
        return False
    variable, value = found
    if value.lower() not in ("true", "false"):
        notes.append(f"tracedagent: {variable}={value!r} is neither true nor false; using false (TLS)")
    return value.lower() == "true"


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


def shown_url(url: str) -> str:
    """``url`` as it may be shown: without its ``user:password@``, and with ``***`` for the
    value of every query parameter whose name says it is a credential (``api_key``,
    ``token``... as ``_secrets.Redactor.names_a_secret`` tells them)."""
    return _shown(url, split_url(url))


def without_credentials(url: str) -> str:
    """``url`` without its ``user:password@``, if it has one: what a request is sent to (the
    credentials travel as a header). To show a URL, use ``shown_url``."""
    return _credentials_removed(url, split_url(url))


def secret_values(url: str, headers: Mapping[str, str]) -> frozenset[str]:
    """What a message must not carry: header values, URL credentials and query values that
    name a credential (``_secrets.redact`` blanks those long enough to be secrets)."""
    return _secrets(split_url(url), headers)


def _credentials_removed(url: str, parts: SplitResult) -> str:
    if not (parts.username or parts.password):
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def _query(parts: SplitResult) -> list[tuple[str, str, str]]:
    """The query's parameters as ``(name, "=", value)`` (``"="`` and value empty when it has none)."""
    return [pair.partition("=") for pair in parts.query.split("&")] if parts.query else []


def _names_a_credential(name: str, value: str) -> bool:
    """A query parameter whose name says its value is a credential (``_secrets``' rule for keys)."""
    return bool(value) and Redactor.names_a_secret(unquote_plus(name))


def _shown(url: str, parts: SplitResult) -> str:
    if not any(_names_a_credential(name, value) for name, _, value in _query(parts)):
        return _credentials_removed(url, parts)
    query = "&".join(f"{name}={MASK}" if _names_a_credential(name, value) else f"{name}{sep}{value}"
                     for name, sep, value in _query(parts))
    return parts._replace(netloc=parts.netloc.rpartition("@")[2], query=query).geturl()


def _secrets(parts: SplitResult, headers: Mapping[str, str]) -> frozenset[str]:
    query = {form for name, _, value in _query(parts) if _names_a_credential(name, value)
             for form in (value, unquote_plus(value))}  # as written in the URL, and as a server may echo it
    return frozenset(headers.values()) | {part for part in (parts.username, parts.password) if part} | query
