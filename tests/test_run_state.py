"""``RunState`` driven by a driver other than ``Agent``: its decisions, on a clock it is given.

A workflow engine (Temporal) runs the loop where time must come from the workflow, not the
process: every decision that reads the time reads the clock the state was built with.
"""

from __future__ import annotations

import asyncio

import pytest

from tracedagent import Budget, Completion, Stop, ToolCall, ToolOutcome, ToolResult, Usage
from tracedagent._core._deadline import Deadline, DeadlineExceeded
from tracedagent._core._run import RunState, current_run, initial_messages


class Clock:
    """Time that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def state_on(clock: Clock, **budget: object) -> RunState:
    return RunState(Budget(**budget), initial_messages("be brief", None, "go"), clock=clock)  # type: ignore[arg-type]


def test_the_time_budget_is_read_on_the_clock_the_state_was_given() -> None:
    clock = Clock()
    state = state_on(clock, max_seconds=10)
    assert state.seconds_left() == 10 and state.out_of_time() is None
    assert state.may_start(ToolCall("c1", "lookup", {}))
    clock.now += 9.5
    assert state.seconds_left() == pytest.approx(0.5)
    assert state.out_of_time() is None
    clock.now += 0.5
    assert state.seconds_left() == 0.0
    assert not state.may_start(ToolCall("c2", "lookup", {}))
    stopped = state.out_of_time()
    assert stopped is not None and stopped.stop is Stop.TIME_BUDGET


def test_a_model_error_after_the_deadline_on_the_given_clock_is_the_time_budget() -> None:
    clock = Clock()
    state = state_on(clock, max_seconds=5)
    assert state.model_failed(RuntimeError("boom")).stop is Stop.MODEL_ERROR
    clock.now += 5
    run = state.model_failed(RuntimeError("boom"))
    assert run.stop is Stop.TIME_BUDGET and run.step_count == 1


def test_without_a_time_budget_there_is_no_deadline_and_calls_always_start() -> None:
    clock = Clock()
    state = state_on(clock)
    clock.now += 1e9
    assert state.deadline is None and state.seconds_left() is None
    assert state.out_of_time() is None and state.may_start(ToolCall("c1", "lookup", {}))


def test_a_sub_run_reads_its_parents_clock_and_gets_what_is_left_of_its_time() -> None:
    clock = Clock()
    parent = state_on(clock, max_seconds=10)
    clock.now += 4
    budget = parent.child_budget(Budget(max_seconds=60))
    assert budget.max_seconds == pytest.approx(6)
    child = RunState(budget, initial_messages(None, None, "sub"), parent=parent)
    assert child.clock is clock
    clock.now += 6
    assert child.out_of_time() is not None


def test_a_turn_ends_on_a_fatal_result_and_a_cut_off_call_says_the_deadline_cut_it() -> None:
    call = ToolCall("c1", "lookup", {"q": "x"})
    assert RunState.ends_turn(ToolResult("c1", "lookup", "no", ToolOutcome.FATAL))
    assert not RunState.ends_turn(ToolResult("c1", "lookup", "no", ToolOutcome.ERROR))
    cut = RunState.cut_off(call)
    assert (cut.call_id, cut.outcome, cut.deadline_cut) == ("c1", ToolOutcome.TIMEOUT, True)
    assert not ToolResult("c1", "lookup", "late", ToolOutcome.TIMEOUT).deadline_cut  # a tool's own timeout


def test_a_driver_of_its_own_runs_the_loop_on_run_state_alone() -> None:
    # What a workflow's driver does: build the state, record turns, ask what to do next.
    clock = Clock()
    state = state_on(clock, max_steps=3, max_seconds=30)
    turn = Completion(tool_calls=[ToolCall("c1", "lookup", {"q": "x"})], usage=Usage(10, 2))
    step = state.record(0, turn)
    assert state.check_turn(turn.tool_calls) is None
    assert state.append(step, ToolResult("c1", "lookup", "42")) is None
    assert state.over_budget() is None
    state.record(1, Completion(text="42", usage=Usage(20, 3)))
    run = state.finish(Stop.ANSWERED)
    assert run.ok and run.output == "42" and run.trajectory() == ["lookup"]
    assert (run.input_tokens, run.output_tokens) == (30, 5)
    assert current_run.get() is None  # building a state sets no context: the driver decides


def test_a_deadline_cuts_work_off_when_its_clock_says_time_is_up() -> None:
    async def main() -> None:
        with pytest.raises(DeadlineExceeded):
            await Deadline.after(0.01).cut(asyncio.sleep(60))
        assert await Deadline.after(60).cut(asyncio.sleep(0, "done")) == "done"

        async def own_timeout() -> None:
            raise asyncio.TimeoutError

        with pytest.raises(asyncio.TimeoutError):  # the work's own, before the deadline: passed through
            await Deadline.after(60).cut(own_timeout())

    asyncio.run(main())
