"""One bounded HTTP request, with the standard library: what ``tracedagent doctor`` asks
each endpoint and how the command line reads Jaeger's API.

Both need the same things from a request - a status that is an answer rather than an
exception, a body read only up to a bound, and ``user:password@`` in the URL sent as Basic
credentials instead of being read as part of the host (and named in urllib's error) - and
each turns failures into its own words.
"""

from __future__ import annotations

import base64
import http.client
import urllib.error
import urllib.parse
import urllib.request
from typing import Mapping

from ._endpoints import without_credentials

__all__ = ["request", "failure_reason"]


def request(url: str, timeout: float, *, max_bytes: int, body: bytes | None = None,
            headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
    """``GET`` (``POST`` when there is a ``body``): the status and at most ``max_bytes`` of the
    answer's body, for error statuses too.

    Raises ``ValueError`` for a URL that is not ``http(s)://HOST...``, and what urllib raises
    when no answer came (``URLError``, ``TimeoutError``, ``http.client.HTTPException``,
    ``ConnectionError``); ``failure_reason`` says what went wrong underneath.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL")
    request_headers = dict(headers or {})
    if parts.username or parts.password:
        user_password = f"{urllib.parse.unquote(parts.username or '')}:{urllib.parse.unquote(parts.password or '')}"
        request_headers["Authorization"] = "Basic " + base64.b64encode(user_password.encode()).decode()
    prepared = urllib.request.Request(without_credentials(url), data=body, headers=request_headers,
                                      method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(prepared, timeout=timeout) as response:
            return response.status, response.read(max_bytes)
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, exc.read(max_bytes)
        except (OSError, ValueError, AttributeError, http.client.HTTPException):  # no readable body
            return exc.code, b""
        finally:
            exc.close()


def failure_reason(exc: Exception) -> object:
    """What went wrong underneath: urllib wraps some socket errors in ``URLError``, not all."""
    return exc.reason if isinstance(exc, urllib.error.URLError) else exc
