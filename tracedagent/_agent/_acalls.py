"""How ``arun`` awaits its calls: the run's deadline, cancellation, and a turn's tasks.

What to do is still the run machine's to decide (whether a call may start, whether a result ends
the turn, what a call cut off returns); this module is only how an asyncio driver carries it
out: each call awaited until the run's deadline, a cancellation of the run never lost on the
way (Python 3.11's ``wait_for`` and a tool that swallows ``CancelledError`` can both drop one),
and a turn's calls each with a copy of the context (the step span
current), concurrently or one after another. Any async driver (``arun``, a streaming one)
dispatches a turn through these functions (a durable workflow through ``turn``, its calls activities); it awaits the model through the instrumented
model's ``acomplete``, which takes the run's deadline. Code run in a context of its own, step by
step, whichever task awaits it: ``InContext`` (one awaitable), ``stepped`` (an async generator's
values, as ``astream`` reads its pump).
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any, AsyncIterator, Awaitable, Callable, Generator, Sequence

from .._core._deadline import Deadline, DeadlineExceeded, awaited, raise_if_cancelled_since
from .._core._records import ToolCall, ToolResult, cancel_requests
from .._core._machine import DecidedCall, RunMachine
from .._core._run import RunState
from .._instrumentation._instrumented import InstrumentedRegistry

__all__ = ["dispatch", "dispatch_turn", "turn", "decided_turn", "InContext", "stepped", "Passed", "in_event_loop"]

_COUNTS_CANCELLATIONS = hasattr(asyncio.Task, "cancelling")
"""Python 3.11+: a task counts the cancellations asked of it (``cancel_requests``), so one
asked for while the task was not awaiting anything is seen without a trip round the event
loop; on 3.10 only ``await asyncio.sleep(0)`` delivers it."""


async def dispatch(tools: InstrumentedRegistry, call: ToolCall, deadline: Deadline | None,
                   check: Callable[[ToolResult], ToolResult] | None = None) -> ToolResult:
    """One call inside its ``execute_tool`` span; if the run's ``deadline`` cuts it off, its
    result says so (``RunState.cut_off``). ``check`` has a last say on the result before the
    span ends with it (a Temporal activity's: a result too large to send is an error)."""
    with tools.span(call) as scope:
        try:
            result = await awaited(tools.wrapped.deadline_for(call, deadline), tools.wrapped.adispatch(call))
        except DeadlineExceeded:
            result = RunState.cut_off(call)
        if check is not None:
            result = check(result)
        scope.end(result)
    return result


class InContext:
    """An awaitable run step by step in ``context``: each resumption of it enters ``context``,
    whichever task awaits it, and a cancellation of that task is thrown in there too. What
    ``asyncio.create_task`` gives a call (a context of its own, where what it sets stays),
    without a task and the trips round the event loop a task costs."""

    __slots__ = ("_run", "_it")

    def __init__(self, context: contextvars.Context, awaitable: Any) -> None:
        self._run = context.run
        self._it = awaitable.__await__()

    def __await__(self) -> Generator[Any, Any, Any]:
        run, it = self._run, self._it
        try:
            signal = run(it.send, None)
        except StopIteration as stop:
            return stop.value
        while True:
            try:
                value = yield signal
            except BaseException as exc:  # a cancellation of the awaiting task, most often
                try:
                    signal = run(it.throw, exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    signal = run(it.send, value)
                except StopIteration as stop:
                    return stop.value


def stepped(events: AsyncIterator[Any]) -> Generator[Any, Any, None]:
    """An async generator as a plain one: its values yielded, what it awaits (a future, or
    ``None`` for a trip round the loop) passed through (``Passed``). Stepped in a context
    with ``context.run(stepped.send, value)`` - ``astream`` reads its pump so - a value comes
    back as the call's result, where ``InContext`` over each ``__anext__`` ends with a
    ``StopIteration`` to catch: a Python ``except`` a value, which cost more than the rest of
    the streaming driver."""
    read = events.__anext__
    while True:
        try:
            event = yield from read()  # type: ignore[misc]
        except StopAsyncIteration:
            return
        yield event


class Passed:
    """What a ``stepped`` generator awaits, awaited by the task reading it: yielded to the
    task, which sends back what it has once that is done."""

    __slots__ = ("signal",)

    def __init__(self, signal: Any) -> None:
        self.signal = signal

    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield self.signal)


async def dispatch_turn(tools: InstrumentedRegistry, machine: RunMachine, calls: Sequence[ToolCall], *,
                        parallel: bool, concurrency: int | None) -> list[ToolResult]:
    """A turn's calls, their results in the model's call order (``turn``, each call through
    ``dispatch``). One after another, each call runs with a copy of this context (the step span
    current), so that what a tool sets in its context stays in its call, as a task of its own
    gives a call in parallel. A cancellation asked for while the calls ran takes effect as the
    turn ends, even if a tool swallowed it."""
    requests = cancel_requests()
    deadline = machine.deadline
    if parallel and len(calls) > 1:
        results = await turn(lambda call: dispatch(tools, call, deadline), machine, calls, parallel=True,
                             concurrency=concurrency)
    else:
        results = await turn(lambda call: InContext(contextvars.copy_context(), dispatch(tools, call, deadline)),
                             machine, calls, parallel=False, concurrency=None)
    if not _COUNTS_CANCELLATIONS:  # Python 3.10: deliver one asked for while nothing was awaited
        await asyncio.sleep(0)
    raise_if_cancelled_since(requests)  # 3.11+: every one asked for is counted, delivered or not
    return results


async def turn(one: Callable[[ToolCall], Awaitable[ToolResult]], machine: RunMachine, calls: Sequence[ToolCall], *,
               parallel: bool, concurrency: int | None) -> list[ToolResult]:
    """How a turn's calls are dispatched, whoever runs each call (``one``: ``arun`` awaits the
    registry, a durable workflow an activity): in parallel (more than one call), each in a task
    of its own, their spans siblings that overlap, at most ``concurrency`` at once; else one
    after another, a result that ends the turn (``ends_turn``) keeping the rest from being
    dispatched. A call is started only if ``may_start`` says so: the run's ``machine`` decides
    both. Results in the model's call order, those not dispatched left out."""
    if parallel and len(calls) > 1:
        return await _concurrently(one, machine, calls, concurrency)
    results: list[ToolResult] = []
    for call in machine.one_by_one(calls, results):
        results.append(await one(call))
    return results


async def decided_turn(perform: Callable[[DecidedCall], Awaitable[ToolResult]], machine: RunMachine,
                       calls: Sequence[DecidedCall]) -> list[ToolResult]:
    """A pause's decided calls (the machine's ``Decided``), whoever performs each (``aresume``
    dispatches an approved call and records a denial; a durable workflow runs an activity):
    one after another, never in parallel, until a result ends the turn (``ends_turn``)."""
    results: list[ToolResult] = []
    for decided in calls:
        results.append(await perform(decided))
        if machine.ends_turn(results[-1]):
            break
    return results


async def _concurrently(one: Callable[[ToolCall], Awaitable[ToolResult]], machine: RunMachine,
                        calls: Sequence[ToolCall], concurrency: int | None) -> list[ToolResult]:
    limit = asyncio.Semaphore(concurrency) if concurrency else None

    async def started(call: ToolCall) -> ToolResult | None:
        if limit is None:
            return await one(call) if machine.may_start(call) else None
        async with limit:
            return await one(call) if machine.may_start(call) else None

    # gather runs each call in a task of its own, and when this task is cancelled it cancels
    # them and waits for them to end.
    outcomes = await asyncio.gather(*(started(call) for call in calls), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):  # a custom registry's bug: every call has ended
            raise outcome
    # The calls start, and take the semaphore, in call order: those the deadline kept from
    # starting (None) are the last ones, which is what "not dispatched" means.
    return [outcome for outcome in outcomes if outcome is not None]  # type: ignore[misc]


def in_event_loop() -> bool:
    """Whether this thread runs an event loop: the sync drivers (``run``, ``resume``) then refuse
    to run async tools, which need a private loop of their own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
