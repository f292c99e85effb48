"""Streaming drivers: ``Agent.stream`` and ``Agent.astream``, the loop with its events as they happen.

``_steps`` and ``_asteps`` are ``Agent._loop`` and ``Agent._aloop`` with the model called to
stream (``InstrumentedModel.stream_turn``) and an event yielded at each point a consumer cares about; every
decision is the same ``RunState`` method in the same order, and the scopes are the same, so
a streamed run and a run of the same script make equal ``Run``s and span trees.

The run's code runs in a context of its own (a copy of the consumer's at ``stream()``), entered
for each event: the run and step spans it makes current, and the run a sub-agent finds, are
never the consumer's between events, and however the consumer leaves, the spans are ended in
the context they were opened in. A stream the consumer stops reading - a ``with`` block left
early, a ``break`` then the stream closed or garbage-collected - is closed at the event it
stopped at: the model's stream is closed (an adapter's HTTP response with it), every open
span ends ``cancelled``, the run is counted, and ``stream.run`` is a ``Run`` with
``Stop.CANCELLED``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from typing import Any, AsyncIterator, Generator, Iterator, Protocol, Sequence

from .._core import _names as N
from .._core._budget import Budget, Stop
from .._core._events import RunEnd, StepEnd, StreamEvent, ToolCallEvent, ToolResultEvent, event_sink, text_delta
from .._core._records import Message, ToolCall, ToolResult, being_cancelled
from .._core._request import ModelSettings
from .._core._run import Run, RunState, current_run
from .._instrumentation._instrumented import InstrumentedModel, InstrumentedRegistry
from .._core._deadline import DeadlineExceeded
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
    _settings: ModelSettings
    _tools: InstrumentedRegistry
    _telemetry: AgentTelemetry

    def _start(self, task: str, history: Sequence[Message] | None, budget: Budget | None,
               conversation_id: str | None, *, asynchronous: bool) -> tuple[RunScope, RunState, RunState | None]: ...

    @staticmethod
    def _end(traced: RunScope, run: Run, parent: RunState | None) -> Run: ...


class _Run:
    """One streamed run as its driver and its stream object share it: the run's own context and,
    once the stream has ended, the ``Run``. The driver holds this, never the stream object, so
    that a stream dropped unclosed is collected (and closed) at once."""

    __slots__ = ("agent", "arguments", "context", "run", "started", "ended", "announced", "pending", "queue")

    def __init__(self, agent: _Agent, arguments: tuple[Any, ...]) -> None:
        self.agent = agent
        self.arguments = arguments
        self.context = contextvars.copy_context()
        self.run: Run | None = None
        self.started = False
        self.ended = False
        self.announced = -1
        """The index of the last step a ``step_end`` was yielded for."""
        self.pending: list[StreamEvent] = []
        """Under ``stream``: sub-agents' events, yielded once their call has returned."""
        self.queue: asyncio.Queue[StreamEvent | None] | None = None
        """Under ``astream``: sub-agents' events, yielded as they come while their calls run."""

    def open(self, asynchronous: bool) -> tuple[RunScope, RunState, RunState | None, Any]:
        """The run's scope and state, in the run's context (at the first event)."""
        self.started = True
        traced, state, parent = self.agent._start(*self.arguments, asynchronous=asynchronous)
        with guard("marking the driver"):
            if traced.recording:
                traced.span.set_attribute(N.DRIVER, N.DRIVER_ASTREAM if asynchronous else N.DRIVER_STREAM)
        if asynchronous:
            self.queue = asyncio.Queue()
        event_sink.set((state, self.pending.append if not asynchronous else self.queue.put_nowait))  # type: ignore[union-attr]
        return traced, state, parent, current_run.set(state)

    def forwards(self, calls: Sequence[ToolCall]) -> bool:
        """Whether a turn calls a sub-agent, whose events this stream passes on while it runs."""
        registry = self.agent._tools.wrapped
        return any(getattr(registry.get(call.name), "forwards_events", False) for call in calls)

    def interrupted(self, traced: RunScope, state: RunState, exc: BaseException) -> None:
        """The run ended without a ``Run`` of its own: closed by its consumer (``GeneratorExit``),
        cancelled, interrupted, or a bug. Every open span ends; a cancelled run is kept."""
        self.ended = True
        kind = N.ERROR_CANCELLED if isinstance(exc, GeneratorExit) else failure_kind(exc)
        traced.fail(kind)
        if kind == N.ERROR_CANCELLED:
            self.run = state.finish(Stop.CANCELLED)

    def ending(self, traced: RunScope, run: Run, parent: RunState | None) -> Iterator[StreamEvent]:
        """The run's spans end, then its last step's ``step_end`` (unless announced) and ``run_end``."""
        self.agent._end(traced, run, parent)
        self.ended = True
        self.run = run
        name = self.agent.name
        if run.steps and run.steps[-1].index > self.announced:
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
                 conversation_id: str | None) -> None:
        self._h = _Run(agent, (task, history, budget, conversation_id))
        self._events = _drive(self._h)
        self._next = functools.partial(self._h.context.run, self._events.__next__)

    def __enter__(self) -> AgentStream:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __iter__(self) -> Iterator[StreamEvent]:
        # The stream itself, not a lighter iterator over ``_next``: ``for e in agent.stream(task)``
        # holds nothing else, and a stream nobody holds is closed (``__del__``) before it starts.
        return self

    def __next__(self) -> StreamEvent:
        return self._next()

    def close(self) -> None:
        """End the stream here: a run still going ends ``cancelled``, every span it opened ended."""
        self._h.context.run(self._events.close)

    def __del__(self) -> None:
        if getattr(self, "_events", None) is not None and not self._h.ended:
            self.close()


def _drive(h: _Run) -> Generator[StreamEvent, None, None]:
    traced, state, parent, token = h.open(asynchronous=False)
    try:
        run = yield from _steps(h, state, traced)
    except BaseException as exc:  # closed by the consumer, interrupted, or a bug
        h.interrupted(traced, state, exc)
        raise
    finally:
        current_run.reset(token)
    yield from h.ending(traced, run, parent)


def _steps(h: _Run, state: RunState, traced: RunScope) -> Generator[StreamEvent, None, Run]:
    agent = h.agent
    name, model = agent.name, agent._model
    tools = agent._tools.wrapped.schemas() or None  # no tools: None, not []
    for i in state.step_indices():
        if stopped := state.before_call():
            return stopped
        traced.start_step(i)
        # 1. call the model with the whole conversation, its text passed on as it comes
        turn = Turn()
        texts = model.stream_turn(state.request(tools, agent._settings), turn, deadline=state.deadline)
        try:
            for text in texts:
                yield text_delta(name, text)
        except DeadlineExceeded:
            return state.model_failed(None, turn.received())
        except (Exception, asyncio.CancelledError) as exc:  # no task to cancel here: the model's own, as in run
            return state.model_failed(exc, turn.received())
        finally:
            texts.close()
        completion = turn.result
        step = state.record(i, completion)
        for call in completion.tool_calls:
            yield ToolCallEvent(agent=name, call=call)
        # 2. check: a turn without tool calls is the answer
        if not completion.wants_tools:
            return state.finish(Stop.ANSWERED)
        if stopped := state.check_turn(completion.tool_calls):
            return stopped
        state.hold(step, agent.registry.waiting(completion.tool_calls))  # calls a person must decide on
        # 3. dispatch each call through the registry, 4. append its result
        for call in (c for n, c in enumerate(completion.tool_calls) if n not in step.waiting):
            result = agent._tools.dispatch(call)
            stopped = state.append(step, result)
            if h.pending:  # a sub-agent's events, from its run inside this call
                yield from h.pending
                h.pending.clear()
            yield ToolResultEvent(agent=name, result=result)
            if stopped:
                return stopped
        if (stopped := state.over_budget()) or (stopped := state.pause(step)):
            return stopped
        traced.end_step(step)
        h.announced = i
        yield StepEnd(agent=name, step=step)
        # 5. repeat, until an exit above or the end of range(max_steps)
    # 6. stop: the ceiling is the loop's structure, not a condition
    return state.finish(Stop.STEP_BUDGET)


class AsyncAgentStream(_Stream):
    """What ``Agent.astream`` returns: an async context manager and an async iterator of
    ``StreamEvent``s. The same events and run as ``AgentStream``, driven as ``arun`` drives a
    run (deadlines cut calls off; a turn's calls run concurrently). Cancelling the task that
    reads it is cancelling ``arun``: every span ends ``cancelled`` and ``CancelledError``
    propagates."""

    def __init__(self, agent: _Agent, task: str, history: Sequence[Message] | None, budget: Budget | None,
                 conversation_id: str | None) -> None:
        self._h = _Run(agent, (task, history, budget, conversation_id))
        self._events = _adrive(self._h)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __aenter__(self) -> AsyncAgentStream:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self

    def __anext__(self) -> Any:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return _acalls.InContext(self._h.context, self._events.__anext__())

    async def aclose(self) -> None:
        """End the stream here: a run still going ends ``cancelled``, every span it opened ended."""
        await _acalls.InContext(self._h.context, self._events.aclose())

    def __del__(self) -> None:
        # Dropped unclosed: closed on its loop, in its context (the spans end where they began).
        h, loop = self._h, getattr(self, "_loop", None)
        if h.ended or not h.started or loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(loop.create_task, _aclose(h.context, self._events))
        except RuntimeError:  # pragma: no cover - the loop closed meanwhile
            pass


async def _aclose(context: contextvars.Context, events: Any) -> None:
    await _acalls.InContext(context, events.aclose())


async def _adrive(h: _Run) -> AsyncIterator[StreamEvent]:
    """``_steps`` as ``Agent._aloop`` runs it, in one async generator (each layer costs per chunk)."""
    traced, state, parent, token = h.open(asynchronous=True)
    agent = h.agent
    name, model = agent.name, agent._model
    tools = agent._tools.wrapped.schemas() or None
    texts: Any = None
    forwarding: Any = None
    try:
        for i in state.step_indices():
            if run := state.before_call():
                break
            traced.start_step(i)
            # 1. call the model with the whole conversation, its text passed on as it comes
            turn = Turn()
            texts = model.astream_turn(state.request(tools, agent._settings), turn, deadline=state.deadline)
            try:
                async for text in texts:
                    yield text_delta(name, text)
            except DeadlineExceeded:
                run = state.model_failed(None, turn.received())
                break
            except asyncio.CancelledError as exc:
                if being_cancelled():  # the run itself is cancelled: propagate, as Python code expects
                    raise
                run = state.model_failed(exc, turn.received())  # the model's own CancelledError
                break
            except Exception as exc:
                run = state.model_failed(exc, turn.received())
                break
            completion = turn.result
            step = state.record(i, completion)
            for call in completion.tool_calls:
                yield ToolCallEvent(agent=name, call=call)
            # 2. check: a turn without tool calls is the answer
            if not completion.wants_tools:
                run = state.finish(Stop.ANSWERED)
                break
            if run := state.check_turn(completion.tool_calls):
                break
            state.hold(step, agent.registry.waiting(completion.tool_calls))  # calls a person must decide on
            calls = [c for n, c in enumerate(completion.tool_calls) if n not in step.waiting]
            # 3. dispatch the turn's calls (concurrently), 4. append their results in call order
            dispatched = _acalls.dispatch_turn(agent._tools, state, calls,
                                               parallel=agent.parallel_tool_calls,
                                               concurrency=agent.max_tool_concurrency)
            if h.forwards(calls):  # sub-agents: their events as they come
                results: list[ToolResult] = []
                forwarding = _forwarding(dispatched, h.queue, results)  # type: ignore[arg-type]
                async for event in forwarding:
                    yield event
            else:
                results = await dispatched
            run = state.append(step, *results)
            for result in results:
                yield ToolResultEvent(agent=name, result=result)
            if run or (run := state.over_budget()) or (run := state.pause(step)):
                break
            traced.end_step(step)
            h.announced = i
            yield StepEnd(agent=name, step=step)
            # 5. repeat, until an exit above or the end of range(max_steps)
        else:
            # 6. stop: the ceiling is the loop's structure, not a condition
            run = state.finish(Stop.STEP_BUDGET)
    except BaseException as exc:  # closed by the consumer, cancelled, interrupted, or a bug
        # Closed from another context than the run's (asyncio's shutdown of async generators)?
        with contextlib.nullcontext() if current_run.get() is state else ending_elsewhere():
            try:
                for inner in (texts, forwarding):  # the model's stream, or sub-agents' calls, if the consumer left then
                    if inner is not None:
                        await inner.aclose()
            finally:  # a close that fails too must not keep the run's spans from ending
                h.interrupted(traced, state, exc)
        raise
    finally:
        if current_run.get() is state:  # else asyncio's shutdown of async generators closed it, from
            current_run.reset(token)   # another context: the run's own is gone with it
    for event in h.ending(traced, run, parent):
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
