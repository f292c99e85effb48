"""A run that paused for approval and the run that resumed it, through the real Collector into
Jaeger: two traces, the resumed run span linked to the paused one, one conversation id, found by
stop reason; the waiting and decided calls on the spans; the approval metrics in Prometheus."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from tracedagent import Agent, Registry, ToolCall, ask, tool
from tracedagent.testing import FakeModel, tool_call

from ._stack import eventually, jaeger_trace, jaeger_traces, prom_query, tracedagent
from .test_e2e import tags

ROOT = Path(__file__).resolve().parents[2]


@tool
def refund(order_id: str, amount: float) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order_id}"


def over_100(call: ToolCall):
    return ask("over 100 USD") if call.arguments.get("amount", 0) > 100 else None


def test_a_resumed_run_links_to_the_paused_one_in_jaeger_in_one_conversation(telemetry, service_name, tmp_path):
    suffix = uuid.uuid4().hex[:6]
    name, conversation = f"desk-{suffix}", f"chat-{suffix}"
    paused = Agent(FakeModel([tool_call("refund", {"order_id": "A1", "amount": 250.0}, id="r1")]),
                   Registry([refund], policy=over_100), name=name, **telemetry.providers).run(
        "refund A1", conversation_id=conversation)
    telemetry.force_flush(timeout=10)
    assert paused.pending[0].id == "r1"
    (tmp_path / "cp.json").write_text(paused.checkpoint())

    # Resumed hours later, in another process, which exports through the same Collector.
    script = textwrap.dedent(f"""
        import json
        from tracedagent import Agent, Registry, ask, configure, tool
        from tracedagent.testing import FakeModel

        @tool
        def refund(order_id: str, amount: float) -> str:
            '''Refund an order.'''
            return f"refunded {{amount}} on {{order_id}}"

        def over_100(call):
            return ask("over 100 USD") if call.arguments.get("amount", 0) > 100 else None

        t = configure(service_name={service_name!r})
        run = Agent(FakeModel(["refunded"]), Registry([refund], policy=over_100), name={name!r}).resume(
            open({str(tmp_path / "cp.json")!r}).read(), {{"r1": True}})
        t.shutdown()
        print(json.dumps({{"trace_id": run.trace_id, "ok": run.ok}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    resumed = __import__("json").loads(done.stdout.strip().splitlines()[-1])
    assert resumed["ok"] and resumed["trace_id"] != paused.trace_id

    def run_span(trace_id: str) -> dict | None:
        found = jaeger_trace(trace_id)
        return next((s for s in found["spans"] if s["operationName"] == f"invoke_agent {name}"), None) \
            if found else None

    waiting = eventually("the paused run in Jaeger", lambda: run_span(paused.trace_id))
    continued = eventually("the resumed run in Jaeger", lambda: run_span(resumed["trace_id"]))
    w, c = tags(waiting), tags(continued)
    assert w["tracedagent.stop_reason"] == "approval_required" and w["tracedagent.tools.pending"] == ["refund"]
    assert w["tracedagent.checkpoint.id"] == paused.checkpoint_id == c["tracedagent.resumed_checkpoint.id"]
    assert "error" not in w or w["error"] is False, "a pause is not a failure"
    assert w["gen_ai.conversation.id"] == c["gen_ai.conversation.id"] == conversation
    assert c["tracedagent.resumed_from"] == paused.trace_id and c["tracedagent.approval.approved"] == ["refund"]
    links = [r for r in continued["references"] if r["traceID"] != resumed["trace_id"]]
    assert [(r["traceID"], r["spanID"]) for r in links] == [(paused.trace_id, waiting["spanID"])]

    by_conversation = eventually("both runs by their conversation", lambda: (lambda found: found if len(found) == 2
                                 else None)(jaeger_traces(service_name, {"gen_ai.conversation.id": conversation})))
    assert {t["traceID"] for t in by_conversation} == {paused.trace_id, resumed["trace_id"]}
    listed = tracedagent("traces", "--service", service_name, "--stop", "approval_required", "--full-ids")
    assert listed.returncode == 0, listed.stderr
    assert paused.trace_id in listed.stdout and resumed["trace_id"] not in listed.stdout
    shown = tracedagent("trace", resumed["trace_id"])
    assert shown.returncode == 0, shown.stderr
    assert f"resumed from trace {paused.trace_id}" in shown.stdout
    shown = tracedagent("trace", paused.trace_id)
    assert "waiting for approval: refund" in shown.stdout

    wait = eventually("the approval wait in Prometheus", lambda: prom_query(
        f'tracedagent_approval_wait_seconds_count{{gen_ai_agent_name="{name}"}}') or None, timeout=90)
    assert float(wait[0]["value"][1]) == 1
