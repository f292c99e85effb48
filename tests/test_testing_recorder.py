"""The Recorder and RunView: what they record, how queries name attributes, and how the
global-provider capture keeps each recorder's spans and metrics its own."""

from __future__ import annotations

import threading

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider

from sample_tools import lookup_order, no_refunds, refund
from tracedagent import Agent, Budget, Registry, Stop
from tracedagent._core import _names as N
from tracedagent.testing import ATTRIBUTE_ALIASES, FakeModel, Recorder, RunView, find_spans, tool_call


def support_agent(script, *, name="support", budget=Budget(), **providers) -> Agent:
    """A lookup-then-answer agent whose refund tool is always denied by policy."""
    return Agent(FakeModel(script), Registry([lookup_order, refund], policy=no_refunds),
                 name=name, budget=budget, **providers)


LOOKUP_THEN_REFUND = [tool_call("lookup_order", {"order_id": "42"}),
                      tool_call("refund", {"order_id": "42", "amount": 900}),
                      "Your order has shipped."]


# --- private providers ---------------------------------------------------------------------

def test_run_view_tells_what_the_run_returned():
    rec = Recorder()
    run = support_agent(LOOKUP_THEN_REFUND, budget=Budget(price_per_1k_input=1.0), **rec.providers).run("where is 42?")

    view = rec.only_run()
    assert isinstance(view, RunView)
    assert view.trace_id == run.trace_id
    assert view.agent_name == "support"
    assert view.stop_reason == run.stop.value == "answered" and view.ok
    assert view.stop_message is None
    assert view.steps == run.step_count == 3
    assert (view.input_tokens, view.output_tokens) == (run.input_tokens, run.output_tokens)
    assert view.cost == pytest.approx(run.cost) and view.cost > 0
    assert view.requested_tools == run.requested_tools() == ["lookup_order", "refund"]
    assert view.executed_tools == run.trajectory() == ["lookup_order"]
    assert view.blocked_tools == run.blocked_tools() == ["refund"]
    assert view.tool_outcomes == [("lookup_order", "ok"), ("refund", "denied")]


def test_run_view_child_spans_nest_step_chat_tool():
    rec = Recorder()
    support_agent(LOOKUP_THEN_REFUND, **rec.providers).run("where is 42?")
    view = rec.only_run()

    steps = view.children()
    assert [s.name for s in steps] == ["step"] * 3 == [s.name for s in view.step_spans]
    assert [s.attributes[N.STEP_INDEX] for s in steps] == [0, 1, 2]
    assert [c.name for c in view.children(steps[0])] == ["chat fake-model", "execute_tool lookup_order"]
    assert len(view.chat_spans) == 3
    assert [s.name for s in view.tool_spans] == ["execute_tool lookup_order", "execute_tool refund"]
    assert len(view.descendants) == 3 + 3 + 2
    assert view.tree().splitlines() == [
        "invoke_agent support",
        "  step", "    chat fake-model", "    execute_tool lookup_order",
        "  step", "    chat fake-model", "    execute_tool refund",
        "  step", "    chat fake-model"]


def test_a_run_view_holds_only_its_own_trace():
    rec = Recorder()
    support_agent(LOOKUP_THEN_REFUND, name="first", **rec.providers).run("a")
    support_agent(["hello"], name="second", **rec.providers).run("b")

    first, second = rec.runs()
    assert first.trace_id != second.trace_id
    assert len(first.descendants) == 8 and len(second.descendants) == 2
    assert {s.context.trace_id for s in second.descendants} == {second.span.context.trace_id}
    assert [r.agent_name for r in rec.runs(agent_name="second")] == ["second"]
    assert len(rec.runs(stop_reason=Stop.ANSWERED)) == 2


def test_an_unstarted_recorder_sees_only_agents_given_its_providers():
    rec = Recorder()
    support_agent(["hi"], **rec.providers).run("a")
    support_agent(["hi"]).run("b")  # global providers: not this recorder's business
    assert len(rec.runs()) == 1
    assert not rec.capturing_global


def test_clear_forgets_spans():
    rec = Recorder()
    support_agent(["hi"], **rec.providers).run("a")
    rec.clear()
    assert rec.spans() == [] and rec.runs() == []


# --- queries ------------------------------------------------------------------------------

def test_spans_filter_by_exact_name_and_aliased_attributes():
    rec = Recorder()
    support_agent(LOOKUP_THEN_REFUND, **rec.providers).run("where is 42?")

    assert [s.attributes[N.STEP_INDEX] for s in rec.spans("step", step_index=1)] == [1]
    denied = rec.spans(tool_name="refund", outcome="denied")
    assert [s.name for s in denied] == ["execute_tool refund"]
    assert rec.spans("execute_tool") == []  # names match exactly, not by prefix
    assert rec.spans(tool_name="refund", outcome="ok") == []
    # dotted keys by dict unpacking; sequence attributes compare equal to lists
    assert rec.spans(**{N.GEN_AI_TOOL_NAME: "refund"}) == denied
    assert len(rec.spans(**{N.TOOLS_REQUESTED: ["lookup_order", "refund"]})) == 1
    assert len(rec.runs(stop_reason=Stop.ANSWERED)) == 1
    assert find_spans(rec.spans(), "step", step_index=2) == rec.spans("step", step_index=2)


def test_keywords_are_aliases_or_exact_keys_never_suffixes():
    rec = Recorder()
    support_agent(LOOKUP_THEN_REFUND, **rec.providers).run("where is 42?")

    assert rec.metric(N.METRIC_TOOL_CALLS, tool_name="refund") == 1
    # ``name`` ends both gen_ai.tool.name and gen_ai.agent.name: a suffix rule would guess
    assert rec.metric(N.METRIC_TOOL_CALLS, name="refund") == 0
    assert rec.spans(name="step", reason="answered") == []


def test_every_alias_names_an_attribute_tracedagent_emits():
    from scenarios import OUTPUT_TYPES, SCENARIOS, TOOLS

    rec = Recorder()
    for stop, (script, budget, _) in SCENARIOS.items():
        Agent(FakeModel(script()), TOOLS, budget=budget, output_type=OUTPUT_TYPES.get(stop), **rec.providers).run("go")
    worker = Agent(FakeModel(["done"]), name="worker", **rec.providers)  # a team, in a conversation
    Agent(FakeModel([tool_call("worker", {"task": "x"}), "ok"]), [worker.as_tool(description="Works.")],
          **rec.providers).run("go", conversation_id="c1")
    emitted = {key for span in rec.spans() for key in span.attributes}
    data = rec.metric_reader.get_metrics_data()
    emitted |= {key for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
                for point in m.data.data_points for key in point.attributes}
    assert set(ATTRIBUTE_ALIASES.values()) <= emitted, set(ATTRIBUTE_ALIASES.values()) - emitted
    assert all("." not in alias for alias in ATTRIBUTE_ALIASES)


def test_span_wants_exactly_one_and_lists_what_was_recorded():
    rec = Recorder()
    support_agent(LOOKUP_THEN_REFUND, **rec.providers).run("where is 42?")
    assert rec.span(tool_name="refund").name == "execute_tool refund"
    with pytest.raises(AssertionError, match=r"exactly one span matching \{'name': 'step'\}, found 3\n"
                                             r"spans recorded: \['chat fake-model'"):
        rec.span("step")


def test_only_run_explains_an_empty_recorder():
    rec = Recorder()
    support_agent(["hi"]).run("uses the global providers")
    with pytest.raises(AssertionError, match=r"(?s)found 0.*\(no run spans\).*start it"):
        rec.only_run()


def test_metric_sums_counters_and_counts_histograms():
    rec = Recorder()
    agent = support_agent(LOOKUP_THEN_REFUND, budget=Budget(price_per_1k_output=2.0), **rec.providers)
    run = agent.run("where is 42?")
    support_agent([tool_call("lookup_order", {"order_id": "1"})] * 2, budget=Budget(max_steps=2),
                  **rec.providers).run("loop")

    assert rec.metric(N.METRIC_RUNS) == 2
    assert rec.metric(N.METRIC_RUNS, stop_reason="answered") == 1
    assert rec.metric(N.METRIC_RUNS, stop_reason=Stop.STEP_BUDGET) == 1
    assert rec.metric(N.METRIC_TOOL_CALLS, tool_name="lookup_order", outcome="ok") == 3
    assert rec.metric(N.METRIC_RUN_STEPS) == 2  # a histogram: one point per run
    assert rec.histogram_sum(N.METRIC_RUN_STEPS) == 3 + 2
    assert run.cost > 0 and rec.metric(N.METRIC_COST) == pytest.approx(sum(v.cost or 0.0 for v in rec.runs()))
    first_run_input = rec.runs()[0].input_tokens
    assert rec.histogram_sum(N.METRIC_TOKEN_USAGE, token_type="input") > first_run_input
    assert rec.metric("no.such.metric") == 0


# --- global capture -----------------------------------------------------------------------

def test_a_started_recorder_captures_agents_using_the_global_providers():
    with Recorder() as rec:
        assert rec.capturing_global
        run = support_agent(LOOKUP_THEN_REFUND).run("where is 42?")
        assert isinstance(trace.get_tracer_provider(), SdkTracerProvider)
    support_agent(["after"]).run("not recorded: the recorder stopped")

    assert rec.only_run().trace_id == run.trace_id
    assert rec.metric(N.METRIC_RUNS, stop_reason="answered") == 1
    assert rec.metric(N.METRIC_TOOL_CALLS, tool_name="refund", outcome="denied") == 1
    assert not rec.capturing_global


def test_consecutive_recorders_are_isolated():
    counts = []
    for _ in range(3):
        with Recorder() as rec:
            support_agent(["hi"]).run("a")
        counts.append((len(rec.runs()), rec.metric(N.METRIC_RUNS)))
    assert counts == [(1, 1.0)] * 3


def test_nested_recorders_both_record():
    with Recorder() as outer:
        support_agent(["one"], name="one").run("a")
        with Recorder() as inner:
            support_agent(["two"], name="two").run("b")
    assert [r.agent_name for r in outer.runs()] == ["one", "two"]
    assert [r.agent_name for r in inner.runs()] == ["two"]
    assert (outer.metric(N.METRIC_RUNS), inner.metric(N.METRIC_RUNS)) == (2, 1)


def test_a_span_belongs_to_the_recorders_active_when_it_started():
    tracer = trace.get_tracer("late-test")
    with Recorder() as first:
        late = tracer.start_span("started during the first test")
    with Recorder() as second:
        late.end()  # e.g. a thread left over from the first test finishing now
    assert [s.name for s in first.spans()] == ["started during the first test"]
    assert second.spans() == []


def test_runs_in_other_threads_are_captured():
    with Recorder() as rec:
        worker = threading.Thread(target=lambda: support_agent(["from a thread"]).run("a"))
        worker.start()
        worker.join()
    assert len(rec.runs()) == 1


def test_a_recorder_starts_once():
    rec = Recorder()
    with rec:
        pass
    with pytest.raises(RuntimeError, match="started once"):
        rec.start()


def test_global_meter_provider_takes_per_recorder_readers():
    with Recorder() as rec:
        assert isinstance(metrics.get_meter_provider(), SdkMeterProvider)
        support_agent(["hi"]).run("a")
    support_agent(["hi"]).run("after the recorder stopped")
    assert rec.metric(N.METRIC_RUNS) == 1  # kept after stop, and nothing added since
