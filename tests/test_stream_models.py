"""Both model adapters streaming through their official SDKs against the local wire-format
servers: a streamed turn (text in pieces, tool calls split across chunks, Anthropic's thinking)
adds up to the turn the non-streamed path reads; a consumer that stops reading closes the HTTP
stream (the server sees the client go away); a stream that breaks is the model's error with
what came kept; the deadline cuts a slow stream.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from typing import Any, Callable

import pytest

import _anthropic_wire as aw
import _openai_wire as ow
from _fake_servers import Reply, json_reply, serve, sse_reply
from async_support import watch
from sample_tools import add, shout
from test_async import error_types
from tracedagent import Agent, Budget, Stop
from tracedagent._core import _names as N
from tracedagent.testing import Recorder


@dataclass(frozen=True, kw_only=True)
class Wire:
    """One provider's replies, streamed and whole, for the same two turns."""

    id: str
    use_key: Callable[[pytest.MonkeyPatch], None]
    build: Callable[..., Any]
    tool_turn: Callable[[], tuple[Reply, Reply]]
    """The tool-calling turn: (streamed, whole)."""
    answer: Callable[[], tuple[Reply, Reply]]
    """The answer: (streamed, whole)."""
    slow: Callable[[float], Reply]
    """An answer whose first text piece comes at once and the rest only after the pause."""
    broken: Reply
    """An answer whose connection drops after the text ``Hello``."""
    chat: str
    """The chat span's name."""


def _openai_tool_turn() -> tuple[Reply, Reply]:
    c = functools.partial(ow.chunk, id="chatcmpl-calls")
    streamed = ow.sse(c(content=""), c(content="Let me "), c(content="check."),
                      c(calls=[{"index": 0, "id": "call_a", "function": {"name": "add", "arguments": ""}}]),
                      c(calls=[{"index": 0, "function": {"arguments": '{"a": 2, '}}]),
                      c(calls=[{"index": 0, "function": {"arguments": '"b": 3}'}}]),
                      c(calls=[{"index": 1, "id": "call_s", "function": {"name": "shout", "arguments": '{"te'}}]),
                      c(calls=[{"index": 1, "function": {"arguments": 'xt": "hi"}'}}]),
                      c(finish="tool_calls"), {**ow.usage_chunk(30, 12), "id": "chatcmpl-calls"})
    whole = json_reply({"id": "chatcmpl-calls", "object": "chat.completion", "created": 1700000000,
                        "model": ow.RESPONSE_MODEL, "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                            "role": "assistant", "content": "Let me check.", "tool_calls": [
                                {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}},
                                {"id": "call_s", "type": "function", "function": {"name": "shout", "arguments": '{"text": "hi"}'}}]}}],
                        "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}})
    return streamed, whole


def _anthropic_tool_turn() -> tuple[Reply, Reply]:
    streamed = aw.streamed(("thinking", (["Adding ", "first."], "sig-1")), ("text", ["Let me ", "check."]),
                           ("tool_use", ("call_a", "add", ['{"a": 2, ', '"b": 3}'])),
                           ("tool_use", ("call_s", "shout", ['{"te', 'xt": "hi"}'])),
                           stop="tool_use", input_tokens=30, output_tokens=12, id="msg_calls")
    whole = aw.message({"type": "thinking", "thinking": "Adding first.", "signature": "sig-1"}, aw.text("Let me check."),
                       aw.tool_use("call_a", "add", {"a": 2, "b": 3}), aw.tool_use("call_s", "shout", {"text": "hi"}),
                       stop="tool_use", input_tokens=30, output_tokens=12, id="msg_calls")
    return streamed, whole


def _openai_slow(pause: float) -> Reply:
    return ow.sse(ow.chunk(content="Hel"), *(x for _ in range(40) for x in (pause, ow.chunk(content="lo"))),
                  ow.chunk(finish="stop"), ow.usage_chunk())


def _anthropic_slow(pause: float) -> Reply:
    events = aw.stream_events(("text", ["Hel", *["lo"] * 40]))
    return sse_reply(*events[:3], *(x for e in events[3:] for x in (pause, e)))


OPENAI = Wire(id="openai", use_key=ow.use_key, build=ow.model_for, chat=f"chat {ow.MODEL}",
              tool_turn=_openai_tool_turn,
              answer=lambda: (ow.streamed_answer("2 + 3 = 5 ", "and HI.", input_tokens=60, output_tokens=9),
                              ow.answer("2 + 3 = 5 and HI.", input_tokens=60, output_tokens=9, id="chatcmpl-stream")),
              slow=_openai_slow,
              broken=ow.sse(ow.chunk(content=""), ow.chunk(content="Hel"), ow.chunk(content="lo"),
                            ow.chunk(content=" there"), break_after=3))
ANTHROPIC = Wire(id="anthropic", use_key=aw.use_key, build=aw.model_for, chat=f"chat {aw.MODEL}",
                 tool_turn=_anthropic_tool_turn,
                 answer=lambda: (aw.streamed(("text", ["2 + 3 = 5 ", "and HI."]), input_tokens=60, output_tokens=9),
                                 aw.message(aw.text("2 + 3 = 5 and HI."), input_tokens=60, output_tokens=9,
                                            id="msg_stream")),
                 slow=_anthropic_slow,
                 broken=aw.streamed(("text", ["Hel", "lo", " there"]), break_after=4))


@pytest.fixture(params=[OPENAI, ANTHROPIC], ids=lambda w: w.id)
def wire(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Wire:
    request.param.use_key(monkeypatch)
    return request.param


async def drive(agent: Agent, driver: str, task: str = "Add 2 and 3, and shout hi.",
                leave_after_first_delta: bool = False) -> tuple[list, Any]:
    events: list = []
    if driver == "stream":
        with agent.stream(task) as stream:
            for event in stream:
                events.append(event)
                if leave_after_first_delta and event.type == "text_delta":
                    break
    else:
        async with agent.astream(task) as stream:
            async for event in stream:
                events.append(event)
                if leave_after_first_delta and event.type == "text_delta":
                    break
    return events, stream.run


def without_streaming(body: dict) -> dict:
    return {k: v for k, v in body.items() if k not in ("stream", "stream_options")}


@pytest.mark.parametrize("driver", ["stream", "astream"])
async def test_a_streamed_run_is_the_run_of_the_same_turns_whole(wire, driver):
    (tool_streamed, tool_whole), (answer_streamed, answer_whole) = wire.tool_turn(), wire.answer()
    with serve(tool_whole, answer_whole) as whole_server:
        agent = Agent(wire.build(whole_server), [add, shout], system_prompt="Use tools.")
        ran = agent.run("Add 2 and 3, and shout hi.") if driver == "stream" else await agent.arun(
            "Add 2 and 3, and shout hi.")
    rec = Recorder()
    with serve(tool_streamed, answer_streamed) as server:
        events, run = await drive(Agent(wire.build(server), [add, shout], system_prompt="Use tools.",
                                        **rec.providers), driver)

    assert run.ok and run.output == "2 + 3 = 5 and HI."
    assert run.steps == ran.steps and run.messages == ran.messages
    calls = run.steps[0].completion.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [("call_a", "add", {"a": 2, "b": 3}),
                                                            ("call_s", "shout", {"text": "hi"})]
    assert [e.text for e in events if e.type == "text_delta"] == ["Let me ", "check.", "2 + 3 = 5 ", "and HI."]
    # The same requests, but streamed: what went back to the provider (thinking, calls) is the same.
    assert [without_streaming(b) for b in server.bodies()] == whole_server.bodies()
    assert all(b["stream"] is True for b in server.bodies())
    if wire is OPENAI:
        assert all(b["stream_options"] == {"include_usage": True} for b in server.bodies())
    assert server.outcomes == ["completed", "completed"]
    chats = rec.spans(wire.chat)
    assert [s.attributes[N.GEN_AI_USAGE_INPUT_TOKENS] for s in chats] == [30, 60]
    assert all(s.attributes[N.GEN_AI_REQUEST_STREAM] is True and s.attributes[N.RESPONSE_CHUNKS] >= 3 for s in chats)


@pytest.mark.parametrize("driver", ["stream", "astream"])
async def test_a_consumer_that_stops_after_the_first_delta_closes_the_providers_stream(wire, driver):
    rec = Recorder()
    spans = watch(rec)
    with serve(wire.slow(0.1)) as server:
        events, run = await drive(Agent(wire.build(server), **rec.providers), driver, leave_after_first_delta=True)
        assert server.client_left.wait(10), "the server never saw the client go away"

    assert [e.type for e in events] == ["text_delta"] and run.stop is Stop.CANCELLED
    assert spans.open == [] and spans.started == spans.ended == 3
    assert error_types(rec) == {wire.chat: "cancelled", "step": "cancelled", "invoke_agent agent": "cancelled"}
    assert rec.metric("tracedagent.runs", stop_reason="cancelled") == 1
    assert server.outcomes == ["client left"]


@pytest.mark.parametrize("driver", ["stream", "astream"])
async def test_a_stream_that_breaks_is_the_models_error_with_what_came_kept(wire, driver):
    rec = Recorder()
    with serve(wire.broken) as server:
        events, run = await drive(Agent(wire.build(server), **rec.providers), driver)

    assert run.stop is Stop.MODEL_ERROR and run.error is not None
    assert run.step_count == len(run.steps) == 1
    assert run.steps[0].completion.text == "Hello" == "".join(e.text for e in events if e.type == "text_delta")
    assert [e.type for e in events][-2:] == ["step_end", "run_end"]
    chat = rec.span(wire.chat)
    assert chat.attributes[N.ERROR_TYPE] == type(run.error).__qualname__
    assert chat.attributes[N.RESPONSE_CHUNKS] >= 2
    assert len(server.requests) == 1 and server.outcomes == ["broken"]  # a stream cut mid-way is not retried


@pytest.mark.parametrize("driver", ["stream", "astream"])
async def test_the_deadline_cuts_a_slow_provider_stream_and_keeps_the_text_so_far(wire, driver):
    rec = Recorder()
    # The first piece comes at once; the budget leaves a loaded machine time to read it.
    with serve(wire.slow(5.0)) as server:
        events, run = await drive(Agent(wire.build(server), budget=Budget(max_seconds=2.0), **rec.providers), driver)
        assert server.client_left.wait(10)

    assert run.stop is Stop.TIME_BUDGET
    assert run.steps[0].completion.text == "Hel" == "".join(e.text for e in events if e.type == "text_delta")
    assert error_types(rec)["invoke_agent agent"] == "time_budget_exhausted"
    if driver == "astream":  # the deadline cut the call
        assert error_types(rec)[wire.chat] == "timeout" and run.error is None
    else:  # the SDK's read timeout, which was what the budget had left
        assert error_types(rec)[wire.chat] == type(run.error).__qualname__


def test_astream_with_only_a_sync_client_reads_the_stream_in_a_worker_thread(monkeypatch):
    ow.use_key(monkeypatch)
    with serve(ow.streamed_answer("In a ", "thread.")) as server:
        client, _ = ow.clients_for(server)
        events, run = asyncio.run(drive(Agent(ow.OpenAIChatModel(ow.MODEL, client)), "astream"))
    assert run.ok and run.output == "In a thread."
    assert server.requests[0].headers.get("x-stainless-async") == "false"
