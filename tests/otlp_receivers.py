"""Two tiny OTLP receivers on 127.0.0.1, for checking what an exporter really sends.

``HttpReceiver`` is a stdlib ``http.server`` decoding OTLP/HTTP protobuf bodies;
``GrpcReceiver`` is a real gRPC server implementing the collector's trace and metrics
services. Both record every request (its headers or metadata and its decoded message)
before answering, so once an exporter's flush has returned, what it sent is here.
Neither is a collector: no batching, no processing, no forwarding. With
``traces_only=True`` either answers metrics exports as Jaeger's own OTLP receiver does
(gRPC ``UNIMPLEMENTED``, HTTP 404): it takes traces only.
"""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["GrpcReceiver", "HttpReceiver", "Received", "ReceivedSpan"]

_TRACES, _METRICS = "/v1/traces", "/v1/metrics"
_MESSAGES = {_TRACES: trace_service_pb2.ExportTraceServiceRequest,
             _METRICS: metrics_service_pb2.ExportMetricsServiceRequest}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


@dataclass
class Received:
    """One export request as it arrived."""

    path: str
    """``/v1/traces`` or ``/v1/metrics`` (the gRPC service is mapped to the same names)."""
    headers: dict[str, str]
    """Lower-cased header (or gRPC metadata) names."""
    message: Any
    """The decoded ``Export{Trace,Metrics}ServiceRequest``."""


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    """Hex, as ``Run.trace_id``."""
    span_id: bytes
    attributes: dict[str, Any]
    resource: dict[str, Any]


class _Receiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._lock = threading.Lock()

    def _record(self, path: str, headers: dict[str, str], message: Any) -> None:
        with self._lock:
            self.requests.append(Received(path, headers, message))

    def _of(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def spans(self) -> list[ReceivedSpan]:
        found = []
        for request in self._of(_TRACES):
            for resource_spans in request.message.resource_spans:
                resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append(ReceivedSpan(span.name, span.trace_id.hex(), span.span_id,
                                                  {kv.key: _value(kv.value) for kv in span.attributes}, resource))
        return found

    def metric_names(self) -> set[str]:
        return {metric.name for request in self._of(_METRICS) for rm in request.message.resource_metrics
                for sm in rm.scope_metrics for metric in sm.metrics}

    def metric_resources(self) -> list[dict[str, Any]]:
        return [{kv.key: _value(kv.value) for kv in rm.resource.attributes}
                for request in self._of(_METRICS) for rm in request.message.resource_metrics]

    def headers(self, path: str = _TRACES) -> list[dict[str, str]]:
        return [r.headers for r in self._of(path)]


class HttpReceiver(_Receiver):
    """OTLP/HTTP protobuf on ``127.0.0.1:port`` (``port=0`` picks a free one)."""

    def __init__(self, port: int = 0, *, traces_only: bool = False) -> None:
        super().__init__()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                message_type = _MESSAGES.get(self.path)
                if message_type is None or (traces_only and self.path == _METRICS):
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver._record(self.path, {k.lower(): v for k, v in self.headers.items()},
                                 message_type.FromString(body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")  # an empty Export*ServiceResponse
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> HttpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class GrpcReceiver(_Receiver):
    """The OTLP gRPC trace and metrics services on ``127.0.0.1:port``."""

    def __init__(self, port: int = 0, *, traces_only: bool = False) -> None:
        super().__init__()
        receiver = self

        def metadata(context: grpc.ServicerContext) -> dict[str, str]:
            return {key.lower(): value for key, value in context.invocation_metadata()}

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
                receiver._record(_TRACES, metadata(context), request)
                return trace_service_pb2.ExportTraceServiceResponse()

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
                receiver._record(_METRICS, metadata(context), request)
                return metrics_service_pb2.ExportMetricsServiceResponse()

        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), self._server)
        if not traces_only:  # a service the server lacks is answered UNIMPLEMENTED
            metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), self._server)
        self.port = self._server.add_insecure_port(f"127.0.0.1:{port}")
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> GrpcReceiver:
        self._server.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.stop(grace=None)
