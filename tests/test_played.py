"""A run with its spans - ``play``, ``aplay``, ``Replay.play`` - the seam an evaluation grades
through; and replay re-running recorded runs through the agent's own entries: every driver's
recording, and a resumed run resumed from the pause a run machine makes again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from opentelemetry.trace import format_trace_id

from test_replay import record
from tracedagent import Agent, Budget, Completion, Registry, Stop, ToolCall, ask, tool
from tracedagent._testing._replay import _repaused
from tracedagent.testing import FakeModel, Played, Recorder, Replay, aplay, play, tool_call


@tool
def lookup(order_id: str) -> str:
    """Looks an order up."""
    return f"{order_id}: shipped"


def shop(script, **options) -> Agent:
    return Agent(FakeModel(script), [lookup], name="shop", **options)


def in_one_trace(played: Played) -> None:
    assert played.spans and {format_trace_id(s.context.trace_id) for s in played.spans} == {played.run.trace_id}


# --- play, aplay: a live run and its spans ------------------------------------------------

def test_play_returns_the_run_and_its_spans_and_the_view_says_what_the_run_did():
    recorder = Recorder()
    agent = shop([tool_call("lookup", {"order_id": "A1"}), "A1 shipped."], **recorder.providers)
    played = play(agent, "where is A1?", recorder=recorder)
    assert played.run.ok and played.run.trajectory() == ["lookup"]
    in_one_trace(played)
    view = played.view
    assert view.stop_reason == played.run.stop.value == "answered"
    assert view.steps == played.run.step_count == 2
    assert view.executed_tools == ["lookup"]
    assert [s.name for s in view.spans("execute_tool lookup")] == ["execute_tool lookup"]


def test_each_play_gets_the_spans_of_its_own_run_only():
    recorder = Recorder()
    first = play(shop(["one"], **recorder.providers), "a", recorder=recorder)
    second = play(shop([tool_call("lookup", {"order_id": "B2"}), "two"], **recorder.providers), "b",
                  recorder=recorder)
    assert first.run.trace_id != second.run.trace_id
    in_one_trace(first)
    in_one_trace(second)
    assert (first.view.steps, second.view.steps) == (1, 2)


def test_aplay_plays_cases_side_by_side_in_one_recorder_each_with_its_own_spans():
    recorder = Recorder()

    async def cases():
        return await asyncio.gather(*(aplay(shop([tool_call("lookup", {"order_id": f"C{i}"}), f"C{i} shipped."],
                                                 **recorder.providers), f"where is C{i}?", recorder=recorder)
                                      for i in range(3)))

    played = asyncio.run(cases())
    assert len({p.run.trace_id for p in played}) == 3
    for p in played:
        in_one_trace(p)
        assert p.view.stop_reason == "answered" and p.run.output == p.run.steps[-1].completion.text


def test_the_view_of_a_team_is_its_top_run_with_the_sub_agents_beneath():
    recorder = Recorder()
    helper = Agent(FakeModel([tool_call("lookup", {"order_id": "T1"}), "T1 shipped."]), [lookup], name="helper",
                   **recorder.providers)
    lead = Agent(FakeModel([tool_call("helper", {"task": "find T1"}), "done"]),
                 [helper.as_tool(description="Finds orders.")], name="lead", **recorder.providers)
    played = play(lead, "find T1", recorder=recorder)
    assert played.view.agent_name == "lead"
    assert [sub.agent_name for sub in played.view.sub_runs] == ["helper"]


def test_a_run_the_recorder_did_not_see_has_no_spans_and_its_view_says_how_to_record_it():
    recorder = Recorder()
    played = play(shop(["hi"], **Recorder().providers), "hello", recorder=recorder)  # another recorder's
    assert played.run.ok and played.spans == ()
    with pytest.raises(AssertionError, match=r"build the agent with \*\*recorder.providers"):
        played.view


# --- Replay.play: a recorded run, the same shape ------------------------------------------

def test_replay_play_is_the_re_run_with_its_spans(tmp_path):
    path = tmp_path / "run.otlp.json"
    [original] = record(path, [(lambda tp: shop([tool_call("lookup", {"order_id": "R1"}), "R1 shipped."],
                                                tracer_provider=tp, capture_content=True),
                                lambda agent: agent.run("where is R1?"))])
    replay = Replay.from_file(path)
    played = replay.play()
    replay.check(played.run)
    in_one_trace(played)
    assert played.run.trace_id != original.trace_id  # a new run, in a trace of its own
    assert played.view.stop_reason == "answered" and played.view.executed_tools == ["lookup"]
    assert played.view.agent_name == "shop"


@pytest.mark.parametrize("driver", ["run", "arun", "stream", "astream"])
def test_every_drivers_recording_replays(tmp_path, driver):
    async def drained(stream):
        async with stream:
            async for _ in stream:
                pass
        return stream.run

    def drive(agent):
        task = "where is D1?"
        if driver == "stream":
            with agent.stream(task) as stream:
                for _ in stream:
                    pass
            return stream.run
        if driver == "astream":
            return asyncio.run(drained(agent.astream(task)))
        return asyncio.run(agent.arun(task)) if driver == "arun" else agent.run(task)

    path = tmp_path / "run.otlp.json"
    [original] = record(path, [(lambda tp: shop([tool_call("lookup", {"order_id": "D1"}), "D1 shipped."],
                                                tracer_provider=tp, capture_content=True), drive)])
    replay = Replay.from_file(path)
    assert replay.recording.driver == driver
    again = replay.run()
    replay.check(again)
    assert again.trajectory() == original.trajectory() == ["lookup"]


# --- a resumed run: its pause made again by a run machine ---------------------------------

def refunds_wait(call: ToolCall):
    return ask("refunds wait for a person") if call.name == "refund" else None


@tool
def refund(order_id: str) -> str:
    """Refunds an order."""
    return f"refunded {order_id}"


def paused_then_resumed(path: Path, script, *, budget: Budget = Budget(), decision=True):
    """A run that pauses on a refund and is resumed, recorded into ``path``: (paused, resumed)."""
    def make(tp):
        return Agent(FakeModel(script), Registry([lookup, refund], policy=refunds_wait), name="desk", budget=budget,
                     tracer_provider=tp, capture_content=True)

    def pause_and_resume(agent):
        paused = agent.run("refund A7")
        return paused, agent.resume(paused.paused, {"r1": decision})

    [(paused, resumed)] = record(path, [(make, pause_and_resume)])
    return paused, resumed


def test_a_resumed_run_resumes_the_checkpoint_its_machine_makes_of_the_recorded_pause(tmp_path):
    path = tmp_path / "runs.otlp.json"
    script = [tool_call("lookup", {"order_id": "A7"}),
              Completion(tool_calls=[ToolCall("l2", "lookup", {"order_id": "A8"}), ToolCall("r1", "refund", {"order_id": "A7"})]),
              "Refunded A7."]
    paused, resumed = paused_then_resumed(path, script)
    assert paused.stop is Stop.APPROVAL_REQUIRED and resumed.ok
    replay = Replay.from_file(path, resumed.trace_id)
    agent = replay.agent()
    checkpoint, decisions = _repaused(agent, replay.recording)
    made = paused.paused
    # What RunState.pause writes, as the recorded pause had it: the waiting call, where the run
    # stood, what it had spent, the conversation, and the calls asked for in the paused turn.
    assert [(c.id, c.name, c.arguments) for c in checkpoint.pending] == [("r1", "refund", {"order_id": "A7"})]
    assert decisions == {"r1": True}
    assert (checkpoint.step_index, checkpoint.spent.steps) == (made.step_index, made.spent.steps) == (1, 2)
    assert (checkpoint.spent.input_tokens, checkpoint.spent.output_tokens) == \
        (made.spent.input_tokens, made.spent.output_tokens)
    assert [m["role"] for m in checkpoint.messages] == [m["role"] for m in made.messages]
    assert checkpoint.messages[-1] == made.messages[-1]  # the paused turn's dispatched call's result
    assert ("lookup", '{"order_id": "A8"}', 1) in checkpoint.repeats
    assert (checkpoint.agent, checkpoint.tools) == (made.agent, tuple(sorted(agent.registry.names)))  # the stubs'
    again = replay.run()
    replay.check(again)
    assert again.resumed is not None and again.carried.input_tokens == resumed.carried.input_tokens


def test_the_repeat_check_after_a_replayed_resume_counts_the_calls_of_the_recorded_pause(tmp_path):
    """A hand-built checkpoint forgot the paused turn's calls: the model asking for the same
    lookup again after the resume was a repeat in the recorded run, and not in the replay."""
    path = tmp_path / "runs.otlp.json"
    script = [Completion(tool_calls=[ToolCall("l1", "lookup", {"order_id": "A7"}), ToolCall("r1", "refund", {"order_id": "A7"})]),
              tool_call("lookup", {"order_id": "A7"}), "unreached"]
    _, resumed = paused_then_resumed(path, script, budget=Budget(repeat_limit=1))
    assert resumed.stop is Stop.REPEATED_CALL
    replay = Replay.from_file(path, resumed.trace_id)
    again = replay.run()
    replay.check(again)
    assert again.stop is Stop.REPEATED_CALL


def test_a_denied_call_of_a_resumed_run_is_denied_again_with_the_recorded_reason(tmp_path):
    path = tmp_path / "runs.otlp.json"
    script = [Completion(tool_calls=[ToolCall("r1", "refund", {"order_id": "A7"})]), "Not refunded."]
    _, resumed = paused_then_resumed(path, script, decision="over the limit")
    replay = Replay.from_file(path, resumed.trace_id)
    assert _repaused(replay.agent(), replay.recording)[1] == {"r1": "over the limit"}
    again = replay.run()
    replay.check(again)
    assert [r.content for s in again.steps if s.resumed for r in s.tool_results] == ["Denied: over the limit"]
