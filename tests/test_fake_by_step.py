"""``FakeModel(by_step=True)``: the turn for the conversation's step, whichever copy of the
model is asked - as on Temporal, where each worker has its own copy and a call is made again
when its worker dies. The default plays this object's next turn, which two copies get wrong."""

from __future__ import annotations

import pytest

from tracedagent import Agent, Stop, tool
from tracedagent.testing import FakeModel, ScriptExhausted, tool_call


@tool
def lookup(n: int) -> str:
    """Look something up."""
    return f"found {n}"


def script():
    return [tool_call("lookup", {"n": 0}, id="c0"), tool_call("lookup", {"n": 1}, id="c1"), "done"]


def conversation(steps: int) -> list[dict]:
    """The messages of a run at step ``steps``: the task, then an assistant turn and a tool result each."""
    messages = [{"role": "user", "content": "go"}]
    for i in range(steps):
        messages += [{"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}"}]},
                     {"role": "tool", "tool_call_id": f"c{i}", "name": "lookup", "content": f"found {i}"}]
    return messages


def test_two_copies_play_one_conversation_turn_by_turn_and_a_retried_call_gets_its_turn_again():
    worker_a, worker_b = FakeModel(script(), by_step=True), FakeModel(script(), by_step=True)
    assert worker_a.complete(conversation(0)).tool_calls[0].id == "c0"
    assert worker_b.complete(conversation(1)).tool_calls[0].id == "c1", "b was never asked before: step 1's turn"
    assert worker_b.complete(conversation(1)).tool_calls[0].id == "c1", "the call made again: the same turn"
    assert worker_a.complete(conversation(2)).text == "done"
    assert (worker_a.call_count, worker_b.call_count) == (2, 2), "each copy still records what it was sent"


def test_the_default_plays_the_next_turn_of_its_own_script_which_a_second_copy_gets_wrong():
    worker_a, worker_b = FakeModel(script()), FakeModel(script())
    worker_a.complete(conversation(0))
    assert worker_b.complete(conversation(1)).tool_calls[0].id == "c0", "the first tool call again"


async def test_a_run_by_step_is_the_run_of_the_plain_script():
    expected = await Agent(FakeModel(script()), [lookup]).arun("go")
    run = await Agent(FakeModel(script(), by_step=True), [lookup]).arun("go")
    assert run.stop is expected.stop is Stop.ANSWERED
    assert run.messages == expected.messages and run.trajectory() == ["lookup", "lookup"]


def test_a_step_past_the_script_says_which_turn_was_asked_for():
    model = FakeModel(["done"], by_step=True)
    with pytest.raises(ScriptExhausted, match="asked for turn 2 .* its script has 1 turns"):
        model.complete(conversation(1))
