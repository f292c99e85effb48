"""Scripted HTTP servers on 127.0.0.1: a model provider's wire format, or fixed pages by path.

The model adapters are tested through the real ``openai`` and ``anthropic`` SDKs, so
what is faked is only the far end of the socket: each request gets the next scripted
``Reply`` (status, headers, body, optional delay), and every request is recorded with
its path, headers and decoded JSON body so a test can assert what the SDK actually sent.
Nothing here reaches the internet; the port is ephemeral.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from contextlib import contextmanager

__all__ = ["Reply", "Recorded", "FakeServer", "RoutedServer", "serve", "json_reply", "sse_reply", "FAST_RETRY",
           "closed_port"]

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
    pieces: tuple[bytes | float, ...] | None = None
    """A streamed body (server-sent events): each ``bytes`` piece sent and flushed on its own as a
    chunk of a chunked body; a ``float`` is a pause of that many seconds, during which the
    server watches for the client going away. ``body`` is then unused."""
    break_after: int | None = None
    """Drop the connection after this many pieces, mid-body: a stream that breaks."""


def sse_reply(*pieces: bytes | float, break_after: int | None = None) -> Reply:
    """A streamed reply of these server-sent events (already formatted, ``data: ...\\n\\n``) and
    pauses (seconds)."""
    return Reply(headers={"content-type": "text/event-stream"}, pieces=pieces, break_after=break_after)


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


def _client_left(connection: socket.socket, wait: float) -> bool:
    """Wait up to ``wait`` seconds; whether the client closed its end meanwhile (it is readable
    with nothing to read: the client sends nothing more once its request is in)."""
    readable, _, _ = select.select([connection], [], [], wait)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _stream(handler: BaseHTTPRequestHandler, reply: Reply) -> str:
    """Send a streamed reply; ``completed``, ``broken`` (after ``break_after`` pieces, as the reply
    asked) or ``client left``."""
    handler.send_response(reply.status)
    for name, value in reply.headers.items():
        handler.send_header(name, value)
    handler.send_header("transfer-encoding", "chunked")
    handler.end_headers()
    handler.wfile.flush()
    sent = 0
    for piece in reply.pieces or ():
        if isinstance(piece, float):
            if _client_left(handler.connection, piece):
                return "client left"
            continue
        if reply.break_after is not None and sent >= reply.break_after:
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return "broken"
        if _client_left(handler.connection, 0.0):
            return "client left"
        sent += 1
        try:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return "client left"
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()
    return "completed"


def _send(handler: BaseHTTPRequestHandler, reply: Reply) -> str:
    """Answer with ``reply``; how it went for a streamed one (see ``_stream``)."""
    if reply.delay:
        time.sleep(reply.delay)
    if reply.pieces is not None:
        try:
            return _stream(handler, reply)
        except (BrokenPipeError, ConnectionResetError):
            return "client left"
    try:
        handler.send_response(reply.status)
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        handler.send_header("content-length", str(len(reply.body)))
        handler.end_headers()
        handler.wfile.write(reply.body)
    except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
        return "client left"
    return "completed"


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
        self.outcomes: list[str] = []
        """How each answer went, in the order they ended: ``completed``, ``broken`` or ``client left``."""
        self.client_left = threading.Event()
        """Set when a client closed its connection before a streamed answer was over."""
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
                outcome = _send(self, server._next(Recorded(method="POST", path=self.path, body=body,
                                                            headers={k.lower(): v for k, v in self.headers.items()})))
                with server._lock:
                    server.outcomes.append(outcome)
                if outcome != "completed":
                    self.close_connection = True
                if outcome == "client left":
                    server.client_left.set()

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
