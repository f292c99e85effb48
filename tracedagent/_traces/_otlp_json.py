"""OTLP/JSON: the file ``tracedagent demo`` writes and ``tracedagent show`` reads.

The format is the one the OTLP specification defines for JSON (an
``ExportTraceServiceRequest``: ``{"resourceSpans": [...]}``), which Jaeger's UI uploads
(Search page, Upload tab) and which any OpenTelemetry tool can read. Encoding reuses the SDK's own
OTLP protobuf encoder and protobuf's JSON mapping, then fixes the one place where the two
disagree: protobuf writes ``bytes`` as base64, OTLP/JSON wants trace and span ids as hex.
Enums are written as integers and field names in lowerCamelCase, as OTLP/JSON requires.

Reading is independent of protobuf and lenient where the specification allows choices
(integers as strings or numbers, enums as integers or names), and it also accepts JSON
Lines - one request per line, the OpenTelemetry file-exporter format. It is strict about
everything else, because a file (like Jaeger's answer, which ``_jaeger`` reads with the same
``parse_json`` and ``integer``) may have been written by anyone: whatever is not trace data
is refused in one line, never with a ``RecursionError`` or ``OverflowError`` later on.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import sys
import threading
from pathlib import Path
from typing import IO, Any, Sequence

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from ._trace import SpanEvent, SpanRecord

__all__ = ["OtlpJsonError", "encode", "decode", "read_file", "OtlpJsonWriter", "parse_json", "integer",
           "MAX_JSON_DEPTH"]


class OtlpJsonError(ValueError):
    """The input is not OTLP/JSON trace data; the message says what was wrong, in one line."""


# --- writing ---------------------------------------------------------------------------

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def encode(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """SDK spans as an OTLP/JSON ``ExportTraceServiceRequest`` (a plain dict)."""
    document = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                _ids_to_hex(span)
                for link in span.get("links", []):
                    _ids_to_hex(link)
    return document


def _ids_to_hex(item: dict[str, Any]) -> None:
    for name in _ID_FIELDS:
        if item.get(name):
            item[name] = base64.b64decode(item[name]).hex()


class OtlpJsonWriter:
    """Streams traces into one OTLP/JSON document, one ``resourceSpans`` entry per line.

    Streaming keeps a long load-generating demo at constant memory; writing to a
    temporary file that replaces ``path`` only on ``close`` means an interrupted demo
    never leaves half a JSON document where a good one was. Safe to share between threads.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._partial = path.with_name(path.name + ".partial")
        self._file: IO[str] | None = self._partial.open("w", encoding="utf-8")
        self._file.write('{"resourceSpans": [')
        self._lock = threading.Lock()
        self._entries = 0
        self.spans = 0
        """Spans written so far."""

    def write(self, document: dict[str, Any]) -> None:
        with self._lock:
            if self._file is None:
                raise ValueError("the writer is closed")
            for resource_spans in document.get("resourceSpans", []):
                self._file.write(("\n" if self._entries == 0 else ",\n") + json.dumps(resource_spans, separators=(",", ":")))
                self._entries += 1
                self.spans += sum(len(s.get("spans", [])) for s in resource_spans.get("scopeSpans", []))

    def close(self) -> None:
        with self._lock:
            if self._file is None:
                return
            self._file.write("\n]}\n")
            self._file.close()
            self._file = None
            os.replace(self._partial, self.path)

    def discard(self) -> None:
        """Drop what was written (the run was interrupted); ``path`` is left untouched."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
                self._partial.unlink(missing_ok=True)


# --- reading ---------------------------------------------------------------------------

MAX_JSON_DEPTH = 200
"""Arrays and objects nested deeper than this are refused. Trace data is about a dozen
levels deep (a captured tool argument a few more); a value nested a thousand deep parses,
but then cannot even be turned into a string without a ``RecursionError``."""

MAX_TIME_NS = 2**64 - 1
"""OTLP times are ``fixed64`` nanoseconds: a larger one is no time at all (and would
overflow a float when shown as a duration)."""

_INT64 = (-2**63, 2**63 - 1)


def parse_json(text: str | bytes) -> Any:
    """JSON that anyone may have written: ``ValueError`` with a one-line reason for anything
    ``json.loads`` refuses, for JSON nested deeper than ``MAX_JSON_DEPTH`` (which would
    otherwise end in a ``RecursionError``, here or wherever the value is used) and for an
    integer of more digits than Python converts."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise ValueError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep") from None
    except UnicodeDecodeError:  # bytes that are not UTF-8 (or -16/-32): a binary or compressed body
        raise ValueError("not JSON: not text in a Unicode encoding") from None
    except ValueError:  # int(): more digits than sys.get_int_max_str_digits()
        raise ValueError(f"JSON with a number of more than {sys.get_int_max_str_digits()} digits") from None
    if _nested_too_deeply(value):
        raise ValueError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
    return value


def _nested_too_deeply(value: Any) -> bool:
    """Walked with a list, not by recursion, for the reason ``MAX_JSON_DEPTH`` exists."""
    pending = [(value, 1)] if isinstance(value, (dict, list)) else []
    while pending:
        item, depth = pending.pop()
        if depth > MAX_JSON_DEPTH:
            return True
        inner = item.values() if isinstance(item, dict) else item
        pending.extend((v, depth + 1) for v in inner if isinstance(v, (dict, list)))
    return False


def integer(value: Any, low: int, high: int) -> int:
    """A whole number from untrusted JSON, within ``[low, high]``: an integer, a decimal string
    (how OTLP/JSON writes 64-bit integers) or a float that is a whole number (how some
    writers do). ``ValueError`` otherwise - for ``1e400`` too, which ``int()`` would turn into
    an ``OverflowError``, and for a number too large to compute with."""
    number: int | None = None
    if isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and len(value) <= 40:
        try:
            number = int(value)
        except ValueError:
            pass
    if number is None:
        raise ValueError(f"{repr(value)[:40]} is not an integer")
    if not low <= number <= high:
        raise ValueError(f"{repr(value)[:40]} is out of range")
    return number


def read_file(path: Path) -> list[SpanRecord]:
    """Every span in an OTLP/JSON file (one document, or JSON Lines)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise OtlpJsonError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise OtlpJsonError(f"{path}: is a directory, not a file") from None
    except UnicodeDecodeError:
        raise OtlpJsonError(f"{path}: not a text file") from None
    except OSError as exc:
        raise OtlpJsonError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        documents = [parse_json(text)]
    except ValueError as whole_error:
        try:
            documents = [parse_json(line) for line in text.splitlines() if line.strip()]
        except ValueError:
            raise OtlpJsonError(f"{path}: {whole_error}") from None
    if not documents:
        raise OtlpJsonError(f"{path}: the file is empty")
    spans = [span for document in documents for span in decode(document, source=str(path))]
    if not spans:
        raise OtlpJsonError(f"{path}: OTLP/JSON without a single span")
    return spans


def decode(document: Any, *, source: str = "input") -> list[SpanRecord]:
    """The spans of one OTLP/JSON ``ExportTraceServiceRequest``."""
    if not isinstance(document, dict) or not isinstance(document.get("resourceSpans"), list):
        hint = " (it looks like Jaeger's own JSON; use `tracedagent trace` for that)" \
            if isinstance(document, dict) and "data" in document else ""
        raise OtlpJsonError(f'{source}: not OTLP/JSON trace data: expected an object with a "resourceSpans" list{hint}')
    records: list[SpanRecord] = []
    try:
        for resource_spans in document["resourceSpans"]:
            resource = _attributes((resource_spans.get("resource") or {}).get("attributes"), source)
            service = resource.get("service.name")
            for scope_spans in resource_spans.get("scopeSpans") or []:
                for span in scope_spans.get("spans") or []:
                    records.append(_span(span, service, source, len(records)))
    except OtlpJsonError:
        raise
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise OtlpJsonError(f"{source}: malformed OTLP/JSON ({exc})") from None
    return records


_KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")
_STATUSES = ("unset", "ok", "error")


def _span(span: Any, service: Any, source: str, index: int) -> SpanRecord:
    where = f"{source}: span #{index + 1}"
    if not isinstance(span, dict):
        raise OtlpJsonError(f"{where} is not an object")
    status = span.get("status") or {}
    try:
        return SpanRecord(
            trace_id=_id(span.get("traceId"), 16, f"{where} traceId"),
            span_id=_id(span.get("spanId"), 8, f"{where} spanId"),
            parent_id=_id(span["parentSpanId"], 8, f"{where} parentSpanId") if span.get("parentSpanId") else None,
            name=str(span.get("name", "")),
            kind=_enum(span.get("kind", 0), _KINDS, "SPAN_KIND_"),
            start_ns=integer(span["startTimeUnixNano"], 0, MAX_TIME_NS),
            end_ns=integer(span["endTimeUnixNano"], 0, MAX_TIME_NS),
            attributes=_attributes(span.get("attributes"), where),
            status=_enum(status.get("code", 0), _STATUSES, "STATUS_CODE_"),
            status_message=str(status["message"]) if status.get("message") else None,
            events=tuple(SpanEvent(name=str(e.get("name", "")),
                                   time_ns=integer(e.get("timeUnixNano", 0), 0, MAX_TIME_NS),
                                   attributes=_attributes(e.get("attributes"), where))
                         for e in span.get("events") or []),
            service=str(service) if service is not None else None)
    except OtlpJsonError:
        raise
    except KeyError as exc:
        raise OtlpJsonError(f"{where} has no {exc.args[0]}") from None
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:  # OverflowError: float(10**400)
        raise OtlpJsonError(f"{where} is malformed ({exc})") from None


def _id(value: Any, size: int, where: str) -> str:
    """Hex as OTLP/JSON specifies; base64 (protobuf's own JSON mapping) is accepted too."""
    if isinstance(value, str):
        if len(value) == 2 * size:
            try:
                bytes.fromhex(value)
                return value.lower()
            except ValueError:
                pass
        try:
            raw = base64.b64decode(value, validate=True)
            if len(raw) == size:
                return raw.hex()
        except (binascii.Error, ValueError):
            pass
    raise OtlpJsonError(f"{where} is not a {size}-byte id: {str(value)[:40]!r}")


def _enum(value: Any, names: tuple[str, ...], prefix: str) -> str:
    if isinstance(value, int) and 0 <= value < len(names):
        return names[value]
    if isinstance(value, str) and value.startswith(prefix) and value[len(prefix):].lower() in names:
        return value[len(prefix):].lower()
    raise ValueError(f"unknown {prefix.rstrip('_').lower()} {value!r}")


def _attributes(items: Any, where: str) -> dict[str, Any]:
    if not items:
        return {}
    if not isinstance(items, list):
        raise OtlpJsonError(f"{where}: attributes must be a list of key/value objects")
    return {str(kv.get("key")): _value(kv.get("value") or {}) for kv in items if isinstance(kv, dict)}


def _value(value: dict[str, Any]) -> Any:
    """An OTLP ``AnyValue`` as a Python value."""
    if "stringValue" in value:
        return _typed(value["stringValue"], str)
    if "boolValue" in value:
        return _typed(value["boolValue"], bool)
    if "intValue" in value:
        return integer(value["intValue"], *_INT64)
    if "doubleValue" in value:
        return float(value["doubleValue"])  # also "NaN" and "Infinity", as protobuf's JSON writes them
    if "arrayValue" in value:
        return [_value(v or {}) for v in (value["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in value:
        return {str(kv.get("key")): _value(kv.get("value") or {})
                for kv in (value["kvlistValue"] or {}).get("values") or []}
    if "bytesValue" in value:
        return _typed(value["bytesValue"], str)
    return None


def _typed(value: Any, kind: type) -> Any:
    """The value, when JSON gave it the type OTLP/JSON says it has: a string is never a list."""
    if not isinstance(value, kind):
        raise ValueError(f"{repr(value)[:40]} is not a {kind.__name__}")
    return value
