"""The small ones of #30 item 7: credentials in the HTTP library's DEBUG logs, and budget
integers past int64 (the asyncio SIGINT handler is in test_hostile_escape.py)."""

from __future__ import annotations

import logging

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otlp_receivers import HttpReceiver
from tracedagent import Agent, Budget, configure
from tracedagent.testing import FakeModel, Recorder

SECRET = "k3y-0f-the-c0llect0r-91ab"


def test_debug_logging_never_shows_the_export_urls_credentials(caplog):
    with HttpReceiver() as receiver, caplog.at_level(logging.DEBUG):
        telemetry = configure(service_name="debug-logs", endpoint=f"http://127.0.0.1:{receiver.port}/?api_key={SECRET}",
                              protocol="http/protobuf", metrics=False, set_global=False)
        try:
            telemetry.tracer_provider.get_tracer("t").start_span("s").end()
            telemetry.tracer_provider.force_flush()
        finally:
            telemetry.shutdown()
    requests = [r for r in caplog.records if r.name.startswith("urllib3") and "POST" in r.getMessage()]
    assert requests, [r.getMessage() for r in caplog.records]  # the library did log the request line
    assert all("api_key=***" in r.getMessage() for r in requests)
    assert SECRET not in caplog.text


def test_a_budget_past_int64_is_clamped_not_dropped_from_the_span():
    rec = Recorder()
    Agent(FakeModel(["done"]), budget=Budget(max_tokens=10**30, max_tool_calls=2**64), **rec.providers).run("go")
    wire = ExportTraceServiceRequest.FromString(encode_spans(rec.spans()).SerializeToString())
    [run] = [s for rs in wire.resource_spans for ss in rs.scope_spans for s in ss.spans if s.name.startswith("invoke")]
    attributes = {kv.key: kv.value.int_value for kv in run.attributes if kv.value.WhichOneof("value") == "int_value"}
    assert attributes["tracedagent.budget.max_tokens"] == 2**63 - 1
    assert attributes["tracedagent.budget.max_tool_calls"] == 2**63 - 1
