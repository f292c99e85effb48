"""Partial typed output: ``stream`` / ``astream`` of a typed agent yield ``partial_output`` events,
the value validated so far as the JSON arrives (pydantic's partial JSON), only when it changed;
the same events from both drivers; none for an untyped agent, prose, or a spec without ``partial``."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from tracedagent import Agent, PartialOutput, Stop
from tracedagent._core._output import OutputCheck
from tracedagent.testing import FakeModel, tool_call


@dataclass
class Item:
    name: str
    qty: int


def events(agent: Agent, driver: str, task: str = "go") -> list:
    if driver == "stream":
        return list(agent.stream(task))

    async def collect() -> list:
        return [e async for e in agent.astream(task)]

    return asyncio.run(collect())


ANSWER = '[{"name": "pen", "qty": 2}, {"name": "ink", "qty": 10}, {"name": "pad", "qty": 1}]'


@pytest.mark.parametrize("driver", ["stream", "astream"])
def test_a_typed_answer_streams_its_value_so_far_each_time_it_changes(driver):
    seen = events(Agent(FakeModel([ANSWER], chunk_size=3), output_type=list[Item]), driver)
    partials = [e.value for e in seen if e.type == "partial_output"]
    assert all(isinstance(e, PartialOutput) and e.agent == "agent" for e in seen if e.type == "partial_output")
    assert partials[:2] == [[], [Item("pen", 2)]] and partials[-1] == seen[-1].run.output  # "[" is an empty list so far
    assert [len(p) for p in partials][-1] == 3 and Item("ink", 10) in partials[-1]
    assert all(a != b for a, b in zip(partials, partials[1:]))  # only when the value changed
    deltas = sum(e.type == "text_delta" for e in seen)
    assert len(partials) < deltas  # bounded by the changes, not the chunks
    for before, event in zip(seen, seen[1:]):  # each right after the text that made it
        if event.type == "partial_output":
            assert before.type == "text_delta"


def test_both_drivers_yield_the_same_partial_values():
    def values(driver: str) -> list:
        agent = Agent(FakeModel([ANSWER], chunk_size=5), output_type=list[Item])
        return [e.value for e in events(agent, driver) if e.type == "partial_output"]

    assert values("stream") == values("astream") != []


@pytest.mark.parametrize("driver", ["stream", "astream"])
def test_no_partial_output_for_text_agents_prose_or_a_spec_without_partial(driver):
    plain = events(Agent(FakeModel([ANSWER], chunk_size=3)), driver)
    assert not [e for e in plain if e.type == "partial_output"]

    retried = events(Agent(FakeModel(["Two pens, I think.", tool_call("x", {}), ANSWER], chunk_size=3),
                           output_type=list[Item]), driver)
    assert retried[-1].run.stop is Stop.ANSWERED and retried[-1].run.output_retries == 1
    first_turn = retried[:next(i for i, e in enumerate(retried) if e.type == "step_end")]
    assert not [e for e in first_turn if e.type == "partial_output"]  # prose parses as nothing

    class Spec:  # an OutputSpec of the user's own, without the optional partial()
        name, schema = "Anything", {}

        def validate(self, text: str) -> OutputCheck:
            return OutputCheck(text)

    own = events(Agent(FakeModel([ANSWER], chunk_size=3), output_type=Spec()), driver)
    assert own[-1].run.ok and not [e for e in own if e.type == "partial_output"]
