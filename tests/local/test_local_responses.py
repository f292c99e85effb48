"""OpenAIResponsesModel on a real server: llama.cpp's server (xllamacpp 0.2.14) answers
``/v1/responses`` too, so the Responses adapter runs a real agent there, non-streamed and
streamed. Its streamed events differ from OpenAI's (no ``output_index``, no item ``id``: a
function call's events name it by its ``call_id``), which is why these runs are worth a test."""

from __future__ import annotations

import asyncio

import pytest

from tracedagent import Stop
from tracedagent._core import _names as N
from tracedagent.testing import Recorder

from ._local import PRIMER, agent


def test_a_plain_answer_reports_the_servers_id_status_and_usage(local_server):
    rec = Recorder()
    run = agent("responses", local_server, [], forced=False, **rec.providers).run("Say hello in one short sentence.")
    assert run.stop is Stop.ANSWERED and run.output.strip()
    assert run.input_tokens > 10 and 0 < run.output_tokens <= 48
    [view] = rec.runs()
    [chat] = view.chat_spans
    a = chat.attributes
    assert a[N.GEN_AI_RESPONSE_ID].startswith("resp_") and a[N.GEN_AI_RESPONSE_MODEL] == "smollm2"
    assert a[N.GEN_AI_RESPONSE_FINISH_REASONS] == ("completed",)
    assert a[N.GEN_AI_USAGE_INPUT_TOKENS] == run.input_tokens and a[N.GEN_AI_USAGE_OUTPUT_TOKENS] == run.output_tokens
    assert a[N.SERVER_PORT] == local_server.port


@pytest.mark.parametrize("driver", ["arun", "astream"])
def test_a_tool_call_and_its_result_make_a_round_trip(local_server, driver):
    """The call (streamed: its id and name, then argument fragments), the tool's result sent back as a
    ``function_call_output`` item, and the server's answer after it."""
    rec = Recorder()
    weather_agent = agent("responses", local_server, **rec.providers)

    async def go():
        if driver == "arun":
            return await weather_agent.arun("What is the weather in Tokyo?", history=PRIMER)
        async with weather_agent.astream("What is the weather in Tokyo?", history=PRIMER) as stream:
            async for _ in stream:
                pass
        return stream.run

    run = asyncio.run(go())
    assert run.stop is Stop.ANSWERED, run.output
    assert run.trajectory()[:1] == ["get_weather"] and run.steps[0].tool_results[0].ok
    call = run.steps[0].completion.tool_calls[0]
    assert call.id and isinstance(call.arguments, dict) and "city" in call.arguments
    chats = rec.runs()[0].chat_spans
    assert len(chats) >= 2 and all(s.attributes[N.GEN_AI_RESPONSE_ID].startswith("resp_") for s in chats)
    assert all(s.attributes[N.GEN_AI_USAGE_OUTPUT_TOKENS] > 0 for s in chats)
    assert run.messages[-1]["role"] == "assistant"


def test_a_response_cut_at_max_output_tokens_still_says_completed(local_server):
    """A quirk of the server (OpenAI says ``incomplete``, reason ``max_output_tokens``): the chat
    span's finish reason is what the server said, and the output tokens show the cut."""
    rec = Recorder()
    run = agent("responses", local_server, [], forced=False, max_output_tokens=4, **rec.providers).run(
        "Write a long story about a dragon.")
    assert run.stop is Stop.ANSWERED and run.output_tokens == 4
    [chat] = rec.runs()[0].chat_spans
    assert chat.attributes[N.GEN_AI_RESPONSE_FINISH_REASONS] == ("completed",)
