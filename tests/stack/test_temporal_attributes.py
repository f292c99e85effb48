"""Your own attributes on a run on Temporal (the real dev server, workers in this process): the
client's ``attributes=`` reach the run span over the hosted agent's, a child workflow's run carries
its caller's, and the team's span tree is ``arun``'s with the same attributes."""

from __future__ import annotations

import uuid

import pytest

from tracedagent import Agent, BadAttributes, Completion, ToolCall
from tracedagent.testing import FakeModel, tool_call

from scenarios import TOOLS
from ._temporal import TEMPORAL, require_temporal, tree
from .test_temporal import recording

temporalio = pytest.importorskip("temporalio")  # the test group installs it: never skipped in CI
from temporalio.client import Client  # noqa: E402

from tracedagent.temporal import run_on_temporal, worker  # noqa: E402

MINE = {"tenant": "acme", "user.id": "u-17", "tags": ["beta", "eu"]}


@pytest.fixture
async def client():
    require_temporal()
    return await Client.connect(TEMPORAL)


def team(provider, suffix: str):
    researcher = Agent(FakeModel([tool_call("search_help", {"q": "delays"}, id="r1"), "found"]), TOOLS,
                       name=f"researcher-{suffix}", attributes={"component": "research", "tenant": "theirs"},
                       tracer_provider=provider)
    planner = Agent(FakeModel([Completion(tool_calls=[ToolCall("r", researcher.name, {"task": "find"})]), "done"]),
                    [researcher.as_tool(description="Researches.")], name=f"planner-{suffix}",
                    attributes={"component": "planning"}, tracer_provider=provider)
    return planner, researcher


async def test_a_teams_attributes_on_temporal_are_arun_s(client):
    suffix = uuid.uuid4().hex[:8]
    here, here_spans = recording()
    there, there_spans = recording()
    planner, _ = team(here, suffix)
    expected = await planner.arun("plan", attributes=MINE)
    durable = team(there, suffix)
    queue = f"q-{uuid.uuid4().hex}"
    async with worker(client, durable, task_queue=queue, max_cached_workflows=0):  # replays at every step too
        run = await run_on_temporal(client, durable[0].name, "plan", task_queue=queue, attributes=MINE,
                                    tracer_provider=there)
    assert run.ok and expected.ok
    spans = list(there_spans.get_finished_spans())
    assert tree(spans) == tree(list(here_spans.get_finished_spans()))
    runs = {s.name.split(" ")[1].split("-")[0]: s for s in spans if s.name.startswith("invoke_agent")}
    wanted = {"tenant": "acme", "user.id": "u-17", "tags": ("beta", "eu"), "component": "planning"}
    for span in runs.values():  # the sub-agent's own defaults do not override its caller's
        assert {k: span.attributes.get(k) for k in wanted} == wanted, span.name
    client_span = next(s for s in spans if s.name.startswith("run_on_temporal"))
    assert "tenant" not in client_span.attributes  # on the run span, not the client's


async def test_bad_attributes_are_refused_before_anything_starts(client):
    with pytest.raises(BadAttributes):
        await run_on_temporal(client, "nobody", "go", attributes={"gen_ai.agent.name": "x"})
