"""Jaeger's HTTP query API, read into the spans the renderer draws.

Two endpoints of jaeger-query (port 16686 by default):

* ``GET /api/traces?service=S&limit=N&start=US&end=US&tags={"k":"v"}`` searches - the
  endpoint Jaeger's own UI uses, since api_v3's HTTP search ignores attributes; ``limit``
  counts traces, ``start``/``end`` are microseconds since the epoch and ``tags`` is a JSON
  object every matching trace must have a span for. The UI's ``lookback=1h`` parameter is
  ignored by Jaeger's HTTP handler (the UI turns it into ``start``/``end`` itself), so this
  client sends the window as ``start``/``end`` too. It answers ``{"data": [trace, ...],
  "errors": [...]}`` in Jaeger's UI model (``spans`` with ``tags``, ``logs``, ``references``,
  and ``processes``), which ``decode_trace`` turns into ``SpanRecord``.
* ``GET /api/v3/traces/{trace_id}`` returns one trace as OTLP JSON - Jaeger's public API,
  ``{"result": {"resourceSpans": [...]}}`` (older versions: the ``resourceSpans`` object
  itself) - read by the trace file's own reader (``_otlp_json.decode``); 404 with
  ``{"error": {"httpCode": 404, "message": ...}}`` when Jaeger does not have it.

Jaeger stores an array attribute as a JSON string whichever way it is read back; the
attributes tracedagent emits as arrays are decoded again (``_attribute``). Only the standard
library is used (``_http``): two GET requests do not justify an HTTP client dependency.

Whatever answers at the URL may not be Jaeger, or may be hostile: its JSON is parsed with
the trace file's own guards (``parse_json``, ``integer``), and anything that is not the
shape described above is a ``JaegerError``, one line.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import time
import urllib.error
import urllib.parse
from typing import Any, Mapping

from .._export import _http
from .._core import _names as N
from .._export._endpoints import shown_url
from ._otlp_json import MAX_TIME_NS, OtlpJsonError, decode, integer, parse_json
from ._trace import SpanEvent, SpanRecord

__all__ = ["JaegerError", "JaegerClient", "decode_trace"]

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""A larger answer is refused rather than read into memory."""

_ARRAY_ATTRIBUTES = frozenset({N.TOOLS_REQUESTED, N.TOOLS_EXECUTED, N.TOOLS_BLOCKED, N.TOOLS_NOT_DISPATCHED,
                               N.TOOLS_PENDING, N.APPROVAL_APPROVED, N.APPROVAL_DENIED,
                               N.GEN_AI_RESPONSE_FINISH_REASONS})
"""Attributes tracedagent emits as arrays; Jaeger stores arrays as JSON strings, so these
are decoded back (and only these: other string attributes may legitimately hold JSON)."""

_JAEGER_ONLY_TAGS = frozenset({"span.kind", "otel.status_code", "otel.status_description", "error",
                               "otel.scope.name", "otel.scope.version", "otel.library.name",
                               "otel.library.version", "internal.span.format"})
"""Tags Jaeger derives from span fields rather than from the span's attributes."""


class JaegerError(Exception):
    """Jaeger could not be asked, or did not answer usefully; the message is one line."""


class JaegerClient:
    """The two queries the command line needs, with errors a person can act on."""

    def __init__(self, base_url: str, *, timeout: float = 10.0) -> None:
        try:
            _http.check_url(base_url)
        except ValueError as exc:
            raise JaegerError(_not_a_url(base_url, exc)) from None
        self.base_url = base_url.rstrip("/")
        """Where Jaeger is; may carry ``user:password@`` (sent as Basic credentials)."""
        self.shown_url = shown_url(self.base_url)
        """``base_url`` for messages."""
        self.timeout = timeout
        """Seconds one query may take in all, its answer read to the end."""

    def search(self, *, service: str, limit: int, since_seconds: float,
               tags: Mapping[str, str] | None = None) -> list[list[SpanRecord]]:
        """Traces of ``service`` that started in the last ``since_seconds``, each as its spans."""
        now_us = int(time.time() * 1e6)
        params: dict[str, str] = {"service": service, "limit": str(limit),
                                  "start": str(now_us - int(since_seconds * 1e6)), "end": str(now_us)}
        if tags:
            params["tags"] = json.dumps(dict(tags), separators=(",", ":"))
        answer = self._get("/api/traces", params)
        return [decode_trace(trace) for trace in _data(answer, self.shown_url)]

    def trace(self, trace_id: str) -> list[SpanRecord]:
        """One trace's spans, from api_v3; ``JaegerError`` when Jaeger does not have it."""
        not_found = f"trace {trace_id} not found in Jaeger at {self.shown_url}"
        answer = self._get(f"/api/v3/traces/{urllib.parse.quote(trace_id)}", None, not_found=not_found)
        document = answer.get("result", answer) if isinstance(answer, dict) else answer
        try:
            records = decode(document, source=f"Jaeger at {self.shown_url}")
        except OtlpJsonError as exc:
            raise JaegerError(f"{exc}; is that URL Jaeger's query service?") from None
        spans = [dataclasses.replace(r, attributes={k: _attribute(k, v) for k, v in r.attributes.items()
                                                    if k not in _JAEGER_ONLY_TAGS}) for r in records]
        if not spans:
            raise JaegerError(not_found)
        return spans

    def _get(self, path: str, params: Mapping[str, str] | None, *, not_found: str | None = None) -> Any:
        url = self.base_url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        where = self.shown_url
        try:
            status, body = _http.request(url, self.timeout, max_bytes=MAX_RESPONSE_BYTES + 1,
                                         headers={"Accept": "application/json"})
        except _http.RedirectRefused as exc:
            raise JaegerError(f"Jaeger at {where} {exc.reason}") from None
        except urllib.error.URLError as exc:
            reason = getattr(exc.reason, "strerror", None) or str(exc.reason)
            raise JaegerError(f"cannot reach Jaeger at {where} ({reason}); is it running? "
                              f"(set --jaeger or {N.ENV_JAEGER_URL})") from None
        except TimeoutError:
            raise JaegerError(f"Jaeger at {where} did not answer within {self.timeout:g} s") from None
        except (http.client.HTTPException, ConnectionError) as exc:
            raise JaegerError(f"Jaeger at {where} broke off the answer ({type(exc).__name__})") from None
        except ValueError as exc:  # what check_url refused: the constructor checked base_url, not its path
            raise JaegerError(_not_a_url(self.base_url, exc)) from None
        if status == 404 and not_found:
            raise JaegerError(not_found)
        if not 200 <= status < 300:
            raise JaegerError(f"Jaeger at {where} answered HTTP {status}: {_error_message(status, body)}")
        if len(body) > MAX_RESPONSE_BYTES:
            raise JaegerError(f"Jaeger at {where} answered with more than {MAX_RESPONSE_BYTES >> 20} MiB")
        try:
            return parse_json(body)
        except ValueError as exc:
            raise JaegerError(f"Jaeger at {where} answered with something this client cannot read ({exc}); "
                              f"is that URL Jaeger's query service?") from None


def _not_a_url(url: str, reason: ValueError) -> str:
    return f"not a usable Jaeger URL: {shown_url(url)!r} ({reason}; expected e.g. {N.DEFAULT_JAEGER_URL})"


def _error_message(status: int, body: bytes) -> str:
    """Jaeger explains errors as ``{"errors": [{"code": 400, "msg": "..."}]}`` (api_v3:
    ``{"error": {"httpCode": 400, "message": "..."}}``); anything else that answers is explained
    by its status."""
    try:
        answer = parse_json(body)
    except ValueError:
        answer = None
    errors = answer.get("errors") if isinstance(answer, dict) else None
    message = "; ".join(str(e.get("msg", "")) for e in errors if isinstance(e, dict)) \
        if isinstance(errors, list) else ""
    error = answer.get("error") if isinstance(answer, dict) else None  # api_v3's shape
    if not message and isinstance(error, dict):
        message = str(error.get("message", ""))
    return (message.strip() or http.client.responses.get(status, "no explanation")).splitlines()[0][:300]


def _data(answer: Any, base_url: str) -> list[dict[str, Any]]:
    if not isinstance(answer, dict) or not isinstance(answer.get("data", []), (list, type(None))):
        raise JaegerError(f"Jaeger at {base_url} answered with JSON that is not a trace list")
    traces = answer.get("data") or []
    if not all(isinstance(t, dict) for t in traces):
        raise JaegerError(f"Jaeger at {base_url} answered with JSON that is not a trace list")
    return traces


# --- Jaeger's JSON model to SpanRecord ------------------------------------------------

def decode_trace(trace: Mapping[str, Any]) -> list[SpanRecord]:
    """One trace of Jaeger's UI JSON model as spans (the inverse of Jaeger's OTLP mapping)."""
    processes = trace.get("processes") or {}
    records = []
    try:
        for span in trace.get("spans") or []:
            tags = {t["key"]: t.get("value") for t in span.get("tags") or []}
            trace_id = str(span["traceID"]).lower().zfill(32)
            parent_id = next((str(r["spanID"]).lower().zfill(16) for r in span.get("references") or []
                              if r.get("refType") == "CHILD_OF"), None)
            status_code = tags.get("otel.status_code")
            status = "error" if status_code == "ERROR" or tags.get("error") in (True, "true") \
                else "ok" if status_code == "OK" else "unset"
            process = processes.get(span.get("processID")) or span.get("process") or {}
            start_ns = _microseconds(span["startTime"])
            service, status_message = process.get("serviceName"), tags.get("otel.status_description")
            records.append(SpanRecord(
                trace_id=trace_id, span_id=str(span["spanID"]).lower().zfill(16), parent_id=parent_id,
                name=str(span.get("operationName", "")), kind=str(tags.get("span.kind", "internal")),
                start_ns=start_ns, end_ns=start_ns + _microseconds(span.get("duration", 0)),
                attributes={k: _attribute(k, v) for k, v in tags.items() if k not in _JAEGER_ONLY_TAGS},
                status=status, status_message=None if status_message is None else str(status_message),
                events=tuple(_event(log) for log in span.get("logs") or []),
                service=None if service is None else str(service)))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise JaegerError(f"Jaeger answered with a span this client cannot read ({type(exc).__name__}: {exc})") from None
    return records


def _microseconds(value: Any) -> int:
    """Jaeger's times and durations, in microseconds, as nanoseconds (within OTLP's range)."""
    return integer(value, 0, MAX_TIME_NS // 1000) * 1000


def _attribute(key: str, value: Any) -> Any:
    if key in _ARRAY_ATTRIBUTES and isinstance(value, str):
        try:
            decoded = parse_json(value)
        except ValueError:
            return value
        return decoded if isinstance(decoded, list) else value
    return value


def _event(log: Mapping[str, Any]) -> SpanEvent:
    """Jaeger stores an event as a log whose ``event`` field holds the event's name."""
    fields = {f["key"]: f.get("value") for f in log.get("fields") or []}
    name = str(fields.pop("event", ""))
    return SpanEvent(name=name, time_ns=_microseconds(log.get("timestamp", 0)), attributes=fields)
