"""One trace from the model's request into an MCP server's own work, in the real Jaeger.

The test server (``tests/mcp_servers/workshop.py``, the ``mcp`` SDK's server) runs as a real
subprocess over stdio and exports its own spans to the real Collector, as the agent does: the
server's ``tools/call lookup`` span must be a child of the agent's ``execute_tool lookup`` span,
and the server's own work a child of that.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tracedagent import Agent, Registry, Stop
from tracedagent.testing import FakeModel, tool_call

from ._stack import OTLP_GRPC, eventually, jaeger_trace
from .test_e2e import tags

pytest.importorskip("mcp")
from tracedagent.mcp import MCPServer  # noqa: E402

WORKSHOP = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "workshop.py")


def test_a_traced_mcp_servers_spans_are_children_of_the_tool_span_in_jaeger(telemetry, service_name):
    server_service = f"{service_name}-workshop"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": OTLP_GRPC, "OTEL_SERVICE_NAME": server_service}
    with MCPServer.stdio(sys.executable, [WORKSHOP], env=env, timeout=60,
                         tracer_provider=telemetry.providers["tracer_provider"]) as server:
        model = FakeModel([tool_call("lookup", {"order_id": "A-17"}), "Shipped."])
        run = Agent(model, Registry(server.tools()), name="mcp-e2e", **telemetry.providers).run("Where is A-17?")
    assert run.stop is Stop.ANSWERED and '"status": "shipped"' in run.steps[0].tool_results[0].content
    telemetry.force_flush(timeout=10)

    def whole():
        found = jaeger_trace(run.trace_id)
        names = {s["operationName"] for s in found["spans"]} if found else set()
        return found if {"execute_tool lookup", "tools/call lookup", "workshop.lookup"} <= names else None

    trace = eventually("the agent's and the server's spans in one trace", whole)
    spans = {s["operationName"]: s for s in trace["spans"]}
    services = {pid: p["serviceName"] for pid, p in trace["processes"].items()}

    def parent(span: dict) -> str:
        [ref] = [r for r in span["references"] if r["refType"] == "CHILD_OF"]
        return ref["spanID"]

    tool, served, work = spans["execute_tool lookup"], spans["tools/call lookup"], spans["workshop.lookup"]
    assert parent(served) == tool["spanID"], "the server's span is a child of the tool span itself"
    assert parent(work) == served["spanID"]
    assert services[served["processID"]] == services[work["processID"]] == server_service
    assert services[tool["processID"]] == service_name
    t = tags(tool)
    assert t["mcp.method.name"] == "tools/call" and t["network.transport"] == "pipe"
    assert t["jsonrpc.request.id"] == tags(served)["jsonrpc.request.id"], "both ends name the same request"
    assert t["mcp.session.id"] and t["mcp.protocol.version"] == tags(served)["mcp.protocol.version"]


def test_an_agent_served_over_mcp_runs_as_a_child_of_the_callers_tool_span_in_jaeger(telemetry, service_name):
    served_service = f"{service_name}-served"
    served = str(Path(WORKSHOP).parent / "served_agent.py")
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": OTLP_GRPC, "OTEL_SERVICE_NAME": served_service,
           "PYTHONPATH": str(Path(WORKSHOP).resolve().parents[2])}
    with MCPServer.stdio(sys.executable, [served], env=env, timeout=60,
                         tracer_provider=telemetry.providers["tracer_provider"]) as server:
        model = FakeModel([tool_call("orders", {"task": "Where is A-17?"}), "Shipped on Monday."])
        run = Agent(model, Registry(server.tools()), name="mcp-caller", **telemetry.providers).run("Where is A-17?")
    assert run.stop is Stop.ANSWERED and run.steps[0].tool_results[0].content == "Order A-17 shipped on Monday."
    telemetry.force_flush(timeout=10)

    def whole():
        found = jaeger_trace(run.trace_id)
        names = {s["operationName"] for s in found["spans"]} if found else set()
        return found if {"execute_tool orders", "tools/call orders", "invoke_agent orders",
                         "execute_tool lookup"} <= names else None

    trace = eventually("the caller's and the served agent's spans in one trace", whole)
    spans = {s["operationName"]: s for s in trace["spans"]}
    services = {pid: p["serviceName"] for pid, p in trace["processes"].items()}
    parent = {s["spanID"]: next(r["spanID"] for r in s["references"] if r["refType"] == "CHILD_OF")
              for s in trace["spans"] if s["references"]}
    tool, served_span, served_run = spans["execute_tool orders"], spans["tools/call orders"], spans["invoke_agent orders"]
    assert parent[served_span["spanID"]] == tool["spanID"]
    assert parent[served_run["spanID"]] == served_span["spanID"], "the served run is a child of the server span"
    assert services[served_run["processID"]] == served_service and services[tool["processID"]] == service_name
