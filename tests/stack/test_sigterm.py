"""SIGTERM in the middle of a loop of runs, through the real stack: every run that finished
before the signal is in Jaeger, whole, and the process ended as SIGTERM ends it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from ._stack import OTLP_GRPC, ROOT, eventually, jaeger_trace

LOOP = textwrap.dedent("""
    import sys, time
    from tracedagent import Agent, configure, tool
    from tracedagent.testing import FakeModel, tool_call

    @tool
    def add(a: int, b: int) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b

    configure(service_name=sys.argv[1], endpoint=sys.argv[2], protocol="grpc")
    while True:  # until SIGTERM
        run = Agent(FakeModel([tool_call("add", {"a": 2, "b": 3}), "5"]), [add]).run("add 2 and 3")
        print(run.trace_id, flush=True)  # finished
        time.sleep(0.02)
""")
SPANS_PER_RUN = 6
"""invoke_agent, two steps, two chat calls and one execute_tool."""


def test_sigterm_mid_loop_loses_no_finished_run(stack_up, service_name):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACEDAGENT_"))}
    env["PYTHONPATH"] = str(ROOT)
    process = subprocess.Popen([sys.executable, "-c", LOOP, f"{service_name}-sigterm", OTLP_GRPC], cwd=ROOT,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        finished = [process.stdout.readline().strip() for _ in range(44)]
        process.send_signal(signal.SIGTERM)
        rest, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    finished += rest.split()

    assert process.returncode == -signal.SIGTERM, stderr
    assert stderr == ""
    for trace_id in finished:
        trace = eventually(f"run {trace_id} in Jaeger with {SPANS_PER_RUN} spans",
                           lambda: (t := jaeger_trace(trace_id)) and len(t["spans"]) >= SPANS_PER_RUN and t)
        assert len(trace["spans"]) == SPANS_PER_RUN
