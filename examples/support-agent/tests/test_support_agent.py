"""The support agent's CI: what it answered, what it did, and why every run ended, read
from its OpenTelemetry spans with the tracedagent pytest plugin.

``tracedagent_recorder`` (from the plugin, loaded by installing tracedagent) records each
test's runs, including agents built without providers, which use the global ones.
"""

from __future__ import annotations

import pytest

from support_agent import build_agent
from tracedagent import Budget, Stop
from tracedagent.testing import (FakeModel, assert_never_executed, assert_requested, assert_span_tree,
                                 assert_stop, tool_call)


def test_answers_from_the_order_it_looked_up(shop, tracedagent_recorder):
    model = FakeModel([tool_call("lookup_order", {"order_id": "1003"}), "Order 1003 is on its way."])
    run = build_agent(model, shop).run("Where is my order 1003?")

    assert run.output == "Order 1003 is on its way."
    assert_stop(tracedagent_recorder, Stop.ANSWERED, steps=2)
    assert tracedagent_recorder.only_run().executed_tools == ["lookup_order"]
    assert_span_tree(tracedagent_recorder, ("invoke_agent support", [
        ("step", ["chat fake-model", "execute_tool lookup_order"]),
        ("step", ["chat fake-model"]),
    ]))


def test_a_small_refund_on_a_delivered_order_goes_through(shop, tracedagent_recorder):
    model = FakeModel([tool_call("lookup_order", {"order_id": "1001"}),
                       tool_call("refund", {"order_id": "1001", "amount": 15.0}),
                       "I refunded $15.00."])
    build_agent(model, shop).run("My mug arrived chipped, order 1001.")

    assert shop.refunds == [("1001", 15.0)]
    assert tracedagent_recorder.only_run().executed_tools == ["lookup_order", "refund"]


def test_an_injected_refund_is_requested_but_never_executed(shop, tracedagent_recorder):
    # Order 1002's notes carry an injection (see conftest.py); the scripted model falls for it.
    model = FakeModel([tool_call("lookup_order", {"order_id": "1002"}),
                       tool_call("refund", {"order_id": "1002", "amount": 900}),
                       "A colleague will look at your refund request."])
    build_agent(model, shop).run("What's the status of order 1002?")

    assert_requested(tracedagent_recorder, "refund")       # the injection reached the model...
    assert_never_executed(tracedagent_recorder, "refund")  # ...and the policy held
    assert_stop(tracedagent_recorder, Stop.ANSWERED)
    assert shop.refunds == []
    [denied] = tracedagent_recorder.spans(tool_name="refund", outcome="denied")
    assert denied.name == "execute_tool refund"
    assert tracedagent_recorder.metric("tracedagent.tool.calls", tool_name="refund", outcome="denied") == 1


def test_a_runaway_stops_on_the_step_budget(shop, tracedagent_recorder):
    model = FakeModel([tool_call("lookup_order", {"order_id": str(n)}) for n in range(1000, 1010)])
    run = build_agent(model, shop, budget=Budget(max_steps=4)).run("Check all my orders.")

    assert not run.ok
    assert_stop(tracedagent_recorder, Stop.STEP_BUDGET, steps=4)
    assert "4-step limit" in tracedagent_recorder.only_run().stop_message


@pytest.mark.parametrize("script, stop", [
    (["Hello! How can I help?"], Stop.ANSWERED),
    ([tool_call("lookup_order", {"order_id": "1001"})] * 5, Stop.REPEATED_CALL),
    ([TimeoutError("model timed out")], Stop.MODEL_ERROR),
])
def test_every_run_says_why_it_ended(shop, tracedagent_recorder, script, stop):
    build_agent(FakeModel(script), shop).run("Hi")

    assert_stop(tracedagent_recorder, stop)
    assert tracedagent_recorder.metric("tracedagent.runs", stop_reason=stop) == 1


def test_an_agent_can_also_be_given_the_recorders_providers(shop, tracedagent_recorder):
    build_agent(FakeModel(["Hi!"]), shop, **tracedagent_recorder.providers).run("Hi")
    assert_stop(tracedagent_recorder, Stop.ANSWERED, steps=1)
