"""Streaming drivers: ``Agent.stream`` and ``Agent.astream``, pumps of the run machine that
tell of what happens as it happens.

``_drive`` and ``_adrive`` perform the ``RunMachine``'s requests (``_core/_machine.py``: the
order of the run and every decision in it) as ``run`` and ``arun`` perform them, with the
model called to stream (``InstrumentedModel.stream_turn``), and yield an event at each point a consumer cares
about: the model's text as it comes, a turn's calls before the run decides on them, each
result, each step's end and the run's. The machine's observer (the run span) opens and ends
the run and step spans, as for every driver, so a streamed run and a run of the same script
make equal ``Run``s and span trees.

The rest is the stream's plumbing, apart from the run's order (``_Run``): the run's code runs
in a context of its own (a copy of the consumer's at ``stream()``), entered for each event,
so the run and step spans it makes current, and the run a sub-agent finds, are never the
consumer's between events, and however the consumer leaves, the spans end in the context
they were opened in. A stream the consumer stops reading - a ``with`` block left early, a
``break`` then the stream closed or garbage-collected - is closed at the event it stopped at:
the model's stream is closed (an adapter's HTTP response with it), every open span ends
``cancelled``, the run is counted, and ``stream.run`` is a ``Run`` with ``Stop.CANCELLED``.
Sub-agents' events come through the run's ``event_sink``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
from typing import Any, AsyncIterator, Generator, Iterator, Mapping, Protocol, Sequence, get_args

from .._core import _names as N
from .._core._budget import Budget
from .._core._events import (RunEnd, StepEnd, StreamEvent, ToolCallEvent, ToolResultEvent, event_sink, partial_outputs,
                             text_delta)
from .._core._machine import CallModel, Dispatch, RunMachine
from .._core._records import Message, ToolCall, ToolResult
from .._core._run import Run, RunState, current_run
from .._instrumentation._instrumented import InstrumentedModel, InstrumentedRegistry
from .._instrumentation._observer import RunScope
from .._instrumentation._spans import failure_kind
from .._instrumentation._streamed import Turn
from .._instrumentation._telemetry import AgentTelemetry, ending_elsewhere, guard
from . import _acalls

__all__ = ["AgentStream", "AsyncAgentStream", "StreamNotEnded"]


class StreamNotEnded(RuntimeError):
    """``stream.run`` was read before the stream ended."""


class _Agent(Protocol):
    """What a stream needs of its ``Agent`` (the drivers' shared parts)."""

    name: str
    parallel_tool_calls: bool
    max_tool_concurrency: int | None
    _model: InstrumentedModel
    _tools: InstrumentedRegistry
    _telemetry: AgentTelemetry

    def _start(self, task: str, history: Sequence[Message] | None, budget: Budget | None,
               conversation_id: str | None, attributes: Mapping[str, Any], *,
               asynchronous: bool) -> tuple[RunScope, RunState, RunState | None]: ...

    def _driven(self, state: RunState, traced: RunScope) -> RunMachine: ...


class _Run:
    """One streamed run as its pump and its stream object share it: the run's own context, the
    sub-agents' events on their way, and, once the stream has ended, the ``Run``. The pump
    holds this, never the stream object, so that a stream dropped unclosed is collected (and
    closed) at once. ``with`` it, the pump has the run's machine (see ``__enter__``)."""

    __slots__ = ("agent", "arguments", "asynchronous", "context", "machine", "run", "started", "ended",
                 "pending", "queue", "loop")

    def __init__(self, agent: _Agent, arguments: tuple[Any, ...], asynchronous: bool) -> None:
        self.agent = agent
        self.arguments = arguments
        self.asynchronous = asynchronous
        self.context = contextvars.copy_context()
        self.machine: RunMachine | None = None
        self.run: Run | None = None
        self.started = False
        self.ended = False
        self.pending: list[StreamEvent] = []
        """Under ``stream``: sub-agents' events, yielded once their call has returned."""
        self.queue: asyncio.Queue[StreamEvent | None] | None = None
        """Under ``astream``: sub-agents' events, yielded as they come while their calls run."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """Under ``astream``: the loop it runs on (where a stream dropped unclosed is closed)."""

    def __enter__(self) -> RunMachine:
        """The run's machine, at the first event, in the run's context: its span started (and
        named for this driver), its state current, and the sink its sub-agents' events go to."""
        self.started = True
        agent, asynchronous = self.agent, self.asynchronous
        traced, state, _ = agent._start(*self.arguments, asynchronous=asynchronous)
        with guard("marking the driver"):
            if traced.recording:
                traced.span.set_attribute(N.DRIVER, N.DRIVER_ASTREAM if asynchronous else N.DRIVER_STREAM)
        if asynchronous:
            self.queue, self.loop = asyncio.Queue(), asyncio.get_running_loop()
        event_sink.set((state, self.queue.put_nowait if self.queue is not None else self.pending.append))
        self.machine = agent._driven(state, traced)
        return self.machine.__enter__()

    def __exit__(self, kind: Any, exc: BaseException | None, traceback: Any) -> None:
        """The run's context left: after its ``Finish``, or on an exception - closed by its
        consumer (``GeneratorExit``), cancelled, interrupted, or a bug - which the machine tells
        its observer (every open span ends, saying what the run used); a cancelled run is kept.
        Closed from another context than the run's (asyncio's shutdown of async generators),
        the spans end without restoring a span context, which went with the run's."""
        machine = self.machine
        assert machine is not None
        if exc is None:
            machine.__exit__(None, None, None)
            return
        self.ended = True
        with contextlib.nullcontext() if current_run.get() is machine.state else ending_elsewhere():
            machine.__exit__(kind, exc, traceback)
        if machine.run is None and failure_kind(exc) == N.ERROR_CANCELLED:
            self.run = machine.used()

    def forwards(self, calls: Sequence[ToolCall]) -> bool:
        """Whether a turn calls a sub-agent, whose events this stream passes on while it runs."""
        registry = self.agent._tools.wrapped
        return any(getattr(registry.get(call.name), "forwards_events", False) for call in calls)

    def ending(self, run: Run, told: int) -> Iterator[StreamEvent]:
        """The run finished, its spans ended: its last step's ``step_end`` (unless step ``told``
        was its last), then ``run_end``."""
        self.ended = True
        self.run = run
        name = self.agent.name
        if run.steps and run.steps[-1].index > told:
            yield StepEnd(agent=name, step=run.steps[-1])
        yield RunEnd(agent=name, run=run)


class _Stream:
    """What both streams share: ``run``."""

    _h: _Run

    @property
    def run(self) -> Run:
        """The ``Run``, once the stream has ended: after ``run_end``, or a ``Stop.CANCELLED`` run
        once a stream the consumer stopped reading has been closed."""
        h = self._h
        if h.run is not None:
            return h.run
        if not h.started:
            raise StreamNotEnded("the stream has not been read: no run has started, so there is no Run yet")
        if h.ended:
            raise StreamNotEnded("the stream ended with an exception, not a Run: see the exception it raised")
        raise StreamNotEnded("the stream has not ended: stream.run is there once run_end has been read "
                             "(or the stream closed)")


class AgentStream(_Stream):
    """What ``Agent.stream`` returns: a context manager and an iterator of ``StreamEvent``s.

    The run starts with the first event read and runs, between events, in the consumer's
    thread. Leave the ``with`` block (or close the stream) before ``run_end`` and the run ends
    ``cancelled``."""

    def __init__(self, agent: _Agent, task: str, history: Sequence[Message] | None, budget: Budget | None,
                 conversation_id: str | None, attributes: Mapping[str, Any]) -> None:
        self._h = _Run(agent, (task, history, budget, conversation_id, attributes), asynchronous=False)
        self._events = _drive(self._h)
        self._next = functools.partial(self._h.context.run, self._events.__next__)

    def __enter__(self) -> AgentStream:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __iter__(self) -> Iterator[StreamEvent]:
        # Each event is ``context.run(events.send, None)``, called from C: no Python frame a
        # chunk. The iterator holds the stream (``step.stream``): ``for e in agent.stream(task)``
        # holds nothing else, and a stream nobody holds is closed (``__del__``) before it starts.
        step = functools.partial(self._h.context.run, self._events.send)
        step.stream = self  # type: ignore[attr-defined]
        return map(step, itertools.repeat(None))

    def __next__(self) -> StreamEvent:
        return self._next()

    def close(self) -> None:
        """End the stream here: a run still going ends ``cancelled``, every span it opened ended."""
        self._h.context.run(self._events.close)

    def __del__(self) -> None:
        if getattr(self, "_events", None) is not None and not self._h.ended:
            self.close()


def _drive(h: _Run) -> Generator[StreamEvent, None, None]:
    """``stream``'s pump: the machine's requests performed in the consumer's thread, between events."""
    agent = h.agent
    name, model, tools, pending, spec = agent.name, agent._model, agent._tools, h.pending, agent._output
    told = -1  # the last step whose step_end was yielded
    with h as machine:
        deadline = machine.deadline
        action = machine.start()
        while True:
            if action.__class__ is CallModel:  # the model's text, passed on as it comes
                request, turn, partials = action.request, Turn(), partial_outputs(name, spec)
                texts = model.stream_turn(request, turn, deadline=deadline)
                try:
                    for text in texts:
                        yield text_delta(name, text)
                        if partials is not None and (partial := partials.feed(text)) is not None:
                            yield partial
                except (Exception, asyncio.CancelledError) as exc:  # what it means, the machine decides
                    action = machine.model_failed(exc, turn.received())
                    continue
                finally:
                    texts.close()
                step = machine.record(turn.result)
                for call in step.completion.tool_calls:  # before the run decides on them
                    yield ToolCallEvent(agent=name, call=call)
                action = machine.decide(step)
                if action.__class__ is CallModel:  # a typed answer that did not validate: asked again
                    told = step.index
                    yield StepEnd(agent=name, step=step)
            elif action.__class__ is Dispatch:  # one call after another, as run dispatches them
                results: list[ToolResult] = []
                for call in machine.one_by_one(action.calls, results):
                    results.append(result := tools.dispatch(call))
                    if pending:  # a sub-agent's events, from its run inside this call
                        yield from pending
                        pending.clear()
                    yield ToolResultEvent(agent=name, result=result)
                if (then := machine.step_done(results)) is None:  # the step ended, the run goes on
                    told = action.step.index
                    yield StepEnd(agent=name, step=action.step)
                    then = machine.next_turn()
                action = then
            else:  # Finish: the run's spans have ended
                break
    yield from h.ending(action.run, told)


class AsyncAgentStream(_Stream):
    """What ``Agent.astream`` returns: an async context manager and an async iterator of
    ``StreamEvent``s. The same events and run as ``AgentStream``, driven as ``arun`` drives a
    run (deadlines cut calls off; a turn's calls run concurrently). Cancelling the task that
    reads it is cancelling ``arun``: every span ends ``cancelled`` and ``CancelledError``
    propagates."""

    def __init__(self, agent: _Agent, task: str, history: Sequence[Message] | None, budget: Budget | None,
                 conversation_id: str | None, attributes: Mapping[str, Any]) -> None:
        self._h = _Run(agent, (task, history, budget, conversation_id, attributes), asynchronous=True)
        self._events = _adrive(self._h)
        stepped = _acalls.stepped(self._events)
        self._run, self._send, self._throw = self._h.context.run, stepped.send, stepped.throw
        self._waiting = False
        """Whether a read waits for what the run awaits (a second reader meanwhile is refused)."""

    async def __aenter__(self) -> AsyncAgentStream:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self

    async def __anext__(self) -> StreamEvent:
        # The pump stepped in the run's context (``_acalls.stepped``): an event comes back as a value;
        # anything else is what the run awaits, which this task waits for in its stead.
        if self._waiting:  # another task's read: as an async generator read twice at once says
            raise RuntimeError("anext(): asynchronous generator is already running")
        run, send = self._run, self._send
        try:
            signal = run(send, None)
            while signal.__class__ not in _EVENTS:
                self._waiting = True
                try:
                    value = await _acalls.Passed(signal)
                except BaseException as exc:  # a cancellation of this task, most often: the run's
                    self._waiting = False
                    signal = run(self._throw, exc)
                else:
                    self._waiting = False
                    signal = run(send, value)
        except StopIteration:
            raise StopAsyncIteration from None
        return signal  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        """End the stream here: a run still going ends ``cancelled``, every span it opened ended."""
        await _acalls.InContext(self._h.context, self._events.aclose())

    def __del__(self) -> None:
        # Dropped unclosed: closed on its loop, in its context (the spans end where they began).
        h = getattr(self, "_h", None)
        loop = None if h is None else h.loop
        if h is None or h.ended or loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(loop.create_task, _aclose(h.context, self._events))
        except RuntimeError:  # pragma: no cover - the loop closed meanwhile
            pass


async def _aclose(context: contextvars.Context, events: Any) -> None:
    await _acalls.InContext(context, events.aclose())


_EVENTS = frozenset(get_args(StreamEvent))


async def _adrive(h: _Run) -> AsyncIterator[StreamEvent]:
    """``astream``'s pump: the machine's requests awaited as ``arun`` awaits them (``_acalls``),
    sub-agents' events passed on while their calls run. One async generator, the text yielded
    straight from the model's: each layer would cost per chunk."""
    agent = h.agent
    name, model, tools, spec = agent.name, agent._model, agent._tools, agent._output
    told, reading = -1, None  # the last step told of; what the pump reads events from
    with h as machine:
        try:
            action = machine.start()
            while True:
                if action.__class__ is CallModel:  # the model's text, passed on as it comes
                    request, turn, partials = action.request, Turn(), partial_outputs(name, spec)
                    reading = texts = model.astream_turn(request, turn, deadline=machine.deadline)
                    try:
                        async for text in texts:
                            yield text_delta(name, text)
                            if partials is not None and (partial := partials.feed(text)) is not None:
                                yield partial
                    except (Exception, asyncio.CancelledError) as exc:  # what it means, the machine decides
                        action = machine.model_failed(exc, turn.received())
                        continue
                    step = machine.record(turn.result)
                    for call in step.completion.tool_calls:  # before the run decides on them
                        yield ToolCallEvent(agent=name, call=call)
                    action = machine.decide(step)
                    if action.__class__ is CallModel:  # a typed answer that did not validate: asked again
                        told = step.index
                        yield StepEnd(agent=name, step=step)
                elif action.__class__ is Dispatch:  # concurrently unless the agent says otherwise
                    dispatched = _acalls.dispatch_turn(tools, machine, action.calls, parallel=agent.parallel_tool_calls,
                                                       concurrency=agent.max_tool_concurrency)
                    if h.forwards(action.calls):  # sub-agents: their events as they come
                        results: list[ToolResult] = []
                        reading = _forwarding(dispatched, h.queue, results)  # type: ignore[arg-type]
                        async for event in reading:
                            yield event
                    else:
                        results = await dispatched
                    for result in results:
                        yield ToolResultEvent(agent=name, result=result)
                    if (then := machine.step_done(results)) is None:  # the step ended, the run goes on
                        told = action.step.index
                        yield StepEnd(agent=name, step=action.step)
                        then = machine.next_turn()
                    action = then
                else:  # Finish: the run's spans have ended
                    break
        except BaseException:  # the consumer left, the task was cancelled: what was being read closes first
            if reading is not None:
                await reading.aclose()
            raise
    for event in h.ending(action.run, told):
        yield event


async def _forwarding(dispatched: Any, queue: asyncio.Queue[StreamEvent | None],
                      results: list[ToolResult]) -> AsyncIterator[StreamEvent]:
    """The sub-agents' events while a turn's calls run in a task of their own; ``results`` then
    holds the turn's results. However this ends early (the consumer left, the task reading the
    stream was cancelled), the calls are cancelled and have ended - their spans with them -
    before it propagates."""
    calls = asyncio.ensure_future(dispatched)
    calls.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while (event := await queue.get()) is not None:
            yield event
    except BaseException:
        calls.cancel()
        try:
            await calls
        except BaseException:  # its cancellation (or a registry's bug): what propagates is ours
            pass
        raise
    results.extend(calls.result())
