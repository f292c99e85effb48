"""What Jaeger's ``/api/v3/traces/{id}`` answers for a trace the tests hold in Jaeger's UI model
(the ``/api/traces`` shape): OTLP JSON in ``{"result": ...}``, as Jaeger's own translation from its
storage model writes it - span kind and status back as fields, a ``CHILD_OF`` reference as the
parent, logs as events, times in nanoseconds, and array attributes still the JSON strings Jaeger
stored them as."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["as_api_v3", "NOT_FOUND"]

NOT_FOUND = {"error": {"httpCode": 404, "message": "trace not found"}}
"""api_v3's answer (HTTP 404) for a trace it does not have."""

_KINDS = {"internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}
_STATUS = {"OK": 1, "ERROR": 2}


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": value}


def _attributes(pairs: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in pairs.items()]


def as_api_v3(trace: Mapping[str, Any]) -> dict[str, Any]:
    """One trace of Jaeger's UI model as api_v3's answer for it."""
    processes = trace.get("processes") or {}
    by_service: dict[str, list[dict[str, Any]]] = {}
    for span in trace["spans"]:
        tags = {t["key"]: t.get("value") for t in span.get("tags") or []}
        kind = _KINDS.get(str(tags.pop("span.kind", "internal")), 1)
        code, message = tags.pop("otel.status_code", None), tags.pop("otel.status_description", None)
        tags.pop("error", None)
        parent = next((r["spanID"] for r in span.get("references") or [] if r.get("refType") == "CHILD_OF"), "")
        start_ns = span["startTime"] * 1000
        events = []
        for log in span.get("logs") or []:
            fields = {f["key"]: f.get("value") for f in log.get("fields") or []}
            events.append({"name": fields.pop("event", ""), "timeUnixNano": str(log.get("timestamp", 0) * 1000),
                           "attributes": _attributes(fields)})
        service = (processes.get(span.get("processID")) or {}).get("serviceName", "")
        by_service.setdefault(service, []).append({
            "traceId": span["traceID"], "spanId": span["spanID"], "parentSpanId": parent,
            "name": span.get("operationName", ""), "kind": kind, "startTimeUnixNano": str(start_ns),
            "endTimeUnixNano": str(start_ns + span.get("duration", 0) * 1000), "attributes": _attributes(tags),
            "events": events,
            "status": {"code": _STATUS.get(str(code), 0), **({"message": message} if message else {})}})
    return {"result": {"resourceSpans": [
        {"resource": {"attributes": _attributes({"service.name": service})},
         "scopeSpans": [{"scope": {"name": "tracedagent"}, "spans": spans}]}
        for service, spans in by_service.items()]}}
