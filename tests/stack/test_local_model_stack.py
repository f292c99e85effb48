"""A real model's runs through the real stack: SmolLM2-135M on llama.cpp's server (tests/local's
tier), its spans through the Collector into Jaeger, with the server's own response ids, finish
reasons, usage and time to first chunk."""

from __future__ import annotations

import os

import pytest

from tracedagent import Agent, Stop
from tracedagent._cli import _local_model as local
from tracedagent._cli._local_cmd import PRIMER, get_weather, model

from ._stack import eventually, jaeger_trace
from .test_e2e import tags


@pytest.fixture(scope="module")
def server():
    if problem := local.missing():
        if os.environ.get("TRACEDAGENT_REQUIRE_LOCAL_MODEL"):
            pytest.fail(problem)
        pytest.skip(problem)
    with local.running() as running:
        yield running


@pytest.mark.parametrize("adapter", ["openai", "anthropic"])
def test_a_real_models_streamed_tool_run_arrives_in_jaeger_with_the_servers_facts(telemetry, server, adapter):
    agent = Agent(model(adapter, server, tool_first=True), [get_weather], temperature=0.0, max_output_tokens=48,
                  name=f"local-{adapter}", tracer_provider=telemetry.tracer_provider,
                  meter_provider=telemetry.meter_provider)
    with agent.stream("What is the weather in Oslo?", history=PRIMER) as events:
        for _ in events:
            pass
    run = events.run
    assert run.stop is Stop.ANSWERED, run.output
    telemetry.force_flush(timeout=10)
    spans = 1 + 2 * run.step_count + len(run.trajectory())
    trace = eventually(f"trace {run.trace_id} in Jaeger",
                       lambda: (t := jaeger_trace(run.trace_id)) and len(t["spans"]) >= spans and t)
    chats = sorted((s for s in trace["spans"] if s["operationName"].startswith("chat ")), key=lambda s: s["startTime"])
    assert len(chats) == run.step_count >= 2
    for chat, step in zip(chats, run.steps):
        t = tags(chat)
        assert t["gen_ai.response.id"] == step.completion.response_id
        assert t["gen_ai.response.model"] == "smollm2" and t["server.address"] == "127.0.0.1"
        assert t["gen_ai.usage.output_tokens"] == step.completion.usage.output_tokens > 0
        assert t["gen_ai.response.time_to_first_chunk"] > 0 and t["tracedagent.response.chunks"] > 0
    assert tags(chats[0])["tracedagent.response.tool_choice_followed"] is True
    [root] = [s for s in trace["spans"] if not s["references"]]
    assert tags(root)["tracedagent.stop_reason"] == "answered"
    assert tags(root)["gen_ai.usage.input_tokens"] == run.input_tokens
