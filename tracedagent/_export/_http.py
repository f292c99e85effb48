"""One bounded HTTP request, with the standard library: what ``tracedagent doctor`` asks
each endpoint and how the command line reads Jaeger's API.

Both need the same things from a request - a status that is an answer rather than an
exception, a body read only up to a bound, and ``user:password@`` in the URL sent as Basic
credentials instead of being read as part of the host (and named in urllib's error) - and
each turns failures into its own words. Two more things urllib does not do by itself:

* **The time limit is the whole request's.** urllib's ``timeout`` bounds each socket
  operation, so a server that sends one byte a second never runs into it. Here a timer
  shuts the connection down when the time is up, and the request raises ``TimeoutError``
  however far it had got.
* **Credentials stay with the origin they were given for.** urllib follows a redirect with
  every header of the request, ``Authorization`` and OTLP API keys included. A request that
  carries credentials (``user:password@``, or a header beyond ``Accept``/``Content-Type``)
  follows redirects within its own scheme, host and port only; a redirect elsewhere raises
  ``RedirectRefused`` instead of taking them along.
"""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from types import TracebackType
from typing import IO, Any, Mapping

from ._endpoints import without_credentials

__all__ = ["request", "failure_reason", "check_url", "RedirectRefused"]

_PLAIN_HEADERS = frozenset({"accept", "content-type"})
"""Request headers that are not credentials; a request with any other carries some."""


class RedirectRefused(urllib.error.URLError):
    """A request with credentials was redirected to another origin, and not followed. The
    ``reason`` says where to, without any credentials of the redirect's own."""


def check_url(url: str) -> urllib.parse.SplitResult:
    """``url`` split, or ``ValueError`` when no request could be made to it: not
    ``http(s)://HOST...``, or a host name the resolver refuses (an empty label as in
    ``a..b``, a label longer than 63 characters), which would otherwise surface from
    deep inside ``socket`` as a ``UnicodeError``."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL")
    try:
        parts.hostname.encode("idna")  # what socket.getaddrinfo does with it
    except UnicodeError:
        raise ValueError("not a usable host name") from None
    return parts


def request(url: str, timeout: float, *, max_bytes: int, body: bytes | None = None,
            headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
    """``GET`` (``POST`` when there is a ``body``): the status and at most ``max_bytes`` of the
    answer's body, for error statuses too, all within ``timeout`` seconds.

    Raises ``ValueError`` for a URL that ``check_url`` refuses, ``TimeoutError`` when the time
    is up, ``RedirectRefused`` (a ``URLError``) for a redirect that would take credentials to
    another origin, and what urllib raises when no answer came (``URLError``,
    ``http.client.HTTPException``, ``ConnectionError``); ``failure_reason`` says what went
    wrong underneath.
    """
    parts = check_url(url)
    request_headers = dict(headers or {})
    if parts.username or parts.password:
        user_password = f"{urllib.parse.unquote(parts.username or '')}:{urllib.parse.unquote(parts.password or '')}"
        request_headers["Authorization"] = "Basic " + base64.b64encode(user_password.encode()).decode()
    prepared = urllib.request.Request(without_credentials(url), data=body, headers=request_headers,
                                      method="GET" if body is None else "POST")
    with _Deadline(timeout) as deadline:
        carries_credentials = any(name.lower() not in _PLAIN_HEADERS for name in request_headers)
        opener = urllib.request.build_opener(_HttpHandler(deadline), _HttpsHandler(deadline),
                                             _Redirects(parts if carries_credentials else None))
        try:
            try:
                with opener.open(prepared, timeout=timeout) as response:
                    answer = response.status, response.read(max_bytes)
                    if len(answer[1]) < max_bytes and response.length:  # short of its Content-Length:
                        raise http.client.IncompleteRead(answer[1], response.length)  # read(n) does not say so
            except urllib.error.HTTPError as exc:
                answer = exc.code, _error_body(exc, max_bytes)
        except RedirectRefused:
            raise
        except Exception:
            if deadline.expired:  # the timer cut the connection: whatever broke, the time was up
                raise TimeoutError(f"no complete answer within {timeout:g} s") from None
            raise
        if deadline.expired:  # a body without a length simply ends where the connection was cut
            raise TimeoutError(f"no complete answer within {timeout:g} s")
        return answer


def _error_body(exc: urllib.error.HTTPError, max_bytes: int) -> bytes:
    try:
        return exc.read(max_bytes)
    except (OSError, ValueError, AttributeError, http.client.HTTPException):  # no readable body
        return b""
    finally:
        exc.close()


def failure_reason(exc: Exception) -> object:
    """What went wrong underneath: urllib wraps some socket errors in ``URLError``, not all."""
    return exc.reason if isinstance(exc, urllib.error.URLError) else exc


# --- the whole request's time limit --------------------------------------------------------

class _Deadline:
    """Shuts down every connection of one request once ``seconds`` have passed.

    Each connection's socket is duplicated when it connects, before TLS wraps it: shutting
    down the duplicate ends the connection under whatever reads it (plain or TLS, the status
    line or the body), and, being this object's own descriptor, it cannot have been closed
    and reused by the time the timer fires.
    """

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._timer.cancel()
        with self._lock:
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock.dup())
            if self.expired:
                _shut(self._sockets[-1])

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed by the other end
        pass


class _WatchedConnection(http.client.HTTPConnection):
    """An HTTP connection whose socket its request's ``_Deadline`` watches (``_connecting``
    gives it one). HTTPS connects through it too (``_HttpsConnection``), so the socket is
    watched before the TLS handshake."""

    deadline: _Deadline

    def connect(self) -> None:
        super().connect()
        self.deadline.watch(self.sock)


class _HttpsConnection(http.client.HTTPSConnection, _WatchedConnection):
    """``HTTPSConnection.connect`` calls ``_WatchedConnection.connect`` before it wraps the socket."""


def _connecting(kind: type[_WatchedConnection], deadline: _Deadline) -> Any:
    """What urllib's ``do_open`` calls to make a connection: one of ``kind``, watched by ``deadline``."""
    def make(*args: Any, **kwargs: Any) -> _WatchedConnection:
        connection = kind(*args, **kwargs)
        connection.deadline = deadline
        return connection
    return make


class _HttpHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_connecting(_WatchedConnection, self.deadline), req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    """TLS with the system's CA certificates, as urllib's own handler does by default."""

    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline
        self.context = ssl.create_default_context()

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_connecting(_HttpsConnection, self.deadline), req, context=self.context)


# --- redirects -------------------------------------------------------------------------

class _Redirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, except that a request with credentials is not redirected to another
    origin than ``origin`` (the URL it was made for); ``None``: a request without credentials,
    free to go anywhere as urllib takes it."""

    def __init__(self, origin: urllib.parse.SplitResult | None) -> None:
        super().__init__()
        self.origin = origin

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        if self.origin is not None:
            target = urllib.parse.urlsplit(newurl)
            if _origin(target) != _origin(self.origin):
                fp.close()
                raise RedirectRefused(f"redirected to {_shown_origin(target)} (HTTP {code}), which was not followed: "
                                      f"the credentials are not sent to another host; use that URL if you trust it")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(parts: urllib.parse.SplitResult) -> tuple[str, str | None, int | None]:
    try:
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:  # a port that is not one: no origin to share
        port = -1
    return parts.scheme, parts.hostname, port


def _shown_origin(parts: urllib.parse.SplitResult) -> str:
    """Scheme, host and port only: a redirect may carry credentials of its own."""
    scheme, host, port = _origin(parts)
    return f"{scheme}://{host}:{port}"
