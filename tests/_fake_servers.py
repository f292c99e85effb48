"""Scripted HTTP servers on 127.0.0.1: a model provider's wire format, or fixed pages by path.

The model adapters are tested through the real ``openai`` and ``anthropic`` SDKs, so
what is faked is only the far end of the socket: each request gets the next scripted
``Reply`` (status, headers, body, optional delay), and every request is recorded with
its path, headers and decoded JSON body so a test can assert what the SDK actually sent.
Nothing here reaches the internet; the port is ephemeral.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from contextlib import contextmanager

__all__ = ["Reply", "Recorded", "FakeServer", "RoutedServer", "serve", "json_reply", "FAST_RETRY", "closed_port"]

FAST_RETRY = {"retry-after-ms": "1"}
"""Headers for a reply the SDK will retry: both SDKs honour ``retry-after-ms``, so a retry costs a millisecond."""


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One scripted HTTP response."""

    status: int = 200
    """HTTP status code."""
    body: bytes = b""
    """Raw response body (use ``json_reply`` for JSON)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers, e.g. ``retry-after-ms`` to keep SDK backoff tiny."""
    delay: float = 0.0
    """Seconds to wait before answering, to provoke a client timeout."""


def json_reply(payload: Any, status: int = 200, **headers: str) -> Reply:
    """A JSON reply; header names use ``_`` for ``-`` (``retry_after_ms="1"``)."""
    return Reply(status=status, body=json.dumps(payload).encode(),
                 headers={"content-type": "application/json",
                          **{k.replace("_", "-"): v for k, v in headers.items()}})


@dataclass(frozen=True, kw_only=True)
class Recorded:
    """One request the server received."""

    method: str
    path: str
    """The request path; for ``RoutedServer`` without the query string."""
    headers: dict[str, str]
    """Header names in lowercase."""
    body: Any = None
    """The decoded JSON body, or the raw text when it was not JSON."""
    query: str = ""
    """The query string (``RoutedServer`` only)."""


def _send(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
    if reply.delay:
        time.sleep(reply.delay)
    try:
        handler.send_response(reply.status)
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        handler.send_header("content-length", str(len(reply.body)))
        handler.end_headers()
        handler.wfile.write(reply.body)
    except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
        pass


def _listen(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, threading.Thread]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    return httpd, threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)


class FakeServer:
    """Answers each request with the next ``Reply``; a request past the script gets a 400
    that tells the SDK not to retry, so an under-scripted test fails fast and plainly."""

    def __init__(self, script: list[Reply]) -> None:
        self.script = list(script)
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's naming
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length).decode()
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw
                _send(self, server._next(Recorded(method="POST", path=self.path, body=body,
                                                  headers={k.lower(): v for k, v in self.headers.items()})))

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

        self._httpd, self._thread = _listen(Handler)
        self.port: int = self._httpd.server_address[1]

    def _next(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self.script:
                return self.script.pop(0)
        return json_reply({"error": {"message": "fake server script exhausted"}}, status=400,
                          x_should_retry="false")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@contextmanager
def serve(*script: Reply) -> Iterator[FakeServer]:
    """Run a ``FakeServer`` for the block."""
    server = FakeServer(list(script)).start()
    try:
        yield server
    finally:
        server.stop()


class RoutedServer:
    """Answers GET requests by path (the query string aside) with a fixed ``Reply``, 404
    otherwise, recording each request: a stand-in for Jaeger's or Prometheus' HTTP API."""

    def __init__(self, routes: dict[str, Reply] | None = None) -> None:
        self.routes: dict[str, Reply] = dict(routes or {})
        self.requests: list[Recorded] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's naming
                path, _, query = self.path.partition("?")
                server.requests.append(Recorded(method="GET", path=path, query=query,
                                                headers={k.lower(): v for k, v in self.headers.items()}))
                _send(self, server.routes.get(path, Reply(status=404, body=b"404 page not found",
                                                          headers={"content-type": "text/plain"})))

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd, thread = _listen(Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        thread.start()

    def answer(self, path: str, body: Any, *, status: int = 200, content_type: str = "application/json") -> None:
        """Serve ``body`` (JSON-encoded unless bytes) at ``path`` from now on."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.routes[path] = Reply(status=status, body=raw, headers={"content-type": content_type})

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (it was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
