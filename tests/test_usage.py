"""One usage record: ``RunUsage`` adds up a run's spend, ``Spent`` is its snapshot, and cache
tokens survive a pause (in memory, and in the checkpoint's JSON)."""

from __future__ import annotations

import json

from tracedagent import Agent, Completion, Stop, ToolCall, Usage, tool
from tracedagent._core._checkpoint import Checkpoint
from tracedagent._core._result import usage_of
from tracedagent._core._usage import RunUsage, Spent
from tracedagent.testing import FakeModel


def test_a_snapshot_added_to_fresh_totals_gives_them_back_cache_tokens_and_tool_calls_included() -> None:
    used = RunUsage(cost_known=True)
    used.incr(Usage(100, 10, cache_read_input_tokens=60, cache_creation_input_tokens=30), 0.5)
    used.incr(Usage(120, 5, cache_read_input_tokens=90), 0.25)
    used.count_tool_calls(3)
    spent = used.snapshot(steps=2, seconds=1.5)
    assert spent == Spent(steps=2, input_tokens=220, output_tokens=15, cache_read_input_tokens=150,
                          cache_creation_input_tokens=30, cost=0.75, tool_calls=3, seconds=1.5)
    again = RunUsage(cost_known=True)
    again.add(spent)
    assert again == used


@tool(requires_approval=True)
def refund(amount: int) -> str:
    """Refund a customer."""
    return f"refunded {amount}"


def _agent(script: list) -> Agent:
    return Agent(FakeModel(script, estimate_usage=False), [refund], name="clerk")


PAUSING = Completion(tool_calls=[ToolCall(id="c1", name="refund", arguments={"amount": 5})],
                     usage=Usage(100, 10, cache_read_input_tokens=64, cache_creation_input_tokens=20))
ANSWER = Completion(text="done", usage=Usage(130, 5, cache_read_input_tokens=100))


def test_a_paused_runs_cache_tokens_are_carried_into_its_resumed_run() -> None:
    paused = _agent([PAUSING]).run("refund 5")
    assert paused.stop is Stop.APPROVAL_REQUIRED
    assert (paused.paused.spent.cache_read_input_tokens, paused.paused.spent.cache_creation_input_tokens) == (64, 20)
    run = _agent([ANSWER]).resume(paused.paused, {"c1": True})
    assert run.ok and run.carried.cache_read_input_tokens == 64
    used = usage_of(run)
    assert (used.input_tokens, used.cache_read_input_tokens, used.cache_creation_input_tokens) == (230, 164, 20)


def test_the_checkpoints_json_carries_the_whole_snapshot() -> None:
    paused = _agent([PAUSING]).run("refund 5")
    data = json.loads(paused.checkpoint())
    assert set(data["spent"]) == {field for field in Spent.__dataclass_fields__}
    back = Checkpoint.loads(paused.checkpoint())
    assert back.spent == paused.paused.spent
    assert (back.spent.cache_read_input_tokens, back.spent.tool_calls) == (64, 1)


def test_a_run_charged_whole_to_its_caller_brings_its_sub_runs_cache_tokens() -> None:
    helper = Agent(FakeModel([Completion(text="checked", usage=Usage(50, 5, cache_read_input_tokens=40))]),
                   name="helper")
    lead = Agent(FakeModel([
        Completion(tool_calls=[ToolCall(id="h", name="helper", arguments={"task": "check"})],
                   usage=Usage(100, 10, cache_read_input_tokens=64, cache_creation_input_tokens=20)),
        Completion(text="done", usage=Usage(120, 10, cache_read_input_tokens=84))]),
        [helper.as_tool(description="Checks.")], name="lead")
    run = lead.run("go")
    used = usage_of(run)
    assert (used.input_tokens, used.output_tokens) == (run.input_tokens, run.output_tokens) == (270, 25)
    assert (used.cache_read_input_tokens, used.cache_creation_input_tokens) == (188, 20)
