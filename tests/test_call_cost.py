"""Cost per model call (issue #39, item 7): each ``chat`` span priced with its run's budget, cache
reads and writes at their own prices when the budget names them, the run's cost the sum of its
calls' (a team's too), and the proposal's ``gen_ai.usage.cost`` only when asked for."""

from __future__ import annotations

import json

import pytest

from async_support import drive
from tracedagent import Agent, Budget, Checkpoint, Completion, Registry, ToolCall, Usage, ask
from tracedagent._core import _names as N
from tracedagent._traces._recorded import _budget
from tracedagent.testing import FakeModel, Recorder, tool_call

PRICES = Budget(price_per_1k_input=3.0, price_per_1k_output=15.0, price_per_1k_cache_read=0.3,
                price_per_1k_cache_write=3.75)
"""A test's prices (USD per 1,000 tokens): none are shipped."""


def said(text: str, *, tokens_in: int, tokens_out: int, read: int = 0, written: int = 0,
         calls: list[ToolCall] | None = None) -> Completion:
    usage = Usage(input_tokens=tokens_in, output_tokens=tokens_out, cache_read_input_tokens=read,
                  cache_creation_input_tokens=written)
    return Completion(text=text, tool_calls=calls or [], usage=usage,
                      finish_reason="tool_calls" if calls else "stop")


def lookup(q: str) -> str:
    """Looks something up."""
    return f"found {q}"


def chats(rec: Recorder) -> list:
    return [s for s in rec.spans() if s.attributes.get(N.GEN_AI_OPERATION_NAME) == N.OP_CHAT]


# --- the price of one call ---------------------------------------------------------------------

def test_cache_reads_and_writes_are_priced_at_their_own_prices_only_when_the_budget_names_them():
    plain = Budget(price_per_1k_input=3.0, price_per_1k_output=15.0)
    # 1,000 input tokens of which 600 read from the cache and 200 written to it, 100 output.
    assert plain.cost_of(1000, 100, cache_read_input_tokens=600, cache_creation_input_tokens=200) \
        == pytest.approx(3.0 + 1.5)  # as ordinary input: what every run was charged before
    assert PRICES.cost_of(1000, 100, cache_read_input_tokens=600, cache_creation_input_tokens=200) \
        == pytest.approx((200 * 3.0 + 600 * 0.3 + 200 * 3.75 + 100 * 15.0) / 1000)
    reads_only = Budget(price_per_1k_input=3.0, price_per_1k_cache_read=0.0)
    assert reads_only.cost_of(1000, 0, cache_read_input_tokens=1000, cache_creation_input_tokens=0) == 0.0
    assert reads_only.priced and Budget(price_per_1k_cache_write=1.0).priced and not Budget().priced
    with pytest.raises(ValueError, match="price_per_1k_cache_read"):
        Budget(price_per_1k_cache_read=-1.0)


# --- on the chat spans, summing to the run's ---------------------------------------------------

@pytest.mark.parametrize("driver", ["run", "arun", "stream"])
def test_each_chat_span_carries_its_call_s_cost_and_the_run_s_cost_is_their_sum(driver):
    rec = Recorder()
    model = FakeModel([said("", tokens_in=1200, tokens_out=40, written=1000, calls=[ToolCall("c1", "lookup", {"q": "a"})]),
                       said("done", tokens_in=1300, tokens_out=20, read=1000)])
    agent = Agent(model, [lookup], budget=PRICES, **rec.providers)
    run = drive(agent, driver, "go")
    first, second = chats(rec)
    assert first.attributes[N.USAGE_COST_USD] == pytest.approx((200 * 3.0 + 1000 * 3.75 + 40 * 15.0) / 1000)
    assert second.attributes[N.USAGE_COST_USD] == pytest.approx((300 * 3.0 + 1000 * 0.3 + 20 * 15.0) / 1000)
    run_span = rec.only_run().span
    assert run_span.attributes[N.COST_USD] == pytest.approx(first.attributes[N.USAGE_COST_USD]
                                                            + second.attributes[N.USAGE_COST_USD])
    assert run.cost == pytest.approx(run_span.attributes[N.COST_USD])
    assert N.GEN_AI_USAGE_COST not in first.attributes  # the proposal's name only when asked for
    # The budget the run used says its cache prices, so that replay rebuilds it.
    assert run_span.attributes[N.BUDGET_PRICE_PER_1K_CACHE_READ] == 0.3
    assert run_span.attributes[N.BUDGET_PRICE_PER_1K_CACHE_WRITE] == 3.75
    assert Budget(**_budget(run_span.attributes)) == PRICES


def test_without_prices_no_call_has_a_cost_unknown_is_not_free():
    rec = Recorder()
    Agent(FakeModel([said("hi", tokens_in=10, tokens_out=2)]), **rec.providers).run("go")
    [chat] = chats(rec)
    assert N.USAGE_COST_USD not in chat.attributes and N.COST_USD not in rec.only_run().span.attributes
    assert N.BUDGET_PRICE_PER_1K_CACHE_READ not in rec.only_run().span.attributes


def test_the_proposal_s_gen_ai_usage_cost_is_written_beside_ours_when_the_variable_asks(monkeypatch):
    monkeypatch.setenv(N.ENV_GEN_AI_USAGE_COST, "true")
    rec = Recorder()
    Agent(FakeModel([said("hi", tokens_in=1000, tokens_out=100)]), budget=PRICES, **rec.providers).run("go")
    [chat] = chats(rec)
    assert chat.attributes[N.GEN_AI_USAGE_COST] == chat.attributes[N.USAGE_COST_USD] == pytest.approx(4.5)


def test_in_a_team_every_run_s_cost_is_the_sum_of_its_own_calls_and_the_total_of_all(monkeypatch):
    """The lead has prices with cache prices; the worker has none of its own and takes them all."""
    rec = Recorder()
    worker = Agent(FakeModel([said("", tokens_in=500, tokens_out=10, read=400,
                                   calls=[ToolCall("w1", "lookup", {"q": "x"})]),
                              said("worked", tokens_in=600, tokens_out=30, written=500)]),
                   [lookup], name="worker", **rec.providers)
    lead = Agent(FakeModel([said("", tokens_in=100, tokens_out=5, calls=[ToolCall("l1", "worker", {"task": "t"})]),
                            said("all done", tokens_in=2000, tokens_out=50, read=1500, written=100)]),
                 [worker.as_tool(description="Works.")], name="lead", budget=PRICES, **rec.providers)
    run = lead.run("plan")
    assert run.ok
    views = {v.agent_name: v for v in rec.runs()}
    everything = 0.0
    for name, view in views.items():
        own = [s for s in view.chat_spans if _run_of(view, s) is view.span]
        assert len(own) == 2
        own_cost = sum(s.attributes[N.USAGE_COST_USD] for s in own)
        assert view.span.attributes[N.COST_USD] == pytest.approx(own_cost), name
        everything += own_cost
    worker_calls = sorted(s.attributes[N.USAGE_COST_USD] for s in views["worker"].chat_spans)
    assert worker_calls == pytest.approx(sorted([(100 * 3.0 + 400 * 0.3 + 10 * 15.0) / 1000,
                                                 (100 * 3.0 + 500 * 3.75 + 30 * 15.0) / 1000]))
    assert views["lead"].span.attributes[N.TOTAL_COST_USD] == pytest.approx(everything)
    assert run.cost == pytest.approx(everything)


def _run_of(view, span):
    """The nearest invoke_agent span above ``span`` in ``view``'s trace."""
    by_id = {s.context.span_id: s for s in [view.span, *view.descendants]}
    parent = by_id.get(span.parent.span_id)
    while parent is not None and parent.attributes.get(N.GEN_AI_OPERATION_NAME) != N.OP_INVOKE_AGENT:
        parent = by_id.get(parent.parent.span_id) if parent.parent else None
    return parent


# --- the new budget fields in a checkpoint -----------------------------------------------------

def test_a_paused_run_s_checkpoint_carries_the_cache_prices_and_a_version_1_one_reads_them_as_none(monkeypatch):
    monkeypatch.delenv(N.ENV_CHECKPOINT_KEY, raising=False)
    agent = Agent(FakeModel([tool_call("lookup", {"q": "a"}, id="c1")]),
                  Registry([lookup], policy=lambda call: ask("every lookup waits")), budget=PRICES)
    paused = agent.run("go")
    assert paused.paused is not None
    data = json.loads(paused.checkpoint())
    assert data["budget"]["price_per_1k_cache_read"] == 0.3 and data["budget"]["price_per_1k_cache_write"] == 3.75
    assert Checkpoint.loads(json.dumps(data)).budget == PRICES
    v1 = {**data, "version": 1, "budget": {k: v for k, v in data["budget"].items() if "cache" not in k}}
    v1["spent"] = {k: v for k, v in data["spent"].items() if "cache" not in k}
    read = Checkpoint.loads(json.dumps(v1)).budget
    assert read.price_per_1k_cache_read is None and read.price_per_1k_cache_write is None
    assert read.price_per_1k_input == 3.0
