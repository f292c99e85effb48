"""OpenAIChatModel through the real ``openai`` SDK against a local Chat Completions server."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import openai
import pytest
from opentelemetry.trace import StatusCode

from _fake_servers import Reply, json_reply, serve
from tracedagent import Agent, Stop, ToolOutcome
from tracedagent import _names as N
from tracedagent.models import MalformedResponseError, OpenAIChatModel
from tracedagent.testing import Recorder
from sample_tools import add, shout

FAKE_KEY = "sk-test-DO-NOT-LEAK-7f3a9c1e5b"
ROOT = Path(__file__).resolve().parents[1]  # subprocesses import this worktree's package
FAST_RETRY = {"retry-after-ms": "1"}  # the SDK honours it, so a retried test stays fast


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key comes from the SDK's usual environment variable, as it would for a user."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def answer(text: str = "The answer is 5.", *, finish: str = "stop", prompt: int = 20, completion: int = 7,
           cached: int | None = None, model: str = "gpt-test-2025-01-01", id: str = "chatcmpl-answer") -> Reply:
    usage: dict = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return json_reply({"id": id, "object": "chat.completion", "created": 1700000000, "model": model,
                       "choices": [{"index": 0, "finish_reason": finish,
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": usage})


def calls(*tool_calls: tuple[str, str, str], prompt: int = 30, completion: int = 12,
          id: str = "chatcmpl-calls") -> Reply:
    """A turn requesting ``(id, name, raw JSON arguments)`` calls, in that order."""
    return json_reply({"id": id, "object": "chat.completion", "created": 1700000000,
                       "model": "gpt-test-2025-01-01",
                       "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                           "role": "assistant", "content": None,
                           "tool_calls": [{"id": cid, "type": "function",
                                           "function": {"name": name, "arguments": args}}
                                          for cid, name, args in tool_calls]}}],
                       "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                 "total_tokens": prompt + completion}})


def error(status: int, message: str, **headers: str) -> Reply:
    return json_reply({"error": {"message": message, "type": "error", "code": None}}, status, **headers)


def model_for(server, **kwargs) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-test", base_url=f"{server.url}/v1", **kwargs)


# --- requests and responses ---------------------------------------------------------


def test_text_answer_request_shape_and_completion():
    with serve(answer("Hello there.", prompt=21, completion=4)) as server:
        model = model_for(server)
        completion = model.complete([{"role": "system", "content": "Be brief."},
                                     {"role": "user", "content": "Hi"}],
                                    max_output_tokens=50, temperature=0.2)
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body == {"model": "gpt-test",
                            "messages": [{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": "Hi"}],
                            "max_completion_tokens": 50, "temperature": 0.2}
    assert completion.text == "Hello there." and not completion.wants_tools
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (21, 4)
    assert completion.model == "gpt-test-2025-01-01"
    assert completion.response_id == "chatcmpl-answer"
    assert completion.finish_reason == "stop"


def test_unset_options_are_not_sent_and_request_options_are():
    with serve(answer(), answer()) as server:
        model_for(server, seed=7, max_tokens_field="max_tokens").complete([{"role": "user", "content": "Hi"}])
        model_for(server, max_tokens_field="max_tokens").complete([{"role": "user", "content": "Hi"}],
                                                                  max_output_tokens=64)
    first, second = server.bodies()
    assert first == {"model": "gpt-test", "messages": [{"role": "user", "content": "Hi"}], "seed": 7}
    assert second["max_tokens"] == 64 and "max_completion_tokens" not in second


def test_agent_runs_several_tool_calls_then_answers_and_is_traced():
    rec = Recorder()
    with serve(calls(("call_a", "add", '{"a": 2, "b": 3}'), ("call_s", "shout", '{"text": "hi"}')),
               answer("2 + 3 = 5 and HI.", prompt=60, completion=9)) as server:
        agent = Agent(model_for(server), [add, shout], system_prompt="Use tools.", max_output_tokens=100,
                      **rec.providers)
        run = agent.run("Add 2 and 3, and shout hi.")

    assert run.ok and run.output == "2 + 3 = 5 and HI."
    assert [r.content for r in run.steps[0].tool_results] == ["5", "HI"]
    assert (run.input_tokens, run.output_tokens) == (30 + 60, 12 + 9)

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

    [view] = rec.runs()
    assert view.stop_reason == "answered" and view.executed_tools == ["add", "shout"]
    chat = view.chat_spans
    assert len(chat) == 2 and len(view.tool_spans) == 2
    for span in chat:
        assert span.attributes[N.GEN_AI_PROVIDER_NAME] == "openai"
        assert span.attributes[N.GEN_AI_REQUEST_MODEL] == "gpt-test"
        assert span.attributes[N.SERVER_ADDRESS] == "127.0.0.1"
        assert span.attributes[N.SERVER_PORT] == server.port
        assert span.attributes[N.GEN_AI_RESPONSE_MODEL] == "gpt-test-2025-01-01"
        assert span.attributes[N.GEN_AI_REQUEST_MAX_TOKENS] == 100
    assert [s.attributes[N.GEN_AI_RESPONSE_FINISH_REASONS] for s in chat] == [("tool_calls",), ("stop",)]
    assert [s.attributes[N.GEN_AI_RESPONSE_ID] for s in chat] == ["chatcmpl-calls", "chatcmpl-answer"]
    assert [s.attributes[N.GEN_AI_USAGE_INPUT_TOKENS] for s in chat] == [30, 60]
    assert [s.attributes[N.GEN_AI_USAGE_OUTPUT_TOKENS] for s in chat] == [12, 9]


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
    with serve(answer(prompt=1200, completion=5, cached=1024)) as server:
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


# --- provider errors ----------------------------------------------------------------


def test_rate_limit_is_retried_by_the_sdk():
    rec = Recorder()
    with serve(error(429, "Rate limit reached", **FAST_RETRY), answer("after retry")) as server:
        run = Agent(model_for(server), **rec.providers).run("Hi")
    assert run.ok and run.output == "after retry"
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]
    [span] = rec.runs()[0].chat_spans
    assert N.ERROR_TYPE not in span.attributes and span.status.status_code is not StatusCode.ERROR


def test_persistent_server_error_stops_the_run_and_keeps_the_partial_run():
    rec = Recorder()
    failing = [error(500, "upstream exploded", **FAST_RETRY) for _ in range(3)]
    with serve(calls(("call_a", "add", '{"a": 1, "b": 1}')), *failing) as server:
        run = Agent(model_for(server), [add], **rec.providers).run("Add.")
    assert len(server.requests) == 1 + 3  # the SDK's default: 2 retries
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, openai.InternalServerError)
    assert run.output == "Stopped: the model call failed (InternalServerError)."
    assert len(run.steps) == 1 and run.steps[0].tool_results[0].content == "2"
    assert run.messages[-1] == {"role": "tool", "tool_call_id": "call_a", "name": "add", "content": "2"}
    view = rec.runs()[0]
    assert view.stop_reason == "model_error"
    ok_span, failed_span = view.chat_spans
    assert N.ERROR_TYPE not in ok_span.attributes
    assert failed_span.attributes[N.ERROR_TYPE] == "InternalServerError"
    assert failed_span.status.status_code is StatusCode.ERROR


def test_max_retries_is_configurable():
    with serve(error(503, "busy", **FAST_RETRY), answer("unused")) as server:
        run = Agent(model_for(server, max_retries=0)).run("Hi")
    assert run.stop is Stop.MODEL_ERROR and len(server.requests) == 1


def test_timeout_surfaces_as_the_sdk_exception():
    rec = Recorder()
    with serve(Reply(delay=1.0, body=b"{}")) as server:
        run = Agent(model_for(server, timeout=0.2, max_retries=0), **rec.providers).run("Hi")
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, openai.APITimeoutError)
    assert rec.runs()[0].chat_spans[0].attributes[N.ERROR_TYPE] == "APITimeoutError"


@pytest.mark.parametrize("reply, error_type", [
    (Reply(body=b'{"id": "x", "choices": [', headers={"content-type": "application/json"}), "JSONDecodeError"),
    (json_reply({"id": "x", "object": "chat.completion"}), "MalformedResponseError"),
    (json_reply({"id": "x", "choices": []}), "MalformedResponseError"),
])
def test_malformed_body_stops_the_run_with_a_named_error(reply, error_type):
    rec = Recorder()
    with serve(reply) as server:
        run = Agent(model_for(server, max_retries=0), **rec.providers).run("Hi")
    assert run.stop is Stop.MODEL_ERROR and type(run.error).__name__ == error_type
    assert rec.runs()[0].chat_spans[0].attributes[N.ERROR_TYPE] == error_type
    if isinstance(run.error, MalformedResponseError):
        assert "choices" in str(run.error)


def test_api_key_never_reaches_spans_output_or_logs(caplog):
    """The 401 body echoes the key, as a careless proxy might; it must still go nowhere."""
    caplog.set_level(logging.DEBUG)  # the SDK's and httpx's debug logs included
    rec = Recorder()
    with serve(error(401, f"Incorrect API key provided: {FAKE_KEY}"), answer("fine")) as server:
        model = model_for(server)
        agent = Agent(model, [add], capture_content=True, **rec.providers)
        failed = agent.run("Hi")
        logging.getLogger("test").exception("run failed", exc_info=failed.error)
        succeeded = agent.run("Hi again")
    assert server.requests[0].headers["authorization"] == f"Bearer {FAKE_KEY}"  # it was in use
    assert failed.stop is Stop.MODEL_ERROR and isinstance(failed.error, openai.AuthenticationError)
    assert rec.runs()[0].chat_spans[0].attributes[N.ERROR_TYPE] == "AuthenticationError"
    assert succeeded.ok
    exported = "".join(span.to_json() for span in rec.spans())
    assert "AuthenticationError" in exported and "Hi again" in exported  # content capture was on
    for text in (exported, failed.output, succeeded.output, caplog.text, str(failed.error),
                 repr(failed.error.body), repr(model)):
        assert FAKE_KEY not in text


def test_models_package_does_not_import_the_sdks():
    script = ("import sys, tracedagent, tracedagent.models\n"
              "print(sorted(m for m in ('openai', 'anthropic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert json.loads(out.replace("'", '"')) == []
