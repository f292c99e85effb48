"""What a trace UI's GenAI tab reads off a run: the run span's answer, the agent's identity,
and a failed call's status description (issue #31)."""

from __future__ import annotations

import json
import uuid

import pytest
from opentelemetry.trace import StatusCode

from sample_tools import TOOLS
from tracedagent import Agent, Budget, Completion, Stop
from tracedagent.testing import FakeModel, Recorder, tool_call


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def _run(rec: Recorder, script, **agent_options):
    agent = Agent(FakeModel(script), TOOLS, name="support", **rec.providers, **agent_options)
    return agent.run("Where is my order?")


def test_the_run_span_holds_the_final_answer_when_content_is_captured(rec):
    run = _run(rec, [tool_call("search_help", {"q": "order"}), Completion(text="It ships today.")],
               capture_content=True)
    span = rec.span("invoke_agent support")
    assert run.stop is Stop.ANSWERED
    assert json.loads(span.attributes["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "It ships today."}], "finish_reason": "stop"}]


def test_a_stopped_run_span_shows_its_sentence_with_the_stop_reason_as_finish_reason(rec):
    run = _run(rec, [tool_call("search_help", {"q": str(i)}) for i in range(5)], capture_content=True,
               budget=Budget(max_steps=2))
    [message] = json.loads(rec.span("invoke_agent support").attributes["gen_ai.output.messages"])
    assert run.stop is Stop.STEP_BUDGET
    assert message["finish_reason"] == "step_budget_exhausted"
    assert message["parts"][0]["content"] == run.output


def test_no_answer_on_the_run_span_without_capture(rec):
    _run(rec, [Completion(text="It ships today.")], capture_content=False)
    assert "gen_ai.output.messages" not in rec.span("invoke_agent support").attributes


def test_the_answer_is_redacted_like_all_captured_content(rec):
    _run(rec, [Completion(text="Use key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789 now.")], capture_content=True)
    assert "sk-proj-abcdefghijklmnop" not in rec.span("invoke_agent support").attributes["gen_ai.output.messages"]


def test_description_version_and_id_identify_the_agent(rec):
    _run(rec, [Completion(text="ok")], description="Answers order questions.\nPolite.", version="2.1.0")
    attributes = rec.span("invoke_agent support").attributes
    assert attributes["gen_ai.agent.description"] == "Answers order questions.\nPolite."
    assert attributes["gen_ai.agent.version"] == "2.1.0"
    agent_id = attributes["gen_ai.agent.id"]
    assert uuid.UUID(agent_id).version == 5
    rec.clear()
    # The same definition gets the same id (in any process: it is derived, not random)...
    _run(rec, [Completion(text="ok")], version="2.1.0")
    assert rec.span("invoke_agent support").attributes["gen_ai.agent.id"] == agent_id
    assert "gen_ai.agent.description" not in rec.span("invoke_agent support").attributes
    rec.clear()
    # ...another version another one, and an id the user gives wins.
    _run(rec, [Completion(text="ok")], version="2.2.0")
    assert rec.span("invoke_agent support").attributes["gen_ai.agent.id"] != agent_id
    rec.clear()
    _run(rec, [Completion(text="ok")], agent_id="asst_123")
    attributes = rec.span("invoke_agent support").attributes
    assert attributes["gen_ai.agent.id"] == "asst_123" and "gen_ai.agent.version" not in attributes


def test_a_long_description_is_bounded(rec):
    _run(rec, [Completion(text="ok")], description="x" * 10_000)
    assert len(rec.span("invoke_agent support").attributes["gen_ai.agent.description"]) <= 1024


class _Unreachable(Exception):
    pass


def test_a_failed_model_call_has_a_status_description_without_the_message(rec):
    _run(rec, [_Unreachable("POST failed; Authorization: Bearer sk-secret-value")], capture_content=True)
    span = rec.span("chat fake-model")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "the model call raised _Unreachable"
    assert span.attributes["error.type"] == "_Unreachable"


@pytest.mark.parametrize("capture", [False, True])
def test_failed_tool_spans_say_what_happened_and_content_only_when_captured(rec, capture):
    _run(rec, [tool_call("flaky", {"n": 1}), tool_call("refund", {"order_id": "A-1"}), Completion(text="sorry")],
         capture_content=capture)
    flaky, = rec.spans("execute_tool flaky")
    refund, = rec.spans("execute_tool refund")
    assert flaky.status.status_code is StatusCode.ERROR and refund.status.status_code is StatusCode.ERROR
    assert flaky.status.description.startswith("the tool raised ToolError")
    assert refund.status.description.startswith("the registry's policy denied the call")
    # The tool's message is content: in the description only when the user opted in.
    assert ("backend unavailable" in flaky.status.description) is capture
