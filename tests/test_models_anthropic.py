"""AnthropicModel through the real ``anthropic`` SDK against a local Messages API server."""

from __future__ import annotations

import logging

import anthropic
import pytest
from opentelemetry.trace import StatusCode

from _fake_servers import Reply, json_reply, serve
from tracedagent import Agent, Stop, ToolOutcome
from tracedagent import _names as N
from tracedagent.models import AnthropicModel, MalformedResponseError
from tracedagent.models.anthropic import DEFAULT_MAX_TOKENS
from tracedagent.testing import Recorder
from sample_tools import add, shout

FAKE_KEY = "sk-ant-test-DO-NOT-LEAK-0c4e2a9d71"
FAST_RETRY = {"retry-after-ms": "1"}  # the SDK honours it, so a retried test stays fast


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key comes from the SDK's usual environment variable, as it would for a user."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def message(*content: dict, stop: str = "end_turn", input_tokens: int = 20, output_tokens: int = 7,
            cache_read: int | None = None, cache_creation: int | None = None,
            model: str = "claude-test-20250101", id: str = "msg_answer") -> Reply:
    usage: dict = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_creation is not None:
        usage["cache_creation_input_tokens"] = cache_creation
    return json_reply({"id": id, "type": "message", "role": "assistant", "model": model,
                       "content": list(content), "stop_reason": stop, "stop_sequence": None, "usage": usage})


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def tool_use(id: str, name: str, input: object) -> dict:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def error(status: int, kind: str, text: str, **headers: str) -> Reply:
    return json_reply({"type": "error", "error": {"type": kind, "message": text}}, status, **headers)


def model_for(server, **kwargs) -> AnthropicModel:
    return AnthropicModel("claude-test", base_url=server.url, **kwargs)


# --- requests and responses ---------------------------------------------------------


def test_text_answer_request_shape_and_completion():
    with serve(message(text("Hello "), text("there."), input_tokens=21, output_tokens=4)) as server:
        completion = model_for(server).complete([{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": "Hi"}])
    [request] = server.requests
    assert request.path == "/v1/messages"
    assert request.body == {"model": "claude-test", "max_tokens": DEFAULT_MAX_TOKENS, "system": "Be brief.",
                            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}
    assert completion.text == "Hello there." and not completion.wants_tools
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (21, 4)
    assert completion.model == "claude-test-20250101"
    assert completion.response_id == "msg_answer"
    assert completion.finish_reason == "end_turn"


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


def test_agent_runs_several_tool_calls_then_answers_and_is_traced():
    rec = Recorder()
    with serve(message(text("Let me compute."), tool_use("toolu_a", "add", {"a": 2, "b": 3}),
                       tool_use("toolu_s", "shout", {"text": "hi"}), stop="tool_use", input_tokens=30,
                       output_tokens=12, id="msg_calls"),
               message(text("2 + 3 = 5 and HI."), input_tokens=60, output_tokens=9)) as server:
        agent = Agent(model_for(server), [add, shout], system_prompt="Use tools.", max_output_tokens=100,
                      **rec.providers)
        run = agent.run("Add 2 and 3, and shout hi.")

    assert run.ok and run.output == "2 + 3 = 5 and HI."
    assert [r.content for r in run.steps[0].tool_results] == ["5", "HI"]
    assert (run.input_tokens, run.output_tokens) == (30 + 60, 12 + 9)

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

    [view] = rec.runs()
    assert view.stop_reason == "answered" and view.executed_tools == ["add", "shout"]
    chat = view.chat_spans
    assert len(chat) == 2 and len(view.tool_spans) == 2
    for span in chat:
        assert span.attributes[N.GEN_AI_PROVIDER_NAME] == "anthropic"
        assert span.attributes[N.GEN_AI_REQUEST_MODEL] == "claude-test"
        assert span.attributes[N.SERVER_ADDRESS] == "127.0.0.1"
        assert span.attributes[N.SERVER_PORT] == server.port
        assert span.attributes[N.GEN_AI_RESPONSE_MODEL] == "claude-test-20250101"
    assert [s.attributes[N.GEN_AI_RESPONSE_FINISH_REASONS] for s in chat] == [("tool_use",), ("end_turn",)]
    assert [s.attributes[N.GEN_AI_RESPONSE_ID] for s in chat] == ["msg_calls", "msg_answer"]
    assert [s.attributes[N.GEN_AI_USAGE_INPUT_TOKENS] for s in chat] == [30, 60]
    assert [s.attributes[N.GEN_AI_USAGE_OUTPUT_TOKENS] for s in chat] == [12, 9]


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


# --- provider errors ----------------------------------------------------------------


def test_rate_limit_is_retried_by_the_sdk():
    rec = Recorder()
    with serve(error(429, "rate_limit_error", "slow down", **FAST_RETRY), message(text("after retry"))) as server:
        run = Agent(model_for(server), **rec.providers).run("Hi")
    assert run.ok and run.output == "after retry"
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]
    [span] = rec.runs()[0].chat_spans
    assert N.ERROR_TYPE not in span.attributes and span.status.status_code is not StatusCode.ERROR


def test_persistent_overload_stops_the_run_and_keeps_the_partial_run():
    rec = Recorder()
    failing = [error(529, "overloaded_error", "Overloaded", **FAST_RETRY) for _ in range(3)]
    with serve(message(tool_use("toolu_a", "add", {"a": 1, "b": 1}), stop="tool_use"), *failing) as server:
        run = Agent(model_for(server), [add], **rec.providers).run("Add.")
    assert len(server.requests) == 1 + 3  # the SDK's default: 2 retries
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, anthropic.OverloadedError)
    assert len(run.steps) == 1 and run.steps[0].tool_results[0].content == "2"
    view = rec.runs()[0]
    ok_span, failed_span = view.chat_spans
    assert N.ERROR_TYPE not in ok_span.attributes
    assert failed_span.attributes[N.ERROR_TYPE] == "OverloadedError"
    assert failed_span.status.status_code is StatusCode.ERROR


def test_internal_server_error_with_max_retries_configured():
    rec = Recorder()
    boom = error(500, "api_error", "boom", **FAST_RETRY)
    with serve(boom, boom) as server:
        run = Agent(model_for(server, max_retries=1), **rec.providers).run("Hi")
    assert len(server.requests) == 2
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, anthropic.InternalServerError)
    assert rec.runs()[0].chat_spans[0].attributes[N.ERROR_TYPE] == "InternalServerError"


def test_timeout_surfaces_as_the_sdk_exception():
    rec = Recorder()
    with serve(Reply(delay=1.0, body=b"{}")) as server:
        run = Agent(model_for(server, timeout=0.2, max_retries=0), **rec.providers).run("Hi")
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, anthropic.APITimeoutError)
    assert rec.runs()[0].chat_spans[0].attributes[N.ERROR_TYPE] == "APITimeoutError"


@pytest.mark.parametrize("reply, error_type", [
    (Reply(body=b'{"id": "msg", "content": [', headers={"content-type": "application/json"}), "JSONDecodeError"),
    (json_reply({"id": "msg", "type": "message"}), "MalformedResponseError"),
])
def test_malformed_body_stops_the_run_with_a_named_error(reply, error_type):
    rec = Recorder()
    with serve(reply) as server:
        run = Agent(model_for(server, max_retries=0), **rec.providers).run("Hi")
    assert run.stop is Stop.MODEL_ERROR and type(run.error).__name__ == error_type
    assert rec.runs()[0].chat_spans[0].attributes[N.ERROR_TYPE] == error_type
    if isinstance(run.error, MalformedResponseError):
        assert "content" in str(run.error)


def test_api_key_never_reaches_spans_output_or_logs(caplog):
    """The 401 body echoes the key, as a careless proxy might; it must still go nowhere."""
    caplog.set_level(logging.DEBUG)  # the SDK's and httpx's debug logs included
    rec = Recorder()
    leaky = error(401, "authentication_error", f"invalid x-api-key {FAKE_KEY}")
    with serve(leaky, message(text("fine"))) as server:
        model = model_for(server)
        agent = Agent(model, [add], capture_content=True, **rec.providers)
        failed = agent.run("Hi")
        logging.getLogger("test").exception("run failed", exc_info=failed.error)
        succeeded = agent.run("Hi again")
    sent = server.requests[0].headers
    assert FAKE_KEY in (sent.get("x-api-key"), sent.get("authorization", "").removeprefix("Bearer "))
    assert failed.stop is Stop.MODEL_ERROR and isinstance(failed.error, anthropic.AuthenticationError)
    assert rec.runs()[0].chat_spans[0].attributes[N.ERROR_TYPE] == "AuthenticationError"
    assert succeeded.ok
    exported = "".join(span.to_json() for span in rec.spans())
    assert "AuthenticationError" in exported and "Hi again" in exported  # content capture was on
    for text_ in (exported, failed.output, succeeded.output, caplog.text, str(failed.error),
                  repr(failed.error.body), repr(model)):
        assert FAKE_KEY not in text_
