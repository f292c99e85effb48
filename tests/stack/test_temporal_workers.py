"""Runs on the real Temporal dev server with workers in processes of their own, spans through
the real Collector into Jaeger: a worker SIGKILLed inside a tool call and a second one finishing
the run (it completes once; the call ran twice, as activities are at least once; one trace,
no span twice, none missing), and 50 runs across two workers, each its own trace."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tracedagent._core import _names as N

from ._stack import ROOT, eventually, jaeger_trace
from ._temporal import TEMPORAL, require_temporal

pytest.importorskip("temporalio")  # the test group installs it: never skipped in CI
from temporalio.client import Client  # noqa: E402

from tracedagent.temporal import result_of, run_on_temporal, start_on_temporal  # noqa: E402


class Worker:
    def __init__(self, queue: str, service: str, files: Path, *options: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.process = subprocess.Popen([sys.executable, "-m", "tests.stack.temporal_worker", queue, service,
                                         str(files), *options], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout.readline().strip() == "ready"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def workers(tmp_path):
    started: list[Worker] = []

    def start(queue: str, service: str, *options: str) -> Worker:
        started.append(Worker(queue, service, tmp_path, *options))
        return started[-1]

    yield start
    for w in started:
        w.stop()


def spans_by_name(trace: dict) -> collections.Counter:
    return collections.Counter(s["operationName"] for s in trace["spans"])


def tags(span: dict) -> dict:
    return {t["key"]: t["value"] for t in span["tags"]}


async def test_a_worker_killed_inside_a_tool_call_and_a_second_worker_finish_the_run_once(
        stack_up, telemetry, service_name, workers, tmp_path):
    require_temporal()
    client = await Client.connect(TEMPORAL)
    queue = f"q-{uuid.uuid4().hex}"
    (tmp_path / "hang").touch()
    first = workers(queue, service_name)
    effects = tmp_path / "effects"
    tracer = telemetry.providers["tracer_provider"]
    run_task = asyncio.create_task(run_on_temporal(client, "durable", "go", task_queue=queue, tracer_provider=tracer))
    deadline = time.monotonic() + 60
    while not (effects.exists() and any(line.startswith("1 ") for line in effects.read_text().splitlines())):
        assert time.monotonic() < deadline and not run_task.done(), "the run never reached the second tool call"
        await asyncio.sleep(0.1)
    first.process.send_signal(signal.SIGKILL)  # inside record(n=1)
    first.process.wait()
    (tmp_path / "hang").unlink()
    second = workers(queue, service_name)
    run = await asyncio.wait_for(run_task, 120)
    telemetry.force_flush(timeout=10)

    assert run.ok and run.output == "done" and run.step_count == 3 and run.trajectory() == ["record", "record"]
    lines = [line.split() for line in effects.read_text().splitlines()]
    pids = {first.process.pid, second.process.pid}
    assert [n for n, _ in lines] == ["0", "1", "1"], "record(1) ran twice: activities are at least once"
    assert {int(pid) for _, pid in lines} == pids and int(lines[-1][1]) == second.process.pid

    expected = {f"{N.TEMPORAL_CLIENT_SPAN} durable": 1, "invoke_agent durable": 1, "step": 3,
                "chat fake-model": 3, "execute_tool record": 2}
    trace = eventually("the run's whole trace in Jaeger", lambda: (
        t if (t := jaeger_trace(run.trace_id)) and spans_by_name(t) == expected else None), timeout=60)
    ids = collections.Counter(s["spanID"] for s in trace["spans"])
    assert max(ids.values()) == 1, "no span twice"
    for span in trace["spans"]:
        parents = [r["spanID"] for r in span.get("references", []) if r["refType"] == "CHILD_OF"]
        assert all(p in ids for p in parents), f"{span['operationName']}'s parent is in the trace"
    attempts = sorted(tags(s)[N.TEMPORAL_ATTEMPT] for s in trace["spans"] if s["operationName"] == "execute_tool record")
    assert attempts == [1, 2], "the killed call's retry is its second attempt; the killed attempt has no span"
    processes = {trace["processes"][s["processID"]]["serviceName"] for s in trace["spans"]}
    assert processes == {service_name}


async def test_fifty_runs_across_two_workers_are_fifty_traces(stack_up, telemetry, service_name, workers, tmp_path):
    require_temporal()
    client = await Client.connect(TEMPORAL)
    queue = f"q-{uuid.uuid4().hex}"
    a, b = workers(queue, service_name), workers(queue, service_name)
    tracer = telemetry.providers["tracer_provider"]
    runs = await asyncio.gather(*(run_on_temporal(client, "durable", f"task {i}", task_queue=queue,
                                                  tracer_provider=tracer) for i in range(50)))
    telemetry.force_flush(timeout=10)
    assert all(run.ok and run.step_count == 3 for run in runs)
    assert len({run.trace_id for run in runs}) == 50
    pids = {int(line.split()[1]) for line in (tmp_path / "effects").read_text().splitlines()}
    assert pids == {a.process.pid, b.process.pid}, "both workers ran calls"
    expected = {f"{N.TEMPORAL_CLIENT_SPAN} durable": 1, "invoke_agent durable": 1, "step": 3,
                "chat fake-model": 3, "execute_tool record": 2}
    for run in runs:
        trace = eventually(f"trace {run.trace_id}", lambda: (
            t if (t := jaeger_trace(run.trace_id)) and spans_by_name(t) == expected else None), timeout=60)
        assert {s["traceID"] for s in trace["spans"]} == {run.trace_id}
