"""Properties that hold for any script and any budget."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from sample_tools import TOOLS
from tracedagent import Agent, Budget, Completion, Stop, ToolCall
from tracedagent.testing import FakeModel, Recorder

# Per tool name, arguments it accepts; any name may also get arguments no tool accepts.
VALID_ARGUMENTS = {
    "search_help": st.builds(lambda q: {"q": q}, st.sampled_from("abc")),
    "flaky": st.builds(lambda n: {"n": n}, st.integers(0, 2)),
    "charge_card": st.builds(lambda amount: {"amount": amount}, st.integers(1, 3)),
    "refund": st.builds(lambda order_id: {"order_id": order_id, "amount": 5.0}, st.sampled_from("abc")),
    "missing": st.builds(lambda q: {"q": q}, st.sampled_from("abc")),
}
BROKEN_ARGUMENTS = st.sampled_from(['{"q": "a"}', "{broken", "[]", {}])
calls = st.sampled_from(sorted(VALID_ARGUMENTS)).flatmap(
    lambda name: st.builds(ToolCall, id=st.uuids().map(str), name=st.just(name),
                           arguments=VALID_ARGUMENTS[name] | BROKEN_ARGUMENTS))
turns = st.one_of(
    st.text(max_size=20),
    st.lists(calls, min_size=1, max_size=3).map(lambda cs: Completion(tool_calls=cs)),
    st.just(ConnectionError("model down")),
)
budgets = st.builds(
    Budget, max_steps=st.integers(1, 8), max_tokens=st.none() | st.integers(50, 3000),
    max_cost=st.none() | st.floats(0.0, 0.05), repeat_limit=st.integers(1, 4),
    price_per_1k_input=st.sampled_from([0.0, 0.01]), price_per_1k_output=st.sampled_from([0.0, 0.03]),
    no_progress_limit=st.none() | st.integers(1, 4))


@settings(max_examples=150, deadline=None)
@given(script=st.lists(turns, max_size=10), budget=budgets)
def test_any_run_ends_named_bounded_and_accounted(script, budget):
    rec = Recorder()
    model = FakeModel(script)
    run = Agent(model, TOOLS, budget=budget, **rec.providers).run("go")

    assert isinstance(run.stop, Stop)
    assert run.step_count <= budget.max_steps and model.call_count <= budget.max_steps
    assert not Counter(run.trajectory()) - Counter(run.requested_tools()), "executed ⊆ requested"
    assert run.ok == (run.stop is Stop.ANSWERED)

    [view] = rec.runs()
    assert view.stop_reason == run.stop.value
    chats = [s for s in view.chat_spans if s.status.is_ok]
    assert view.input_tokens == sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats) == run.input_tokens
    assert view.output_tokens == sum(s.attributes["gen_ai.usage.output_tokens"] for s in chats) == run.output_tokens
    assert len(view.step_spans) == model.call_count
    assert view.executed_tools == run.trajectory() and view.requested_tools == run.requested_tools()
    assert sum(s.attributes["tracedagent.tool.outcome"] == "ok" for s in view.tool_spans) == len(run.trajectory())
