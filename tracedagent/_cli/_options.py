"""The command line's shared options and argument parsers, each refusing a bad value as a
usage error (exit status 2) before any command runs."""

from __future__ import annotations

import re
from typing import Any, Callable

import click
from opentelemetry.sdk.resources import SERVICE_NAME

from .._core import _names as N
from .._export._configure import resource_for
from .._export._endpoints import split_url

__all__ = ["url", "jaeger_option", "otlp_options", "service_option", "service_name", "trace_id", "since"]


def url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuses, as a usage error, a URL that cannot even be split (``http://[::1``, port 99999)."""
    if value is not None:
        try:
            split_url(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


def jaeger_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--jaeger", "jaeger_url", metavar="URL", envvar=N.ENV_JAEGER_URL,
                        default=N.DEFAULT_JAEGER_URL, show_default=True, callback=url,
                        help=f"Jaeger's query service (env {N.ENV_JAEGER_URL}).")(f)


def service_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--service``: left ``None`` when not given, so that the environment can name it (see
    ``service_name``); an argument wins over the environment only when it is given."""
    return click.option("--service", metavar="NAME", callback=_text,
                        help=f"{what} (default: ${N.ENV_SERVICE_NAME}, else {N.DEFAULT_SERVICE_NAME}).")


def _text(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuses bytes that are not UTF-8 (a shell passes them on as lone surrogates), which
    could go neither into a URL nor onto a span."""
    if value is not None:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise click.BadParameter(f"{value!r} is not UTF-8 text") from None
    return value


def service_name(given: str | None) -> str:
    """``--service`` when given, else the name ``configure()`` gives a service from the
    environment - the same resolution, so ``traces`` finds what ``demo`` sent."""
    return given if given is not None else str(resource_for().attributes[SERVICE_NAME])


def otlp_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--otlp`` and ``--protocol``: left ``None`` when not given, so that ``configure``
    resolves them from the standard variables exactly as it does for any application."""
    f = click.option("--protocol", type=click.Choice([N.PROTOCOL_GRPC, N.PROTOCOL_HTTP]),
                     help=f"OTLP protocol (default: ${N.ENV_OTLP_PROTOCOL}, else {N.DEFAULT_PROTOCOL}); "
                          f"the local collector takes gRPC on 4317 and HTTP on 4318.")(f)
    return click.option("--otlp", "otlp_endpoint", metavar="URL", callback=url,
                        help=f"The collector's OTLP endpoint (default: ${N.ENV_OTLP_ENDPOINT}).")(f)


_TRACE_ID = re.compile(r"^[0-9a-fA-F]{1,32}$")


def trace_id(value: str) -> str:
    if not _TRACE_ID.match(value):
        raise click.BadParameter(f"{value!r} is not a trace id (up to 32 hex digits)")
    return value.lower()


_SINCE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SINCE_DAYS = 10_000
"""The longest ``--since`` (27 years, before any trace): a window longer than the time since
1970 would ask Jaeger for a start before the epoch, and one of 400 nines days overflowed."""


def since(value: str) -> float:
    match = _SINCE.match(value)
    if not match or float(match.group(1)) <= 0:
        raise click.BadParameter(f"{value!r} is not a time span like 30m, 1h or 2d")
    seconds = float(match.group(1)) * _SECONDS[match.group(2)]
    if seconds > MAX_SINCE_DAYS * _SECONDS["d"]:  # also infinity, what float() makes of 400 nines
        raise click.BadParameter(f"{value[:40]!r} reaches back further than {MAX_SINCE_DAYS:,} days")
    return seconds
