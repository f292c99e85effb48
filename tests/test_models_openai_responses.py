"""OpenAIResponsesModel on the wire: what it sends the Responses API and how it reads the replies
and the streamed events, through the real ``openai`` SDK against a local server. What every
adapter promises (errors, retries, spans, the key) is in ``test_models_contract.py``."""

from __future__ import annotations

import asyncio

import openai
import pytest

import _openai_responses_wire as rw
from _fake_servers import json_reply, serve
from sample_tools import add, shout
from tracedagent import Agent, Stop
from tracedagent._core import _names as N
from tracedagent.models import OpenAIResponsesModel
from tracedagent.models.openai_responses import ResponseFailedError
from tracedagent.testing import Recorder

TASK = "Add 2 and 3, and shout hi."


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    rw.use_key(monkeypatch)


def tool_turn(streamed: bool):
    if streamed:
        return rw.streamed_calls(["Let me ", "check."], ("call_a", "add", ['{"a": 2, ', '"b": 3}']),
                                 ("call_s", "shout", ['{"te', 'xt": "hi"}']))
    return rw.json_reply(rw.response(rw.message("Let me check."), rw.function_call("call_a", "add", {"a": 2, "b": 3}),
                                     rw.function_call("call_s", "shout", {"text": "hi"}), id="resp_calls",
                                     input_tokens=30, output_tokens=12))


def final_answer(streamed: bool):
    options = dict(input_tokens=60, output_tokens=9, reasoning=4, cached=32)
    if streamed:
        return rw.streamed_answer("2 + 3 = 5 ", "and HI.", id="resp_answer", **options)
    return rw.answer("2 + 3 = 5 and HI.", **options)


async def drive(agent: Agent, driver: str):
    if driver == "run":
        return agent.run(TASK), []
    if driver == "arun":
        return await agent.arun(TASK), []
    if driver == "stream":
        with agent.stream(TASK) as stream:
            events = list(stream)
        return stream.run, events
    async with agent.astream(TASK) as astream:
        events = [event async for event in astream]
    return astream.run, events


# --- requests and responses ---------------------------------------------------------


def test_a_plain_answer_request_and_completion():
    with serve(rw.answer("Hello there.", input_tokens=21, output_tokens=4)) as server:
        completion = rw.model_for(server, store=False).complete(
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
            max_output_tokens=50, temperature=0.2)
    [request] = server.requests
    assert request.path == "/v1/responses"
    assert request.body == {"model": rw.MODEL, "instructions": "Be brief.",
                            "input": [{"type": "message", "role": "user", "content": "Hi"}],
                            "max_output_tokens": 50, "temperature": 0.2, "store": False}
    assert completion.text == "Hello there." and not completion.wants_tools
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (21, 4)
    assert (completion.model, completion.response_id, completion.finish_reason) == (
        rw.RESPONSE_MODEL, "resp_answer", "completed")


@pytest.mark.parametrize("driver", ["run", "arun", "stream", "astream"])
def test_tool_calls_and_their_results_make_a_round_trip_in_every_driver(driver):
    rec = Recorder()
    streamed = driver in ("stream", "astream")
    with serve(tool_turn(streamed), final_answer(streamed)) as server:
        agent = Agent(rw.model_for(server), [add, shout], system_prompt="Use tools.", max_output_tokens=100,
                      **rec.providers)
        run, events = asyncio.run(drive(agent, driver))

    assert run.ok and run.output == "2 + 3 = 5 and HI."
    assert [(c.id, c.name, c.arguments) for c in run.steps[0].completion.tool_calls] == [
        ("call_a", "add", {"a": 2, "b": 3}), ("call_s", "shout", {"text": "hi"})]
    assert [r.content for r in run.steps[0].tool_results] == ["5", "HI"]
    first, second = server.bodies()
    assert first["tools"] == [
        {"type": "function", "name": "add", "description": "Add two integers.", "parameters": add.parameters},
        {"type": "function", "name": "shout", "description": "Upper-case a text.", "parameters": shout.parameters}]
    assert first["max_output_tokens"] == 100 and first["instructions"] == second["instructions"] == "Use tools."
    assert second["input"] == [
        {"type": "message", "role": "user", "content": TASK},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me check."}]},
        {"type": "function_call", "call_id": "call_a", "name": "add", "arguments": '{"a": 2, "b": 3}'},
        {"type": "function_call", "call_id": "call_s", "name": "shout", "arguments": '{"text": "hi"}'},
        {"type": "function_call_output", "call_id": "call_a", "output": "5"},
        {"type": "function_call_output", "call_id": "call_s", "output": "HI"}]
    assert all(body.get("stream") is (True if streamed else None) for body in server.bodies())
    if streamed:
        assert [e.text for e in events if e.type == "text_delta"] == ["Let me ", "check.", "2 + 3 = 5 ", "and HI."]
    sent_async = server.requests[0].headers["x-stainless-async"] != "false"
    assert sent_async is (driver in ("arun", "astream"))

    chat = rec.runs()[0].chat_spans
    assert [s.attributes[N.GEN_AI_RESPONSE_ID] for s in chat] == ["resp_calls", "resp_answer"]
    assert [s.attributes[N.GEN_AI_RESPONSE_FINISH_REASONS] for s in chat] == [("completed",)] * 2
    assert [s.attributes[N.GEN_AI_USAGE_INPUT_TOKENS] for s in chat] == [30, 60]
    assert [s.attributes[N.GEN_AI_USAGE_OUTPUT_TOKENS] for s in chat] == [12, 9]
    # the usage of response.completed, reasoning and cached tokens included
    assert N.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS not in chat[0].attributes
    assert chat[1].attributes[N.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 4
    assert chat[1].attributes[N.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 32
    assert run.steps[1].completion.usage.reasoning_output_tokens == 4


def test_an_incomplete_response_says_why_and_a_refusal_is_the_text():
    with serve(rw.json_reply(rw.response(rw.message("Half an ans"), status="incomplete",
                                         incomplete="max_output_tokens")),
               rw.json_reply(rw.response(rw.message("I can't help with that.", refusal=True)))) as server:
        model = rw.model_for(server)
        cut = model.complete([{"role": "user", "content": "Hi"}])
        refused = model.complete([{"role": "user", "content": "Hi"}])
    assert (cut.text, cut.finish_reason) == ("Half an ans", "max_output_tokens")
    assert refused.text == "I can't help with that."


@pytest.mark.parametrize("raw", ['{"a": 2, "b":', "[2, 3]"])
def test_malformed_arguments_stay_raw_and_are_replayed_as_sent(raw):
    with serve(rw.calls(("call_bad", "add", raw)), rw.answer("Sorry.")) as server:
        run = Agent(rw.model_for(server), [add]).run("Add.")
    assert run.ok and run.steps[0].completion.tool_calls[0].arguments == raw
    assert server.bodies()[1]["input"][1] == {"type": "function_call", "call_id": "call_bad", "name": "add",
                                              "arguments": raw}


def test_a_named_tool_choice_and_whether_it_was_followed_are_on_the_chat_span():
    rec = Recorder()
    with serve(rw.calls(("call_a", "add", {"a": 1, "b": 1})), rw.answer()) as server:
        Agent(rw.model_for(server, tool_choice={"type": "function", "name": "add"}), [add],
              **rec.providers).run("Add.")
    assert server.bodies()[0]["tool_choice"] == {"type": "function", "name": "add"}
    first = rec.runs()[0].chat_spans[0].attributes
    assert (first[N.REQUEST_TOOL_CHOICE], first[N.REQUEST_TOOL_CHOICE_NAME]) == ("function", "add")
    assert first[N.RESPONSE_TOOL_CHOICE_FOLLOWED] is True


# --- failures -----------------------------------------------------------------------


def test_an_error_body_is_the_sdks_error_and_a_named_model_error():
    rec = Recorder()
    with serve(rw.error(400, "Unsupported parameter: 'temperature'")) as server:
        run = Agent(rw.model_for(server, max_retries=0), **rec.providers).run("Hi")
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, openai.BadRequestError)
    assert run.error.body["message"] == "Unsupported parameter: 'temperature'"
    assert rec.runs()[0].chat_spans[0].attributes[N.ERROR_TYPE] == "BadRequestError"


@pytest.mark.parametrize("driver", ["run", "stream"])
def test_a_failed_response_is_a_named_model_error(driver):
    failed = {**rw.response(id="resp_failed", status="failed"), "output": [],
              "error": {"code": "server_error", "message": "The model failed."}}
    reply = (rw.json_reply(failed) if driver == "run" else
             rw.events({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
                        "content_index": 0, "delta": "Hel", "logprobs": []},
                       {"type": "response.failed", "response": failed}))
    rec = Recorder()
    with serve(reply) as server:
        run, events = asyncio.run(drive(Agent(rw.model_for(server, max_retries=0), **rec.providers), driver))
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, ResponseFailedError)
    assert (str(run.error), run.error.code) == ("The model failed.", "server_error")
    assert rec.runs()[-1].chat_spans[0].attributes[N.ERROR_TYPE] == "ResponseFailedError"


def test_a_body_without_output_is_a_malformed_response():
    with serve(json_reply({"id": "resp_x", "object": "response"})) as server:
        run = Agent(rw.model_for(server, max_retries=0)).run("Hi")
    assert run.stop is Stop.MODEL_ERROR and type(run.error).__name__ == "MalformedResponseError"
    assert "output" in str(run.error)


def test_request_options_the_loop_sets_are_refused():
    with pytest.raises(TypeError, match="input, instructions"):
        OpenAIResponsesModel("m", input=[], instructions="x")


@pytest.mark.parametrize("deltas", [True, False], ids=["deltas", "whole-at-done"])
def test_a_stream_that_names_items_only_by_call_id_adds_up_to_its_calls(deltas):
    """llama.cpp's server: no ``output_index``, no ``item.id``; its events' ``item_id`` is the
    ``call_id``. Some servers send a call's arguments only whole, when it is done."""
    def call(call_id: str, name: str, fragments: list[str]) -> list[dict]:
        opened = {k: v for k, v in rw.function_call(call_id, name, "").items() if k != "id"}
        streamed = [{"type": "response.function_call_arguments.delta", "item_id": call_id, "delta": f}
                    for f in fragments] if deltas else []
        done = {"type": "response.output_item.done", "item": {**opened, "arguments": "".join(fragments)}}
        return [{"type": "response.output_item.added", "item": opened}, *streamed, done]

    whole = rw.response(rw.function_call("fc_1", "add", '{"a": 2, "b": 3}'),
                        rw.function_call("fc_2", "shout", '{"text": "hi"}'), id="resp_calls")
    reply = rw.events(*call("fc_1", "add", ['{"a": 2, ', '"b": 3}']), *call("fc_2", "shout", ['{"text": "hi"}']),
                      {"type": "response.completed", "response": whole})
    with serve(reply, rw.streamed_answer("Done.")) as server:
        with Agent(rw.model_for(server), [add, shout]).stream(TASK) as stream:
            list(stream)
    assert stream.run.ok and stream.run.trajectory() == ["add", "shout"]
    assert [c.arguments for c in stream.run.steps[0].completion.tool_calls] == [{"a": 2, "b": 3}, {"text": "hi"}]
