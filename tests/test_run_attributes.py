"""Your own attributes on runs (``attributes=``): on the run span from every entry point, the agent's
defaults under the call's, carried into sub-agents' runs, baggage copied only on request, every
refusal named before anything runs, never a metric label, and through Temporal's codec."""

from __future__ import annotations

import asyncio
import json

import pytest
from opentelemetry import baggage
from opentelemetry import context as otel_context

from sample_tools import refund
from tracedagent import Agent, BadAttributes, Registry, Stop, ask, tool
from tracedagent._core import _names as N
from tracedagent.testing import FakeModel, Recorder, tool_call

MINE = {"user.id": "u-17", "tenant": "acme", "tags": ["beta", "eu"], "priority": 2, "ratio": 0.5, "vip": True}


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def run_span(rec: Recorder, agent: str = "agent"):
    spans = [s for s in rec.spans() if s.name == f"invoke_agent {agent}"]
    assert len(spans) == 1, [s.name for s in rec.spans()]
    return spans[0]


def mine(span, keys=MINE) -> dict:
    """The span's attributes named in ``keys``, sequences as lists (the SDK keeps tuples)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in span.attributes.items() if k in keys}


def pausing(rec: Recorder, **kwargs) -> Agent:
    """An agent whose first turn asks for a refund a person must approve, then answers."""
    registry = Registry([refund], policy=lambda call: ask("a person decides"))
    return Agent(FakeModel([tool_call("refund", {"order_id": "A1", "amount": 5.0}, id="c1"), "refunded"]),
                 registry, accept_unsigned_checkpoints=True, **rec.providers, **kwargs)


# --- every entry point ------------------------------------------------------------------------

def _stream(agent, **kw):
    with agent.stream("go", **kw) as stream:
        for _ in stream:
            pass
    return stream.run


async def _astream(agent, **kw):
    async with agent.astream("go", **kw) as stream:
        async for _ in stream:
            pass
    return stream.run


@pytest.mark.parametrize("driver", ["run", "arun", "stream", "astream"])
async def test_each_driver_puts_the_calls_attributes_on_its_run_span(rec, driver):
    agent = Agent(FakeModel(["done"]), **rec.providers)
    call = {"run": lambda: agent.run("go", attributes=MINE), "stream": lambda: _stream(agent, attributes=MINE)}
    if driver in call:
        run = call[driver]()
    else:
        run = await (agent.arun("go", attributes=MINE) if driver == "arun" else _astream(agent, attributes=MINE))
    assert run.ok
    span = run_span(rec)
    assert mine(span) == MINE
    assert span.attributes[N.DRIVER] == driver  # the run span's own attributes are all there too
    # only on the run span: its step and chat spans do not repeat them
    assert all(not (set(s.attributes) & set(MINE)) for s in rec.spans() if s is not span)


@pytest.mark.parametrize("driver", ["resume", "aresume"])
async def test_a_resumed_run_carries_the_attributes_given_to_resume(rec, driver):
    agent = pausing(rec, attributes={"component": "desk"})
    paused = agent.run("refund A1", attributes={"tenant": "acme"})
    assert paused.stop is Stop.APPROVAL_REQUIRED
    rec.clear()
    kwargs = {"attributes": {"tenant": "acme", "ticket": 9}}
    resumed = (agent.resume(paused.checkpoint(), {"c1": True}, **kwargs) if driver == "resume"
               else await agent.aresume(paused.checkpoint(), {"c1": True}, **kwargs))
    assert resumed.ok
    assert mine(run_span(rec), {"tenant", "ticket", "component"}) == {"tenant": "acme", "ticket": 9,
                                                                     "component": "desk"}


def test_a_refused_resume_leaves_the_checkpoint_unclaimed(rec):
    agent = pausing(rec)
    paused = agent.run("refund A1")
    with pytest.raises(BadAttributes):
        agent.resume(paused.checkpoint(), {"c1": True}, attributes={"tracedagent.stop_reason": "x"})
    assert agent.resume(paused.checkpoint(), {"c1": True}).ok  # not used up by the refusal


# --- defaults, override, sub-agents -----------------------------------------------------------

def test_the_agents_defaults_are_on_every_run_and_a_calls_keys_win(rec):
    agent = Agent(FakeModel(["one", "two"]), attributes={"component": "desk", "tenant": "default"}, **rec.providers)
    agent.run("go")
    agent.run("go", attributes={"tenant": "acme", "user.id": "u1"})
    first, second = [s for s in rec.spans() if s.name == "invoke_agent agent"]
    keys = {"component", "tenant", "user.id"}
    assert mine(first, keys) == {"component": "desk", "tenant": "default"}
    assert mine(second, keys) == {"component": "desk", "tenant": "acme", "user.id": "u1"}
    assert agent.attributes == {"component": "desk", "tenant": "default"}


def team(rec: Recorder):
    @tool
    def search(q: str) -> str:
        """Search."""
        return "found"

    researcher = Agent(FakeModel([tool_call("search", {"q": "x"}), "found it"]), [search], name="researcher",
                       attributes={"component": "research", "tenant": "researcher-default"}, **rec.providers)
    return Agent(FakeModel([tool_call("researcher", {"task": "find"}), "all done"]),
                 [researcher.as_tool(description="Researches.")], name="planner",
                 attributes={"component": "planning"}, **rec.providers)


@pytest.mark.parametrize("driver", ["run", "arun", "stream"])
def test_a_sub_agents_run_carries_its_callers_attributes_over_its_own_defaults(rec, driver):
    planner = team(rec)  # a sub-agent is an async tool: called from sync code here
    kwargs = {"attributes": {"tenant": "acme", "user.id": "u1"}}
    run = (planner.run("plan", **kwargs) if driver == "run" else _stream(planner, **kwargs) if driver == "stream"
           else asyncio.run(planner.arun("plan", **kwargs)))
    assert run.ok and len(run.sub_runs) == 1
    keys = {"component", "tenant", "user.id"}
    assert mine(run_span(rec, "planner"), keys) == {"component": "planning", "tenant": "acme", "user.id": "u1"}
    # the caller's run attributes (its call's and its defaults) win; the sub-agent's own fill the rest
    assert mine(run_span(rec, "researcher"), keys) == {"component": "planning", "tenant": "acme", "user.id": "u1"}


def test_a_sub_agent_alone_has_its_own_defaults_and_nothing_leaks_after_a_team_run(rec):
    planner = team(rec)
    planner.run("plan", attributes={"tenant": "acme"})
    rec.clear()
    researcher = planner.registry.get("researcher").runs
    researcher.run("alone")  # not under a run: its own defaults only, nothing of the team's
    assert mine(run_span(rec, "researcher"), {"component", "tenant"}) == {"component": "research",
                                                                          "tenant": "researcher-default"}


def test_a_sub_run_holds_at_most_the_bound_its_own_keys_first(rec):
    @tool
    def ask_helper() -> str:
        """Calls the helper."""
        return helper.run("help").output

    helper = Agent(FakeModel(["helped"]), name="helper", attributes={"own": 1}, **rec.providers)
    caller = Agent(FakeModel([tool_call("ask_helper", {}), "done"]), [ask_helper], name="caller", **rec.providers)
    many = {f"k{i}": i for i in range(N.MAX_RUN_ATTRIBUTES)}
    assert caller.run("go", attributes=many).ok
    inherited = dict(run_span(rec, "helper").attributes)
    ours = {k: v for k, v in inherited.items() if not k.startswith(N.RESERVED_ATTRIBUTE_PREFIXES)}
    assert len(ours) == N.MAX_RUN_ATTRIBUTES and ours["own"] == 1


# --- baggage, only on request -----------------------------------------------------------------

def in_baggage(**entries):
    context = None
    for key, value in entries.items():
        context = baggage.set_baggage(key, value, context)
    return otel_context.attach(context)


def test_baggage_is_copied_only_when_asked_and_only_the_keys_named(rec):
    token = in_baggage(tenant="acme", session="s-1", **{"gen_ai.agent.name": "spoofed", "api_key": "sk-x"})
    try:
        Agent(FakeModel(["a"]), name="plain", **rec.providers).run("go")
        Agent(FakeModel(["a"]), name="named", attributes_from_baggage=["tenant"], **rec.providers).run("go")
        Agent(FakeModel(["a"]), name="every", attributes_from_baggage=True, attributes={"tenant": "mine"},
              **rec.providers).run("go")
    finally:
        otel_context.detach(token)
    keys = {"tenant", "session", "api_key"}
    assert mine(run_span(rec, "plain"), keys) == {}
    assert mine(run_span(rec, "named"), keys) == {"tenant": "acme"}
    # every entry that may be one, under what the program says itself; never a reserved or a secret's key
    every = run_span(rec, "every")
    assert mine(every, keys) == {"tenant": "mine", "session": "s-1"}
    assert every.attributes["gen_ai.agent.name"] == "every"


def test_baggage_keys_to_copy_are_checked_when_the_agent_is_made():
    with pytest.raises(BadAttributes) as refused:
        Agent(FakeModel(["a"]), attributes_from_baggage=["tracedagent.driver"])
    assert refused.value.reason == "reserved"


# --- refusals: named, before anything runs ----------------------------------------------------

@pytest.mark.parametrize("attributes, key, reason", [
    ({"gen_ai.agent.name": "x"}, "gen_ai.agent.name", "reserved"),
    ({"TracedAgent.driver": "x"}, "TracedAgent.driver", "reserved"),
    ({"otel.status_code": "OK"}, "otel.status_code", "reserved"),
    ({"db_password": "hunter22"}, "db_password", "secret"),
    ({"": 1}, "", "bad_key"),
    ({"k" * (N.MAX_ATTRIBUTE_KEY_LENGTH + 1): 1}, "k" * 80, "bad_key"),
    ({"line\nbreak": 1}, "line\nbreak", "bad_key"),
    ({3: "x"}, "int", "bad_key"),
    ({"obj": {"nested": 1}}, "obj", "bad_value"),
    ({"none": None}, "none", "bad_value"),
    ({"bytes": b"x"}, "bytes", "bad_value"),
    ({"mixed": [1, "a"]}, "mixed", "bad_value"),
    ({"big": 2**64}, "big", "bad_value"),
    ({"items": list(range(N.MAX_ATTRIBUTE_ITEMS + 1))}, "items", "too_many_items"),
    ({f"k{i}": i for i in range(N.MAX_RUN_ATTRIBUTES + 1)}, None, "too_many"),
    (["tenant", "acme"], None, "not_a_mapping"),
])
@pytest.mark.parametrize("where", ["run", "arun", "stream", "astream", "agent"])
async def test_a_refused_attribute_is_named_before_anything_runs(rec, attributes, key, reason, where):
    model = FakeModel(["never"])
    with pytest.raises(BadAttributes) as refused:
        if where == "agent":
            Agent(model, attributes=attributes, **rec.providers)
        else:
            agent = Agent(model, **rec.providers)
            if where == "run":
                agent.run("go", attributes=attributes)
            elif where == "arun":
                await agent.arun("go", attributes=attributes)
            else:  # refused at the call, not at the first event
                getattr(agent, where)("go", attributes=attributes)
    assert isinstance(refused.value, ValueError)
    assert (refused.value.key, refused.value.reason) == (key, reason)
    assert model.call_count == 0 and rec.spans() == []


def test_the_bound_counts_the_agents_defaults_and_the_calls_together(rec):
    agent = Agent(FakeModel(["a"]), attributes={f"d{i}": i for i in range(20)}, **rec.providers)
    with pytest.raises(BadAttributes) as refused:
        agent.run("go", attributes={f"c{i}": i for i in range(20)})
    assert refused.value.reason == "too_many"
    assert agent.run("go", attributes={f"d{i}": -i for i in range(20)}).ok  # the same keys: 20 in all


def test_a_long_string_is_cut_and_a_credential_shape_blanked(rec):
    key = "sk-" + "A" * 40
    Agent(FakeModel(["a"]), **rec.providers).run("go", attributes={
        "note": "x" * 5000, "where": f"called with {key}", "many": ["y" * 2000], "lone": "\ud800"})
    span = run_span(rec)
    assert len(span.attributes["note"]) == N.MAX_ATTRIBUTE_VALUE_LENGTH
    assert span.attributes["note"].endswith(N.TRUNCATION_MARK)
    assert span.attributes["many"][0].endswith(N.TRUNCATION_MARK)
    assert key not in span.attributes["where"] and "***" in span.attributes["where"]
    assert span.attributes["lone"] == "\ufffd"


# --- never a metric label ---------------------------------------------------------------------

def test_attributes_are_never_metric_labels(rec):
    @tool
    def lookup(q: str) -> str:
        """Look up."""
        return "ok"

    agent = Agent(FakeModel([tool_call("lookup", {"q": "x"}), "done"]), [lookup],
                  attributes={"component": "desk"}, **rec.providers)
    assert agent.run("go", attributes=MINE).ok
    labels = {key for data in rec._metrics_data() for rm in data.resource_metrics for sm in rm.scope_metrics
              for metric in sm.metrics for point in metric.data.data_points for key in point.attributes}
    assert labels and not labels & {*MINE, "component"}
    assert rec.metric("tracedagent.runs") == 1


# --- Temporal's run request -------------------------------------------------------------------

def test_a_run_request_carries_the_attributes_checked_and_decodes_without_them():
    pytest.importorskip("temporalio")
    from tracedagent.temporal._client import _request
    from tracedagent.temporal._codec import request_from_data

    request = json.loads(json.dumps(_request("desk", "go", None, None, None, attributes=MINE)))
    assert request_from_data(request)["attributes"] == {**MINE, "tags": ("beta", "eu")}
    older = _request("desk", "go", None, None, None)  # as a client before attributes wrote it
    assert "attributes" not in older and request_from_data(older)["attributes"] == {}
    with pytest.raises(BadAttributes) as refused:
        _request("desk", "go", None, None, None, attributes={"gen_ai.x": 1})
    assert refused.value.reason == "reserved"
    with pytest.raises(ValueError):  # one written by hand is checked as the client checks it
        request_from_data({**older, "attributes": {"k": {"nested": 1}}})
    cut = request_from_data({**older, "attributes": {"k": "z" * 5000}})["attributes"]["k"]
    assert len(cut) == N.MAX_ATTRIBUTE_VALUE_LENGTH


def test_run_on_temporal_refuses_bad_attributes_before_it_starts():
    pytest.importorskip("temporalio")
    from tracedagent.temporal import run_on_temporal

    with pytest.raises(BadAttributes):
        asyncio.run(run_on_temporal(object(), "desk", "go", attributes={"tracedagent.x": 1}))  # type: ignore[arg-type]
