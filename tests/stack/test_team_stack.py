"""A team through the real stack: one trace in Jaeger, found by the top run's stop reason and by
the conversation id, with every sub-agent's run inside it and honest totals."""

from __future__ import annotations

import uuid

from tracedagent import Agent, Budget, Completion, ToolCall, tool
from tracedagent.testing import FakeModel, tool_call

from ._stack import eventually, jaeger_traces, tracedagent
from .test_e2e import tags


@tool
def search(q: str) -> str:
    """Search."""
    return f"results for {q}"


def test_a_team_is_one_trace_found_by_stop_reason_and_by_conversation(telemetry, service_name):
    suffix = uuid.uuid4().hex[:6]
    conversation = f"chat-{suffix}"
    researcher = Agent(FakeModel([tool_call("search", {"q": "delays"}), "found"]), [search],
                       name=f"researcher-{suffix}", **telemetry.providers)
    writer = Agent(FakeModel([tool_call("search", {"q": str(i)}) for i in range(5)]), [search],
                   name=f"writer-{suffix}", budget=Budget(max_steps=2), **telemetry.providers)
    planner = Agent(FakeModel([Completion(tool_calls=[ToolCall("r", researcher.name, {"task": "find"}),
                                                      ToolCall("w", writer.name, {"task": "write"})]), "done"]),
                    [researcher.as_tool(description="Researches."), writer.as_tool(description="Writes.")],
                    name=f"planner-{suffix}", **telemetry.providers)
    run = planner.run("plan", conversation_id=conversation)
    telemetry.force_flush(timeout=10)
    assert run.ok and {r.stop.value for r in run.sub_runs} == {"answered", "step_budget_exhausted"}

    def complete(found: list[dict]) -> dict | None:
        runs = [s for t in found for s in t["spans"] if s["operationName"].startswith("invoke_agent")]
        return found[0] if len(found) == 1 and len(runs) == 3 else None

    by_stop = eventually("the team's trace by its stop reason", lambda: complete(jaeger_traces(
        service_name, {"tracedagent.stop_reason": "answered", "gen_ai.agent.name": planner.name})))
    by_conversation = eventually("the team's trace by its conversation", lambda: complete(jaeger_traces(
        service_name, {"gen_ai.conversation.id": conversation})))
    assert by_stop["traceID"] == by_conversation["traceID"] == run.trace_id

    spans = {s["spanID"]: s for s in by_stop["spans"]}
    runs = {tags(s)["gen_ai.agent.name"]: s for s in spans.values() if s["operationName"].startswith("invoke_agent")}
    assert {tags(s)["gen_ai.conversation.id"] for s in runs.values()} == {conversation}
    for child in (researcher.name, writer.name):
        parent = spans[runs[child]["references"][0]["spanID"]]
        assert parent["operationName"] == f"execute_tool {child}"
    assert tags(spans[runs[writer.name]["references"][0]["spanID"]])["tracedagent.sub_agent.stop_reason"] == \
        "step_budget_exhausted"
    chats = [tags(s) for s in spans.values() if s["operationName"].startswith("chat")]
    assert sum(c["gen_ai.usage.input_tokens"] for c in chats) == run.input_tokens
    assert tags(runs[planner.name])["tracedagent.usage.total_input_tokens"] == run.input_tokens

    listed = tracedagent("traces", "--service", service_name, "--conversation", conversation, "--full-ids")
    assert listed.returncode == 0, listed.stderr
    assert run.trace_id in listed.stdout and planner.name in listed.stdout
