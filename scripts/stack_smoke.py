#!/usr/bin/env python3
"""End-to-end smoke test of the running observability stack (`make stack-smoke`).

Sends, like a tracedagent process would, over OTLP gRPC to the collector on
127.0.0.1:4317:
  * a trace: a run span with tracedagent.stop_reason=fatal_tool_error and a tool span;
  * metrics: tracedagent.runs (that stop reason), a denied tracedagent.tool.calls, cost.
Then checks, with a deadline, that
  1. Jaeger returns the trace      (GET :16686/api/traces?service=...);
  2. Prometheus has the run counter (GET :9090/api/v1/query);
  3. the span metrics reached Prometheus (traces_span_metrics_calls_total);
  4. TracedagentFatalToolError fires in Prometheus and reaches Alertmanager (:9093).
The service name is unique per run (tracedagent-smoke-<hex>), so runs don't mix.
Needs opentelemetry-sdk and opentelemetry-exporter-otlp-proto-grpc; not package code.
"""

import json
import sys
import time
import urllib.parse
import urllib.request
import uuid

from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

OTLP = "127.0.0.1:4317"
JAEGER = "http://127.0.0.1:16686"
PROMETHEUS = "http://127.0.0.1:9090"
ALERTMANAGER = "http://127.0.0.1:9093"
DEADLINE_S = 60


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def prom_query(expr: str):
    url = f"{PROMETHEUS}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    return get_json(url)["data"]["result"]


def wait_for(what: str, check):
    """Poll check() until it returns something truthy; print how long it took."""
    start = time.monotonic()
    while True:
        try:
            result = check()
        except OSError:
            result = None
        if result:
            print(f"ok   {what} ({time.monotonic() - start:.1f} s)")
            return result
        if time.monotonic() - start > DEADLINE_S:
            print(f"FAIL {what}: nothing after {DEADLINE_S} s", file=sys.stderr)
            sys.exit(1)
        time.sleep(0.5)


def send(service: str) -> str:
    resource = Resource.create({"service.name": service})

    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=OTLP, insecure=True)))
    tracer = tracer_provider.get_tracer("tracedagent.smoke")
    with tracer.start_as_current_span("invoke_agent smoke") as run_span:
        run_span.set_attribute("gen_ai.agent.name", "smoke")
        run_span.set_attribute("tracedagent.stop_reason", "fatal_tool_error")
        with tracer.start_as_current_span("execute_tool explode") as tool_span:
            tool_span.set_attribute("gen_ai.tool.name", "explode")
            tool_span.set_attribute("tracedagent.tool.outcome", "fatal")
        trace_id = format(run_span.get_span_context().trace_id, "032x")
    tracer_provider.shutdown()  # flushes

    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=OTLP, insecure=True))
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    meter = meter_provider.get_meter("tracedagent.smoke")
    agent = {"gen_ai.agent.name": "smoke"}
    meter.create_counter("tracedagent.runs", unit="{run}").add(
        1, {**agent, "tracedagent.stop_reason": "fatal_tool_error"})
    meter.create_counter("tracedagent.tool.calls", unit="{call}").add(
        1, {**agent, "gen_ai.tool.name": "explode", "tracedagent.tool.outcome": "denied"})
    meter.create_counter("tracedagent.cost", unit="USD").add(0.01, agent)
    meter_provider.shutdown()  # exports once more, then stops
    return trace_id


def main() -> None:
    service = f"tracedagent-smoke-{uuid.uuid4().hex[:8]}"
    trace_id = send(service)
    print(f"sent trace {trace_id} and metrics as service {service}")

    def trace_in_jaeger():
        url = f"{JAEGER}/api/traces?" + urllib.parse.urlencode({"service": service, "lookback": "1h"})
        return [t for t in get_json(url)["data"] if t["traceID"] == trace_id]

    wait_for("trace stored in Jaeger", trace_in_jaeger)
    wait_for("tracedagent_runs_total in Prometheus",
             lambda: prom_query(f'tracedagent_runs_total{{job="{service}"}}'))
    wait_for("span metrics in Prometheus",
             lambda: prom_query(f'traces_span_metrics_calls_total{{service_name="{service}"}}'))
    wait_for("alert TracedagentFatalToolError firing in Prometheus",
             lambda: [a for a in get_json(f"{PROMETHEUS}/api/v1/alerts")["data"]["alerts"]
                      if a["labels"].get("alertname") == "TracedagentFatalToolError"
                      and a["labels"].get("job") == service and a["state"] == "firing"])
    wait_for("alert received by Alertmanager",
             lambda: [a for a in get_json(f"{ALERTMANAGER}/api/v2/alerts")
                      if a["labels"].get("alertname") == "TracedagentFatalToolError"
                      and a["labels"].get("job") == service])
    print("smoke test passed")


if __name__ == "__main__":
    main()
