"""A ``history`` in OpenAI's or Anthropic's own message shapes: converted to the loop's before the
run starts, or refused at the call with the message and the field named (never a ``KeyError``
from inside an adapter, reported as a failed model call)."""

from __future__ import annotations

import json

import pytest

from sample_tools import add
from tracedagent import Agent, Stop
from tracedagent._core._messages import MalformedMessage
from tracedagent._core._provider_messages import ProviderMessageError, loop_messages
from tracedagent.testing import FakeModel

OPENAI = [
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "What is 2 + 3?"}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": json.dumps({"a": 2, "b": 3})}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    {"role": "assistant", "content": "2 + 3 = 5."},
]
ANTHROPIC = [
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "add them", "signature": "sig"},
        {"type": "text", "text": "Adding."},
        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "5"}]},
                                 {"type": "text", "text": "Thanks."}]},
    {"role": "assistant", "content": [{"type": "text", "text": "2 + 3 = 5."}]},
]
LOOP = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "name": "add", "arguments": {"a": 2, "b": 3}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "add", "content": "5"},
    {"role": "assistant", "content": "2 + 3 = 5."},
]


def test_openai_shapes_become_the_loops():
    expected = [dict(m) for m in LOOP]
    expected[2]["content"] = None  # OpenAI's null content stays null: the loop's shape allows it
    assert loop_messages(OPENAI) == expected


def test_the_loops_shape_passes_unchanged_and_is_copied():
    converted = loop_messages(LOOP)
    assert converted == LOOP and all(a is not b for a, b in zip(converted, LOOP))


def test_anthropic_blocks_become_the_loops_with_thinking_kept_for_replay():
    converted = loop_messages(ANTHROPIC)
    assert converted == [
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": "Adding.",
         "tool_calls": [{"id": "toolu_1", "name": "add", "arguments": {"a": 2, "b": 3}}],
         "provider_data": {"anthropic": {"thinking": [{"type": "thinking", "thinking": "add them", "signature": "sig"}]}}},
        {"role": "tool", "tool_call_id": "toolu_1", "name": "add", "content": "5"},
        {"role": "user", "content": "Thanks."},
        {"role": "assistant", "content": "2 + 3 = 5."},
    ]


def test_arguments_that_are_not_a_json_object_stay_raw_as_a_models_would():
    [message] = loop_messages([{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "add", "arguments": "{not json"}}]}])
    assert message["tool_calls"][0]["arguments"] == "{not json"


@pytest.mark.parametrize("history", [OPENAI, ANTHROPIC], ids=["openai", "anthropic"])
def test_a_run_given_a_providers_history_sends_the_loops_shape(history):
    model = FakeModel(["It is 5."])
    run = Agent(model, [add]).run("And again?", history=history)
    assert run.stop is Stop.ANSWERED and run.error is None
    assert all(m["role"] in ("system", "user", "assistant", "tool") for m in model.calls[0]["messages"])
    calls = [c for m in run.messages for c in m.get("tool_calls", ())]
    assert calls and calls[0]["name"] == "add" and calls[0]["arguments"] == {"a": 2, "b": 3}


def test_through_the_openai_adapter_an_openai_history_goes_out_as_openai_sent_it(monkeypatch):
    """The issue's finding: this history failed the run as "the model call failed (KeyError)"."""
    import _openai_wire as wire
    from _fake_servers import serve

    wire.use_key(monkeypatch)
    with serve(wire.answer("Again 5.")) as server:
        run = Agent(wire.model_for(server), [add]).run("And again?", history=OPENAI)
    assert run.stop is Stop.ANSWERED, run.output
    [body] = server.bodies()
    assert body["messages"][2] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "5"}


def test_through_the_anthropic_adapter_an_anthropic_history_goes_out_as_blocks(monkeypatch):
    import _anthropic_wire as wire
    from _fake_servers import serve

    wire.use_key(monkeypatch)
    with serve(wire.answer("Again 5.")) as server:
        run = Agent(wire.model_for(server), [add]).run("And again?", history=ANTHROPIC)
    assert run.stop is Stop.ANSWERED, run.output
    [body] = server.bodies()
    assert body["messages"][1]["content"][0]["type"] == "thinking"
    assert body["messages"][1]["content"][2] == {"type": "tool_use", "id": "toolu_1", "name": "add",
                                                 "input": {"a": 2, "b": 3}}
    assert body["messages"][2]["content"][:2] == [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "5"},
                                                  {"type": "text", "text": "Thanks."}]


@pytest.mark.parametrize("message, error, named", [
    ({"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"arguments": "{}"}}]},
     ProviderMessageError, "message 0: 'tool_calls[0].function.name' is missing"),
    ({"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "add"}}]},
     ProviderMessageError, "message 0: 'tool_calls[0].id' is missing"),
    ({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "5"}, {"type": "image"}]},
     ProviderMessageError, "message 0: 'content[1]' is a 'image' block"),
    ({"role": "user", "content": [{"type": "tool_result", "content": "5"}]},
     ProviderMessageError, "message 0: 'content[0].tool_use_id' is missing"),
    ({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "add", "input": [1]}]},
     ProviderMessageError, "message 0: 'content[0].input' is a list"),
    ({"role": "assistant", "content": [{"type": "image"}]}, ProviderMessageError, "message 0: 'content[0]' is a 'image'"),
    ({"role": "assistant", "content": "", "function_call": {"name": "add", "arguments": "{}"}},
     ProviderMessageError, "message 0: 'function_call'"),
    # not a provider's shape either: the loop's one shape check says what is wrong
    ({"role": "tool", "content": "5"}, MalformedMessage, "message 0: 'tool_call_id'"),
    ({"role": "assistant", "tool_calls": [{"id": "x"}]}, MalformedMessage, "message 0: 'tool_calls[0]'"),
    ({"role": "assistant", "tool_calls": "add"}, MalformedMessage, "message 0: 'tool_calls' is str"),
    ({"role": "function", "name": "add", "content": "5"}, MalformedMessage, "message 0: 'role' is 'function'"),
    ({"content": "hi"}, MalformedMessage, "message 0: 'role'"),
    ("hello", MalformedMessage, "message 0: 'message' is str"),
    ({"role": "user", "content": 5}, MalformedMessage, "message 0: 'content' is int"),
])
def test_a_message_that_does_not_convert_is_refused_at_the_call_naming_it(message, error, named):
    model = FakeModel(["never asked"])
    with pytest.raises(error) as raised:
        Agent(model, [add]).run("task", history=[message])
    assert named in str(raised.value)
    assert isinstance(raised.value, ValueError) and raised.value.index == 0
    assert not model.calls


def test_the_refusal_comes_before_any_span_or_model_call():
    from tracedagent.testing import Recorder

    rec = Recorder()
    model = FakeModel(["never asked"])
    with pytest.raises(ProviderMessageError, match="message 1"):
        Agent(model, [add], **rec.providers).run("task", history=[{"role": "user", "content": "ok"},
                                                                  {"role": "assistant", "content": [{"type": "audio"}]}])
    assert rec.exporter.get_finished_spans() == ()


def test_an_error_never_quotes_long_content():
    secret = "x" * 200
    with pytest.raises(ProviderMessageError) as raised:
        loop_messages([{"role": "assistant", "content": [{"type": secret}]}])
    assert "x" * 41 not in str(raised.value)


def test_what_is_not_a_list_is_left_to_the_shape_check():
    assert loop_messages("hello") == "hello" and loop_messages(None) is None
