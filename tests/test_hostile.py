"""A hostile model cannot hide from the trace, crash the loop or exhaust the process.

The model's output is the least trusted input: an injection chooses tool names, arguments
and call counts. Spans here go through the real OTLP protobuf encoder, which drops any
attribute it cannot encode, so what is asserted is what a collector would receive.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from sample_tools import no_refunds, refund, search_help
from tracedagent._core import _names as N
from tracedagent import Agent, Budget, Completion, Registry, Stop, ToolCall, ToolError, Usage, tool
from tracedagent.testing import FakeModel, Recorder, tool_call

LISTS = ("tracedagent.tools.requested", "tracedagent.tools.executed", "tracedagent.tools.blocked")
"""Always on the run span; ``tracedagent.tools.not_dispatched`` is there when a call was not dispatched."""


def encoded_spans(rec: Recorder) -> list[dict[str, Any]]:
    """Every recorded span as the OTLP protobuf encoder ships it: name and attributes."""
    wire = ExportTraceServiceRequest.FromString(encode_spans(rec.spans()).SerializeToString())
    out = []
    for resource in wire.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                attributes = {}
                for kv in span.attributes:
                    v = kv.value
                    kind = v.WhichOneof("value")
                    attributes[kv.key] = ([x.string_value for x in v.array_value.values]
                                          if kind == "array_value" else getattr(v, kind))
                out.append({"name": span.name, "attributes": attributes})
    return out


class Scripted:
    """A custom model returning whatever it was given, unchecked: what a buggy adapter or
    a compatible server could hand the loop."""

    provider_name = "hostile"

    def __init__(self, turns: list[Any]) -> None:
        self.turns = list(turns)

    def complete(self, messages, tools=None, max_output_tokens=None, temperature=None):
        return self.turns.pop(0) if self.turns else Completion(text="done")


def every_call_has_one_fate(spans: list[dict[str, Any]]) -> None:
    for span in spans:
        a = span["attributes"]
        if span["name"] == "step" and "tracedagent.tools.requested" in a:
            fates = Counter(a["tracedagent.tools.executed"]) + Counter(a["tracedagent.tools.blocked"]) \
                + Counter(a.get("tracedagent.tools.not_dispatched", []))
            assert fates == Counter(a["tracedagent.tools.requested"]), a
        if span["name"].startswith("invoke_agent"):
            for key in LISTS:
                assert key in a, f"{key} lost in encoding: {sorted(a)}"


HOSTILE_TEXT = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["bad\ud800name", "\udfff", "[/]", "[bold red]x[/]", "\x1b[2J", "\x00\x07\x7f\x9b", "a\nb"]),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=4),
    st.builds(lambda n: "x" * n, st.integers(200, 20_000)),
)


def deep(n: int) -> Any:
    value: Any = "leaf"
    for _ in range(n):
        value = {"k": value}
    return value


HOSTILE_ARGUMENTS = st.one_of(
    st.dictionaries(HOSTILE_TEXT, HOSTILE_TEXT, max_size=3),
    st.builds(deep, st.integers(1, 3000)),
    st.builds(lambda n: "[" * n + "]" * n, st.integers(1, 6000)),  # a JSON string nested deep
    HOSTILE_TEXT,
)
HOSTILE_CALL = st.builds(ToolCall, id=HOSTILE_TEXT, name=st.one_of(HOSTILE_TEXT, st.just("search_help"),
                                                                   st.just("refund")), arguments=HOSTILE_ARGUMENTS)
BAD_VALUE = st.one_of(st.none(), st.text(max_size=5), st.booleans(), st.integers(-5, -1), st.floats(), st.just([1]))
HOSTILE_USAGE = st.one_of(
    st.builds(Usage, input_tokens=st.integers(0, 10**9), output_tokens=st.integers(0, 10**9)),
    st.builds(Usage, input_tokens=BAD_VALUE, output_tokens=BAD_VALUE),
    BAD_VALUE,
)
HOSTILE_COMPLETION = st.builds(
    Completion,
    text=st.one_of(HOSTILE_TEXT, BAD_VALUE),
    tool_calls=st.one_of(st.lists(HOSTILE_CALL, max_size=4), BAD_VALUE,
                         st.lists(st.one_of(HOSTILE_CALL, BAD_VALUE), max_size=3)),
    usage=HOSTILE_USAGE,
    model=st.one_of(st.none(), HOSTILE_TEXT, BAD_VALUE),
    finish_reason=st.one_of(st.none(), HOSTILE_TEXT),
    response_id=st.one_of(st.none(), HOSTILE_TEXT, BAD_VALUE),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(turns=st.lists(HOSTILE_COMPLETION, min_size=1, max_size=3), capture=st.booleans())
def test_whatever_the_model_returns_the_run_returns_and_the_encoded_trace_accounts_for_every_call(turns, capture):
    rec = Recorder()
    agent = Agent(Scripted(turns), Registry([search_help, refund], policy=no_refunds), capture_content=capture,
                  budget=Budget(max_steps=4), **rec.providers)
    run = agent.run("go")

    assert isinstance(run.stop, Stop) and run.stop is not Stop.CANCELLED
    spans = encoded_spans(rec)
    every_call_has_one_fate(spans)
    [run_span] = [s for s in spans if s["name"].startswith("invoke_agent")]
    assert run_span["attributes"]["tracedagent.stop_reason"] == run.stop.value
    chats = [s["attributes"] for s in spans if s["name"].startswith("chat")]
    answered = [c for c in chats if "gen_ai.usage.input_tokens" in c]
    assert run_span["attributes"]["gen_ai.usage.input_tokens"] == sum(c["gen_ai.usage.input_tokens"] for c in answered)
    for span in spans:
        for value in span["attributes"].values():
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str):
                    assert len(text) <= N.DEFAULT_CONTENT_MAX_LENGTH + 64


def test_a_surrogate_in_one_name_does_not_erase_the_denied_refund():
    rec = Recorder()
    turn = Completion(tool_calls=[ToolCall("1", "refund", {"order_id": "1", "amount": 5}),
                                  ToolCall("2", "bad\ud800name", {})])
    Agent(Scripted([turn]), Registry([search_help, refund], policy=no_refunds), **rec.providers).run("go")
    spans = encoded_spans(rec)
    [run_span] = [s["attributes"] for s in spans if s["name"].startswith("invoke_agent")]
    assert run_span["tracedagent.tools.blocked"] == ["refund", "bad\ufffdname"]
    assert run_span["tracedagent.tools.requested"] == ["refund", "bad\ufffdname"]


def test_a_list_cut_at_its_bound_says_how_long_it_was():
    rec = Recorder()
    calls = [ToolCall(str(i), f"t{i}", {}) for i in range(300)]
    Agent(Scripted([Completion(tool_calls=calls)]), [search_help], budget=Budget(max_tool_calls_per_step=None),
          **rec.providers).run("go")
    [view] = rec.runs()
    attributes = view.span.attributes
    assert len(attributes["tracedagent.tools.requested"]) == 256
    assert attributes["tracedagent.tools.requested_count"] == 300
    assert attributes["tracedagent.tools.blocked_count"] == 300
    assert "tracedagent.tools.executed_count" not in attributes  # only lists that were cut


def test_content_too_deep_to_serialise_costs_the_chat_span_nothing():
    rec = Recorder()
    turns = [Completion(tool_calls=[ToolCall("1", "search_help", deep(5000))], usage=Usage(10, 0)),
             Completion(text="done", usage=Usage(10, 0))]
    run = Agent(Scripted(turns), [search_help], capture_content=True, **rec.providers).run("go")
    spans = encoded_spans(rec)
    chats = [s["attributes"] for s in spans if s["name"].startswith("chat")]
    assert [c["gen_ai.usage.input_tokens"] for c in chats] == [10, 10]
    assert run.input_tokens == 20 == sum(c["gen_ai.usage.input_tokens"] for c in chats)
    assert "content nested too deeply" in chats[0]["gen_ai.output.messages"]


def test_twenty_thousand_calls_in_one_turn_stop_the_run_before_any_is_dispatched():
    rec = Recorder()
    calls = [ToolCall(str(i), "search_help", {"q": str(i)}) for i in range(20_000)]
    run = Agent(Scripted([Completion(tool_calls=calls)]), [search_help], **rec.providers).run("go")
    assert run.stop is Stop.TOOL_CALL_BUDGET and run.trajectory() == []
    assert len(rec.spans()) == 3  # run, step, chat: no execute_tool span
    assert "20000 tool calls in one turn" in run.output
    assert run.steps[0].not_dispatched_names == ["search_help"] * 20_000
    [view] = rec.runs()
    assert view.span.attributes["tracedagent.tools.not_dispatched_count"] == 20_000


def test_the_run_wide_tool_call_ceiling():
    many = [tool_call("search_help", {"q": str(i)}) for i in range(10)]
    run = Agent(FakeModel(many), [search_help], budget=Budget(max_tool_calls=3)).run("go")
    assert run.stop is Stop.TOOL_CALL_BUDGET and run.trajectory() == ["search_help"] * 3


def test_an_unknown_tool_reply_does_not_list_five_thousand_tools():
    def fn() -> str:
        """A tool."""
        return "x"

    registry = Registry([tool(name=f"tool_{i}")(fn) for i in range(5000)])
    result = registry.dispatch(ToolCall("1", "nope" * 100, {}))
    assert result.outcome.value == "unknown_tool"
    assert len(result.content) < 1000 and "and 4968 more" in result.content


@pytest.mark.parametrize("where", ["task", "argument", "result"])
def test_a_key_never_reaches_a_span_even_with_capture_on(where):
    key = "sk-live-" + "A1b2C3d4E5f6G7h8I9j0"

    @tool
    def fetch(url: str) -> str:
        """Fetch a URL."""
        return f"fetched with {key}" if where == "result" else "fetched"

    rec = Recorder()
    argument = {"url": f"https://api.example.com/?api_key={key}"} if where == "argument" else {"url": "x"}
    task = f"use {key} please" if where == "task" else "go"
    Agent(FakeModel([tool_call("fetch", argument), "done"]), [fetch], capture_content=True,
          **rec.providers).run(task)
    wire = encode_spans(rec.spans()).SerializeToString()
    assert key.encode() not in wire
    assert b"***" in wire  # it was there, and was blanked


def test_users_can_extend_the_redactor():
    from tracedagent import Redactor

    rec = Recorder()
    Agent(FakeModel(["the code is ZX-12345"]), capture_content=True, redact=Redactor().extend(r"ZX-\d+"),
          **rec.providers).run("what is the code?")
    assert b"ZX-12345" not in encode_spans(rec.spans()).SerializeToString()


def test_captured_content_uses_the_genai_shapes():
    rec = Recorder()
    turns = [Completion(tool_calls=[ToolCall("c1", "search_help", '{"q": broken')], finish_reason="tool_calls"),
             "done"]
    Agent(FakeModel(turns), [search_help], system_prompt="be brief", capture_content=True,
          **rec.providers).run("find", history=[{"role": "user", "content": "earlier"}])
    [view] = rec.runs()
    run_attributes = view.span.attributes
    assert json.loads(run_attributes["gen_ai.system_instructions"]) == [{"type": "text", "content": "be brief"}]
    assert json.loads(run_attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "earlier"}]},
        {"role": "user", "parts": [{"type": "text", "content": "find"}]}]
    first, second = view.chat_spans
    assert json.loads(first.attributes["gen_ai.output.messages"]) == [
        {"role": "assistant", "finish_reason": "tool_calls",
         "parts": [{"type": "tool_call", "id": "c1", "name": "search_help", "arguments": '{"q": broken'}]}]
    sent = json.loads(second.attributes["gen_ai.input.messages"])
    assert sent[-1] == {"role": "tool", "name": "search_help", "parts": [
        {"type": "tool_call_response", "id": "c1", "response": sent[-1]["parts"][0]["response"]}]}
    assert "invalid arguments" in sent[-1]["parts"][0]["response"]
    [tool_span] = view.tool_spans
    assert json.loads(tool_span.attributes["gen_ai.tool.call.arguments"]) == '{"q": broken'


# --- tools and models that misbehave in ways Python makes awkward ---------------------------

class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("the database connection behind this object is gone")


def nested_list(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def both_drivers(agent: Agent, task: str = "go"):
    import asyncio

    return agent.run(task), asyncio.run(asyncio.wait_for(agent.arun(task), 10))


@pytest.mark.parametrize("value", [Unprintable(), nested_list(100_000), 10**5000], ids=["str-raises", "deep", "huge-int"])
def test_a_tool_value_that_cannot_be_shown_is_the_tools_failure(value):
    @tool
    def produce() -> str:
        """Produces something awkward."""
        return value

    for run in both_drivers(Agent(FakeModel([tool_call("produce", {}), "done"] * 2), [produce])):
        assert run.ok
        [result] = run.steps[0].tool_results
        assert result.outcome.value == "error" and result.content.startswith("Error: produce failed (")


def test_a_tool_error_that_cannot_render_its_message_is_still_an_observation():
    class Garbled(ToolError):
        def __str__(self) -> str:
            raise RuntimeError("cannot render")

    @tool
    def garble() -> str:
        """Fails awkwardly."""
        raise Garbled()

    for run in both_drivers(Agent(FakeModel([tool_call("garble", {}), "done"] * 2), [garble])):
        [result] = run.steps[0].tool_results
        assert run.ok and result.outcome.value == "error" and result.error_type.endswith("Garbled")
        assert "could not be read" in result.content


def test_stop_iteration_from_a_sync_tool_or_model_does_not_hang_arun():
    """A Future cannot carry StopIteration: handed one, asyncio.to_thread never wakes its task."""
    items: list[str] = []

    @tool
    def first_match() -> str:
        """The first match."""
        return next(iter(items))

    class Exhausted:
        def complete(self, messages, tools=None, max_output_tokens=None, temperature=None):
            return next(iter(items))

    tool_run, tool_arun = both_drivers(Agent(FakeModel([tool_call("first_match", {}), "done"] * 2), [first_match]))
    assert [r.outcome.value for r in tool_arun.steps[0].tool_results] == ["error"] == \
        [r.outcome.value for r in tool_run.steps[0].tool_results]
    model_run, model_arun = both_drivers(Agent(Exhausted()))
    assert model_run.stop is model_arun.stop is Stop.MODEL_ERROR


def test_an_integer_too_long_to_read_is_invalid_arguments_not_a_crash():
    calls = [ToolCall("c1", "search_help", '{"q": ' + "9" * 5000 + "}"), ToolCall("c2", "search_help", {"q": 10**5000})]
    run = Agent(Scripted([Completion(tool_calls=calls)]), [search_help]).run("go")
    assert run.ok
    assert [r.outcome.value for r in run.steps[0].tool_results] == ["invalid_arguments", "invalid_arguments"]


@pytest.mark.parametrize("count", [2**64, 10**400])
def test_a_token_count_past_any_model_is_the_models_error(count):
    rec = Recorder()
    run = Agent(Scripted([Completion(text="hi", usage=Usage(count, 1))]), budget=Budget(price_per_1k_input=0.01),
                **rec.providers).run("go")
    assert run.stop is Stop.MODEL_ERROR and "input_tokens" in str(run.error)
    assert encoded_spans(rec)  # and the trace still encodes


def test_a_repeated_model_chosen_name_cannot_cost_the_batch_its_encoding():
    name = "bad\ud800\x1b]8;;http://evil\x07name"
    rec = Recorder()
    turn = Completion(tool_calls=[ToolCall("c", name, {})])
    run = Agent(Scripted([turn] * 5), [search_help], budget=Budget(repeat_limit=2), **rec.providers).run("go")
    assert run.stop is Stop.REPEATED_CALL
    encode_spans(rec.spans()).SerializeToString()  # raises if a string cannot be encoded
    description = rec.only_run().span.status.description
    assert "\ud800" not in description and "\x1b" not in description and "\ufffd" in description


def test_secret_named_values_are_blanked_in_json_results_numbers_and_nested_objects():
    @tool
    def db_config(name: str) -> dict:
        """Connection settings of a database."""
        return {"host": "db1", "password": "Tr0ub4dor&3xyz", "api_key": "k-8f2a91c4d7e6"}

    @tool
    def connect(credentials: dict, password: int = 0) -> str:
        """Connect."""
        return "connected"

    rec = Recorder()
    Agent(FakeModel([tool_call("db_config", {"name": "orders"}),
                     tool_call("connect", {"credentials": {"user": "svc", "pass": "Tr0ub4dor&3xyz"},
                                           "password": 48151623}), "done"]),
          [db_config, connect], capture_content=True, **rec.providers).run("connect")
    wire = encode_spans(rec.spans()).SerializeToString()
    for secret in (b"Tr0ub4dor&3xyz", b"k-8f2a91c4d7e6", b"48151623"):
        assert secret not in wire
    assert b"db1" in wire  # what is not a secret stays
