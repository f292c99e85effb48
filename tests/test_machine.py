"""The run machine with no I/O: every stop reason, a pause and a resume, and a team, driven by
hand - each model turn and tool result fed in by the test, time read off a clock it moves.

Nothing here calls a model, dispatches a tool, opens a span or reads the process's clock: what
the machine asks for and what it decides is all there is to see.
"""

from __future__ import annotations

import asyncio

import pytest

from tracedagent._core._budget import Budget, Stop
from tracedagent._core._checkpoint import NESTED_ID_SEPARATOR
from tracedagent._core._deadline import DeadlineExceeded
from tracedagent._core._machine import CallModel, Decided, Dispatch, Finish, RunMachine, Wait, Waits, sub_decisions
from tracedagent._core._output import OutputCheck, OutputRequest
from tracedagent._core._records import Completion, ToolCall, ToolOutcome, ToolResult, Usage
from tracedagent._core._request import ModelSettings
from tracedagent._core._run import RunState, current_run, initial_messages
from tracedagent._core._tools import Approved, Registry, tool


@tool
def echo(text: str) -> str:
    """Say it back."""
    return text


@tool(requires_approval=True)
def refund(amount: int) -> str:
    """Refund an amount."""
    return "refunded"


class Seen:
    """The observer: what the machine told it, in order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def step_started(self, index: int) -> None:
        self.events.append(("start", index))

    def step_ended(self, step) -> None:
        self.events.append(("end", step.index))

    def run_ended(self, run) -> None:
        self.events.append(("run", run.stop))

    def run_failed(self, error, used) -> None:
        self.events.append(("failed", type(error).__name__, used.step_count, used.input_tokens, used.output_tokens))

    def waiting(self, checkpoint) -> None:
        self.events.append(("waiting", checkpoint.id))

    def decided(self, checkpoint, decisions, now) -> None:
        self.events.append(("decided", dict(decisions), now))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def machine(budget: Budget = Budget(), *, parent: RunState | None = None, clock: Clock | None = None,
            settings: ModelSettings = ModelSettings(), waits: Waits | None = None) -> RunMachine:
    registry = Registry([echo, refund])
    state = RunState(budget, initial_messages("be brief", None, "go"), clock=clock or Clock(), parent=parent,
                     agent="clerk", tools=registry.names)
    return RunMachine(state, registry, Seen(), settings=settings, waits=waits)


def call(text: str = "a", id: str | None = None, name: str = "echo") -> ToolCall:
    arguments = {"amount": 5} if name == "refund" else {"text": text}
    return ToolCall(id or f"c-{name}-{text}", name, arguments)


def turn(*calls: ToolCall, tokens: tuple[int, int] = (10, 1), text: str = "") -> Completion:
    return Completion(text=text, tool_calls=list(calls), usage=Usage(*tokens))


def ok(c: ToolCall) -> ToolResult:
    return ToolResult(c.id, c.name, c.arguments.get("text", "done"))


def one_tool_step(m: RunMachine, action, c: ToolCall, **turn_args):
    """Feed a turn asking for ``c`` and its result; the machine's next action."""
    assert isinstance(action, CallModel)
    dispatch = m.model_returned(turn(c, **turn_args))
    assert isinstance(dispatch, Dispatch) and dispatch.calls == [c] and dispatch.held == {}
    return m.tools_done([ok(c)])


def test_a_run_answered_after_a_tool_step_asks_for_each_thing_in_order():
    m = machine(settings=ModelSettings(max_output_tokens=50, temperature=0.2))
    first = m.start()
    assert isinstance(first, CallModel) and first.step == 0
    request = first.request
    assert request.messages is m.state.messages  # the conversation itself, not a copy
    assert [t["name"] for t in request.tools] == ["echo", "refund"] and request.timeout is None
    assert request.settings.max_output_tokens == 50 and request.settings.temperature == 0.2
    second = one_tool_step(m, first, call("hi"))
    assert isinstance(second, CallModel) and second.step == 1
    assert m.state.messages[-1]["role"] == "tool"  # the result is shown to the model
    done = m.model_returned(turn(text="hi back"))
    assert isinstance(done, Finish) and done.run.stop is Stop.ANSWERED and done.run.output == "hi back"
    assert m.run is done.run and done.run.step_count == 2 and done.run.input_tokens == 20
    assert m.observer.events == [("start", 0), ("end", 0), ("start", 1), ("run", Stop.ANSWERED)]


class Upper:
    """An output spec with no pydantic (the core sees the protocol only): upper-case text."""

    name, schema = "Upper", {"type": "string"}

    def validate(self, text: str) -> OutputCheck:
        return OutputCheck(text.lower()) if text.isupper() else OutputCheck(problem="not upper case")


def typed_machine(budget: Budget = Budget()) -> RunMachine:
    state = RunState(budget, initial_messages("be brief", None, "go"), clock=Clock())
    return RunMachine(state, Registry([echo]), Seen(), output=Upper(), output_mode="native")


def test_an_answer_that_does_not_validate_is_not_the_answer_and_the_model_is_asked_again():
    m = typed_machine()
    first = m.start()
    assert first.request.output == OutputRequest(name="Upper", schema={"type": "string"}, mode="native")
    again = m.model_returned(turn(text="plain text"))
    assert isinstance(again, CallModel) and again.step == 1 and again.request.output is first.request.output
    assert m.state.messages[-1] == {"role": "user", "content": "Your answer is not a valid Upper: not upper case\n"
                                                               "Answer again with only the corrected JSON value."}
    done = m.model_returned(turn(text="SHOUT"))
    assert isinstance(done, Finish) and done.run.stop is Stop.ANSWERED
    assert done.run.output == "shout" and done.run.text == "SHOUT" and done.run.output_retries == 1
    assert m.observer.events == [("start", 0), ("end", 0), ("start", 1), ("run", Stop.ANSWERED)]


def test_retries_spent_stop_invalid_output_and_at_the_ceiling_the_step_budget_wins():
    m = typed_machine(Budget(max_output_retries=1))
    m.start()
    m.model_returned(turn(text="a"))
    done = m.model_returned(turn(text="b"))
    assert done.run.stop is Stop.INVALID_OUTPUT and done.run.text == "b" and done.run.step_count == 2
    assert done.run.output == "Stopped: the answer is not a valid Upper after 1 retry (not upper case)."
    m = typed_machine(Budget(max_steps=1, max_output_retries=3))
    m.start()
    done = m.model_returned(turn(text="a"))
    assert done.run.stop is Stop.STEP_BUDGET and done.run.output_retries == 0  # no step left to retry in
    assert m.state.messages[-1]["role"] == "assistant"  # and nothing was said to a model not called again


def test_a_typed_turn_with_calls_is_dispatched_as_any_other():
    m = typed_machine()
    m.start()
    dispatch = m.model_returned(turn(call("x"), text="thinking"))
    assert isinstance(dispatch, Dispatch) and dispatch.calls == [call("x")]


def test_step_budget_is_the_loops_structure():
    m = machine(Budget(max_steps=2))
    action = one_tool_step(m, m.start(), call("a"))
    action = one_tool_step(m, action, call("b"))
    assert isinstance(action, Finish) and action.run.stop is Stop.STEP_BUDGET and action.run.step_count == 2
    assert m.observer.events == [("start", 0), ("end", 0), ("start", 1), ("end", 1), ("run", Stop.STEP_BUDGET)]


def test_token_budget_passed_after_a_step_and_nothing_left_before_a_call():
    m = machine(Budget(max_tokens=15))
    action = one_tool_step(m, m.start(), call("a"), tokens=(10, 10))
    assert action.run.stop is Stop.TOKEN_BUDGET and "used 20 tokens, over the 15-token budget" in action.run.output
    m = machine(Budget(max_tokens=20))
    action = one_tool_step(m, m.start(), call("a"), tokens=(10, 10))  # exactly spent: no call can be paid for
    assert action.run.stop is Stop.TOKEN_BUDGET and "nothing was left of its 20-token budget" in action.run.output
    assert m.observer.events[-2:] == [("end", 0), ("run", Stop.TOKEN_BUDGET)]  # no step 1 was started


def test_cost_budget():
    m = machine(Budget(max_cost=0.01, price_per_1k_input=1.0))
    action = one_tool_step(m, m.start(), call("a"), tokens=(20, 0))
    assert action.run.stop is Stop.COST_BUDGET and action.run.cost == pytest.approx(0.02)


def test_repeated_call_stops_before_dispatch():
    m = machine(Budget(repeat_limit=1))
    action = one_tool_step(m, m.start(), call("same", id="1"))
    action = m.model_returned(turn(call("same", id="2")))
    assert isinstance(action, Finish) and action.run.stop is Stop.REPEATED_CALL
    assert action.run.steps[-1].tool_results == []  # never dispatched


def test_fatal_result_ends_the_turn_and_the_run():
    m = machine()
    m.start()
    a, b = call("a"), call("b")
    dispatch = m.model_returned(turn(a, b))
    fatal = ToolResult(a.id, a.name, "boom", ToolOutcome.FATAL)
    assert m.ends_turn(fatal) and not m.ends_turn(ok(b))
    action = m.tools_done([fatal])  # one after another: b never started
    assert isinstance(action, Finish) and action.run.stop is Stop.TOOL_FATAL
    assert action.run.tool_names().not_dispatched == ["echo"]
    assert dispatch.calls == [a, b]


def test_one_by_one_stops_after_a_result_that_ends_the_turn_and_once_the_time_is_up():
    m = machine()
    m.start()
    a, b, c = call("a"), call("b"), call("c")
    dispatch = m.model_returned(turn(a, b, c))
    results: list[ToolResult] = []
    dispatched = []
    for each in m.one_by_one(dispatch.calls, results):
        dispatched.append(each)
        results.append(ToolResult(each.id, each.name, "boom", ToolOutcome.FATAL) if each is b else ok(each))
    assert dispatched == [a, b]  # c never started: b's result ended the turn
    clock = Clock()
    m = machine(Budget(max_seconds=5), clock=clock)
    m.start()
    dispatch = m.model_returned(turn(a, b))
    results, dispatched = [], []
    for each in m.one_by_one(dispatch.calls, results):
        dispatched.append(each)
        clock.now = 6  # the deadline passed while the call ran: the next may not start
        results.append(ok(each))
    assert dispatched == [a]


def test_no_progress():
    m = machine(Budget(no_progress_limit=1))
    m.start()
    c = call("a")
    m.model_returned(turn(c))
    action = m.tools_done([ToolResult(c.id, c.name, "Error: no", ToolOutcome.ERROR)])
    assert isinstance(action, Finish) and action.run.stop is Stop.NO_PROGRESS


def test_a_failed_model_call_counts_as_a_step():
    m = machine()
    m.start()
    error = ValueError("provider down")
    action = m.model_failed(error)
    assert action.run.stop is Stop.MODEL_ERROR and action.run.error is error
    assert action.run.step_count == 1 and action.run.steps == []
    assert m.observer.events == [("start", 0), ("run", Stop.MODEL_ERROR)]


def test_a_model_request_over_the_payload_limit_ends_the_run_payload_limit():
    """A durable driver did not send the request (Temporal's payload limit): the machine names
    the stop, the step counted as a failed call's, the run returned."""
    from tracedagent._core._payloads import PayloadTooLarge

    m = machine()
    m.start()
    error = PayloadTooLarge("model request", 3_000_000, 2_097_152)
    action = m.model_failed(error)
    assert action.run.stop is Stop.PAYLOAD_LIMIT and action.run.error is error and action.run.step_count == 1
    assert "3,000,000 bytes" in action.run.output and action.run.output.startswith("Stopped:")
    assert m.observer.events == [("start", 0), ("run", Stop.PAYLOAD_LIMIT)]


def test_a_models_own_cancelled_error_is_its_failure_outside_a_cancelled_task():
    m = machine()
    m.start()
    assert m.model_failed(asyncio.CancelledError()).run.stop is Stop.MODEL_ERROR


def test_a_cancelled_runs_cancellation_is_raised_again():
    async def main():
        m = machine()
        m.start()
        asyncio.current_task().cancel()  # the run's own task is being cancelled
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError as exc:
            with pytest.raises(asyncio.CancelledError):
                m.model_failed(exc)
        if hasattr(asyncio.Task, "uncancel"):  # 3.11+: the task counts the request; 3.10 does not
            asyncio.current_task().uncancel()
        return m

    m = asyncio.run(main())
    assert m.run is None and m.used().step_count == 1  # the call asked for counts, as a failed one does


def test_time_budget_before_a_call_at_the_model_and_between_calls():
    clock = Clock()
    m = machine(Budget(max_seconds=5), clock=clock)
    first = m.start()
    assert first.request.timeout == 5
    clock.now = 2
    dispatch = m.model_returned(turn(call("a"), call("b")))
    assert m.may_start(dispatch.calls[0])
    clock.now = 6  # the deadline passed while the first call ran: the second may not start
    assert not m.may_start(dispatch.calls[1])
    cut = m.cut_off(dispatch.calls[0])
    assert cut.outcome is ToolOutcome.TIMEOUT and cut.deadline_cut
    action = m.tools_done([cut])
    assert action.run.stop is Stop.TIME_BUDGET
    # cut off at the deadline while the model ran
    m = machine(Budget(max_seconds=5), clock=Clock())
    m.start()
    action = m.model_failed(DeadlineExceeded())
    assert action.run.stop is Stop.TIME_BUDGET and action.run.error is None and action.run.step_count == 1
    # out of time before a call: no step is started
    clock = Clock()
    m = machine(Budget(max_seconds=5), clock=clock)
    first = m.start()
    m.model_returned(turn(call("a")))
    clock.now = 4
    second = m.tools_done([ok(call("a"))])
    assert second.request.timeout == 1  # what is left, a new request each call
    m.model_returned(turn(call("b")))
    clock.now = 4.5
    third = m.tools_done([ok(call("b"))])
    assert third.request is not second.request
    m.model_returned(turn(call("c")))
    clock.now = 5
    assert m.tools_done([ok(call("c"))]).run.stop is Stop.TIME_BUDGET


def test_tool_call_budget():
    m = machine(Budget(max_tool_calls_per_step=1))
    m.start()
    action = m.model_returned(turn(call("a"), call("b")))
    assert isinstance(action, Finish) and action.run.stop is Stop.TOOL_CALL_BUDGET


def test_cancelled_run_is_told_to_the_observer_with_what_it_used():
    m = machine()
    with pytest.raises(KeyboardInterrupt):
        with m:
            assert current_run.get() is m.state  # a run started by a tool is its sub-run
            action = one_tool_step(m, m.start(), call("a"), tokens=(7, 3))
            m.model_returned(turn(call("b"), tokens=(5, 2)))  # two model calls, then interrupted
            raise KeyboardInterrupt
    assert current_run.get() is None
    assert m.observer.events[-1] == ("failed", "KeyboardInterrupt", 2, 12, 5)
    used = m.used()
    assert used.stop is Stop.CANCELLED and [s.index for s in used.steps] == [0, 1]


def test_a_finished_run_is_not_failed_by_an_exception_after_it():
    m = machine()
    with pytest.raises(RuntimeError):
        with m:
            m.start()
            m.model_returned(turn(text="done"))
            raise RuntimeError("the driver's own bug, after the run ended")
    assert [e[0] for e in m.observer.events] == ["start", "run"]


def test_a_driver_that_tells_of_the_turn_and_the_step_end_feeds_them_back_in_halves():
    """A stream tells its consumer of a turn's calls before the run decides on them, and of a
    step's end before the next step starts: ``record`` / ``decide`` and ``step_done`` /
    ``next_turn`` are ``model_returned`` and ``tools_done`` with that moment in between."""
    m = machine(Budget(max_steps=2))
    m.start()
    c = call("a")
    step = m.record(turn(c, tokens=(4, 1)))
    assert step.index == 0 and step.tool_results == [] and m.state.input_tokens == 4
    assert m.observer.events == [("start", 0)] and m.used().step_count == 1  # kept, nothing decided
    dispatch = m.decide(step)
    assert isinstance(dispatch, Dispatch) and dispatch.step is step and dispatch.calls == [c]
    assert m.step_done([ok(c)]) is None and step.tool_results == [ok(c)]
    assert m.observer.events == [("start", 0), ("end", 0)]  # the step ended, the next not begun
    second = m.next_turn()
    assert isinstance(second, CallModel) and second.step == 1
    m.decide(m.record(turn(c)))
    assert m.step_done([ok(c)]) is None
    finished = m.next_turn()  # the step budget is the loop's structure: asked before a turn
    assert isinstance(finished, Finish) and finished.run.stop is Stop.STEP_BUDGET
    assert m.observer.events[-3:] == [("start", 1), ("end", 1), ("run", Stop.STEP_BUDGET)]
    fatal = machine()
    fatal.start()
    fatal.decide(fatal.record(turn(c)))
    stopped = fatal.step_done([ToolResult(c.id, c.name, "boom", ToolOutcome.FATAL)])  # no next turn to ask for
    assert isinstance(stopped, Finish) and stopped.run.stop is Stop.TOOL_FATAL
    assert fatal.observer.events == [("start", 0), ("run", Stop.TOOL_FATAL)]
    repeated = machine(Budget(repeat_limit=1))
    repeated.start()
    repeated.decide(repeated.record(turn(c)))
    repeated.step_done([ok(c)])
    repeated.next_turn()
    assert repeated.decide(repeated.record(turn(c))).run.stop is Stop.REPEATED_CALL


def test_what_a_broken_stream_delivered_is_kept_as_the_failed_steps_turn():
    m = machine()
    m.start()
    error = ConnectionError("dropped")
    run = m.model_failed(error, turn(text="Hello", tokens=(3, 1))).run
    assert run.stop is Stop.MODEL_ERROR and run.error is error and run.input_tokens == 3
    assert run.step_count == len(run.steps) == 1 and run.steps[0].completion.text == "Hello"
    m = machine(Budget(max_seconds=5))
    m.start()
    run = m.model_failed(DeadlineExceeded(), turn(text="Hel")).run  # cut off mid-stream
    assert run.stop is Stop.TIME_BUDGET and run.error is None and run.steps[0].completion.text == "Hel"


def test_a_pump_closed_from_another_context_leaves_that_context_alone():
    """asyncio's shutdown of async generators closes a stream left open from its own context:
    the run's ``current_run`` went with the run's context, and the one there is not touched."""
    import contextvars

    m = machine()
    ran = contextvars.copy_context()
    ran.run(m.__enter__)
    ran.run(m.start)
    assert ran.run(current_run.get) is m.state and current_run.get() is None
    m.__exit__(GeneratorExit, GeneratorExit(), None)  # here, not in ``ran``
    assert current_run.get() is None and m.observer.events[-1][:2] == ("failed", "GeneratorExit")


def paused_run():
    """A run whose turn calls ``refund`` (waits for a person) and ``echo`` (dispatched)."""
    m = machine(Budget(max_steps=5))
    m.start()
    held, free = call(name="refund", id="r1"), call("x")
    dispatch = m.model_returned(turn(held, free))
    assert dispatch.calls == [free] and list(dispatch.held) == [0]
    action = m.tools_done([ok(free)])
    return m, action


def test_approval_required_pauses_with_a_checkpoint():
    m, action = paused_run()
    run = action.run
    assert run.stop is Stop.APPROVAL_REQUIRED and [p.id for p in run.pending] == ["r1"]
    assert run.paused.step_index == 0 and run.paused.spent.steps == 1 and run.paused.spent.input_tokens == 10
    assert m.observer.events == [("start", 0), ("run", Stop.APPROVAL_REQUIRED)]


@pytest.mark.parametrize("decision", [True, False, "too much"])
def test_resume_dispatches_the_decided_calls_as_a_step_then_goes_on(decision):
    _, paused = paused_run()
    cp = paused.run.paused
    m = machine(Budget(max_steps=5))
    decided = m.resume(cp, {"r1": decision})
    assert isinstance(decided, Decided) and decided.step.resumed and decided.step.index == 0
    (only,) = decided.calls
    if decision is True:
        assert isinstance(only.call, Approved) and only.denied is None
        result = ToolResult("r1", "refund", "refunded")
    else:
        assert only.denied.outcome is ToolOutcome.DENIED
        assert only.denied.content == ("Denied: too much" if decision else "Denied: a person did not approve this call")
        result = only.denied
    action = m.tools_done([result])
    assert isinstance(action, CallModel) and action.step == 1  # the turns go on after the paused one
    assert m.state.usage.input_tokens == 10  # what the paused run spent counts
    done = m.model_returned(turn(text="refund handled"))
    assert done.run.stop is Stop.ANSWERED and done.run.resumed is cp
    assert m.observer.events == [("start", 0), ("end", 0), ("start", 1), ("run", Stop.ANSWERED)]


def test_a_team_sub_agent_charges_its_caller_and_its_pause_pauses_the_caller():
    lead = machine(Budget(max_steps=5))
    lead.start()
    delegate = call("sub", id="d1")
    dispatch = lead.model_returned(turn(delegate, tokens=(10, 1)))
    # The delegate's tool runs a sub-agent: a machine whose state's parent is the lead's.
    sub = machine(Budget(max_steps=5), parent=lead.state)
    sub.start()
    sub_turn = sub.model_returned(turn(call(name="refund", id="r1"), tokens=(4, 2)))
    assert sub_turn.calls == [] and list(sub_turn.held) == [0]
    sub_done = sub.tools_done([])
    assert sub_done.run.stop is Stop.APPROVAL_REQUIRED
    assert lead.state.sub_runs == [sub_done.run]  # kept by its caller's run
    assert lead.state.usage.input_tokens == 14  # charged as it happened
    pending = ToolResult("d1", "echo", "waiting", ToolOutcome.PENDING, pending=sub_done.run)
    action = lead.tools_done([pending])
    assert action.run.stop is Stop.APPROVAL_REQUIRED
    (waiting,) = action.run.paused.sub_agents
    assert waiting.call_id == "d1" and waiting.checkpoint is sub_done.run.paused
    # Resumed: the sub-agent's call is dispatched again with its share of the decisions.
    nested = "d1" + NESTED_ID_SEPARATOR + "r1"
    assert sub_decisions(waiting, {nested: True, "other": False}) == {"r1": True}
    resumed = machine(Budget(max_steps=5))
    decided = resumed.resume(action.run.paused, {nested: True})
    (again,) = decided.calls
    assert again.sub is waiting and again.decisions == {"r1": True} and isinstance(again.call, Approved)


def test_a_team_over_its_ceiling_stops_the_sub_agent():
    lead = machine(Budget(max_tokens=30))
    lead.start()
    lead.model_returned(turn(call("sub"), tokens=(10, 0)))
    sub = machine(Budget(), parent=lead.state)
    assert sub.state.parent is lead.state
    action = one_tool_step(sub, sub.start(), call("a"), tokens=(25, 0))
    assert action.run.stop is Stop.TOKEN_BUDGET and "its team used 35 tokens" in action.run.output
    spent = machine(Budget(max_tokens=10))
    spent.start()
    spent.model_returned(turn(call("sub"), tokens=(10, 0)))
    late = machine(Budget(), parent=spent.state)  # started after its team spent everything
    assert late.start().run.stop is Stop.TOKEN_BUDGET
    assert "nothing was left of its team's 10-token budget" in late.run.output


def test_every_stop_reason_is_reached_here():
    """The stops above (and cancelled, through ``used``): one test per reason, none forgotten."""
    import sys
    source = open(sys.modules[__name__].__file__).read()
    for stop in Stop:
        assert f"Stop.{stop.name}" in source, stop


# The Temporal path: a driver that can wait for decisions within the run (a durable workflow).

def waiting_run(budget: Budget = Budget(max_steps=5), clock: Clock | None = None):
    """``paused_run`` under a machine told it may wait: a ``Wait`` instead of the pause's stop."""
    clock = clock or Clock()
    ids = iter(["w-0", "w-1"])
    m = machine(budget, clock=clock, waits=Waits(lambda: next(ids), lambda: 5000.0 + clock.now))
    m.start()
    held, free = call(name="refund", id="r1"), call("x")
    m.model_returned(turn(held, free))
    return m, m.tools_done([ok(free)])


def test_a_machine_that_may_wait_hands_a_wait_with_the_checkpoint_instead_of_pausing():
    m, action = waiting_run()
    assert isinstance(action, Wait) and action.checkpoint.id == "w-0" and action.checkpoint.paused_at == 5000.0
    assert [c.id for c in action.checkpoint.pending] == ["r1"] and action.step.paused
    assert m.run is None and m.observer.events == [("start", 0), ("waiting", "w-0")]


@pytest.mark.parametrize("decision", [True, False, "too much"])
def test_the_decisions_waited_for_are_a_decided_step_of_the_same_run_as_resume_hands(decision):
    m, _ = waiting_run()
    decided = m.decided({"r1": decision})
    _, paused = paused_run()
    resumed = machine(Budget(max_steps=5)).resume(paused.run.paused, {"r1": decision})
    assert isinstance(decided, Decided) and decided.step.resumed and decided.step.index == 0
    (only,) = decided.calls
    (again,) = resumed.calls
    assert type(only.call) is type(again.call) and only.call.arguments == again.call.arguments
    assert only.denied == again.denied
    assert m.observer.events == [("start", 0), ("waiting", "w-0"), ("end", 0), ("decided", {"r1": decision}, 5000.0),
                                 ("start", 0)]
    action = m.tools_done([ToolResult("r1", "refund", "refunded") if decision is True else only.denied])
    assert isinstance(action, CallModel) and action.step == 1  # the turns go on after the paused one
    done = m.model_returned(turn(text="handled"))
    assert done.run.stop is Stop.ANSWERED and done.run.step_count == 3 and done.run.input_tokens == 20


def test_a_corrected_approval_is_settled_as_resume_settles_it():
    from tracedagent import Approve

    m, wait = waiting_run()
    decided = m.decided({"r1": Approve(digest=wait.checkpoint.pending[0].digest, arguments={"amount": 3})})
    (only,) = decided.calls
    assert isinstance(only.call, Approved) and only.call.arguments == {"amount": 3}
    assert m.observer.events[3][1] == {"r1": True}


def test_a_wait_that_is_over_ends_approval_required_with_the_checkpoint():
    m, wait = waiting_run()
    done = m.wait_over()
    assert isinstance(done, Finish) and done.run.stop is Stop.APPROVAL_REQUIRED and done.run.paused is wait.checkpoint
    assert m.observer.events[-1] == ("run", Stop.APPROVAL_REQUIRED)


def test_the_wait_is_not_running_time():
    clock = Clock()
    m = machine(Budget(max_steps=5, max_seconds=10), clock=clock, waits=Waits(lambda: "w-0", clock))
    m.start()
    held, free = call(name="refund", id="r1"), call("x")
    m.model_returned(turn(held, free))
    clock.now = 3.0
    assert isinstance(m.tools_done([ok(free)]), Wait)  # waits with 7 s left
    clock.now = 3600.0  # an hour waiting for a person
    assert isinstance(m.decided({"r1": False}), Decided)
    assert m.deadline.left() == pytest.approx(7.0)
    assert isinstance(m.tools_done([denied_result("r1")]), CallModel)


def denied_result(id: str) -> ToolResult:
    return ToolResult(id, "refund", "Denied: no", ToolOutcome.DENIED)


def test_a_sub_agent_that_paused_ends_the_run_approval_required_even_when_it_may_wait():
    """Only resuming the sub-agent from its checkpoint can go on with it: nothing to wait for here."""
    ids = iter(["w-0"])
    lead = machine(Budget(max_steps=5), waits=Waits(lambda: next(ids), lambda: 1.0))
    lead.start()
    lead.model_returned(turn(call("d", id="d1")))
    sub = machine(Budget(max_steps=5), parent=lead.state)
    sub.start()
    sub.model_returned(turn(call(name="refund", id="r1")))
    paused = sub.tools_done([]).run
    action = lead.tools_done([ToolResult("d1", "echo", "waiting", ToolOutcome.PENDING, pending=paused)])
    assert isinstance(action, Finish) and action.run.stop is Stop.APPROVAL_REQUIRED
    assert action.run.paused.id == "w-0" and action.run.paused.sub_agents
