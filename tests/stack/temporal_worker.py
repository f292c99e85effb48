"""A worker process for the Temporal tests: ``python -m tests.stack.temporal_worker QUEUE SERVICE FILES
[ENDPOINT [batch]]``.

It hosts one agent, ``durable``, whose model plays a script by step (``FakeModel(by_step=True)``: the
number of assistant turns it is sent), so that any worker picks up where another stopped, and whose ``record``
tool appends ``N PID`` to FILES/effects before (while FILES/hang exists and N is 1) hanging:
the test kills the worker inside that call. And ``payer``, whose ``refund`` tool requires
approval (it appends ``AMOUNT PID`` to FILES/refunds). Spans go to the collector (or the OTLP/gRPC
ENDPOINT given) one by one, under service SERVICE; with ``batch``, through the SDK's
``BatchSpanProcessor`` with its defaults, as ``configure()`` exports them.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from temporalio.client import Client

from tracedagent import Agent, Completion, tool
from tracedagent.temporal import ActivitySettings, worker
from tracedagent.testing import FakeModel, tool_call

TURNS = [tool_call("record", {"n": 0}, id="c0"), tool_call("record", {"n": 1}, id="c1"), "done"]


def main() -> None:
    queue, service, files = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    endpoint = sys.argv[4] if len(sys.argv) > 4 else "http://127.0.0.1:4317"
    processor = BatchSpanProcessor if sys.argv[5:] == ["batch"] else SimpleSpanProcessor

    @tool
    async def record(n: int) -> str:
        """Record a side effect."""
        with open(files / "effects", "a") as f:
            f.write(f"{n} {os.getpid()}\n")
        while n == 1 and (files / "hang").exists():
            await asyncio.sleep(0.1)
        return f"recorded {n}"

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(processor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))
    agent = Agent(FakeModel(TURNS, by_step=True), [record], name="durable", tracer_provider=provider)

    @tool(requires_approval=True)
    async def refund(amount: int) -> str:
        """Refund a customer: a person approves it first."""
        with open(files / "refunds", "a") as f:
            f.write(f"{amount} {os.getpid()}\n")
        return f"refunded {amount}"

    payer = Agent(FakeModel([tool_call("refund", {"amount": 30}, id="r1"), "done"], by_step=True), [refund],
                  name="payer", tracer_provider=provider)

    async def serve() -> None:
        client = await Client.connect(os.environ.get("TRACEDAGENT_TEMPORAL_ADDRESS", "127.0.0.1:7233"))
        settings = ActivitySettings(heartbeat_timeout=2, retry_interval=0.2)
        async with worker(client, [agent, payer], task_queue=queue, settings=settings,
                          sticky_queue_schedule_to_start_timeout=timedelta(seconds=1)):
            print("ready", flush=True)
            while True:
                await asyncio.sleep(3600)

    asyncio.run(serve())


if __name__ == "__main__":
    main()
