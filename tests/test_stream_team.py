"""A team streamed: sub-agents' events reach the one consumer, each naming its agent, and the
team's run and trace are those of ``run`` / ``arun``; a consumer that leaves while a sub-agent
runs ends every span of the team."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from async_support import watch
from test_async import summary
from test_stream import aread, read, unstreamed
from test_team import team
from tracedagent import Stop
from tracedagent._testing import _fake
from tracedagent.testing import Recorder


def fresh_team(rec: Recorder) -> Any:
    """``team``, its scripts' call ids numbered from 1 (so two teams send the same conversations)."""
    _fake._call_ids = itertools.count(1)
    return team(rec)


def by_agent(events: list) -> dict[str, list]:
    grouped: dict[str, list] = {}
    for event in events:
        grouped.setdefault(event.agent, []).append(event)
    return grouped


def sub_runs(run: Any) -> list:
    """The summaries of ``run``'s sub-runs, by output (their order is the order they ended)."""
    return sorted((summary(sub) for sub in run.sub_runs), key=lambda s: s["output"])


@pytest.mark.parametrize("driver", ["stream", "astream"])
def test_a_streamed_team_is_the_team_run_with_every_agents_events(driver):
    by_driver, streamed_rec = Recorder(), Recorder()
    plain = fresh_team(by_driver)
    ran = plain.run("plan") if driver == "stream" else asyncio.run(plain.arun("plan"))
    streamed = fresh_team(streamed_rec)
    events, run = read(streamed, "plan") if driver == "stream" else asyncio.run(aread(streamed, "plan"))

    assert summary(run) == summary(ran) and sub_runs(run) == sub_runs(ran)
    assert unstreamed(streamed_rec.spans()) == unstreamed(by_driver.spans())
    grouped = by_agent(events)
    assert set(grouped) == {"planner", "researcher", "checker", "writer"}
    assert events[-1].type == "run_end" and events[-1].run is run
    runs_by_name = {"planner": run, **{e.agent: e.run for e in events if e.type == "run_end"}}
    for name, own in grouped.items():
        assert own[-1].type == "run_end" and [e.type for e in own].count("run_end") == 1
        finished = runs_by_name[name]
        assert [e.result for e in own if e.type == "tool_result"] == [r for s in finished.steps for r in s.tool_results]
        assert "".join(e.text for e in own if e.type == "text_delta") == "".join(
            s.completion.text for s in finished.steps)
    # A sub-agent's events come while its call runs: before the planner's result of that call.
    order = [(e.agent, e.type, getattr(getattr(e, "result", None), "name", None)) for e in events]
    for name in ("researcher", "writer"):
        assert order.index((name, "run_end", None)) < order.index(("planner", "tool_result", name))
    assert order.index(("checker", "run_end", None)) < order.index(("researcher", "tool_result", "checker"))


async def test_under_astream_a_sub_agents_events_arrive_while_it_runs():
    rec = Recorder()
    seen_before_its_call_ended: list[bool] = []
    ended = {"flag": False}
    spans = watch(rec)
    spans.end_hooks.append(lambda s: s.name == "execute_tool researcher" and ended.update(flag=True))
    async with team(rec, latency=0.01).astream("plan") as stream:
        async for event in stream:
            if event.agent == "checker":
                seen_before_its_call_ended.append(not ended["flag"])
    assert seen_before_its_call_ended and all(seen_before_its_call_ended)
    assert stream.run.ok


@pytest.mark.parametrize("driver", ["stream", "astream"])
def test_a_consumer_that_leaves_at_a_sub_agents_event_ends_the_whole_team(driver):
    rec = Recorder()
    spans = watch(rec)
    agent = team(rec, latency=0.01)

    async def leave() -> Any:
        async with agent.astream("plan") as stream:
            async for event in stream:
                if event.agent == "checker":
                    break
        return stream

    if driver == "stream":
        with agent.stream("plan") as stream:
            for event in stream:
                if event.agent == "checker":
                    break
    else:
        stream = asyncio.run(leave())
    assert stream.run.stop is Stop.CANCELLED
    assert spans.open == [] and spans.started == spans.ended
    planner = rec.only_run()
    assert planner.stop_reason == "cancelled"
    if driver == "astream":  # the sub-agents were still running: their runs were cancelled too
        assert {s.attributes.get("tracedagent.stop_reason") for s in rec.spans()
                if s.name == "invoke_agent researcher"} == {"cancelled"}


@pytest.mark.parametrize("driver", ["stream", "astream"])
def test_an_agent_run_inside_an_ordinary_tool_of_a_streamed_run_keeps_its_team_events_to_itself(driver):
    """The tool's agent inherits the streamed run's context but is not streamed (``arun``): its
    sub-agents run as ``arun`` too, and their events never reach the outer stream - where they
    waited in its queue and came out during a later turn's own sub-agent, as if its."""
    from tracedagent import Agent, Completion, ToolCall, tool
    from tracedagent.testing import FakeModel

    helper = Agent(FakeModel(["helper says hi"]), name="helper")
    boss = Agent(FakeModel([Completion(tool_calls=[ToolCall("i1", "helper", {"task": "t"})]), "boss done"]),
                 [helper.as_tool(description="Helps.")], name="boss")

    @tool
    async def consult(q: str) -> str:
        """An ordinary tool that runs another agent."""
        return (await boss.arun(q)).output

    mine = Agent(FakeModel(["mine done"]), name="mine")
    top = Agent(FakeModel([Completion(tool_calls=[ToolCall("t1", "consult", {"q": "x"})]),
                           Completion(tool_calls=[ToolCall("t2", "mine", {"task": "y"})]), "top done"]),
                [consult, mine.as_tool(description="Mine.")], name="top")
    events, run = read(top) if driver == "stream" else asyncio.run(aread(top))
    assert run.ok and run.output == "top done" and run.trajectory() == ["consult", "mine"]
    assert {event.agent for event in events} == {"top", "mine"}
