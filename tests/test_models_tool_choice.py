"""A ``tool_choice`` on the chat span: what the request asked, and whether the answer followed it.
llama.cpp's server ignores a ``tool_choice`` naming one function (tests/local shows it on the real
server); here both adapters' readings of every form, through the real SDKs against wire fakes."""

from __future__ import annotations

import pytest

import _anthropic_wire as anthropic_wire
import _openai_wire as openai_wire
from _fake_servers import serve
from sample_tools import add, shout
from tracedagent import Agent
from tracedagent._core import _names as N
from tracedagent.testing import Recorder

ASKED, NAME, FOLLOWED = N.REQUEST_TOOL_CHOICE, N.REQUEST_TOOL_CHOICE_NAME, N.RESPONSE_TOOL_CHOICE_FOLLOWED


def chat_attributes(wire, reply, stream: bool = False, **options) -> dict:
    rec = Recorder()
    with serve(reply, wire.answer("done")) as server:
        agent = Agent(wire.model_for(server, **options), [add, shout], max_output_tokens=50, **rec.providers)
        if stream:
            with agent.stream("Add 2 and 3.") as events:
                for _ in events:
                    pass
        else:
            agent.run("Add 2 and 3.")
    first = min((s for s in rec.exporter.get_finished_spans() if s.name.startswith("chat ")), key=lambda s: s.start_time)
    return dict(first.attributes)


OPENAI = [
    ({"type": "function", "function": {"name": "add"}}, openai_wire.answer("5"), ("function", "add", False)),
    ({"type": "function", "function": {"name": "add"}}, openai_wire.calls(("c1", "add", {"a": 2, "b": 3})),
     ("function", "add", True)),
    ({"type": "function", "function": {"name": "add"}}, openai_wire.calls(("c1", "shout", {"text": "x"})),
     ("function", "add", False)),
    ("required", openai_wire.answer("5"), ("required", None, False)),
    ("required", openai_wire.calls(("c1", "shout", {"text": "x"})), ("required", None, True)),
    ("none", openai_wire.calls(("c1", "add", {"a": 2, "b": 3})), ("none", None, False)),
    ("auto", openai_wire.answer("5"), ("auto", None, None)),
]


@pytest.mark.parametrize("choice, reply, expected", OPENAI)
def test_openai_tool_choice_asked_and_followed(monkeypatch, choice, reply, expected):
    openai_wire.use_key(monkeypatch)
    a = chat_attributes(openai_wire, reply, tool_choice=choice)
    assert (a.get(ASKED), a.get(NAME), a.get(FOLLOWED)) == expected


ANTHROPIC = [
    ({"type": "tool", "name": "add"}, anthropic_wire.answer("5"), ("function", "add", False)),
    ({"type": "tool", "name": "add"}, anthropic_wire.calls(("t1", "add", {"a": 2, "b": 3})), ("function", "add", True)),
    ({"type": "any"}, anthropic_wire.answer("5"), ("required", None, False)),
    ({"type": "none"}, anthropic_wire.answer("5"), ("none", None, True)),
    ({"type": "auto"}, anthropic_wire.answer("5"), ("auto", None, None)),
]


@pytest.mark.parametrize("choice, reply, expected", ANTHROPIC)
def test_anthropic_tool_choice_asked_and_followed(monkeypatch, choice, reply, expected):
    anthropic_wire.use_key(monkeypatch)
    a = chat_attributes(anthropic_wire, reply, tool_choice=choice)
    assert (a.get(ASKED), a.get(NAME), a.get(FOLLOWED)) == expected


def test_a_streamed_call_is_judged_by_the_calls_it_streamed(monkeypatch):
    openai_wire.use_key(monkeypatch)
    reply = openai_wire.sse(openai_wire.chunk(content="5"), openai_wire.chunk(finish="stop"), openai_wire.usage_chunk())
    a = chat_attributes(openai_wire, reply, stream=True, tool_choice={"type": "function", "function": {"name": "add"}})
    assert (a.get(ASKED), a.get(NAME), a.get(FOLLOWED)) == ("function", "add", False)


def test_without_a_tool_choice_nothing_is_added(monkeypatch):
    openai_wire.use_key(monkeypatch)
    a = chat_attributes(openai_wire, openai_wire.answer("5"))
    assert not {ASKED, NAME, FOLLOWED} & a.keys()
