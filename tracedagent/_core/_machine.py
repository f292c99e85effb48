"""The run as a machine: the order of a run and every decision in it, with no I/O.

The h11 pattern (a protocol as a state machine that performs no I/O, driven by whoever owns
the I/O): ``RunMachine`` hands its driver the next thing to do - call the model with this
request (``CallModel``), dispatch these calls (``Dispatch``; ``Decided`` for a resumed run's
decided calls), wait for a person's decisions (``Wait``: only a driver that said it can wait,
a durable workflow, is asked), or stop (``Finish``) - and the driver feeds back what happened
(``model_returned``, ``model_failed``, ``tools_done``, ``decided`` / ``wait_over``), which
returns the next thing to do.
A driver that tells of what happens in between (a stream's events) feeds the two back in
halves: ``record`` then ``decide``, ``step_done`` then ``next_turn``.
A driver is then a pump: a short loop that performs the machine's requests, its own way
(``run`` in this thread, ``arun`` awaiting under the run's deadline, a workflow engine as
activities). Every decision - when the run stops and why, which calls wait for a person, what
a failed model call means - is asked of the machine, which asks ``RunState`` (its
vocabulary: ``record``, ``check_turn``, ``hold``, ``over_budget``, ``pause``, ``finish``...).

The machine reads the time only through the run's clock, and tells an ``Observer`` (the
run and step spans, in ``_instrumentation``) of its transitions: telemetry watches, never
decides.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence

from ._budget import Stop
from ._checkpoint import NESTED_ID_SEPARATOR, Checkpoint, PendingCall, SubAgentPause, escape_id
from ._decisions import Decision, settle
from ._deadline import Deadline, DeadlineExceeded
from ._output import OutputSpec, output_request
from ._records import Completion, ToolCall, ToolOutcome, ToolResult, being_cancelled
from ._request import ModelRequest, ModelSettings
from ._run import Run, RunState, Step, current_run
from ._tools import Approved, Registry

__all__ = ["RunMachine", "Observer", "CallModel", "Dispatch", "Decided", "DecidedCall", "Wait", "Waits", "Finish",
           "Action", "decided_plan", "denied", "sub_decisions", "DENIED_BY_A_PERSON"]

DENIED_BY_A_PERSON = "a person did not approve this call"
"""What the model is shown for a call denied with ``False`` (a string decision is shown as given)."""


class Observer(Protocol):
    """Who watches a run's transitions (its run and step spans): told, never asked."""

    def step_started(self, index: int) -> None:
        """Step ``index`` begins: its model call (or a resumed run's decided calls) comes next."""

    def step_ended(self, step: Step) -> None:
        """The step did its work and the run goes on."""

    def run_ended(self, run: Run) -> None:
        """The run stopped for a named reason (its last step ends with it)."""

    def run_failed(self, error: BaseException, used: Run) -> None:
        """The run raised instead (cancelled, interrupted, a bug); ``used`` is what it had used."""

    def waiting(self, checkpoint: Checkpoint) -> None:
        """The run waits for a person's decisions on ``checkpoint``'s calls (a ``Wait``)."""

    def decided(self, checkpoint: Checkpoint, decisions: Mapping[str, Decision], now: float) -> None:
        """A person decided on a pause (a resumed run's, or a waiting run's): ``decisions`` settled,
        ``now`` the wall-clock time they arrived (how long the pause lasted)."""


class CallModel:
    """Call the model with ``request`` for step ``step``; feed back ``model_returned`` or ``model_failed``."""

    __slots__ = ("request", "step")

    def __init__(self, request: ModelRequest, step: int) -> None:
        self.request = request
        self.step = step


class Dispatch:
    """Dispatch ``calls`` (those of the turn that may start, in call order), asking ``may_start``
    before each and ``ends_turn`` after each when one after another (``one_by_one``); feed back
    ``tools_done``.
    ``held`` are the calls (by position in the turn) that wait for a person, and why."""

    __slots__ = ("step", "calls", "held")

    def __init__(self, step: Step, calls: Sequence[ToolCall], held: dict[int, str]) -> None:
        self.step = step
        self.calls = calls
        self.held = held


class DecidedCall:
    """One call a person decided on, in a resumed run: ``denied`` is its result if it was
    denied (record it: the model is shown it); ``sub`` a sub-agent's paused run, resumed with
    its share of the ``decisions``; else dispatch ``call`` (an ``Approved`` call)."""

    __slots__ = ("call", "denied", "sub", "decisions")

    def __init__(self, call: ToolCall, denied: ToolResult | None = None, sub: SubAgentPause | None = None,
                 decisions: Mapping[str, Decision] | None = None) -> None:
        self.call = call
        self.denied = denied
        self.sub = sub
        self.decisions = decisions or {}


class Decided:
    """A resumed run's first step: the decided calls, one after another (``ends_turn`` after
    each), no model call; feed back ``tools_done``."""

    __slots__ = ("step", "calls")

    def __init__(self, step: Step, calls: list[DecidedCall]) -> None:
        self.step = step
        self.calls = calls


class Wait:
    """Wait for a person's decisions on ``checkpoint``'s calls (``checkpoint.pending``), the run
    paused after ``step`` (its spans open, its clock stopped); feed back ``decided`` with the
    decisions (checked: ``check_decisions``), or ``wait_over`` when the driver waits no longer."""

    __slots__ = ("step", "checkpoint")

    def __init__(self, step: Step, checkpoint: Checkpoint) -> None:
        self.step = step
        self.checkpoint = checkpoint


class Waits:
    """A driver that can wait for decisions within the run (a durable workflow, which no process
    holds while it waits): how it names a pause (``new_id``) and reads the wall-clock time
    (``now``), both replay-safe in a workflow (from its history)."""

    __slots__ = ("new_id", "now")

    def __init__(self, new_id: Callable[[], str], now: Callable[[], float]) -> None:
        self.new_id = new_id
        self.now = now


class Finish:
    """The run stopped: ``run`` is what the driver returns (its spans have ended). A paused run
    is one too: ``run.paused`` is its checkpoint."""

    __slots__ = ("run",)

    def __init__(self, run: Run) -> None:
        self.run = run


Action = CallModel | Dispatch | Decided | Wait | Finish
"""What the machine asks of its driver next."""


class RunMachine:
    """One run's order and decisions, driven by a pump (see the module docstring).

    ``state`` is the run's ``RunState`` (its budget, messages, clock, parent); ``registry``
    answers which calls wait for a person and gives the tools' schemas; ``observer`` hears
    the transitions; ``waits``, given by a driver that can wait for decisions within the run,
    turns a pause into a ``Wait`` (else the run finishes ``approval_required`` with a checkpoint
    to resume from). Used as a context manager around the pump: the run is ``current_run``
    inside it (a run started by a tool is its sub-run), and an exception out of it is told to
    the observer with what the run had used."""

    __slots__ = ("state", "registry", "observer", "run", "may_start", "_settings", "_tools", "_next",
                 "_last", "_step", "_calling", "_token", "_waits", "_waiting", "_spec", "_output")

    def __init__(self, state: RunState, registry: Registry, observer: Observer, *,
                 settings: ModelSettings = ModelSettings(), waits: Waits | None = None,
                 output: OutputSpec | None = None, output_mode: str = "prompted") -> None:
        """``output``: the run's output type (its answer is checked against it: ``answer``), asked
        for in ``output_mode`` (resolved: ``prompted``, ``native`` or ``tool``)."""
        self.state = state
        self.registry = registry
        self.observer = observer
        self.run: Run | None = None
        """The ``Run`` once the machine has finished."""
        self._settings = settings
        self._tools = registry.schemas() or None  # no tools: None, not []
        self.may_start = state.may_start
        """Whether the turn's next call is dispatched, asked before each (``RunState.may_start``:
        not once the run's time is up): the same answer for every driver."""
        self._next = 0
        """The index of the next model turn."""
        self._last = state.budget.max_steps
        """The step ceiling: ``range(max_steps)`` is the loop's structure."""
        self._step: Step | None = None
        self._calling = False
        """Whether a model call was asked for and nothing fed back yet (it counts as a step)."""
        self._token: Any = None
        self._waits = waits
        self._waiting: tuple[Wait, float | None] | None = None
        """The ``Wait`` handed out, and the run's seconds left when it began (the wait is not running time)."""
        self._spec = output
        self._output = output_request(output, output_mode)  # each call's request
        state.typed = output is not None

    def __enter__(self) -> RunMachine:
        self._token = current_run.set(self.state)
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, traceback: Any) -> None:
        if current_run.get() is self.state:  # else a pump closed from another context (asyncio's
            current_run.reset(self._token)   # shutdown of an async generator left open): the run's went with it
        if exc is not None and self.run is None:
            self.observer.run_failed(exc, self.used())

    # The driver's side: start, then feed back what happened; each returns what to do next.

    def start(self) -> CallModel | Finish:
        """A new run's first thing to do."""
        self._next = self.state.first_step
        return self._turn()

    def resume(self, checkpoint: Checkpoint, decisions: Mapping[str, Decision]) -> Decided:
        """A paused run continued (``checkpoint`` and ``decisions`` checked and settled already;
        its span says so from its start: ``Resumed``): its state rebuilt
        (``RunState.continue_from``), then its decided calls as one step."""
        state = self.state
        state.continue_from(checkpoint)
        self._next = state.first_step
        return self._decided(checkpoint, decisions)

    def decided(self, decisions: Mapping[str, Decision]) -> Decided:
        """The decisions a ``Wait`` waited for (checked against its checkpoint): settled as a
        resumed run's are (``settle``), the run's clock going on from where the wait began, the
        paused step ended, then the decided calls as one step - what ``resume`` hands, in the
        same run."""
        assert self._waiting is not None, "decided without a Wait"
        (wait, left), self._waiting = self._waiting, None
        checkpoint, decisions = settle(wait.checkpoint, decisions)  # an Approve's corrected arguments, a shared id denied
        self.state.waited(left)
        self.observer.step_ended(wait.step)  # the paused turn: its held calls pending
        assert self._waits is not None
        self.observer.decided(checkpoint, decisions, self._waits.now())
        return self._decided(checkpoint, decisions)

    def wait_over(self) -> Finish:
        """The driver waits no longer (its approval timeout): the run stops ``approval_required``
        with the checkpoint, as a driver that cannot wait stops it at once."""
        assert self._waiting is not None, "wait_over without a Wait"
        (wait, _), self._waiting = self._waiting, None
        return self._finish(self.state.finish(Stop.APPROVAL_REQUIRED, detail=wait.checkpoint))

    def _decided(self, checkpoint: Checkpoint, decisions: Mapping[str, Decision]) -> Decided:
        """The decided calls of a pause as one step without a model call (resumed, or waited for)."""
        state = self.state
        plan = decided_plan(checkpoint, decisions)
        self.observer.step_started(checkpoint.step_index)
        step = self._step = state.record_decided(checkpoint.step_index, [call for call, _ in plan])
        calls = []
        for call, waited in plan:
            if isinstance(waited, SubAgentPause):
                calls.append(DecidedCall(call, sub=waited, decisions=sub_decisions(waited, decisions)))
            elif isinstance(call, Approved):
                calls.append(DecidedCall(call))
            else:
                calls.append(DecidedCall(call, denied=denied(call, decisions[waited.id])))
        return Decided(step, calls)

    def model_returned(self, completion: Completion) -> Dispatch | Finish | CallModel:
        """The model answered the step's call: the turn is recorded (``record``, written out:
        a call less a step for every pump) and checked (``decide``)."""
        self._calling = False
        return self.decide(self.state.record(self._next - 1, completion))

    def record(self, completion: Completion) -> Step:
        """``model_returned``'s first half: the turn kept, nothing decided on it yet. A driver
        that tells of the turn before the run decides on it (a stream's ``tool_call`` events)
        calls this, then ``decide``."""
        self._calling = False
        return self.state.record(self._next - 1, completion)

    def decide(self, step: Step) -> Dispatch | Finish | CallModel:
        """``model_returned``'s second half: the answer (or, typed, an answer that did not validate
        asked again: a ``CallModel``), the turn's checks, the calls that wait."""
        state, calls = self.state, step.completion.tool_calls
        if not calls:
            return self.answer(step)
        if stopped := state.check_turn(calls):
            return self._finish(stopped)
        state.hold(step, self.registry.waiting(calls))  # calls a person must decide on
        held = step.waiting
        self._step = step
        return Dispatch(step, [c for n, c in enumerate(calls) if n not in held] if held else calls, held)

    def model_failed(self, error: BaseException, received: Completion | None = None) -> Finish:
        """The model call raised ``error``. Cut off at the run's deadline (``DeadlineExceeded``),
        the run is out of time; a ``CancelledError`` of a run whose task is being cancelled is
        the run's own cancellation, re-raised as Python code expects; anything else (the
        model's own ``CancelledError`` too) is the model's failure, or out of time if the time
        budget ran out meanwhile (the adapter was given what was left as its timeout).
        ``received`` is what a streamed call had delivered before it broke or was cut: kept as
        the step's turn."""
        if isinstance(error, DeadlineExceeded):
            self._calling = False
            return self._finish(self.state.model_failed(None, received))
        if isinstance(error, asyncio.CancelledError) and being_cancelled():
            raise error
        self._calling = False
        return self._finish(self.state.model_failed(error, received))

    @property
    def deadline(self) -> Deadline | None:
        """When the run's time runs out, if it has a time budget: an async driver's calls are
        cut off there."""
        return self.state.deadline

    ends_turn = staticmethod(RunState.ends_turn)
    cut_off = staticmethod(RunState.cut_off)

    def one_by_one(self, calls: Sequence[ToolCall], results: list[ToolResult]) -> Iterator[ToolCall]:
        """A turn's calls as a driver dispatches them one after another: each while it may
        start (``may_start``), none after a result that ends the turn (``ends_turn``). The
        driver appends each call's result to ``results`` before it asks for the next call."""
        may_start = self.may_start
        for call in calls:
            if results and RunState.ends_turn(results[-1]) or not may_start(call):
                return
            yield call

    def tools_done(self, results: Sequence[ToolResult]) -> CallModel | Wait | Finish:
        """The step's dispatched calls' results, in call order (those not dispatched left out):
        kept on the step and shown to the model, then the checks that end a turn."""
        return self.step_done(results) or self._turn()

    def step_done(self, results: Sequence[ToolResult]) -> Wait | Finish | None:
        """``tools_done``'s first half: ``None`` if the step ended and the run goes on. A driver
        that tells of a step's end before the next one begins (a stream's ``step_end`` event)
        calls this, then ``next_turn``."""
        state, step = self.state, self._step
        assert step is not None, "tools_done without a Dispatch"
        if (stopped := state.append(step, *results)) or (stopped := state.over_budget()):
            return self._finish(stopped)
        if self._waits is not None and state.waits(step):
            return self._wait(step)
        if stopped := state.pause(step):
            return self._finish(stopped)
        self.observer.step_ended(step)
        return None

    def _wait(self, step: Step) -> Wait | Finish:
        """Where ``pause`` would stop the run, a driver that can wait waits for the decisions;
        not when a sub-agent's run paused inside a call (only resuming it from its checkpoint
        can go on with it): the run stops ``approval_required`` then, as without ``waits``. The
        pause's id and time are drawn only here (a workflow draws them from its history)."""
        waits = self._waits
        assert waits is not None
        checkpoint = self.state.checkpoint_at(step, waits.new_id(), waits.now())
        assert checkpoint is not None  # something waits: checked
        if checkpoint.sub_agents:
            return self._finish(self.state.finish(Stop.APPROVAL_REQUIRED, detail=checkpoint))
        wait = Wait(step, checkpoint)
        self._waiting = (wait, self.state.seconds_left())
        self.observer.waiting(checkpoint)
        return wait

    def next_turn(self) -> CallModel | Finish:
        """``tools_done``'s second half: the next model turn, or the stop that comes first."""
        return self._turn()

    def used(self) -> Run:
        """What the run has used so far (steps, tokens, tool calls), as a cancelled ``Run``: a
        model call asked for and not answered counts as a step, as a failed one does."""
        return self.state.finish(Stop.CANCELLED, call_failed=self._calling)

    # The decisions only the machine takes.

    def answer(self, step: Step) -> Finish | CallModel:
        """A turn without tool calls is the answer, unless its text does not validate against the
        run's output type: then the model is told why and called again, a step like any other, or
        the run stops (``RunState.invalid_output``: out of retries, or of steps)."""
        state, spec = self.state, self._spec
        if spec is None:
            return self._finish(state.finish(Stop.ANSWERED))
        check = spec.validate(step.completion.text)
        if check.problem is None:
            return self._finish(state.finish(Stop.ANSWERED, value=check.value))
        if stopped := state.invalid_output(spec, check.problem, step_left=self._next < self._last):
            return self._finish(stopped)
        self.observer.step_ended(step)
        return self._turn()

    def _turn(self) -> CallModel | Finish:
        """The next model turn, unless the step budget is spent or a ceiling is reached first."""
        state, i = self.state, self._next
        if i >= self._last:  # the ceiling is the loop's structure, not a condition
            return self._finish(state.finish(Stop.STEP_BUDGET))
        if stopped := state.before_call():  # time, and anything left to spend
            return self._finish(stopped)
        self._next = i + 1
        self.observer.step_started(i)
        self._calling = True
        return CallModel(state.request(self._tools, self._settings, self._output), i)

    def _finish(self, run: Run) -> Finish:
        """Every stop: the observer ends the spans, a sub-agent's run is kept by its caller's."""
        self.run = run
        self.observer.run_ended(run)
        if (parent := self.state.parent) is not None:
            parent.absorb(run)
        return Finish(run)


def decided_plan(cp: Checkpoint, decisions: Mapping[str, Decision]) -> list[tuple[ToolCall, PendingCall | SubAgentPause]]:
    """Each decided call as it is dispatched: approved ones as ``Approved`` calls with the
    checkpoint's arguments, in the checkpoint's order, sub-agents' after this run's own."""
    plan: list[tuple[ToolCall, PendingCall | SubAgentPause]] = []
    for call in cp.pending:
        kind = Approved if decisions[call.id] is True else ToolCall
        plan.append((kind(call.id, call.name, call.arguments), call))
    for sub in cp.sub_agents:
        plan.append((Approved(sub.call_id, sub.name, sub.arguments), sub))
    return plan


def denied(call: ToolCall, decision: Decision) -> ToolResult:
    """The result of a call a person denied: the reason they gave, or ``DENIED_BY_A_PERSON``."""
    reason = decision if isinstance(decision, str) and decision else DENIED_BY_A_PERSON
    return ToolResult(call.id, call.name, f"Denied: {reason}", ToolOutcome.DENIED)


def sub_decisions(sub: SubAgentPause, decisions: Mapping[str, Decision]) -> dict[str, Decision]:
    """A paused sub-agent's share of the decisions: those of ids under its call's, unprefixed."""
    prefix = escape_id(sub.call_id) + NESTED_ID_SEPARATOR
    return {key[len(prefix):]: value for key, value in decisions.items() if key.startswith(prefix)}
