"""OpenAIChatModel on the wire: what it sends the Chat Completions API and how it reads the
replies, through the real ``openai`` SDK against a local server. What every adapter promises
(errors, retries, spans, the key) is in ``test_models_contract.py``."""

from __future__ import annotations

import json

import openai
import pytest

from _fake_servers import json_reply, serve
from _openai_wire import FAKE_KEY, answer, calls, model_for, use_key
from sample_tools import add, shout
from tracedagent import Agent, ToolOutcome
from tracedagent._core import _names as N
from tracedagent.models import OpenAIChatModel
from tracedagent.testing import Recorder


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    use_key(monkeypatch)


# --- requests and responses ---------------------------------------------------------


def test_text_answer_request_shape():
    with serve(answer("Hello there.")) as server:
        model_for(server).complete([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
                                   max_output_tokens=50, temperature=0.2)
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body == {"model": "gpt-test",
                            "messages": [{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": "Hi"}],
                            "max_completion_tokens": 50, "temperature": 0.2}


def test_unset_options_are_not_sent_and_request_options_are():
    with serve(answer(), answer()) as server:
        model_for(server, seed=7, max_tokens_field="max_tokens").complete([{"role": "user", "content": "Hi"}])
        model_for(server, max_tokens_field="max_tokens").complete([{"role": "user", "content": "Hi"}],
                                                                  max_output_tokens=64)
    first, second = server.bodies()
    assert first == {"model": "gpt-test", "messages": [{"role": "user", "content": "Hi"}], "seed": 7}
    assert second["max_tokens"] == 64 and "max_completion_tokens" not in second


def test_tool_calls_and_their_results_on_the_wire():
    with serve(calls(("call_a", "add", '{"a": 2, "b": 3}'), ("call_s", "shout", '{"text": "hi"}')),
               answer("2 + 3 = 5 and HI.")) as server:
        Agent(model_for(server), [add, shout], system_prompt="Use tools.", max_output_tokens=100).run(
            "Add 2 and 3, and shout hi.")

    first, second = server.bodies()
    assert first["tools"] == [
        {"type": "function", "function": {"name": "add", "description": "Add two integers.",
                                          "parameters": add.parameters}},
        {"type": "function", "function": {"name": "shout", "description": "Upper-case a text.",
                                          "parameters": shout.parameters}}]
    assert first["max_completion_tokens"] == 100
    assert second["messages"] == [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Add 2 and 3, and shout hi."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}},
            {"id": "call_s", "type": "function", "function": {"name": "shout", "arguments": '{"text": "hi"}'}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "5"},
        {"role": "tool", "tool_call_id": "call_s", "content": "HI"}]


@pytest.mark.parametrize("raw", ['{"a": 2, "b":', "[2, 3]", "not json at all"])
def test_malformed_tool_arguments_stay_raw_and_registry_answers_invalid(raw):
    with serve(calls(("call_bad", "add", raw)), answer("Sorry.")) as server:
        run = Agent(model_for(server), [add]).run("Add.")
    call = run.steps[0].completion.tool_calls[0]
    assert call.arguments == raw
    [result] = run.steps[0].tool_results
    assert result.outcome is ToolOutcome.INVALID_ARGUMENTS
    replayed = server.bodies()[1]["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert replayed == raw  # the model sees exactly what it sent
    assert run.ok


@pytest.mark.parametrize("drop_id", [True, False], ids=["id-missing", "id-empty"])
def test_calls_a_server_sent_without_ids_get_ids_that_match_their_results(drop_id):
    reply = calls(("", "add", '{"a": 2, "b": 3}'), ("", "add", '{"a": 1, "b": 1}'))
    if drop_id:
        body = json.loads(reply.body)
        for call in body["choices"][0]["message"]["tool_calls"]:
            del call["id"]
        reply = json_reply(body)
    with serve(reply, answer()) as server:
        run = Agent(model_for(server), [add]).run("Add.")
    assert run.ok and run.trajectory() == ["add", "add"]
    sent = server.bodies()[1]["messages"]
    call_ids = [call["id"] for call in sent[1]["tool_calls"]]
    assert all(call_ids) and len(set(call_ids)) == 2
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == call_ids


def test_cached_prompt_tokens_are_reported():
    rec = Recorder()
    with serve(answer(input_tokens=1200, output_tokens=5, cached=1024)) as server:
        run = Agent(model_for(server), **rec.providers).run("Hi")
    usage = run.steps[0].completion.usage
    assert (usage.input_tokens, usage.cache_read_input_tokens) == (1200, 1024)
    [span] = rec.runs()[0].chat_spans
    assert span.attributes[N.GEN_AI_USAGE_INPUT_TOKENS] == 1200
    assert span.attributes[N.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 1024


def test_a_server_without_usage_counts_zero_tokens():
    body = {"id": "x", "object": "chat.completion", "created": 1, "model": "llama3.2",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]}
    with serve(json_reply(body)) as server:
        completion = model_for(server).complete([{"role": "user", "content": "Hi"}])
    assert completion.text == "ok" and completion.usage.total_tokens == 0


# --- endpoints and configuration ----------------------------------------------------


def test_base_url_from_the_sdk_environment_variable(monkeypatch):
    with serve(answer("from env")) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        model = OpenAIChatModel("llama3.2")
        assert (model.server_address, model.server_port) == ("127.0.0.1", server.port)
        assert model.complete([{"role": "user", "content": "Hi"}]).text == "from env"
    assert server.requests[0].headers["authorization"] == f"Bearer {FAKE_KEY}"


def test_default_endpoint_is_openai():
    model = OpenAIChatModel("gpt-4.1-mini")
    assert (model.provider_name, model.model_name) == ("openai", "gpt-4.1-mini")
    assert (model.server_address, model.server_port) == ("api.openai.com", 443)


def test_a_ready_client_is_used_as_is_and_conflicting_options_are_refused():
    with serve(answer("mine")) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="local-placeholder")
        assert OpenAIChatModel("m", client).complete([{"role": "user", "content": "Hi"}]).text == "mine"
        with pytest.raises(TypeError, match="base_url"):
            OpenAIChatModel("m", client, base_url=server.url)
    with pytest.raises(TypeError, match="messages"):
        OpenAIChatModel("m", messages=[])
    with pytest.raises(ValueError, match="max_tokens_field"):
        OpenAIChatModel("m", max_tokens_field="max_output_tokens")


def test_reasoning_tokens_are_reported_on_the_chat_span():
    rec = Recorder()
    body = json.loads(answer(output_tokens=50).body)
    body["usage"]["completion_tokens_details"] = {"reasoning_tokens": 38}
    with serve(json_reply(body)) as server:
        run = Agent(model_for(server), **rec.providers).run("Hi")
    assert run.steps[0].completion.usage.reasoning_output_tokens == 38
    [span] = rec.runs()[0].chat_spans
    assert span.attributes[N.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 38
    assert span.attributes[N.GEN_AI_USAGE_OUTPUT_TOKENS] == 50  # reasoning tokens are output tokens
