"""What a run on Temporal costs per step, and how many runs two workers finish per second.

Needs Temporal's dev server (``make stack-up`` starts it on 127.0.0.1:7233). Three figures,
all in this one process against the same server, so they are comparable with each other:

  (a) bare      a plain Temporal workflow that runs the same two activities per step (one
                returning a canned model turn, one a tool's text) with no tracedagent at all:
                what Temporal itself costs per step (a workflow task and two activity round
                trips through the server).
  (b) agent     tracedagent.temporal's workflow, the same steps: RunState's decisions, the
                run/step spans in the workflow, chat and tool spans in the activities (an SDK
                TracerProvider recording in memory), the records as JSON.
  (b)/(a)       what tracedagent adds on top of Temporal, per step.
  (c) runs/s    RUNS two-step runs started at once and served by two worker processes.

Timings are wall time on a shared machine: read the ratio, not the milliseconds.

    python benchmarks/temporal.py [--steps 5] [--runs 6] [--throughput 40]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from tracedagent import Agent, Completion, ToolCall, tool
from tracedagent.temporal import run_on_temporal, worker
from tracedagent.testing import FakeModel

ADDRESS = os.environ.get("TRACEDAGENT_TEMPORAL_ADDRESS", "127.0.0.1:7233")


@tool
def lookup(n: int) -> str:
    """Look something up."""
    return f"found {n}"


def script(steps: int) -> list:
    return [Completion(tool_calls=[ToolCall(f"c{i}", "lookup", {"n": i})]) for i in range(steps - 1)] + ["done"]


@activity.defn(name="bare.model")
async def bare_model(step: int) -> dict:
    return {"text": "", "tool_calls": [{"id": f"c{step}", "name": "lookup", "arguments": {"n": step}}]}


@activity.defn(name="bare.tool")
async def bare_tool(n: int) -> str:
    return f"found {n}"


@workflow.defn(name="bare.run")
class BareRun:
    @workflow.run
    async def run(self, steps: int) -> int:
        for i in range(steps):
            await workflow.execute_activity("bare.model", i, start_to_close_timeout=timedelta(seconds=60))
            if i < steps - 1:
                await workflow.execute_activity("bare.tool", i, start_to_close_timeout=timedelta(seconds=60))
        return steps


async def per_step(client: Client, steps: int, runs: int) -> tuple[float, float]:
    """Bare and traced runs alternate, both workers up throughout, so that the machine's load
    drifts over both alike."""
    queue = f"bench-{uuid.uuid4().hex}"
    # The sandbox as tracedagent.temporal.worker sets it up, this module passed through too.
    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(
        "tracedagent", "opentelemetry", "__main__"))
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    agent = Agent(FakeModel(script(steps), by_step=True), [lookup], name="bench", tracer_provider=provider)
    bare: list[float] = []
    traced: list[float] = []
    async with Worker(client, task_queue=queue, workflows=[BareRun], activities=[bare_model, bare_tool],
                      workflow_runner=runner), worker(client, [agent], task_queue=queue + "-agent"):
        for _ in range(runs):
            started = time.perf_counter()
            await client.execute_workflow("bare.run", steps, id=f"bare-{uuid.uuid4().hex}", task_queue=queue)
            bare.append((time.perf_counter() - started) / steps)
            started = time.perf_counter()
            run = await run_on_temporal(client, "bench", "go", task_queue=queue + "-agent", tracer_provider=provider)
            traced.append((time.perf_counter() - started) / steps)
            assert run.ok and run.step_count == steps, run.stop
    return statistics.median(bare), statistics.median(traced)


def serve(queue: str) -> None:
    """A worker process for the throughput figure: hosts the agent until killed."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    agent = Agent(FakeModel(script(2), by_step=True), [lookup], name="bench", tracer_provider=provider)

    async def main() -> None:
        client = await Client.connect(ADDRESS)
        async with worker(client, [agent], task_queue=queue):
            print("ready", flush=True)
            await asyncio.Event().wait()

    asyncio.run(main())


async def throughput(client: Client, runs: int) -> float:
    queue = f"bench-{uuid.uuid4().hex}"
    workers = [subprocess.Popen([sys.executable, __file__, "--serve", queue], stdout=subprocess.PIPE, text=True)
               for _ in range(2)]
    try:
        for w in workers:
            assert w.stdout.readline().strip() == "ready"
        started = time.perf_counter()
        done = await asyncio.gather(*(run_on_temporal(client, "bench", f"task {i}", task_queue=queue)
                                      for i in range(runs)))
        seconds = time.perf_counter() - started
        assert all(run.ok for run in done)
        return runs / seconds
    finally:
        for w in workers:
            w.kill()
            w.wait()


async def main(args: argparse.Namespace) -> None:
    client = await Client.connect(ADDRESS)
    bare, traced = await per_step(client, args.steps, args.runs)
    print(f"{args.steps}-step runs, median of {args.runs}, per step:")
    print(f"(a) bare Temporal workflow, same activities: {bare * 1000:7.1f} ms")
    print(f"(b) tracedagent.temporal run:                {traced * 1000:7.1f} ms")
    print(f"(b)/(a) = {traced / bare:.2f}")
    rate = await throughput(client, args.throughput)
    print(f"(c) {args.throughput} two-step runs at once, two worker processes: {rate:.1f} runs/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--throughput", type=int, default=40)
    parser.add_argument("--serve", metavar="QUEUE", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve:
        serve(arguments.serve)
    else:
        asyncio.run(main(arguments))
