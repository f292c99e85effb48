"""AnthropicModel on the wire: what it sends the Messages API and how it reads the replies,
through the real ``anthropic`` SDK against a local server. What every adapter promises
(errors, retries, spans, the key) is in ``test_models_contract.py``."""

from __future__ import annotations

import asyncio
import logging

import anthropic
import pytest

from _anthropic_wire import FAKE_KEY, message, model_for, text, tool_use, use_key
from _fake_servers import serve
from sample_tools import add, shout
from tracedagent import Agent, ToolOutcome
from tracedagent._core import _names as N
from tracedagent.models import AnthropicModel
from tracedagent.models.anthropic import DEFAULT_MAX_TOKENS
from tracedagent.testing import Recorder


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    use_key(monkeypatch)


# --- requests and responses ---------------------------------------------------------


def test_text_answer_request_shape_and_text_blocks_joined():
    with serve(message(text("Hello "), text("there."))) as server:
        completion = model_for(server).complete([{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": "Hi"}])
    [request] = server.requests
    assert request.path == "/v1/messages"
    assert request.body == {"model": "claude-test", "max_tokens": DEFAULT_MAX_TOKENS, "system": "Be brief.",
                            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}
    assert completion.text == "Hello there."


def test_max_tokens_default_is_overridable_and_the_loop_value_wins():
    with serve(message(text("a")), message(text("b"))) as server:
        model = model_for(server, max_tokens=300, metadata={"user_id": "u-1"})
        model.complete([{"role": "user", "content": "Hi"}])
        model.complete([{"role": "user", "content": "Hi"}], max_output_tokens=42)
    first, second = server.bodies()
    assert first["max_tokens"] == 300 and first["metadata"] == {"user_id": "u-1"}
    assert second["max_tokens"] == 42


def test_temperature_is_not_sent_and_that_is_logged_once(caplog):
    with serve(message(text("a")), message(text("b"))) as server:
        model = model_for(server)
        for _ in range(2):
            model.complete([{"role": "user", "content": "Hi"}], temperature=0.2)
    assert all("temperature" not in body for body in server.bodies())
    warnings = [r for r in caplog.records if "temperature" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING


def test_tool_uses_and_their_results_on_the_wire():
    with serve(message(text("Let me compute."), tool_use("toolu_a", "add", {"a": 2, "b": 3}),
                       tool_use("toolu_s", "shout", {"text": "hi"}), stop="tool_use"),
               message(text("2 + 3 = 5 and HI."))) as server:
        Agent(model_for(server), [add, shout], system_prompt="Use tools.", max_output_tokens=100).run(
            "Add 2 and 3, and shout hi.")

    first, second = server.bodies()
    assert first["tools"] == [
        {"name": "add", "description": "Add two integers.", "input_schema": add.parameters},
        {"name": "shout", "description": "Upper-case a text.", "input_schema": shout.parameters}]
    assert first["max_tokens"] == 100 and first["system"] == "Use tools."
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Add 2 and 3, and shout hi."}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me compute."},
            {"type": "tool_use", "id": "toolu_a", "name": "add", "input": {"a": 2, "b": 3}},
            {"type": "tool_use", "id": "toolu_s", "name": "shout", "input": {"text": "hi"}}]},
        {"role": "user", "content": [  # consecutive tool results share one user turn
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "5"},
            {"type": "tool_result", "tool_use_id": "toolu_s", "content": "HI"}]}]


def test_history_turns_merge_by_role_and_system_messages_join():
    history = [{"role": "system", "content": "Rule two."},
               {"role": "user", "content": "Earlier question"},
               {"role": "assistant", "content": "", "tool_calls": [{"id": "toolu_1", "name": "add",
                                                                    "arguments": {"a": 1, "b": 2}}]},
               {"role": "tool", "tool_call_id": "toolu_1", "name": "add", "content": "3"}]
    with serve(message(text("ok"))) as server:
        Agent(model_for(server), [add], system_prompt="Rule one.").run("Now this.", history=history)
    body = server.bodies()[0]
    assert body["system"] == "Rule one.\n\nRule two."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Earlier question"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "add",
                                           "input": {"a": 1, "b": 2}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3"},
                                     {"type": "text", "text": "Now this."}]}]


def test_thinking_blocks_of_a_tool_turn_are_replayed_unmodified():
    thinking = {"type": "thinking", "thinking": "I should add.", "signature": "c2lnbmF0dXJl"}
    redacted = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
    with serve(message(thinking, redacted, tool_use("toolu_t", "add", {"a": 1, "b": 1}), stop="tool_use"),
               message(text("2"))) as server:
        run = Agent(model_for(server), [add]).run("1+1?")
    assert run.ok and run.steps[0].completion.text == ""  # thinking is not the answer
    assistant = server.bodies()[1]["messages"][1]
    assert assistant == {"role": "assistant", "content": [
        thinking, redacted, {"type": "tool_use", "id": "toolu_t", "name": "add", "input": {"a": 1, "b": 1}}]}

    # The blocks travel in the run's messages, so a later run continuing this history sends them too.
    with serve(message(text("again 2"))) as server:
        later = Agent(model_for(server), [add]).run("and again?", history=run.messages[:3])
    assert later.ok
    assert server.bodies()[0]["messages"][1] == assistant


def test_cache_tokens_are_included_in_input_tokens_and_reported_apart():
    rec = Recorder()
    reply = message(text("ok"), input_tokens=3, output_tokens=5, cache_read=1000, cache_creation=200)
    with serve(reply) as server:
        run = Agent(model_for(server), **rec.providers).run("Hi")
    usage = run.steps[0].completion.usage
    assert usage.input_tokens == 3 + 1000 + 200
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (1000, 200)
    assert run.input_tokens == 1203
    [span] = rec.runs()[0].chat_spans
    assert span.attributes[N.GEN_AI_USAGE_INPUT_TOKENS] == 1203
    assert span.attributes[N.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 1000
    assert span.attributes[N.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 200


@pytest.mark.parametrize("raw", ['{"a": 2, "b":', "[2, 3]"])
def test_malformed_tool_input_stays_raw_and_registry_answers_invalid(raw):
    """The API sends ``input`` as an object, but a proxy or a buggy server may not."""
    with serve(message(tool_use("toolu_bad", "add", raw), stop="tool_use"), message(text("Sorry."))) as server:
        run = Agent(model_for(server), [add]).run("Add.")
    assert run.steps[0].completion.tool_calls[0].arguments == raw
    assert run.steps[0].tool_results[0].outcome is ToolOutcome.INVALID_ARGUMENTS
    replayed = server.bodies()[1]["messages"][1]["content"][0]
    assert replayed == {"type": "tool_use", "id": "toolu_bad", "name": "add", "input": {}}
    assert run.ok


# --- endpoints and configuration ----------------------------------------------------


def test_default_endpoint_and_sdk_spans_off_on_the_built_client():
    model = AnthropicModel("claude-sonnet-4-5")
    assert (model.provider_name, model.model_name) == ("anthropic", "claude-sonnet-4-5")
    assert (model.server_address, model.server_port) == ("api.anthropic.com", 443)
    assert model.client.open_telemetry["traces"]["enabled"] is False


def test_a_ready_client_is_used_as_is_and_conflicting_options_are_refused():
    with serve(message(text("mine"))) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key=FAKE_KEY)
        assert AnthropicModel("m", client).complete([{"role": "user", "content": "Hi"}]).text == "mine"
        with pytest.raises(TypeError, match="max_retries"):
            AnthropicModel("m", client, max_retries=5)
    with pytest.raises(TypeError, match="system"):
        AnthropicModel("m", system="no")
    with pytest.raises(ValueError, match="max_tokens"):
        AnthropicModel("m", max_tokens=0)



def test_the_async_client_the_adapter_builds_has_sdk_spans_off_too():
    with serve(message(text("ok"))) as server:
        model = model_for(server)
        assert asyncio.run(model.acomplete([{"role": "user", "content": "Hi"}])).text == "ok"
    assert isinstance(model.async_client, anthropic.AsyncAnthropic)
    assert model.async_client.open_telemetry["traces"]["enabled"] is False
