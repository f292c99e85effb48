"""The model and the registry as the loop sees them: each call inside its span scope.

The loop calls ``complete`` / ``acomplete`` and ``dispatch`` / ``adispatch`` as it would on
the bare objects; the wrappers open a ``ChatScope`` or ``ToolScope`` around the call and end
it with the call's outcome, so that the loop's code says nothing about telemetry beyond the
run and step spans. The async forms also carry the run's deadline: a call still running when
it passes is cancelled, and its span ends marked ``timeout``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Awaitable, Sequence, TypeVar

from .._core._records import (Completion, Message, Model, ToolCall, ToolOutcome, ToolResult, cancel_requests,
                       check_completion, in_thread)
from ._spans import ChatScope, DeadlineExceeded, ToolScope, failure_kind
from ._telemetry import AgentTelemetry
from .._core._tools import Cut, Registry, until

__all__ = ["InstrumentedModel", "InstrumentedRegistry"]

T = TypeVar("T")


def _passed(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _raise_if_cancelled_since(requests: int) -> None:
    """A cancellation of this task asked for while it awaited work that swallowed it (a tool
    that catches ``CancelledError``, or ``wait_for`` on Python 3.11 returning a result that came
    at the same moment) is still this run's: raise it now. ``requests``: ``cancel_requests()``
    before the work."""
    if cancel_requests() > requests:
        raise asyncio.CancelledError


async def _before(deadline: float | None, work: Awaitable[T]) -> T:
    """``await work``, cancelled when ``time.monotonic()`` reaches ``deadline``
    (``DeadlineExceeded``). A cancellation of this task during the work is raised even if the
    work swallowed it."""
    requests = cancel_requests()
    if deadline is None:
        result = await work
    else:
        try:
            result = await until(deadline, work)
        except Cut:
            raise DeadlineExceeded from None
    _raise_if_cancelled_since(requests)
    return result


def _takes_timeout(method: Any) -> bool:
    try:
        return "timeout" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read (a builtin, a C extension)
        return False


class InstrumentedModel:
    """A ``Model`` whose every call is a ``chat`` span, with the GenAI client metrics."""

    def __init__(self, model: Model, telemetry: AgentTelemetry) -> None:
        self.wrapped = model
        self._t = telemetry
        self._acomplete = getattr(model, "acomplete", None)
        self._sync_takes_timeout = _takes_timeout(model.complete)
        self._async_takes_timeout = self._acomplete is not None and _takes_timeout(self._acomplete)

    def complete(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                 max_output_tokens: int | None = None, temperature: float | None = None, *,
                 timeout: float | None = None) -> Completion:
        """``timeout`` is the time the run has left, passed on if the model takes one."""
        scope = ChatScope(self._t, messages, max_output_tokens, temperature)
        try:
            if timeout is not None and self._sync_takes_timeout:
                answer = self.wrapped.complete(messages, tools=tools, max_output_tokens=max_output_tokens,
                                               temperature=temperature, timeout=timeout)
            else:
                answer = self.wrapped.complete(messages, tools=tools, max_output_tokens=max_output_tokens,
                                               temperature=temperature)
            completion = check_completion(answer)
        except BaseException as exc:  # the model failed, or an interrupt arrived during the call
            scope.fail(failure_kind(exc))
            raise
        scope.end(completion)
        return completion

    async def acomplete(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                        max_output_tokens: int | None = None, temperature: float | None = None, *,
                        deadline: float | None = None) -> Completion:
        """The model's ``acomplete``, or its ``complete`` in a worker thread (the thread carries
        the context, so the chat span stays the parent of anything the model traces itself)."""
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        scope = ChatScope(self._t, messages, max_output_tokens, temperature)
        try:
            if self._acomplete is not None:
                options = self._options(tools, max_output_tokens, temperature, timeout, self._async_takes_timeout)
                work = self._acomplete(messages, **options)
            else:
                options = self._options(tools, max_output_tokens, temperature, timeout, self._sync_takes_timeout)
                work = in_thread(self.wrapped.complete, messages, **options)
            completion = check_completion(await _before(deadline, work))
        except BaseException as exc:
            scope.fail(failure_kind(exc))
            raise
        scope.end(completion)
        return completion

    @staticmethod
    def _options(tools: Any, max_output_tokens: int | None, temperature: float | None,
                 timeout: float | None, takes_timeout: bool) -> dict[str, Any]:
        options = {"tools": tools, "max_output_tokens": max_output_tokens, "temperature": temperature}
        if timeout is not None and takes_timeout:
            options["timeout"] = timeout
        return options


class InstrumentedRegistry:
    """A ``Registry`` whose every dispatch is an ``execute_tool`` span, with the tool-call counter."""

    def __init__(self, registry: Registry, telemetry: AgentTelemetry) -> None:
        self.wrapped = registry
        self._t = telemetry

    def dispatch(self, call: ToolCall) -> ToolResult:
        scope = ToolScope(self._t, call, known=call.name in self.wrapped)
        try:
            result = self.wrapped.dispatch(call)
        except BaseException as exc:  # a custom registry that raises, or an interrupt
            scope.fail(failure_kind(exc))
            raise
        scope.end(result)
        return result

    async def adispatch(self, call: ToolCall, deadline: float | None = None) -> ToolResult:
        """One call; if the run's deadline cuts it off, its result says so (outcome ``timeout``)."""
        scope = ToolScope(self._t, call, known=call.name in self.wrapped)
        deadline = self.wrapped.deadline_for(call, deadline)
        try:
            result = await _before(deadline, self.wrapped.adispatch(call))
        except DeadlineExceeded:
            result = ToolResult(call.id, call.name, "Stopped: the run's time budget ran out during this call.",
                                ToolOutcome.TIMEOUT)
        except BaseException as exc:
            scope.fail(failure_kind(exc))
            raise
        scope.end(result)
        return result

    async def adispatch_turn(self, calls: Sequence[ToolCall], *, parallel: bool, concurrency: int | None,
                             deadline: float | None) -> list[ToolResult]:
        """A turn's calls, their results in the model's call order. Each call runs in a task of
        its own, with a copy of this context (the step span current), so that what a tool sets
        in its context stays in its call. In parallel the calls' spans are siblings that
        overlap; one after another (``parallel`` off, or a lone call), a fatal result ends the
        turn, as in ``run``. A call not yet started when the run's deadline passes is not
        dispatched. A cancellation asked for while the calls ran takes effect as the turn
        ends, even if a tool swallowed it."""
        requests = cancel_requests()
        if parallel and len(calls) > 1:
            results = await self._concurrently(calls, concurrency, deadline)
        else:
            results = []
            for call in calls:
                if _passed(deadline):
                    break
                results.append(await asyncio.create_task(self.adispatch(call, deadline)))
                if results[-1].outcome is ToolOutcome.FATAL:
                    break
        await asyncio.sleep(0)  # delivers a cancellation asked for while nothing was awaited
        _raise_if_cancelled_since(requests)
        return results

    async def _concurrently(self, calls: Sequence[ToolCall], concurrency: int | None,
                            deadline: float | None) -> list[ToolResult]:
        limit = asyncio.Semaphore(concurrency) if concurrency else None

        async def one(call: ToolCall) -> ToolResult | None:
            if limit is None:
                return None if _passed(deadline) else await self.adispatch(call, deadline)
            async with limit:
                return None if _passed(deadline) else await self.adispatch(call, deadline)

        # gather runs each call in a task of its own, and when this task is cancelled it cancels
        # them and waits for them to end.
        outcomes = await asyncio.gather(*(one(call) for call in calls), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):  # a custom registry's bug: every call has ended
                raise outcome
        # The calls start, and take the semaphore, in call order: those the deadline kept from
        # starting (None) are the last ones, which is what "not dispatched" means.
        return [outcome for outcome in outcomes if outcome is not None]  # type: ignore[misc]
