"""A typed answer on the wire (#37): what each adapter asks its provider for, through the real
SDKs against local servers - OpenAI's ``response_format`` / ``text.format`` with a strict JSON
schema, Anthropic's forced output tool (its call read back as the answer's text, never a tool
call) - and that a server ignoring the request loses nothing: JSON text is validated all the same."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

import _anthropic_wire as anthropic_wire
import _openai_responses_wire as responses_wire
import _openai_wire as openai_wire
from _fake_servers import serve
from sample_tools import add
from tracedagent import Agent, Stop
from tracedagent.testing import Recorder

PARIS = {"city": "Paris", "celsius": 21}


@dataclass
class Weather:
    city: str
    celsius: int


@dataclass
class Forecast:
    city: str
    note: str = ""  # optional: the schema cannot be strict


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    anthropic_wire.use_key(monkeypatch)
    openai_wire.use_key(monkeypatch)


def _weather_schema(strict: bool) -> dict:
    schema = {"properties": {"city": {"title": "City", "type": "string"},
                             "celsius": {"title": "Celsius", "type": "integer"}},
              "required": ["city", "celsius"], "title": "Weather", "type": "object"}
    return {**schema, "additionalProperties": False} if strict else schema


# --- OpenAI Chat Completions ------------------------------------------------------------------------

def test_openai_chat_sends_a_strict_json_schema_and_validates_the_answer():
    with serve(openai_wire.answer(json.dumps(PARIS))) as server:
        agent = Agent(openai_wire.model_for(server), output_type=Weather)
        run = agent.run("Weather in Paris?")
    [body] = server.bodies()
    assert agent.output_mode == "native"
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "Weather", "schema": _weather_schema(strict=True), "strict": True}}
    assert all("JSON schema" not in m["content"] for m in body["messages"])  # asked natively, not prompted
    assert run.ok and run.output == Weather("Paris", 21)


def test_openai_chat_sends_a_schema_that_cannot_be_strict_as_guidance():
    with serve(openai_wire.answer('{"city": "Oslo"}')) as server:
        run = Agent(openai_wire.model_for(server), output_type=Forecast).run("go")
    [body] = server.bodies()
    fmt = body["response_format"]["json_schema"]
    assert fmt["strict"] is False and "additionalProperties" not in fmt["schema"]
    assert run.output == Forecast(city="Oslo")


def test_openai_chat_instructs_for_a_type_that_is_not_an_object():
    with serve(openai_wire.answer("[1, 2]")) as server:
        run = Agent(openai_wire.model_for(server), output_type=list[int], system_prompt="Be brief.").run("go")
    [body] = server.bodies()
    assert "response_format" not in body
    assert body["messages"][0]["role"] == "system" and '"type":"array"' in body["messages"][0]["content"]
    assert run.output == [1, 2]


def test_openai_chat_a_server_ignoring_the_format_is_retried_with_the_problem():
    with serve(openai_wire.answer("It is 21 degrees."), openai_wire.answer(json.dumps(PARIS))) as server:
        run = Agent(openai_wire.model_for(server), output_type=Weather).run("go")
    first, second = server.bodies()
    assert run.ok and run.output_retries == 1
    assert second["messages"][-1]["role"] == "user" and "not a valid Weather" in second["messages"][-1]["content"]
    assert second["response_format"] == first["response_format"]


def test_openai_chat_prompted_mode_sends_no_format():
    with serve(openai_wire.answer(json.dumps(PARIS))) as server:
        run = Agent(openai_wire.model_for(server), output_type=Weather, output_mode="prompted").run("go")
    [body] = server.bodies()
    assert "response_format" not in body and "JSON schema of Weather" in body["messages"][0]["content"]
    assert run.ok


# --- OpenAI Responses --------------------------------------------------------------------------------

def test_openai_responses_sends_text_format_json_schema():
    with serve(responses_wire.answer(json.dumps(PARIS))) as server:
        run = Agent(responses_wire.model_for(server), output_type=Weather).run("go")
    [body] = server.bodies()
    assert body["text"] == {"format": {"type": "json_schema", "name": "Weather",
                                       "schema": _weather_schema(strict=True), "strict": True}}
    assert run.ok and run.output == Weather("Paris", 21)


# --- Anthropic ----------------------------------------------------------------------------------------

def _output_tool(schema: dict) -> dict:
    return {"name": "final_result", "description": "Give the final answer, a Weather, as this tool's input.",
            "input_schema": schema}


def test_anthropic_forces_the_output_tool_and_its_call_is_the_answer():
    reply = anthropic_wire.message(anthropic_wire.text("Here it is."),
                                   anthropic_wire.tool_use("toolu_1", "final_result", PARIS), stop="tool_use")
    with serve(reply) as server:
        agent = Agent(anthropic_wire.model_for(server), output_type=Weather)
        run = agent.run("Weather in Paris?")
    [body] = server.bodies()
    assert agent.output_mode == "tool"
    assert body["tools"] == [_output_tool(_weather_schema(strict=False))]
    assert body["tool_choice"] == {"type": "tool", "name": "final_result"}
    assert run.ok and run.output == Weather("Paris", 21) and json.loads(run.text) == PARIS
    assert run.requested_tools() == [] and run.steps[0].completion.tool_calls == []  # not a requested call


def test_anthropic_with_tools_asks_for_any_tool_and_the_output_tool_is_not_counted():
    with serve(anthropic_wire.calls(("toolu_a", "add", {"a": 2, "b": 3})),
               anthropic_wire.message(anthropic_wire.tool_use("toolu_2", "final_result", PARIS), stop="tool_use")
               ) as server:
        run = Agent(anthropic_wire.model_for(server), [add], output_type=Weather).run("go")
    first, second = server.bodies()
    assert [t["name"] for t in first["tools"]] == ["add", "final_result"] and first["tool_choice"] == {"type": "any"}
    assert run.ok and run.requested_tools() == ["add"] and run.trajectory() == ["add"]


def test_anthropic_a_server_ignoring_the_forced_tool_answers_with_text_json():
    with serve(anthropic_wire.answer(json.dumps(PARIS))) as server:
        run = Agent(anthropic_wire.model_for(server), output_type=Weather).run("go")
    assert run.ok and run.output == Weather("Paris", 21)


def test_anthropic_an_invalid_output_tool_call_is_retried_then_stops_invalid_output():
    bad = anthropic_wire.message(anthropic_wire.tool_use("toolu_1", "final_result", {"city": "Paris"}), stop="tool_use")
    with serve(bad, bad) as server:
        run = Agent(anthropic_wire.model_for(server), output_type=Weather).run("go")
    first, second = server.bodies()
    assert run.stop is Stop.INVALID_OUTPUT and run.output_retries == 1
    assert second["messages"][1] == {"role": "assistant", "content": [{"type": "text", "text": '{"city": "Paris"}'}]}
    assert "celsius" in second["messages"][2]["content"][0]["text"]


def test_anthropic_request_options_choosing_the_tool_choice_win():
    reply = anthropic_wire.message(anthropic_wire.tool_use("toolu_1", "final_result", PARIS), stop="tool_use")
    with serve(reply) as server:
        run = Agent(anthropic_wire.model_for(server, tool_choice={"type": "auto"}), output_type=Weather).run("go")
    [body] = server.bodies()
    assert body["tool_choice"] == {"type": "auto"} and run.ok


@pytest.mark.parametrize("driver", ["stream", "astream"])
async def test_anthropic_a_streamed_output_tool_call_is_the_answers_text(driver):
    fragments = ['{"city": "Pa', 'ris", "celsius": 21}']
    reply = anthropic_wire.streamed(("tool_use", ("toolu_1", "final_result", fragments)), stop="tool_use")
    rec = Recorder()
    with serve(reply) as server:
        agent = Agent(anthropic_wire.model_for(server), output_type=Weather, **rec.providers)
        if driver == "stream":
            with agent.stream("go") as stream:
                texts = [e.text for e in stream if type(e).__name__ == "TextDelta"]
        else:
            async with agent.astream("go") as stream:
                texts = [e.text async for e in stream if type(e).__name__ == "TextDelta"]
    assert texts == fragments
    assert stream.run.ok and stream.run.output == Weather("Paris", 21) and stream.run.requested_tools() == []


def test_a_tool_named_like_the_output_tool_is_refused_in_tool_mode():
    def final_result(x: int) -> int:
        """Clashes."""
        return x

    with serve() as server:
        with pytest.raises(ValueError, match="final_result"):
            Agent(anthropic_wire.model_for(server), [final_result], output_type=Weather)
        assert Agent(anthropic_wire.model_for(server), [final_result], output_type=Weather,
                     output_mode="prompted").output_mode == "prompted"
