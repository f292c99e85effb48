"""Real agent runs on a real model (SmolLM2-135M on llama.cpp's server) through both adapters:
answers, streams, tool calls and their results, a team, an approval pause, and the ways a real
call fails. What is asserted is what the server really did: its ids, finish reasons, usage."""

from __future__ import annotations

import asyncio

import pytest

from tracedagent import Agent, Budget, Registry, Stop, ask
from tracedagent._core import _names as N
from tracedagent.testing import Recorder

from ._local import ADAPTERS, PRIMER, agent, get_weather, model

FINISHED = {"openai": {"stop", "length"}, "anthropic": {"end_turn", "max_tokens"}}
CALLED = {"openai": "tool_calls", "anthropic": "tool_use"}


def chats(rec: Recorder) -> list:
    """The chat spans, in the order the calls started."""
    return sorted((s for s in rec.exporter.get_finished_spans() if s.name.startswith("chat ")),
                  key=lambda s: s.start_time)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_plain_answer_carries_the_servers_id_finish_reason_and_usage(local_server, adapter):
    rec = Recorder()
    run = agent(adapter, local_server, [], forced=False, **rec.providers).run("Say hello in one short sentence.")
    assert run.stop is Stop.ANSWERED and run.output.strip()
    assert run.input_tokens > 10 and 0 < run.output_tokens <= 48
    [chat] = chats(rec)
    a = chat.attributes
    assert a[N.GEN_AI_RESPONSE_ID] and a[N.GEN_AI_RESPONSE_MODEL] == "smollm2"
    assert a[N.GEN_AI_RESPONSE_FINISH_REASONS][0] in FINISHED[adapter]
    assert a[N.GEN_AI_USAGE_INPUT_TOKENS] == run.input_tokens and a[N.GEN_AI_USAGE_OUTPUT_TOKENS] == run.output_tokens
    assert a[N.SERVER_ADDRESS] == "127.0.0.1" and a[N.SERVER_PORT] == local_server.port


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_streamed_answer_reports_usage_time_to_first_chunk_and_chunks(local_server, adapter):
    rec = Recorder()
    with agent(adapter, local_server, [], forced=False, **rec.providers).stream("Name three colours.") as stream:
        texts = [event for event in stream]
    run = stream.run
    assert run.stop is Stop.ANSWERED and run.output.strip() and texts
    assert run.input_tokens > 10 and run.output_tokens > 0, "the usage of the stream's last chunk or event"
    [chat] = chats(rec)
    a = chat.attributes
    assert a[N.GEN_AI_REQUEST_STREAM] is True
    assert a[N.RESPONSE_CHUNKS] > 1 and a[N.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] > 0
    assert a[N.GEN_AI_RESPONSE_ID] and a[N.GEN_AI_USAGE_OUTPUT_TOKENS] == run.output_tokens


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("driver", ["run", "stream"])
def test_a_tool_call_and_its_result_make_a_round_trip(local_server, adapter, driver):
    rec = Recorder()
    weather_agent = agent(adapter, local_server, **rec.providers)
    if driver == "run":
        run = weather_agent.run("What is the weather in Tokyo?", history=PRIMER)
    else:
        with weather_agent.stream("What is the weather in Tokyo?", history=PRIMER) as stream:
            for _ in stream:
                pass
        run = stream.run
    assert run.stop is Stop.ANSWERED, run.output
    assert run.trajectory()[:1] == ["get_weather"] and run.steps[0].tool_results[0].ok
    call = run.steps[0].completion.tool_calls[0]
    assert call.id and isinstance(call.arguments, dict) and "city" in call.arguments
    first, *_ = chats(rec)
    assert first.attributes[N.GEN_AI_RESPONSE_FINISH_REASONS][0] in (CALLED[adapter], *FINISHED[adapter])
    tool_span = next(s for s in rec.exporter.get_finished_spans() if s.name.startswith("execute_tool"))
    assert tool_span.attributes[N.GEN_AI_TOOL_CALL_ID] == call.id
    # the result went back in the provider's shape, and the server answered after it
    assert run.messages[-1]["role"] == "assistant" and run.steps[-1].completion.finish_reason in FINISHED[adapter]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_team_a_coordinator_delegates_to_a_sub_agent_that_calls_a_tool(local_server, adapter):
    rec = Recorder()
    forecaster = agent(adapter, local_server, name="forecaster", **rec.providers)
    coordinator = agent(adapter, local_server, [forecaster.as_tool(description="Answers weather questions.")],
                        name="coordinator", **rec.providers)
    run = coordinator.run("Ask the forecaster: what is the weather in Oslo?")
    assert run.stop is Stop.ANSWERED, run.output
    assert run.trajectory()[:1] == ["forecaster"]
    [sub] = run.sub_runs
    assert sub.trajectory()[:1] == ["get_weather"] and sub.stop is Stop.ANSWERED
    assert run.input_tokens > sub.input_tokens > 0, "the sub-run's tokens count in the coordinator's"
    assert sub.trace_id == run.trace_id


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_an_approval_pauses_the_run_and_the_decision_resumes_it(local_server, adapter):
    rec = Recorder()
    registry = Registry([get_weather], policy=lambda call: ask("weather costs money"))
    weather_agent = agent(adapter, local_server, registry, **rec.providers)
    paused = weather_agent.run("What is the weather in Paris?", history=PRIMER)
    assert paused.stop is Stop.APPROVAL_REQUIRED and paused.tool_names().pending == ["get_weather"]
    [call] = paused.steps[-1].completion.tool_calls
    resumed = weather_agent.resume(paused.checkpoint(), {call.id: True})
    assert resumed.stop is Stop.ANSWERED, resumed.output
    assert resumed.trajectory() == ["get_weather"]
    assert resumed.messages[-1]["role"] == "assistant"


# --- failures ------------------------------------------------------------------------------

@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_context_overflow_is_a_model_error_with_the_providers_error_type(local_server, adapter):
    rec = Recorder()
    run = agent(adapter, local_server, [], forced=False, **rec.providers).run("word " * 10_000)
    assert run.stop is Stop.MODEL_ERROR and type(run.error).__name__ == "BadRequestError"
    [chat] = chats(rec)
    assert chat.attributes[N.ERROR_TYPE] == "BadRequestError"
    assert not chat.status.is_ok


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_server_killed_mid_stream_is_a_model_error_and_what_arrived_is_kept(adapter):
    from tracedagent._cli import _local_model as local

    from ._local import missing_or_fail

    missing_or_fail()
    rec = Recorder()
    with local.running() as server:  # a server of its own: this test kills it
        long_agent = agent(adapter, server, [], forced=False, max_output_tokens=400, **rec.providers)
        received: list[str] = []
        with long_agent.stream("Count from 1 to 200, one number per line.") as stream:
            for event in stream:
                if isinstance(getattr(event, "text", None), str):
                    received.append(event.text)
                if len(received) == 20:
                    server.kill()
        run = stream.run
    assert run.stop is Stop.MODEL_ERROR
    assert type(run.error).__name__ == "APIConnectionError", repr(run.error)  # both SDKs
    [chat] = chats(rec)
    assert chat.attributes[N.RESPONSE_CHUNKS] >= 20, "the chunks that arrived are counted"
    assert chat.attributes[N.ERROR_TYPE] == type(run.error).__name__


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_deadline_mid_generation_is_time_budget_exhausted(local_server, adapter):
    rec = Recorder()
    slow = agent(adapter, local_server, [], forced=False, max_output_tokens=400, budget=Budget(max_seconds=0.8),
                 **rec.providers)
    run = asyncio.run(slow.arun("Count from 1 to 200, one number per line."))
    assert run.stop is Stop.TIME_BUDGET, run.output
    [chat] = chats(rec)
    assert not chat.status.is_ok
