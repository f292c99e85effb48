"""Replay from the real Jaeger: a run exported through the Collector, read back by trace id."""

from __future__ import annotations

import subprocess
import sys

from tracedagent import Stop
from tracedagent._cli._demo import SCENARIOS, build_agent, run_scenario
from tracedagent.testing import Replay

from ._stack import JAEGER, eventually, jaeger_trace, tracedagent


def test_a_run_seen_in_jaeger_becomes_a_passing_regression_test(telemetry, tmp_path):
    scenario = next(s for s in SCENARIOS if s.stops_with is Stop.REPEATED_CALL)
    agent = build_agent(scenario, pace=0, tracer_provider=telemetry.tracer_provider,
                        meter_provider=telemetry.meter_provider, capture_content=True)
    run = run_scenario(agent, scenario)
    telemetry.force_flush(timeout=10)
    spans = 1 + 2 * run.step_count + sum(len(s.tool_results) for s in run.steps)  # run, steps, chats, tools
    eventually(f"trace {run.trace_id} with {spans} spans in Jaeger",
               lambda: (t := jaeger_trace(run.trace_id)) and len(t["spans"]) >= spans)

    replay = Replay.from_jaeger(run.trace_id, url=JAEGER)
    again = replay.run()
    replay.check(again)
    assert again.stop is Stop.REPEATED_CALL
    assert again.not_dispatched_tools() == run.not_dispatched_tools() == ["check_ticket"]

    out = tmp_path / "test_replay_stuck.py"
    made = tracedagent("replay", run.trace_id, "--jaeger", JAEGER, "-o", out)
    assert made.returncode == 0, made.stderr
    tested = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert tested.returncode == 0, tested.stdout[-3000:]
    assert "1 passed" in tested.stdout
