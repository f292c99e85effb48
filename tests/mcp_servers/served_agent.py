"""An agent served as an MCP tool over stdio (``tracedagent.mcp.serve_agent``), for the tests.

Its model is scripted (the answer is ``ANSWER``, or a step-budget give-up with ``--give-up``);
with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, its spans and the SDK server's go to that collector.
"""

from __future__ import annotations

import os
import sys

from tracedagent import Agent, Budget
from tracedagent.mcp import serve_agent
from tracedagent.testing import FakeModel, tool_call

ANSWER = "Order A-17 shipped on Monday."


def lookup(order_id: str) -> str:
    """Look an order up."""
    return "shipped"


if __name__ == "__main__":
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from tracedagent import configure

        configure(service_name=os.environ.get("OTEL_SERVICE_NAME", "served-agent"))
    give_up = "--give-up" in sys.argv
    script = [tool_call("lookup", {"order_id": str(i)}) for i in range(5)] if give_up else \
        [tool_call("lookup", {"order_id": "A-17"}), ANSWER]
    agent = Agent(FakeModel(script), [lookup], name="orders", budget=Budget(max_steps=2))
    serve_agent(agent, description="Answers questions about orders.").run()
