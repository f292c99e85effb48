"""Sub-agents: a team is one trace with honest totals, bounded by the budget at its top."""

from __future__ import annotations

import asyncio

import pytest

from tracedagent import Agent, Budget, Completion, FatalToolError, Stop, ToolCall, Usage, tool
from tracedagent.testing import FakeModel, Recorder, assert_never_executed, assert_span_tree, tool_call


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@tool
def search(q: str) -> str:
    """Search the web."""
    return f"results for {q}"


@tool
def publish(text: str) -> str:
    """Publish a text."""
    return "published"


@tool
def revoked() -> str:
    """A tool whose credentials are gone."""
    raise FatalToolError("credentials revoked")


def both(*calls: ToolCall) -> Completion:
    """One turn asking for several calls at once."""
    return Completion(tool_calls=list(calls), finish_reason="tool_calls")


def team(rec: Recorder, *, planner_budget: Budget = Budget(), writer_script=None, latency: float = 0.0,
         conversation_id: str | None = None):
    """planner -> (researcher -> checker, writer), the planner calling both of its sub-agents in one turn."""
    checker = Agent(FakeModel([tool_call("search", {"q": "check"}), "checked"], latency=latency),
                    [search], name="checker", **rec.providers)
    researcher = Agent(FakeModel([tool_call("checker", {"task": "verify"}), "found it"], latency=latency),
                       [search, checker.as_tool(description="Checks facts.")], name="researcher", **rec.providers)
    writer = Agent(FakeModel(writer_script or ["a draft"], latency=latency), [publish], name="writer",
                   **rec.providers)
    planner = Agent(FakeModel([both(ToolCall("r", "researcher", {"task": "find"}),
                                    ToolCall("w", "writer", {"task": "write"})), "all done"], latency=latency),
                    [researcher.as_tool(description="Researches."), writer.as_tool(description="Writes.")],
                    name="planner", budget=planner_budget, **rec.providers)
    return planner


def drive(agent: Agent, driver: str, task: str = "plan", **kwargs):
    if driver == "run":
        return agent.run(task, **kwargs)
    return asyncio.run(agent.arun(task, **kwargs))


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_three_level_team_is_one_trace_with_each_sub_agent_under_its_tool_call(rec, driver):
    run = drive(team(rec), driver)

    assert run.ok and run.output == "all done"
    assert [r.stop for r in run.sub_runs] and {r.output for r in run.sub_runs} == {"found it", "a draft"}
    top = rec.only_run()  # the team counts as one run
    assert len({s.context.trace_id for s in rec.spans()}) == 1
    assert_span_tree(top, ("invoke_agent planner", [
        ("step", ["chat fake-model",
                  ("execute_tool researcher", [("invoke_agent researcher", [
                      ("step", ["chat fake-model", ("execute_tool checker", [("invoke_agent checker", [
                          ("step", ["chat fake-model", "execute_tool search"]),
                          ("step", ["chat fake-model"])])])]),
                      ("step", ["chat fake-model"])])]),
                  ("execute_tool writer", [("invoke_agent writer", [("step", ["chat fake-model"])])])]),
        ("step", ["chat fake-model"]),
    ]))
    by_agent = {v.agent_name: v for v in rec.runs()}
    assert [v.agent_name for v in top.sub_runs] and {v.agent_name for v in top.sub_runs} == {"researcher", "writer"}
    assert [v.agent_name for v in by_agent["researcher"].sub_runs] == ["checker"]
    tool_span = {s.attributes["gen_ai.tool.name"]: s for s in top.tool_spans}
    for name in ("researcher", "writer"):
        child = by_agent[name].span
        assert child.parent.span_id == tool_span[name].context.span_id
        assert tool_span[name].attributes["tracedagent.sub_agent.stop_reason"] == "answered"
        assert tool_span[name].attributes["tracedagent.tool.outcome"] == "ok"


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_totals_count_every_model_call_once(rec, driver):
    run = drive(team(rec), driver)

    chats = [s for s in rec.spans() if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == 2 + 2 + 2 + 1  # planner, researcher, checker, writer
    assert run.input_tokens == sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats)
    assert run.output_tokens == sum(s.attributes["gen_ai.usage.output_tokens"] for s in chats)
    # gen_ai.usage.* on an invoke_agent span is the agent's own calls: summed over every span
    # of the trace, each call counts once.
    runs = rec.runs()
    assert sum(v.input_tokens for v in runs) == run.input_tokens
    for view in runs:
        own = sum(s.attributes["gen_ai.usage.input_tokens"] for s in view.chat_spans
                  if _run_of(view, s) is view.span)
        assert view.input_tokens == own
    top = rec.only_run()
    assert top.total_input_tokens == run.input_tokens and top.total_output_tokens == run.output_tokens
    assert run.own_input_tokens == top.input_tokens


def _run_of(view, span):
    """The nearest invoke_agent span above ``span`` in ``view``'s trace."""
    by_id = {s.context.span_id: s for s in [view.span, *view.descendants]}
    parent = by_id.get(span.parent.span_id)
    while parent is not None and parent.attributes.get("gen_ai.operation.name") != "invoke_agent":
        parent = by_id.get(parent.parent.span_id) if parent.parent else None
    return parent


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_child_cannot_spend_past_what_its_parent_has_left(rec, driver):
    # The writer wants to loop forever; the planner's 600-token budget bounds it.
    greedy = [tool_call("publish", {"text": f"draft {i}"}) for i in range(20)]
    run = drive(team(rec, planner_budget=Budget(max_tokens=600), writer_script=greedy), driver)

    writer = next(r for r in run.sub_runs if r.stop is not Stop.ANSWERED)
    writer_view = rec.runs(agent_name="writer")[0]
    assert writer.stop is Stop.TOKEN_BUDGET
    assert writer_view.span.attributes["tracedagent.budget.max_tokens"] <= 600
    assert run.stop is Stop.TOKEN_BUDGET  # the team's total passed the top budget, counted once
    assert run.total_tokens == sum(s.attributes["gen_ai.usage.input_tokens"] + s.attributes["gen_ai.usage.output_tokens"]
                                   for s in rec.spans() if s.attributes.get("gen_ai.operation.name") == "chat")


STEP_TOKENS = 200


def greedy_worker(rec: Recorder, name: str) -> Agent:
    """A sub-agent that would search for ten steps, each model call 200 tokens."""
    turns = [Completion(tool_calls=[ToolCall(f"{name}{i}", "search", {"q": f"{name} {i}"})], usage=Usage(190, 10))
             for i in range(10)]
    return Agent(FakeModel(turns, latency=0.01), [search], name=name, budget=Budget(max_steps=10), **rec.providers)


def test_sub_agents_side_by_side_are_held_to_the_teams_budget_as_they_spend(rec):
    """Each parallel sub-agent starts with all the team had left; each sees the others' spend
    as it happens, so together they stop soon after the team's budget, not three budgets on."""
    workers = [greedy_worker(rec, name) for name in ("a", "b", "c")]
    lead = Agent(FakeModel([both(*(ToolCall(w.name, w.name, {"task": "dig"}) for w in workers)), "done"]),
                 [w.as_tool(description="Digs.") for w in workers], name="lead", budget=Budget(max_tokens=1000),
                 **rec.providers)
    run = asyncio.run(lead.arun("dig"))

    assert run.stop is Stop.TOKEN_BUDGET
    assert [r.stop for r in run.sub_runs] == [Stop.TOKEN_BUDGET] * 3
    assert any("its team used" in r.output for r in run.sub_runs)
    lead_turn = run.steps[0].completion.usage.total_tokens
    assert run.total_tokens <= 1000 + lead_turn + 3 * STEP_TOKENS  # at most one step past it each
    assert run.total_tokens == run.own_input_tokens + run.own_output_tokens + sum(r.total_tokens for r in run.sub_runs)


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_sub_agent_without_prices_is_priced_at_its_parents(rec, driver):
    worker = Agent(FakeModel([Completion(text="done", usage=Usage(1000, 0))]), name="worker", **rec.providers)
    boss = Agent(FakeModel([tool_call("worker", {"task": "go"}), "ok"]), [worker.as_tool(description="Works.")],
                 name="boss", budget=Budget(price_per_1k_input=0.01, max_cost=1.0), **rec.providers)
    run = drive(boss, driver)

    assert run.sub_runs[0].cost == pytest.approx(0.01)
    assert run.cost == pytest.approx(run.own_cost + 0.01)
    assert rec.runs(agent_name="worker")[0].span.attributes["tracedagent.cost_usd"] == pytest.approx(0.01)


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_childs_budget_stop_is_an_error_the_parent_model_sees(rec, driver):
    worker = Agent(FakeModel([tool_call("search", {"q": str(i)}) for i in range(5)]), [search], name="worker",
                   budget=Budget(max_steps=2), **rec.providers)
    boss_model = FakeModel([tool_call("worker", {"task": "go"}), "gave up"])
    boss = Agent(boss_model, [worker.as_tool(description="Works.")], name="boss", **rec.providers)
    run = drive(boss, driver)

    assert run.ok and run.steps[0].tool_results[0].outcome.value == "error"
    shown = boss_model.calls[1]["messages"][-1]["content"]
    assert "step_budget_exhausted" in shown and "worker" in shown
    [span] = rec.only_run().spans(tool_name="worker")
    assert span.attributes["tracedagent.sub_agent.stop_reason"] == "step_budget_exhausted"


@pytest.mark.parametrize("driver", ["run", "arun"])
@pytest.mark.parametrize("fatal_is_fatal, parent_stop", [(True, Stop.TOOL_FATAL), (False, Stop.ANSWERED)])
def test_a_childs_fatal_error_stops_the_team_unless_softened(rec, driver, fatal_is_fatal, parent_stop):
    worker = Agent(FakeModel([tool_call("revoked")]), [revoked], name="worker", **rec.providers)
    boss = Agent(FakeModel([tool_call("worker", {"task": "go"}), "routed around"]),
                 [worker.as_tool(description="Works.", fatal_is_fatal=fatal_is_fatal)], name="boss", **rec.providers)
    run = drive(boss, driver)

    assert run.stop is parent_stop
    assert run.sub_runs[0].stop is Stop.TOOL_FATAL
    assert run.steps[0].tool_results[0].outcome.value == ("fatal" if fatal_is_fatal else "error")
    assert_never_executed(rec.runs(agent_name="worker")[0], "search")


def test_parallel_sub_agents_under_arun_overlap(rec):
    drive(team(rec, latency=0.05), "arun")
    top = rec.only_run()
    spans = {s.attributes["gen_ai.tool.name"]: s for s in top.tool_spans if s.parent == top.step_spans[0].context}
    r, w = spans["researcher"], spans["writer"]
    assert r.start_time < w.end_time and w.start_time < r.end_time


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_conversation_id_is_on_every_run_of_the_team(rec, driver):
    run = drive(team(rec), driver, conversation_id="conv-42")
    assert run.conversation_id == "conv-42" and all(r.conversation_id == "conv-42" for r in run.sub_runs)
    views = rec.runs()
    assert len(views) == 4 and {v.conversation_id for v in views} == {"conv-42"}
    assert rec.only_run(conversation_id="conv-42").agent_name == "planner"
    # never a metric label: unbounded cardinality
    assert rec.metric("tracedagent.runs") == 4
    assert rec.metric("tracedagent.runs", **{"gen_ai.conversation.id": "conv-42"}) == 0


@pytest.mark.parametrize("calls", [1, 2], ids=["one sub-agent", "two at once"])
async def test_a_sub_agent_out_of_the_time_it_inherited_ends_itself_and_counts_in_the_totals(rec, calls):
    # The sub-agent's second model call outlives the deadline it shares with its caller: it
    # must end as time_budget_exhausted, its run recorded and its tokens counted, rather than
    # be cancelled from outside by the caller's deadline.
    class SlowSecondCall(FakeModel):
        async def acomplete(self, messages, **options):
            if self.call_count % 2 == 1:
                await asyncio.sleep(60)
            return await super().acomplete(messages, **options)

    researcher = Agent(SlowSecondCall([tool_call("search", {"q": "a"}), "never", tool_call("search", {"q": "b"}),
                                       "never"]), [search], name="researcher", **rec.providers)
    first = both(*[ToolCall(f"r{i}", "researcher", {"task": "dig"}) for i in range(calls)])
    lead = Agent(FakeModel([first, "never asked"]), [researcher.as_tool(description="Research.")], name="lead",
                 budget=Budget(max_seconds=0.3), **rec.providers)
    run = await lead.arun("go")

    assert run.stop is Stop.TIME_BUDGET
    assert [sub.stop for sub in run.sub_runs] == [Stop.TIME_BUDGET] * calls
    researcher_spans = rec.spans("invoke_agent researcher")
    assert [s.attributes["tracedagent.stop_reason"] for s in researcher_spans] == ["time_budget_exhausted"] * calls
    assert [s.attributes["tracedagent.sub_agent.stop_reason"] for s in rec.spans("execute_tool researcher")] == [
        "time_budget_exhausted"] * calls
    chat_input = sum(s.attributes.get("gen_ai.usage.input_tokens", 0) for s in rec.spans()
                     if s.name.startswith("chat "))
    assert run.input_tokens == chat_input, "every completed model call of the team is in the lead's total"


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_sub_agent_with_nothing_left_does_not_call_the_model(rec, driver):
    """Three sub-agents one after another under a 5,000-token team budget: once the first two
    have spent it, the third stops before its first model call (it made one, 42 % over)."""
    models = {name: FakeModel([Completion(text=f"{name} done", usage=Usage(2900, 100))]) for name in "abc"}
    workers = [Agent(models[name], name=name, **rec.providers) for name in "abc"]
    lead = Agent(FakeModel([Completion(tool_calls=[ToolCall(n, n, {"task": "work"}) for n in "abc"],
                                       usage=Usage(90, 10)), "done"]),
                 [w.as_tool(description="Works.") for w in workers], name="lead",
                 budget=Budget(max_tokens=5000), parallel_tool_calls=False, **rec.providers)
    run = drive(lead, driver)
    assert run.stop is Stop.TOKEN_BUDGET
    assert [m.call_count for m in models.values()] == [1, 1, 0]
    [third] = [r for r in run.sub_runs if r.output.startswith("Stopped: nothing was left")]
    assert third.stop is Stop.TOKEN_BUDGET and third.step_count == 0 and third.total_tokens == 0
    assert run.total_tokens == 100 + 2 * 3000  # the lead's turn and two calls: one call past the budget at most
    assert not [s for s in rec.spans() if s.name.startswith("chat") and s.attributes.get("gen_ai.agent.name") == "c"]


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_run_that_spent_its_whole_budget_makes_no_further_call(rec, driver):
    model = FakeModel([Completion(tool_calls=[ToolCall("s", "search", {"q": "x"})], usage=Usage(900, 100)), "more"])
    run = drive(Agent(model, [search], budget=Budget(max_tokens=1000), **rec.providers), driver)
    assert run.stop is Stop.TOKEN_BUDGET and model.call_count == 1 and run.total_tokens == 1000
