"""Workflow histories recorded by an older worker, replayed against today's workflow code.

A run that waits days for approval was started by the worker deployed then; the worker
deployed now must replay its history without a nondeterminism error (docs/temporal.md,
"Upgrading workers"). ``HISTORIES`` names each recorded run and builds the agents it ran
(same names, tools, budgets and scripts: a replay decides from the agent's definition and
the history). ``python -m tests.temporal_histories ADDRESS`` records them again into
tests/data/temporal_histories/ (or the directory given after it) with the worker of the
checked-out code (the histories there were recorded with the worker before the workflow became
a pump of the run machine; those in ``searchable/`` with the worker that upserts search
attributes); ``tests/test_temporal_replay.py`` replays both without a server.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, Callable

from sample_tools import TOOLS, close_account, search_help
from tracedagent import Agent, Budget, Completion, ToolCall, tool
from tracedagent.testing import FakeModel, tool_call

QUEUE = "histories"
"""The task queue every recorded run ran on (a replay finds its agents by queue and name)."""
DIRECTORY = Path(__file__).parent / "data" / "temporal_histories"
SEARCHABLE = DIRECTORY / "searchable"
"""The same runs recorded by the worker that upserts search attributes and a memo (#40), behind
``workflow.patched``: their histories carry the patch markers and the upserts, which a later
worker must ask for again (``python tests/temporal_histories.py ADDRESS tests/data/temporal_histories/searchable``)."""


@tool(requires_approval=True)
def refund(amount: int) -> str:
    """Refund a customer: a person approves it first."""
    return f"refunded {amount}"


def _many(n: int = 12) -> list[Any]:
    return [tool_call("search_help", {"q": f"q{i}"}, id=f"m{i}") for i in range(n)]


def _two(*calls: ToolCall) -> Completion:
    return Completion(tool_calls=list(calls))


def answered_parallel() -> list[Agent]:
    turns = [_two(ToolCall("p1", "search_help", {"q": "a"}), ToolCall("p2", "search_help", {"q": "b"})),
             tool_call("search_help", {"q": "c"}, id="p3"), "done"]
    return [Agent(FakeModel(turns), TOOLS, name="answered-parallel", max_tool_concurrency=2)]


def answered_sequential() -> list[Agent]:
    turns = [_two(ToolCall("s1", "search_help", {"q": "a"}), ToolCall("s2", "flaky", {"n": 1})), "done"]
    return [Agent(FakeModel(turns), TOOLS, name="answered-sequential", parallel_tool_calls=False)]


def fatal_sequential() -> list[Agent]:
    turns = [_two(ToolCall("f1", "charge_card", {"amount": 1}), ToolCall("f2", "search_help", {"q": "x"}))]
    return [Agent(FakeModel(turns), TOOLS, name="fatal-sequential", parallel_tool_calls=False)]


def _payer(name: str) -> list[Agent]:
    turns = [_two(ToolCall("r0", "search_help", {"q": "refund"}), ToolCall("r1", "refund", {"amount": 30}),
                  ToolCall("r2", "close_account", {"account": "A1"})), "done"]
    return [Agent(FakeModel(turns), [search_help, refund, close_account], name=name)]


def approval_approved() -> list[Agent]:
    return _payer("approval-approved")


def approval_denied() -> list[Agent]:
    return _payer("approval-denied")


def approval_timeout() -> list[Agent]:
    return _payer("approval-timeout")


def approval_cancelled() -> list[Agent]:
    return _payer("approval-cancelled")


def team() -> list[Agent]:
    researcher = Agent(FakeModel([tool_call("search_help", {"q": "delays"}, id="t-r1"), "found"]), TOOLS,
                       name="team-researcher")
    writer = Agent(FakeModel(_many(5)), TOOLS, name="team-writer", budget=Budget(max_steps=2))
    planner = Agent(FakeModel([_two(ToolCall("tr", researcher.name, {"task": "find"}),
                                    ToolCall("tw", writer.name, {"task": "write"})), "done"]),
                    [researcher.as_tool(description="Researches."), writer.as_tool(description="Writes.")],
                    name="team-planner")
    return [planner, researcher, writer]


def team_paused() -> list[Agent]:
    clerk = Agent(FakeModel([tool_call("refund", {"amount": 900}, id="c1"), "never"]), [refund], name="team-clerk")
    lead = Agent(FakeModel([tool_call(clerk.name, {"task": "refund"}, id="t1"), "never"]),
                 [clerk.as_tool(description="Refunds.")], name="team-lead")
    return [lead, clerk]


def step_budget() -> list[Agent]:
    return [Agent(FakeModel(_many()), TOOLS, name="step-budget", budget=Budget(max_steps=3))]


def token_budget() -> list[Agent]:
    return [Agent(FakeModel(_many()), TOOLS, name="token-budget", budget=Budget(max_tokens=250))]


def cost_budget() -> list[Agent]:
    budget = Budget(max_cost=0.001, price_per_1k_input=0.01, price_per_1k_output=0.03)
    return [Agent(FakeModel(_many()), TOOLS, name="cost-budget", budget=budget)]


def repeated_call() -> list[Agent]:
    turns = [tool_call("search_help", {"q": "same"}, id=f"x{i}") for i in range(6)]
    return [Agent(FakeModel(turns), TOOLS, name="repeated-call", budget=Budget(repeat_limit=2))]


def tool_call_budget() -> list[Agent]:
    return [Agent(FakeModel(_many()), TOOLS, name="tool-call-budget", budget=Budget(max_tool_calls=2))]


def no_progress() -> list[Agent]:
    turns = [tool_call("flaky", {"n": i}, id=f"n{i}") for i in range(6)]
    return [Agent(FakeModel(turns), TOOLS, name="no-progress", budget=Budget(no_progress_limit=2))]


def model_error() -> list[Agent]:
    turns = [tool_call("search_help", {"q": "a"}, id="e1"), TimeoutError("read timed out")]
    return [Agent(FakeModel(turns), TOOLS, name="model-error")]


def time_budget() -> list[Agent]:
    return [Agent(FakeModel(_many()), TOOLS, name="time-budget", budget=Budget(max_seconds=0))]


HISTORIES: dict[str, Callable[[], list[Agent]]] = {f.__name__.replace("_", "-"): f for f in (
    answered_parallel, answered_sequential, fatal_sequential, approval_approved, approval_denied, approval_timeout,
    approval_cancelled, team, team_paused, step_budget, token_budget, cost_budget, repeated_call, tool_call_budget,
    no_progress, model_error, time_budget)}
"""Each recorded run by file name (``NAME.json``): the agents its worker hosted, the first the one run."""


def all_agents() -> list[Agent]:
    return [agent for make in HISTORIES.values() for agent in make()]


async def _record(address: str, directory: Path = DIRECTORY) -> None:  # pragma: no cover - by hand, on a dev server
    from temporalio.client import Client

    from tracedagent.temporal import approve_on_temporal, start_on_temporal, waiting_on_temporal, worker

    client = await Client.connect(address)
    directory.mkdir(parents=True, exist_ok=True)
    async with worker(client, all_agents(), task_queue=QUEUE):
        for name, make in HISTORIES.items():
            agent = make()[0]
            timeout = 0.5 if name in ("approval-timeout", "team-paused") else None
            handle = await start_on_temporal(client, agent.name, "help me", task_queue=QUEUE,
                                             workflow_id=f"history-{name}", approval_timeout=timeout)
            if name in ("approval-approved", "approval-denied", "approval-cancelled"):
                while not await waiting_on_temporal(client, handle.id):
                    await asyncio.sleep(0.1)
                if name == "approval-cancelled":
                    await handle.cancel()
                else:
                    yes = name == "approval-approved"
                    await approve_on_temporal(client, handle.id, {"r1": yes, "r2": True if yes else "not today"})
            try:
                await handle.result()
            except Exception as exc:  # the cancelled one
                print(name, "ended", type(exc).__name__)
            history = await handle.fetch_history()
            (directory / f"{name}.json").write_text(json.dumps(json.loads(history.to_json()), indent=None) + "\n")
            children = [e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
                        for e in history.events if e.HasField("child_workflow_execution_started_event_attributes")]
            for n, child in enumerate(sorted(children)):  # a sub-agent's run: the same workflow, replayed too
                data = (await client.get_workflow_handle(child).fetch_history()).to_json()
                (directory / f"{name}.child{n}.json").write_text(json.dumps(json.loads(data)) + "\n")
            print(name, "recorded", len(children), "children")


if __name__ == "__main__":  # pragma: no cover
    asyncio.run(_record(sys.argv[1], *(Path(a) for a in sys.argv[2:3])))
