"""The telemetry contract: one test per stop reason on spans, tool spans, metrics, privacy, failure."""

from __future__ import annotations

import json
import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry import context as otel_context
from opentelemetry import trace as trace_api
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode

from sample_tools import search_help
from scenarios import OUTPUT_TYPES, RETURNED_STOPS, SCENARIOS, TOOLS
from tracedagent import Agent, Budget, Completion, Registry, Stop, ToolCall
from tracedagent._instrumentation import _telemetry
from tracedagent.testing import (FakeModel, Recorder, assert_never_executed, assert_requested, assert_span_tree,
                                 assert_stop, tool_call)


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def run_scenario(rec: Recorder, stop: Stop):
    script, budget, _ = SCENARIOS[stop]
    run = Agent(FakeModel(script()), TOOLS, budget=budget, name="support", output_type=OUTPUT_TYPES.get(stop),
                **rec.providers).run("help me")
    [view] = rec.runs()
    return run, view


@pytest.mark.parametrize("stop", sorted(RETURNED_STOPS))
def test_run_span_tells_why_the_run_ended(rec, stop):
    run, view = run_scenario(rec, stop)
    expected_steps = SCENARIOS[stop][2]

    assert run.stop is stop
    assert_stop(view, stop, steps=expected_steps)
    span = view.span
    assert span.name == "invoke_agent support" and span.kind is SpanKind.INTERNAL and span.parent is None
    assert view.trace_id == run.trace_id and len(run.trace_id) == 32
    assert view.stop_reason == stop.value
    assert view.steps == run.step_count
    assert (view.input_tokens, view.output_tokens) == (run.input_tokens, run.output_tokens)
    priced = SCENARIOS[stop][1].price_per_1k_input > 0
    assert view.cost == (pytest.approx(run.cost) if priced else None)  # no prices: unknown, not free
    assert view.requested_tools == run.requested_tools()
    assert view.executed_tools == run.trajectory()
    assert view.blocked_tools == run.blocked_tools()
    assert span.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert span.attributes["gen_ai.agent.name"] == "support"
    assert span.attributes["gen_ai.provider.name"] == "fake"
    assert span.attributes["gen_ai.request.model"] == "fake-model"
    assert span.attributes["tracedagent.budget.max_steps"] == SCENARIOS[stop][1].max_steps
    if stop in (Stop.ANSWERED, Stop.APPROVAL_REQUIRED):  # a pause is not a failure
        assert span.status.status_code is StatusCode.UNSET and "error.type" not in span.attributes
    else:
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == run.output
        assert span.attributes["error.type"] == stop.value


@pytest.mark.parametrize("stop", [s for s in sorted(RETURNED_STOPS)
                                  if s not in (Stop.ANSWERED, Stop.STEP_BUDGET, Stop.TIME_BUDGET)])
def test_the_step_that_stopped_the_run_carries_a_stop_event(rec, stop):
    _, view = run_scenario(rec, stop)
    last_step = view.step_spans[-1]
    events = [(e.name, dict(e.attributes)) for e in last_step.events]
    assert events == [("tracedagent.stop", {"tracedagent.stop_reason": stop.value})]
    assert all(not s.events for s in view.step_spans[:-1])


def test_every_stopped_run_has_its_stop_event_on_the_run_span(rec):
    for stop in sorted(RETURNED_STOPS - {Stop.ANSWERED}):
        run, view = run_scenario(rec, stop)
        events = [(e.name, dict(e.attributes)) for e in view.span.events]
        waiting = {"tracedagent.pending_calls": len(run.pending)} if stop is Stop.APPROVAL_REQUIRED else {}
        assert events == [("tracedagent.stop", {"tracedagent.stop_reason": stop.value,
                                                "tracedagent.step.index": run.step_count - 1, **waiting})], stop
        rec.clear()
    run, view = run_scenario(rec, Stop.ANSWERED)
    assert not view.span.events


def test_span_tree_run_step_chat_tool(rec):
    run, view = run_scenario(rec, Stop.ANSWERED)
    assert_span_tree(view, ("invoke_agent support", [
        ("step", ["chat fake-model", "execute_tool search_help"]),
        ("step", ["chat fake-model"]),
    ]))
    steps = view.children()
    assert [s.attributes["tracedagent.step.index"] for s in steps] == [0, 1]
    first = steps[0].attributes
    assert first["tracedagent.step.input_tokens"] == run.steps[0].completion.usage.input_tokens
    assert first["tracedagent.tools.requested"] == ("search_help",)
    assert first["tracedagent.tools.executed"] == ("search_help",)


def test_chat_span_follows_the_genai_conventions(rec):
    run, view = run_scenario(rec, Stop.ANSWERED)
    chat = view.chat_spans[0]
    assert chat.kind is SpanKind.CLIENT
    a = chat.attributes
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "fake"
    assert a["gen_ai.request.model"] == "fake-model" and a["gen_ai.response.model"] == "fake-model"
    assert a["gen_ai.usage.input_tokens"] == run.steps[0].completion.usage.input_tokens
    assert a["gen_ai.usage.output_tokens"] == run.steps[0].completion.usage.output_tokens
    assert a["gen_ai.response.finish_reasons"] == ("tool_calls",)


def test_failed_model_call_marks_the_chat_span(rec):
    _, view = run_scenario(rec, Stop.MODEL_ERROR)
    failed = view.chat_spans[-1]
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["error.type"] == "TimeoutError"
    assert "read timed out" not in json.dumps(failed.to_json()), "error messages may carry secrets"


@pytest.mark.parametrize("call, outcome, error_type", [
    (ToolCall("c1", "search_help", {"q": "x"}), "ok", None),
    (ToolCall("c1", "refund", {"order_id": "A"}), "denied", "denied"),
    (ToolCall("c1", "search_help", "{oops"), "invalid_arguments", "invalid_arguments"),
    (ToolCall("c1", "drop_tables", {}), "unknown_tool", "unknown_tool"),
    (ToolCall("c1", "flaky", {"n": 1}), "error", "ToolError"),
    (ToolCall("c1", "charge_card", {"amount": 1}), "fatal", "FatalToolError"),
])
def test_every_dispatched_call_gets_a_tool_span(rec, call, outcome, error_type):
    Agent(FakeModel([_turn(call), "done"]), TOOLS, **rec.providers).run("go")
    [view] = rec.runs()
    [span] = view.tool_spans
    known = call.name in TOOLS
    assert span.name == f"execute_tool {call.name if known else '_OTHER'}", "invented names never name spans"
    a = span.attributes
    assert a["gen_ai.operation.name"] == "execute_tool" and a["gen_ai.tool.name"] == call.name
    assert a["gen_ai.tool.call.id"] == "c1" and a["gen_ai.tool.type"] == "function"
    assert a["tracedagent.tool.outcome"] == outcome
    if error_type is None:
        assert span.status.status_code is StatusCode.UNSET
    else:
        assert span.status.status_code is StatusCode.ERROR and a["error.type"] == error_type


def _turn(call: ToolCall) -> Completion:
    return Completion(tool_calls=[call])


def test_the_repeated_call_that_stops_a_run_gets_no_tool_span(rec):
    run, view = run_scenario(rec, Stop.REPEATED_CALL)
    assert len(run.requested_tools()) == 3
    assert len(view.tool_spans) == 2


def test_a_denied_call_is_requested_on_the_spans_but_never_executed(rec):
    Agent(FakeModel([tool_call("refund", {"order_id": "A1"}), "I can't."]), TOOLS, **rec.providers).run("refund")
    assert_requested(rec, "refund")
    assert_never_executed(rec, "refund")
    assert rec.only_run().blocked_tools == ["refund"]


def test_metrics_count_runs_tools_cost_and_tokens(rec):
    for stop in (Stop.ANSWERED, Stop.ANSWERED, Stop.TOOL_FATAL, Stop.COST_BUDGET):
        script, budget, _ = SCENARIOS[stop]
        Agent(FakeModel(script()), TOOLS, budget=budget, name="support", **rec.providers).run("go")
    runs = rec.runs()

    assert rec.metric("tracedagent.runs", stop_reason="answered") == 2
    assert rec.metric("tracedagent.runs", stop_reason="fatal_tool_error") == 1
    assert rec.metric("tracedagent.runs", stop_reason="cost_budget_exhausted") == 1
    assert rec.metric("tracedagent.runs") == 4
    assert rec.metric("tracedagent.tool.calls", **{"gen_ai.tool.name": "search_help", "tracedagent.tool.outcome": "ok"}) \
        == sum(v.executed_tools.count("search_help") for v in runs)
    assert rec.metric("tracedagent.tool.calls", outcome="fatal") == 1
    assert rec.metric("tracedagent.cost") == pytest.approx(sum(v.cost or 0.0 for v in runs))  # unpriced runs: no cost recorded
    assert rec.metric("tracedagent.run.steps") == 4  # one histogram point per run
    chat_calls = sum(len(v.chat_spans) for v in runs)
    assert rec.metric("gen_ai.client.operation.duration") == chat_calls
    assert rec.metric("gen_ai.client.token.usage", token_type="input") == chat_calls
    assert rec.metric("gen_ai.client.token.usage") == 2 * chat_calls


def test_unknown_tool_names_do_not_become_metric_labels(rec):
    Agent(FakeModel([tool_call("x" * 500, {}), "done"]), TOOLS, **rec.providers).run("go")
    assert rec.metric("tracedagent.tool.calls", outcome="unknown_tool") == 1
    assert rec.metric("tracedagent.tool.calls", **{"gen_ai.tool.name": "_OTHER"}) == 1
    [span] = rec.runs()[0].tool_spans
    assert len(span.attributes["gen_ai.tool.name"]) <= 128, "model-chosen names are bounded"


def test_an_invented_name_the_policy_denies_is_not_a_label_either(rec):
    deny_all = Registry([search_help], policy=lambda call: "no tools today")
    Agent(FakeModel([tool_call("invented_1", {}), tool_call("invented_2", {}), "ok"]), deny_all,
          **rec.providers).run("go")
    assert rec.metric("tracedagent.tool.calls", outcome="denied") == 2
    assert rec.metric("tracedagent.tool.calls", **{"gen_ai.tool.name": "_OTHER"}) == 2
    assert {s.name for s in rec.runs()[0].tool_spans} == {"execute_tool _OTHER"}


def test_a_long_invented_name_does_not_bloat_the_run_status(rec):
    name = "y" * 5000
    run = Agent(FakeModel([tool_call(name, {"q": 1})] * 5), TOOLS, budget=Budget(repeat_limit=1),
                **rec.providers).run("go")
    assert run.stop is Stop.REPEATED_CALL
    assert len(run.output) < 300
    assert len(rec.runs()[0].span.status.description) <= 1024


class RaisingRegistry(Registry):
    def dispatch(self, call):
        raise RuntimeError("registry bug")


def test_a_registry_that_raises_still_ends_its_tool_span(rec):
    with pytest.raises(RuntimeError):
        Agent(FakeModel([tool_call("search_help", {"q": "a"}), "done"]), RaisingRegistry([search_help]),
              **rec.providers).run("go")
    [tool_span] = [s for s in rec.spans() if s.name.startswith("execute_tool")]
    assert tool_span.status.status_code is StatusCode.ERROR and tool_span.attributes["error.type"] == "RuntimeError"
    [run_span] = [s for s in rec.spans() if s.name.startswith("invoke_agent")]
    assert run_span.status.status_code is StatusCode.ERROR


class WrongModel:
    def __init__(self, answer):
        self.answer = answer

    def complete(self, messages, tools=None, max_output_tokens=None, temperature=None):
        return self.answer


@pytest.mark.parametrize("answer", [None, {"text": "hi"}, Completion(text="hi", usage=None),
                                    Completion(tool_calls=[{"id": "c1", "name": "search_help"}]),
                                    Completion(tool_calls=[ToolCall(7, "search_help", {})]),
                                    Completion(tool_calls=[ToolCall("c1", None, {})])],
                         ids=["none", "dict", "no-usage", "call-as-dict", "int-call-id", "no-tool-name"])
def test_a_model_returning_the_wrong_thing_is_a_model_error(rec, answer):
    run = Agent(WrongModel(answer), TOOLS, **rec.providers).run("go")
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, TypeError)
    [chat] = rec.runs()[0].chat_spans
    assert chat.attributes["error.type"] == "TypeError"


SECRET = "sk-live-SECRET-4242"


def exported_text(rec: Recorder) -> str:
    return "\n".join(span.to_json() for span in rec.spans())


def test_no_content_reaches_spans_by_default(rec, monkeypatch):
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    model = FakeModel([tool_call("search_help", {"q": SECRET}), f"the key is {SECRET}"])
    run = Agent(model, TOOLS, system_prompt=f"token {SECRET}", **rec.providers).run(f"use {SECRET}")
    assert run.ok
    text = exported_text(rec)
    assert SECRET not in text
    assert "gen_ai.input.messages" not in text and "gen_ai.tool.call.arguments" not in text


def test_content_capture_is_opt_in_and_bounded(rec, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    monkeypatch.setenv("TRACEDAGENT_CONTENT_MAX_LENGTH", "200")
    long_query = "z" * 1000
    Agent(FakeModel([tool_call("search_help", {"q": long_query}), "done"]), TOOLS, **rec.providers).run("find it")
    view = rec.runs()[0]
    chat = view.chat_spans[0].attributes
    assert "find it" in chat["gen_ai.input.messages"]
    assert "search_help" in chat["gen_ai.output.messages"]
    tool_span = view.tool_spans[0].attributes
    arguments = tool_span["gen_ai.tool.call.arguments"]
    assert len(arguments) <= 200 and json.loads(arguments)["q"].startswith("zzz")  # cut inside, still JSON
    assert len(tool_span["gen_ai.tool.call.result"]) <= 200
    assert list(tool_span["tracedagent.content.truncated"]) == ["gen_ai.tool.call.arguments", "gen_ai.tool.call.result"]


def test_agent_argument_overrides_the_environment(rec, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    Agent(FakeModel([f"{SECRET}"]), TOOLS, capture_content=False, **rec.providers).run(SECRET)
    assert SECRET not in exported_text(rec)


def test_run_span_is_a_child_of_the_callers_span(rec):
    tracer = rec.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("handle_request") as parent:
        run = Agent(FakeModel(["ok"]), **rec.providers).run("go")
    [view] = rec.runs()
    assert view.span.parent.span_id == parent.get_span_context().span_id
    assert run.trace_id == view.trace_id


def test_without_an_sdk_there_is_no_trace_id_and_nothing_breaks():
    from opentelemetry.trace import NoOpTracerProvider
    run = Agent(FakeModel(["ok"]), tracer_provider=NoOpTracerProvider()).run("go")
    assert run.ok and run.trace_id is None


# --- telemetry failure never changes a run -------------------------------------------------

class ExplodingProcessor(SimpleSpanProcessor):
    def on_start(self, span, parent_context=None):
        raise RuntimeError("processor bug on start")

    def on_end(self, span):
        raise RuntimeError("processor bug on end")


class FailingExporter(SpanExporter):
    def export(self, spans):
        raise ConnectionError("collector down")


class BrokenTracerProvider(TracerProvider):
    def get_tracer(self, *args, **kwargs):
        raise RuntimeError("broken provider")


class BrokenMeterProvider:
    def get_meter(self, *args, **kwargs):
        raise RuntimeError("broken meter provider")


def reference_run():
    script = [tool_call("search_help", {"q": "a"}, id="x1"), tool_call("refund", {"order_id": "1"}, id="x2"), "done"]
    return Agent(FakeModel(script), TOOLS).run("go")


@pytest.mark.parametrize("make_providers", [
    lambda: {"tracer_provider": _provider_with(ExplodingProcessor(FailingExporter()))},
    lambda: {"tracer_provider": _provider_with(SimpleSpanProcessor(FailingExporter()))},
    lambda: {"tracer_provider": BrokenTracerProvider()},
    lambda: {"meter_provider": BrokenMeterProvider()},
], ids=["processor-raises", "exporter-raises", "provider-raises", "meter-provider-raises"])
def test_broken_telemetry_never_changes_the_run(make_providers, caplog):
    expected = reference_run()
    script = [tool_call("search_help", {"q": "a"}, id="x1"), tool_call("refund", {"order_id": "1"}, id="x2"), "done"]
    _telemetry._reported.clear()
    with caplog.at_level(logging.WARNING):
        run = Agent(FakeModel(script), TOOLS, **make_providers()).run("go")
    # Reported, not silently swallowed: by tracedagent's guard, or by the SDK's own processor,
    # which catches an exporter's exception itself.
    assert any(r.levelno >= logging.WARNING and r.name.startswith(("tracedagent", "opentelemetry"))
               for r in caplog.records)
    assert (run.stop, run.output, run.messages, run.requested_tools(), run.trajectory()) == (
        expected.stop, expected.output, expected.messages, expected.requested_tools(), expected.trajectory())


class BrokenSpan(NonRecordingSpan):
    """A span whose every method but ``end`` raises: ``end`` must still be called, once."""

    def is_recording(self):
        raise RuntimeError("broken is_recording")

    def set_attribute(self, key, value):
        raise RuntimeError("broken set_attribute")

    def set_attributes(self, attributes):
        raise RuntimeError("broken set_attributes")

    def add_event(self, name, attributes=None, timestamp=None):
        raise RuntimeError("broken add_event")

    def set_status(self, status, description=None):
        raise RuntimeError("broken set_status")

    def end(self, end_time=None):
        BrokenSpanTracer.ended.append(self)


class BrokenSpanTracer(trace_api.Tracer):
    started: list = []
    ended: list = []

    def start_span(self, name, context=None, kind=SpanKind.INTERNAL, attributes=None, *args, **kwargs):
        span = BrokenSpan(SpanContext(trace_id=0x1F, span_id=len(self.started) + 1, is_remote=False))
        self.started.append(span)
        return span

    def start_as_current_span(self, *args, **kwargs):  # pragma: no cover - tracedagent does not use it
        raise NotImplementedError


class BrokenSpanProvider(trace_api.TracerProvider):
    def get_tracer(self, *args, **kwargs):
        return BrokenSpanTracer()


def test_spans_whose_methods_raise_still_end_once_and_leave_the_context_as_it_was():
    BrokenSpanTracer.started, BrokenSpanTracer.ended = [], []
    expected = reference_run()
    script = [tool_call("search_help", {"q": "a"}, id="x1"), tool_call("refund", {"order_id": "1"}, id="x2"), "done"]
    before = otel_context.get_current()
    run = Agent(FakeModel(script), TOOLS, tracer_provider=BrokenSpanProvider(), capture_content=True).run("go")
    assert otel_context.get_current() == before
    assert (run.stop, run.output, run.messages) == (expected.stop, expected.output, expected.messages)
    assert len(BrokenSpanTracer.started) == 9  # run, 3 steps, 3 chats, 2 tools
    assert sorted(map(id, BrokenSpanTracer.ended)) == sorted(map(id, BrokenSpanTracer.started))


class InterruptedModel:
    def complete(self, messages, tools=None, max_output_tokens=None, temperature=None):
        raise KeyboardInterrupt


def test_an_interrupt_during_the_model_call_ends_its_spans_and_propagates(rec):
    before = otel_context.get_current()
    with pytest.raises(KeyboardInterrupt):
        Agent(InterruptedModel(), TOOLS, **rec.providers).run("go")
    assert otel_context.get_current() == before
    by_name = {span.name.split()[0]: span for span in rec.spans()}
    assert set(by_name) == {"invoke_agent", "step", "chat"}
    for name in ("invoke_agent", "step", "chat"):  # an interrupt is a cancellation, on every open span
        assert by_name[name].status.status_code is StatusCode.ERROR
        assert by_name[name].attributes["error.type"] == "cancelled"
    assert by_name["invoke_agent"].attributes["tracedagent.stop_reason"] == "cancelled"
    assert rec.metric("tracedagent.runs", stop_reason="cancelled") == 1


def _provider_with(processor) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider


def test_a_telemetry_failure_is_logged_once_not_per_span(caplog):
    _telemetry._reported.clear()
    provider = _provider_with(ExplodingProcessor(FailingExporter()))
    with caplog.at_level(logging.WARNING, logger="tracedagent"):
        for _ in range(3):
            Agent(FakeModel([tool_call("search_help", {"q": "a"}), "done"]), TOOLS, tracer_provider=provider).run("go")
    messages = [r.getMessage() for r in caplog.records if r.name == "tracedagent"]
    assert messages, "the failure is reported"
    assert len(messages) == len(set(messages)), "each kind of failure is reported once"


def test_provider_chosen_strings_are_bounded_on_the_chat_span(rec):
    long = "m" * 5000
    turn = Completion(text="hi", model=long, finish_reason=long, response_id=long)
    Agent(FakeModel([turn]), TOOLS, **rec.providers).run("go")
    [chat] = rec.runs()[0].chat_spans
    for key in ("gen_ai.response.model", "gen_ai.response.id"):
        assert 0 < len(chat.attributes[key]) <= 128
    assert all(len(reason) <= 128 for reason in chat.attributes["gen_ai.response.finish_reasons"])


def test_what_the_spans_were_built_from_cannot_change_under_them():
    agent = Agent(FakeModel(["hi"]), TOOLS, name="support")
    for attribute in ("name", "model", "registry"):
        with pytest.raises(AttributeError):
            setattr(agent, attribute, None)


def test_the_run_span_reports_the_budget_the_run_used(rec):
    agent = Agent(FakeModel(["hi", "hi"]), TOOLS, budget=Budget(max_steps=4), **rec.providers)
    agent.run("go")
    agent.budget = Budget(max_steps=7, max_tokens=900)  # the loop reads it per run: so must the span
    agent.run("go")
    first, second = (view.span.attributes for view in rec.runs())
    assert first["tracedagent.budget.max_steps"] == 4 and "tracedagent.budget.max_tokens" not in first
    assert second["tracedagent.budget.max_steps"] == 7 and second["tracedagent.budget.max_tokens"] == 900


def test_the_run_span_says_which_method_drove_it_and_how_it_dispatched(rec):
    import asyncio

    agent = Agent(FakeModel(["hi"] * 4), TOOLS, **rec.providers)
    agent.run("go")
    asyncio.run(agent.arun("go"))
    agent.max_tool_concurrency = 2  # read per run, like the budget
    asyncio.run(agent.arun("go"))
    agent.parallel_tool_calls = False
    asyncio.run(agent.arun("go"))
    shown = [{k: v for k, v in view.span.attributes.items() if k.startswith(("tracedagent.driver",
              "tracedagent.tools.parallel", "tracedagent.tools.max_concurrency"))} for view in rec.runs()]
    assert shown == [{"tracedagent.driver": "run"},
                     {"tracedagent.driver": "arun", "tracedagent.tools.parallel": True},
                     {"tracedagent.driver": "arun", "tracedagent.tools.parallel": True,
                      "tracedagent.tools.max_concurrency": 2},
                     {"tracedagent.driver": "arun", "tracedagent.tools.parallel": False}]


def test_a_no_op_meter_provider_records_nothing_and_the_run_is_unchanged():
    from opentelemetry.metrics import NoOpMeterProvider

    recorder = Recorder()
    agent = Agent(FakeModel([tool_call("search_help", {"q": "x"}), "done"]), TOOLS,
                  tracer_provider=recorder.tracer_provider, meter_provider=NoOpMeterProvider())
    assert not agent._telemetry.metrics_on
    run = agent.run("go")
    assert run.ok and run.trajectory() == ["search_help"]
    assert recorder.runs()[0].span.attributes["tracedagent.tools.executed"] == ("search_help",)


@pytest.mark.parametrize("stop", sorted(RETURNED_STOPS))
def test_every_requested_call_has_one_fate_and_the_steps_agree(rec, stop):
    run, view = run_scenario(rec, stop)
    spans = [view.span, *view.step_spans]
    for span in spans:
        a = span.attributes
        requested = list(a.get("tracedagent.tools.requested", ()))
        fates = [*a.get("tracedagent.tools.executed", ()), *a.get("tracedagent.tools.blocked", ()),
                 *a.get("tracedagent.tools.not_dispatched", ()), *a.get("tracedagent.tools.pending", ())]
        assert sorted(fates) == sorted(requested), (span.name, dict(a))
    # A step is a model call attempted: the Run, the run span and the step spans agree.
    assert run.step_count == view.steps == len(view.step_spans) == len(view.chat_spans)
    assert view.not_dispatched_tools == run.not_dispatched_tools()
    if run.not_dispatched_tools():
        [stopped_in] = [s for s in view.step_spans if s.attributes.get("tracedagent.tools.not_dispatched")]
        assert stopped_in.attributes["tracedagent.tools.not_dispatched_reason"] == stop.value


def test_the_run_span_sums_its_own_prompt_cache_tokens_and_a_sub_agents_stay_on_its_span(rec):
    """gen_ai.usage.cache_*.input_tokens on invoke_agent, as on chat spans: the run's own calls,
    set only when non-zero (a run without caching carries neither)."""
    from tracedagent import Usage
    helper = Agent(FakeModel([Completion(text="checked", usage=Usage(50, 5, cache_read_input_tokens=40))]),
                   name="helper", **rec.providers)
    lead = Agent(FakeModel([
        Completion(tool_calls=[ToolCall("c1", "helper", {"task": "check"})],
                   usage=Usage(100, 10, cache_read_input_tokens=64, cache_creation_input_tokens=20)),
        Completion(text="done", usage=Usage(120, 10, cache_read_input_tokens=84)),
    ]), [helper.as_tool(description="Checks.")], name="lead", **rec.providers)
    run = lead.run("go")
    assert run.ok and (run.own_cache_read_input_tokens, run.own_cache_creation_input_tokens) == (148, 20)
    spans = {s.attributes["gen_ai.agent.name"]: s.attributes for s in rec.spans() if s.name.startswith("invoke_agent")}
    assert spans["lead"]["gen_ai.usage.cache_read.input_tokens"] == 148
    assert spans["lead"]["gen_ai.usage.cache_creation.input_tokens"] == 20
    assert spans["helper"]["gen_ai.usage.cache_read.input_tokens"] == 40
    assert "gen_ai.usage.cache_creation.input_tokens" not in spans["helper"]

    plain = Agent(FakeModel([Completion(text="hi", usage=Usage(10, 2))]), name="plain", **rec.providers)
    plain.run("go")
    [plain_span] = [s for s in rec.spans() if s.name == "invoke_agent plain"]
    assert not any(key.startswith("gen_ai.usage.cache") for key in plain_span.attributes)
