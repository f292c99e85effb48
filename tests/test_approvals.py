"""A run that waits for a person: calls held for approval, the pause as a named stop, the
checkpoint, and resuming it (here, in a fresh process, inside a team), with its trace."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from opentelemetry.trace import StatusCode

from async_support import turn, watch
from sample_tools import close_account, refund, search_help
from tracedagent import (AlreadyResumed, BadDecisions, Budget, Checkpoint, CheckpointError, Completion,
                         MalformedCheckpoint, Agent, Registry, Stop, ToolCall, ToolOutcome, UnknownCheckpointVersion, WrongAgent, ask, tool)
from tracedagent.testing import FakeModel, Recorder

ROOT = Path(__file__).resolve().parent.parent


def signed(data: dict) -> str:
    """Checkpoint data signed anew with the tests' key: what a key holder (a bug, a migration)
    could write. The checks after the signature's are tested with these."""
    from tracedagent._core._signing import keyring, signature_block
    return json.dumps(signature_block({k: v for k, v in data.items() if k != "signature"}, keyring(None), None))


def refunds_over_100(call: ToolCall):
    """The policy of a help desk: a refund over 100 USD waits for a person, smaller ones run."""
    if call.name == "refund" and isinstance(call.arguments, dict) and call.arguments.get("amount", 0) > 100:
        return ask("refund over 100 USD")
    return None


def desk(script, *, rec: Recorder | None = None, budget: Budget = Budget(), name: str = "desk") -> Agent:
    registry = Registry([search_help, refund, close_account], policy=refunds_over_100)
    return Agent(FakeModel(script), registry, budget=budget, name=name, **(rec.providers if rec else {}))


PAUSING_TURN = turn(("search_help", {"q": "refunds"}), ("refund", {"order_id": "A1", "amount": 250.0}),
                    ("refund", {"order_id": "A2", "amount": 20.0}), ("close_account", {"account": "A1"}))


def fates_are_whole(span) -> None:
    a = span.attributes
    fates = [*a.get("tracedagent.tools.executed", ()), *a.get("tracedagent.tools.blocked", ()),
             *a.get("tracedagent.tools.not_dispatched", ()), *a.get("tracedagent.tools.pending", ())]
    assert sorted(fates) == sorted(a.get("tracedagent.tools.requested", ())), (span.name, dict(a))


# --- the pause ------------------------------------------------------------------------------

@pytest.mark.parametrize("driver", ["run", "arun"])
async def test_a_turn_with_calls_to_approve_dispatches_the_others_then_pauses(driver):
    rec = Recorder()
    spans = watch(rec)
    agent = desk([PAUSING_TURN], rec=rec)
    run = agent.run("refund me") if driver == "run" else await agent.arun("refund me")

    assert run.stop is Stop.APPROVAL_REQUIRED and run.stop.value == "approval_required" and not run.ok
    assert [(c.id, c.name, c.arguments, c.reason) for c in run.pending] == [
        ("c1", "refund", {"order_id": "A1", "amount": 250.0}, "refund over 100 USD"),
        ("c3", "close_account", {"account": "A1"}, "close_account requires approval")]
    assert run.trajectory() == ["search_help", "refund"]  # the small refund ran, the big one waits
    assert run.pending_tools() == ["refund", "close_account"] and run.not_dispatched_tools() == []
    tool_spans = [s.attributes["gen_ai.tool.call.id"] for s in rec.spans() if s.name.startswith("execute_tool")]
    assert sorted(tool_spans) == ["c0", "c2"], "a waiting call is not dispatched"
    assert not any(m.get("tool_call_id") in ("c1", "c3") for m in run.messages)

    view = rec.only_run()
    assert view.span.status.status_code is StatusCode.UNSET and "error.type" not in view.span.attributes
    assert view.span.attributes["tracedagent.stop_reason"] == "approval_required"
    assert view.span.attributes["tracedagent.tools.pending"] == ("refund", "close_account")
    assert view.span.attributes["tracedagent.checkpoint.id"] == run.checkpoint_id
    [event] = view.span.events
    assert (event.name, event.attributes["tracedagent.pending_calls"]) == ("tracedagent.stop", 2)
    [step] = view.step_spans
    assert step.attributes["tracedagent.tools.pending"] == ("refund", "close_account")
    for span in (view.span, step):
        fates_are_whole(span)
    assert spans.open == [] and spans.started == spans.ended
    assert rec.metric("tracedagent.runs", stop_reason="approval_required") == 1


def test_a_call_the_policy_denies_is_denied_not_held_and_a_bad_call_is_not_held():
    no_closing = lambda call: "closing is done by phone" if call.name == "close_account" else None  # noqa: E731
    agent = Agent(FakeModel([turn(("close_account", {"account": "A1"}), ("close_account", {"wrong": 1})), "ok"]),
                  Registry([close_account], policy=no_closing))
    run = agent.run("close it")
    assert run.ok and run.pending == [] and run.blocked_tools() == ["close_account", "close_account"]


def test_a_registry_asked_to_dispatch_a_waiting_call_without_a_decision_denies_it():
    """A driver that does not pause (a custom one) cannot run a call a person must approve."""
    result = Registry([close_account]).dispatch(ToolCall("1", "close_account", {"account": "A1"}))
    assert result.outcome is ToolOutcome.DENIED and "approval" in result.content


def test_checkpoint_is_versioned_json_with_what_resuming_needs():
    run = desk([PAUSING_TURN], budget=Budget(max_steps=5, max_tokens=10_000)).run("refund me", conversation_id="conv-1")
    data = json.loads(run.checkpoint())
    assert data["version"] == 2 and data["id"] == run.checkpoint_id
    assert data["signature"]["alg"] == "HMAC-SHA256" and len(data["signature"]["mac"]) == 64
    assert data["spent"]["cache_read_input_tokens"] == 0 == data["spent"]["cache_creation_input_tokens"]
    assert data["agent"] == "desk" and data["tools"] == ["close_account", "refund", "search_help"]
    assert data["budget"]["max_steps"] == 5 and data["budget"]["max_tokens"] == 10_000
    assert data["spent"]["steps"] == 1 and data["spent"]["tool_calls"] == 4
    assert data["spent"]["input_tokens"] == run.input_tokens and data["spent"]["seconds"] >= 0
    assert data["messages"] == run.messages and data["conversation_id"] == "conv-1"
    assert [p["id"] for p in data["pending"]] == ["c1", "c3"]
    with pytest.raises(ValueError, match="only a paused run"):
        desk(["hi"]).run("hello").checkpoint()


# --- resuming ---------------------------------------------------------------------------------

@pytest.mark.parametrize("driver", ["run", "arun"])
@pytest.mark.parametrize("decisions, executed, denied", [
    ({"c1": True, "c3": True}, ["refund", "close_account"], []),
    ({"c1": False, "c3": "the customer called back"}, [], ["refund", "close_account"]),
    ({"c1": True, "c3": False}, ["refund"], ["close_account"]),
], ids=["approved", "denied", "mixed"])
async def test_resume_runs_approved_calls_with_the_checkpoint_arguments_and_denies_the_others(
        driver, decisions, executed, denied):
    paused = desk([PAUSING_TURN], rec=Recorder()).run("refund me", conversation_id="conv-7")
    ran: list[tuple[str, float]] = []

    @tool(name="refund")
    def recording_refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        ran.append((order_id, amount))
        return f"refunded {amount} on {order_id}"

    rec = Recorder()
    spans = watch(rec)
    resumer = Agent(FakeModel(["all settled"]), Registry([search_help, recording_refund, close_account],
                                                         policy=refunds_over_100), name="desk", **rec.providers)
    run = (resumer.resume(paused.checkpoint(), decisions) if driver == "run"
           else await resumer.aresume(paused.checkpoint(), decisions))

    assert run.ok and run.output == "all settled"
    assert ran == ([("A1", 250.0)] if "refund" in executed else []), "exactly the checkpoint's arguments"
    assert run.trajectory() == executed and run.blocked_tools() == denied
    shown = {m["tool_call_id"]: m["content"] for m in run.messages if m.get("role") == "tool"}
    assert set(shown) == {"c0", "c1", "c2", "c3"}, "every call of the paused turn is answered once"
    if decisions["c3"] is not True:
        expected = decisions["c3"] if isinstance(decisions["c3"], str) else "a person did not approve this call"
        assert shown["c3"] == f"Denied: {expected}"
    view = rec.only_run()
    a = view.span.attributes
    assert a["tracedagent.resumed_from"] == paused.trace_id != run.trace_id
    assert a["tracedagent.resumed_checkpoint.id"] == paused.checkpoint_id == run.resumed.id
    assert a["gen_ai.conversation.id"] == "conv-7" == run.conversation_id
    assert list(a["tracedagent.approval.approved"]) == [n for n in ("refund", "close_account") if n in executed]
    assert list(a["tracedagent.approval.denied"]) == denied
    [link] = view.span.links
    assert f"{link.context.trace_id:032x}" == paused.trace_id and f"{link.context.span_id:016x}" == \
        json.loads(paused.checkpoint())["span_id"]
    decided, answered = view.step_spans
    assert decided.attributes["tracedagent.step.index"] == 0 and decided.attributes["tracedagent.step.resumed"]
    assert answered.attributes["tracedagent.step.index"] == 1
    for span in (view.span, decided, answered):
        fates_are_whole(span)
    assert spans.open == [] and spans.started == spans.ended
    assert rec.metric("tracedagent.approval.wait") == 1
    for decision, calls in (("approved", executed), ("denied", denied)):
        assert rec.metric("tracedagent.approval.decisions", **{"tracedagent.approval.decision": decision}) == len(calls)


def test_a_resumed_run_may_pause_again_and_resume_again():
    agent = desk([turn(("refund", {"order_id": "A", "amount": 500.0})),
                  turn(("close_account", {"account": "A"}), prefix="d"), "done"])
    first = agent.run("refund and close")
    second = agent.resume(first.checkpoint(), {"c0": True})
    assert second.stop is Stop.APPROVAL_REQUIRED and [c.id for c in second.pending] == ["d0"]
    assert second.resumed.id == first.checkpoint_id != second.checkpoint_id
    third = agent.resume(second.checkpoint(), {"d0": True})
    assert third.ok and third.trajectory() == ["close_account"]
    assert third.input_tokens > second.input_tokens > first.input_tokens, "totals run on across pauses"


def test_a_checkpoint_written_to_a_file_is_resumed_by_a_new_agent_in_a_fresh_process(tmp_path):
    paused = desk([PAUSING_TURN]).run("refund me")
    path = tmp_path / "paused.json"
    path.write_text(paused.checkpoint())
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from test_approvals import desk
        run = desk(["refunded and closed"]).resume(open({str(path)!r}).read(), {{"c1": True, "c3": True}})
        print(json.dumps({{"stop": run.stop.value, "trajectory": run.trajectory(), "output": run.output}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"stop": "answered", "trajectory": ["refund", "close_account"],
                                       "output": "refunded and closed"}


# --- budgets across a pause -----------------------------------------------------------------

def test_a_run_paused_after_3_of_4_steps_gets_one_more_step():
    script = [turn(("search_help", {"q": str(i)}), prefix=f"s{i}") for i in range(2)]
    script += [turn(("close_account", {"account": "A"}))]
    paused = desk(script, budget=Budget(max_steps=4)).run("go")
    assert paused.stop is Stop.APPROVAL_REQUIRED and paused.step_count == 3
    model = FakeModel([turn(("search_help", {"q": str(i)}), prefix=f"t{i}") for i in range(5)])
    resumed = Agent(model, desk([]).registry, name="desk").resume(paused.checkpoint(), {"c0": True})
    assert resumed.stop is Stop.STEP_BUDGET and model.call_count == 1
    assert resumed.output == "Stopped: reached the 4-step limit without an answer."
    assert [s.index for s in resumed.steps] == [2, 3]


def test_tokens_and_tool_calls_spent_before_a_pause_count_after_it():
    paused = desk([PAUSING_TURN], budget=Budget(max_tool_calls=5)).run("go")
    resumed = desk([turn(("search_help", {"q": "x"}), ("search_help", {"q": "y"}), prefix="n"), "done"]).resume(
        paused.checkpoint(), {"c1": True, "c3": True})
    assert resumed.stop is Stop.TOOL_CALL_BUDGET, "4 calls before the pause and 2 after: over 5"

    paused = desk([PAUSING_TURN], budget=Budget(max_tokens=paused.input_tokens + paused.output_tokens + 5)).run("go")
    resumed = desk([turn(("search_help", {"q": "z"}), prefix="n"), "done"]).resume(
        paused.checkpoint(), {"c1": True, "c3": True})
    assert resumed.stop is Stop.TOKEN_BUDGET and resumed.step_count == 2, "one model call was over the rest"
    assert resumed.input_tokens > paused.input_tokens


def test_time_waiting_for_a_person_does_not_count_against_the_time_budget():
    paused = desk([PAUSING_TURN], budget=Budget(max_seconds=60)).run("go")
    data = json.loads(paused.checkpoint())
    data["paused_at"] -= 3600  # decided an hour later
    resumed = desk(["done"]).resume(signed(data), {"c1": True, "c3": True})
    assert resumed.ok
    data["id"], data["spent"]["seconds"] = "ran-out", 60.0  # but the time it ran counts
    assert desk(["done"]).resume(signed(data), {"c1": True, "c3": True}).stop is Stop.TIME_BUDGET


# --- teams -------------------------------------------------------------------------------------

def team(rec: Recorder | None = None, sub_script=(), top_script=()) -> Agent:
    clerk = desk(list(sub_script), rec=rec, name="clerk")
    return Agent(FakeModel(list(top_script)), [clerk.as_tool(description="Handles refunds."), search_help],
                 name="lead", **(rec.providers if rec else {}))


def test_a_sub_agent_call_waiting_for_approval_pauses_the_team_and_resuming_continues_inside_it():
    top = [turn(("clerk", {"task": "refund A1"}), ("search_help", {"q": "policy"}), prefix="t")]
    paused = team(Recorder(), [turn(("refund", {"order_id": "A1", "amount": 900.0}))], top).run("help")
    assert paused.stop is Stop.APPROVAL_REQUIRED
    assert [(c.id, c.name, c.reason) for c in paused.pending] == [("t0/c0", "refund", "refund over 100 USD")]
    assert paused.pending_tools() == ["clerk"] and paused.trajectory() == ["search_help"]
    [sub] = paused.sub_runs
    assert sub.stop is Stop.APPROVAL_REQUIRED and sub.pending_tools() == ["refund"]

    rec = Recorder()
    spans = watch(rec)
    lead = team(rec, ["refunded 900"], ["the clerk refunded it"])
    with pytest.raises(BadDecisions):
        lead.resume(paused.checkpoint(), {"c0": True})  # the inner id alone is not the waiting call's
    run = lead.resume(paused.checkpoint(), {"t0/c0": True})
    assert run.ok and run.output == "the clerk refunded it" and run.trajectory() == ["clerk"]
    [sub] = run.sub_runs
    assert sub.ok and sub.trajectory() == ["refund"] and sub.resumed is not None
    runs = {v.span.attributes["gen_ai.agent.name"]: v for v in rec.runs()}
    assert runs["clerk"].trace_id == runs["lead"].trace_id == run.trace_id, "one resumed trace"
    assert runs["clerk"].span.parent.span_id == rec.span("execute_tool clerk").context.span_id
    assert runs["clerk"].span.attributes["tracedagent.resumed_from"] == paused.trace_id
    assert spans.open == [] and spans.started == spans.ended
    for view in runs.values():
        for span in (view.span, *view.step_spans):
            fates_are_whole(span)


def test_a_sub_agent_resumed_with_its_team_has_no_more_time_than_the_team_has_left():
    """The team's own held call runs first and uses most of the resumed team's time; the
    sub-agent resumed after it is cut when the team's time is up, not a window later (its
    checkpoint's window began before the pause)."""
    import asyncio
    import time

    @tool(requires_approval=True)
    def slow(x: int) -> str:
        """Takes most of the team's time."""
        time.sleep(0.8)
        return "done"

    @tool(requires_approval=True)
    async def endless(x: int) -> str:
        """Never ends by itself (async: a deadline can cut it)."""
        await asyncio.sleep(30)
        return "never"

    def lead(rec: Recorder, sub_script: list, top_script: list) -> Agent:
        clerk = Agent(FakeModel(sub_script), [endless], name="clerk", **rec.providers)
        return Agent(FakeModel(top_script), [slow, clerk.as_tool(description="Helps.")], name="lead",
                     budget=Budget(max_seconds=1.0), **rec.providers)

    top = [turn(("slow", {"x": 1}), ("clerk", {"task": "go"}), prefix="t")]
    paused = asyncio.run(lead(Recorder(), [turn(("endless", {"x": 1}))], top).arun("help"))
    assert paused.stop is Stop.APPROVAL_REQUIRED and len(paused.pending) == 2

    rec = Recorder()
    run = lead(rec, ["never read"], ["never read"]).resume(paused.checkpoint(), {c.id: True for c in paused.pending})
    assert run.stop is Stop.TIME_BUDGET
    [sub] = run.sub_runs
    assert sub.stop is Stop.TIME_BUDGET
    cut = rec.span("execute_tool endless")
    assert cut.attributes["tracedagent.tool.deadline_cut"] is True
    assert (cut.end_time - cut.start_time) / 1e9 < 0.7, "cut at the team's deadline, 0.2 s after it began"


# --- bad checkpoints: a named error, and nothing runs ---------------------------------------------

def test_calls_sharing_an_id_are_denied_not_held_since_one_decision_would_run_both():
    both = Completion(tool_calls=[ToolCall("x", "close_account", {"account": "KEEP"}),
                                  ToolCall("x", "close_account", {"account": "DELETE-ALL"}),
                                  ToolCall("y", "close_account", {"account": "Z"})])
    paused = desk([both]).run("go")
    assert paused.stop is Stop.APPROVAL_REQUIRED and [c.id for c in paused.pending] == ["y"]
    assert [r.outcome for r in paused.steps[0].tool_results] == [ToolOutcome.DENIED, ToolOutcome.DENIED]
    assert paused.blocked_tools() == ["close_account", "close_account"]


def test_a_sub_agents_paused_call_is_blocked_not_pending_when_the_team_stops_for_another_reason():
    """The team did not pause (a fatal tool error ended it), so nothing waits: the sub-agent's
    call ran and did not succeed (blocked), the team's own held call was never dispatched."""
    from tracedagent import FatalToolError

    @tool
    def explode(why: str) -> str:
        """Fails for good."""
        raise FatalToolError(why)

    rec = Recorder()
    clerk = desk([turn(("refund", {"order_id": "A1", "amount": 900.0}))], rec=rec, name="clerk")
    lead = Agent(FakeModel([turn(("clerk", {"task": "refund A1"}), ("close_account", {"account": "B"}),
                                 ("explode", {"why": "down"}), prefix="t")]),
                 Registry([clerk.as_tool(description="Handles refunds."), close_account, explode]),
                 name="lead", **rec.providers)
    run = lead.run("help")
    assert run.stop is Stop.TOOL_FATAL and run.pending == [] and run.pending_tools() == []
    assert run.blocked_tools() == ["clerk", "explode"] and run.not_dispatched_tools() == ["close_account"]
    span = rec.span("invoke_agent lead")
    assert "tracedagent.tools.pending" not in span.attributes
    assert span.attributes["tracedagent.tools.blocked"] == ("clerk", "explode")
    fates_are_whole(span)


@pytest.fixture(scope="module")
def checkpoint() -> str:
    return desk([PAUSING_TURN]).run("refund me").checkpoint()


def edited(checkpoint: str, **changes) -> str:
    return signed({**json.loads(checkpoint), **changes})


@pytest.mark.parametrize("bad, decisions, error", [
    ("{not json", {}, MalformedCheckpoint),
    ('["a list"]', {}, MalformedCheckpoint),
    ("version:3", {"c1": True, "c3": True}, UnknownCheckpointVersion),
    ("budget", {"c1": True, "c3": True}, MalformedCheckpoint),
    ("agent", {"c1": True, "c3": True}, WrongAgent),
    ("tools", {"c1": True, "c3": True}, WrongAgent),
    (None, {"c1": True, "c3": True, "c9": True}, BadDecisions),
    (None, {"c1": True}, BadDecisions),
    (None, {"c1": True, "c3": 1}, BadDecisions),
    (None, {"c1": True, "c3": "x" * 10_001}, BadDecisions),
], ids=["not-json", "not-an-object", "unknown-version", "bad-budget", "another-agents-name", "another-agents-tools",
        "a-decision-for-no-waiting-call", "a-missing-decision", "a-decision-neither-bool-nor-string",
        "a-reason-over-10000-characters"])
def test_a_bad_checkpoint_or_bad_decisions_raise_a_named_error_and_nothing_runs(checkpoint, bad, decisions, error):
    text = {None: checkpoint, "version:3": edited(checkpoint, version=3),
            "budget": edited(checkpoint, budget={"max_steps": 0}), "agent": edited(checkpoint, agent="billing"),
            "tools": edited(checkpoint, tools=["refund"])}.get(bad, bad)
    rec = Recorder()
    agent = desk(["should not run"], rec=rec)
    with pytest.raises(error) as raised:
        agent.resume(text, decisions)
    assert isinstance(raised.value, CheckpointError) and str(raised.value)
    assert agent.model.call_count == 0 and rec.spans() == []
    assert agent.resume(checkpoint, {"c1": True, "c3": True}).ok, "a refused resume does not use the checkpoint up"


def with_fields(checkpoint: str, key: str, **changes) -> str:
    """The checkpoint with fields of its ``budget`` or ``spent`` changed (None: removed)."""
    data = json.loads(checkpoint)
    for name, value in changes.items():
        if value is None:
            del data[key][name]
        else:
            data[key][name] = value
    return signed(data)


@pytest.mark.parametrize("key, changes", [
    ("spent", {"steps": 10**400}), ("spent", {"cost": 10**400}), ("spent", {"steps": 2.5}),
    ("spent", {"input_tokens": None}), ("budget", {"max_steps": 3.0}), ("budget", {"max_seconds": 10**400}),
    ("budget", {"max_cost": "1"}), ("budget", {"repeat_limit": True}), ("budget", {"max_tokens": None}),
    ("budget", {"surprise": 1}),
], ids=["huge-steps", "huge-cost", "fractional-steps", "spent-lacks-a-field", "float-max-steps", "huge-max-seconds",
        "string-max-cost", "bool-repeat-limit", "budget-lacks-a-field", "unknown-budget-field"])
def test_a_checkpoint_with_a_field_of_the_wrong_type_or_size_or_missing_is_malformed_before_anything_runs(
        checkpoint, key, changes):
    """A missing field would reset a budget to its default, a wrong type fail half-way through the
    resumed run (after the checkpoint was used up), and a huge int raised OverflowError."""
    rec = Recorder()
    agent = desk(["should not run"], rec=rec)
    with pytest.raises(MalformedCheckpoint):
        agent.resume(with_fields(checkpoint, key, **changes), {"c1": True, "c3": True})
    assert agent.model.call_count == 0 and rec.spans() == []
    assert agent.resume(checkpoint, {"c1": True, "c3": True}).ok, "a refused resume does not use the checkpoint up"


def test_the_repeat_check_counts_the_calls_asked_for_before_the_pause():
    budget = Budget(repeat_limit=2)
    asked = [turn(("search_help", {"q": "same"}), prefix="a"),
             turn(("search_help", {"q": "same"}), ("close_account", {"account": "A"}), prefix="b")]
    paused = desk(asked, budget=budget).run("go")
    assert paused.stop is Stop.APPROVAL_REQUIRED
    assert dict(((name, arguments), times) for name, arguments, times in
                Checkpoint.loads(paused.checkpoint()).repeats) == {("search_help", '{"q": "same"}'): 2,
                                                                   ("close_account", '{"account": "A"}'): 1}
    resumed = desk([turn(("search_help", {"q": "same"}), prefix="c"), "done"], budget=budget).resume(
        paused.checkpoint(), {"b1": True})
    assert resumed.stop is Stop.REPEATED_CALL, "the third identical call, as in a run that never paused"

    older = json.loads(paused.checkpoint())
    del older["repeats"]  # what an earlier release wrote: read, and counted afresh
    again = desk([turn(("search_help", {"q": "same"}), prefix="c"), "done"], budget=budget).resume(
        signed(older), {"b1": True})
    assert again.ok


def test_a_sync_resume_inside_a_running_event_loop_with_async_tools_is_refused_before_anything_runs():
    import asyncio

    @tool(requires_approval=True)
    async def close(account: str) -> str:
        """Closes an account."""
        return "closed"

    def agent(script) -> Agent:
        return Agent(FakeModel(script), Registry([close]), name="desk")

    paused = agent([turn(("close", {"account": "A"}))]).run("go")
    later = agent(["done"])

    async def in_a_loop():
        with pytest.raises(RuntimeError, match="aresume"):
            later.resume(paused.checkpoint(), {"c0": True})
        return await later.aresume(paused.checkpoint(), {"c0": True})

    resumed = asyncio.run(in_a_loop())
    assert resumed.ok and resumed.trajectory() == ["close"], "the refusal did not use the checkpoint up"


def test_a_checkpoint_resumed_twice_is_refused_and_the_application_can_tell_across_processes(checkpoint):
    agent = desk(["done", "again"])
    first = agent.resume(checkpoint, {"c1": True, "c3": True})
    with pytest.raises(AlreadyResumed):
        agent.resume(checkpoint, {"c1": True, "c3": True})
    assert agent.model.call_count == 1 and first.resumed.id == Checkpoint.loads(checkpoint).id

    claimed: set[str] = set()  # the application's table of resumed checkpoint ids

    def claim(checkpoint_id: str) -> bool:
        if checkpoint_id in claimed:
            return False
        claimed.add(checkpoint_id)
        return True

    assert desk(["done"]).resume(checkpoint, {"c1": True, "c3": True}, claim=claim).ok
    other_process = desk(["done"])
    with pytest.raises(AlreadyResumed):
        other_process.resume(checkpoint, {"c1": True, "c3": True}, claim=claim)
    assert other_process.model.call_count == 0


@pytest.mark.parametrize("driver", ["stream", "astream"])
async def test_a_streamed_run_pauses_the_same_way_and_resumes(driver):
    rec = Recorder()
    agent = desk([PAUSING_TURN, "settled"], rec=rec)
    if driver == "stream":
        with agent.stream("refund me") as stream:
            list(stream)
    else:
        async with agent.astream("refund me") as stream:
            async for _ in stream:
                pass
    paused = stream.run
    assert paused.stop is Stop.APPROVAL_REQUIRED and [c.id for c in paused.pending] == ["c1", "c3"]
    assert paused.trajectory() == ["search_help", "refund"]
    fates_are_whole(rec.only_run().span)
    assert agent.resume(paused.checkpoint(), {"c1": True, "c3": False}).ok
