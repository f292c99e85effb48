"""What a real server does that the providers' APIs do not, and what the chat span makes of it."""

from __future__ import annotations

import pytest

from tracedagent import Budget, Stop
from tracedagent._core import _names as N
from tracedagent.testing import Recorder

from ._local import ADAPTERS, agent

NAMED = {"openai": {"type": "function", "function": {"name": "get_weather"}},
         "anthropic": {"type": "tool", "name": "get_weather"}}


def only_chat(rec: Recorder):
    [chat] = [s for s in rec.exporter.get_finished_spans() if s.name.startswith("chat ")]
    return chat.attributes


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_an_unknown_model_name_is_answered_and_the_span_names_both(local_server, adapter):
    """llama.cpp serves its one model whatever the request names: a 200, not a 404."""
    rec = Recorder()
    run = agent(adapter, local_server, [], forced=False, model_options={"name": "no-such-model"},
                **rec.providers).run("Say hi.")
    assert run.stop is Stop.ANSWERED
    a = only_chat(rec)
    assert a[N.GEN_AI_REQUEST_MODEL] == "no-such-model" and a[N.GEN_AI_RESPONSE_MODEL] == "smollm2"


@pytest.mark.parametrize("adapter, followed", [("openai", False), ("anthropic", True)])
def test_a_tool_choice_naming_a_function_and_whether_the_server_followed_it(local_server, adapter, followed):
    """On /v1/chat/completions llama.cpp takes only a string tool_choice: one naming a function is
    dropped (the model answers in text) and the span says it was not followed. /v1/messages honours
    Anthropic's {"type": "tool", "name"}."""
    rec = Recorder()
    run = agent(adapter, local_server, forced=False, model_options={"tool_choice": NAMED[adapter]},
                budget=Budget(max_steps=1), **rec.providers).run("What is the weather in Tokyo?")
    assert run.requested_tools()[:1] == (["get_weather"] if followed else [])
    a = only_chat(rec)
    assert (a[N.REQUEST_TOOL_CHOICE], a[N.REQUEST_TOOL_CHOICE_NAME]) == ("function", "get_weather")
    assert a[N.RESPONSE_TOOL_CHOICE_FOLLOWED] is followed


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_required_tool_call_is_followed(local_server, adapter):
    rec = Recorder()
    forced = {"openai": "required", "anthropic": {"type": "any"}}[adapter]
    run = agent(adapter, local_server, forced=False, model_options={"tool_choice": forced}, budget=Budget(max_steps=1),
                **rec.providers).run("What is the weather in Tokyo?")
    assert run.requested_tools()[:1] == ["get_weather"]
    a = only_chat(rec)
    assert a[N.REQUEST_TOOL_CHOICE] == "required" and a[N.RESPONSE_TOOL_CHOICE_FOLLOWED] is True


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_error_bodies_have_openais_shape_on_both_endpoints(local_server, adapter):
    """llama.cpp answers errors on Anthropic's /v1/messages in OpenAI's shape; the SDK still raises
    its BadRequestError, and the server's own error type stays in the exception for the caller."""
    run = agent(adapter, local_server, [], forced=False).run("word " * 10_000)
    assert run.stop is Stop.MODEL_ERROR and type(run.error).__name__ == "BadRequestError"
    body = run.error.body
    error = body.get("error", body) if adapter == "anthropic" else body  # openai's SDK unwraps "error"
    assert error["type"] == "exceed_context_size_error" and error["code"] == 400
