"""What the provider adapters share: the missing-SDK message, argument decoding, the server
address, the error for unreadable responses, and keeping keys out of exception text.

Nothing here imports a provider SDK, so ``tracedagent.models`` stays importable without them.
"""

from __future__ import annotations

import json
from typing import Any, Iterable
from urllib.parse import urlsplit

from .._secrets import redact

__all__ = ["MalformedResponseError", "missing_sdk", "client_options", "decode_arguments",
           "encode_arguments", "server_of", "scrub_secrets"]

_DEFAULT_PORTS = {"https": 443, "http": 80}
_MIN_API_KEY_LENGTH = 16
"""Shorter keys (``api_key="ollama"`` for a local server) are placeholders, not secrets;
blanking them would mangle the server's own words in its error messages."""


class MalformedResponseError(ValueError):
    """The provider answered with success, but the body lacks what every response must have.

    The message names only what was missing, never the body: a body can hold prompt text.
    """


def missing_sdk(module: str, extra: str) -> str:
    """The ImportError text for an adapter whose SDK is not installed."""
    return (f"tracedagent.models.{module} needs the official `{extra}` SDK, which is an optional "
            f"dependency: pip install 'tracedagent[{extra}]'")


def client_options(client: Any, **options: Any) -> dict[str, Any]:
    """The SDK-client keyword arguments the caller set; refuses them next to a ready-made client,
    where they would silently do nothing."""
    given = {k: v for k, v in options.items() if v is not None}
    if client is not None and given:
        raise TypeError(f"{', '.join(sorted(given))} configure the client the adapter builds; "
                        "set them on the client you passed instead")
    return given


def decode_arguments(raw: Any) -> dict[str, Any] | str:
    """Tool arguments as the registry wants them: a dict when the model sent a JSON object,
    otherwise the raw text, so the registry answers ``invalid_arguments`` rather than guessing."""
    if isinstance(raw, dict):
        return raw
    if raw is None:
        return {}
    text = raw if isinstance(raw, str) else json.dumps(raw, default=str)
    try:
        parsed = json.loads(text) if text.strip() else {}
    except ValueError:
        return text
    return parsed if isinstance(parsed, dict) else text


def encode_arguments(arguments: dict[str, Any] | str) -> str:
    """Arguments back to the JSON text a chat API expects; a raw string is replayed verbatim."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def server_of(base_url: Any) -> tuple[str | None, int | None]:
    """``server.address`` and ``server.port`` of an SDK client's base URL."""
    parts = urlsplit(str(base_url))
    if not parts.hostname:
        return None, None
    return parts.hostname, parts.port or _DEFAULT_PORTS.get(parts.scheme)


def scrub_secrets(exc: BaseException, secrets: Iterable[Any]) -> None:
    """Remove credentials from an SDK exception's text, in place, before it propagates.

    Real providers mask keys in their error bodies, but a proxy or a home-grown compatible
    server may echo the ``Authorization`` header back, and the SDK puts the body into the
    exception message, from where it reaches logs and tracebacks.
    """
    found = list(secrets)

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return redact(value, found, min_length=_MIN_API_KEY_LENGTH)
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    exc.args = tuple(clean(a) for a in exc.args)
    for attribute in ("message", "body"):
        if hasattr(exc, attribute):
            try:
                setattr(exc, attribute, clean(getattr(exc, attribute)))
            except AttributeError:  # a read-only property: the args above are what str() shows
                pass
