"""A moment a run's work must be over by, on a clock its driver chooses.

One type for what was five conversions between a deadline and a timeout: the run's time
budget (``RunState``), the timeout a model adapter is given, the calls a driver no longer
starts, a call cut off when the run's time is up, and a tool's own ``timeout``. The clock is
replaceable: a driver whose time is not the process's (a Temporal workflow, where it must be
``workflow.time()``; a test) gives ``RunState`` its own, and every decision reads time
through it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Awaitable, Protocol, TypeVar

from ._records import cancel_requests

__all__ = ["Clock", "Deadline", "DeadlineExceeded", "RunDeadlineExceeded", "awaited"]

T = TypeVar("T")


class Clock(Protocol):
    """Seconds on a clock that never goes back (``time.monotonic`` by default)."""

    def __call__(self) -> float: ...


class DeadlineExceeded(Exception):
    """Work was cancelled because its deadline came: the run's time budget ran out while a call
    was in flight, or a tool ran past its own ``timeout``."""


class RunDeadlineExceeded(DeadlineExceeded):
    """Raised by a tool that watches the run's deadline itself and stopped its work there (an
    MCP call, whose work runs on a loop of its own and can be cancelled even under ``run``):
    the registry records the call as cut off by the run's deadline (``deadline_cut``), as the
    drivers record a call they cut."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Deadline:
    """When time is up, and the clock that says so."""

    at: float
    """The clock's reading at which time is up."""
    clock: Clock = time.monotonic
    """Where ``at`` is read against; every check of this deadline reads this clock."""

    @classmethod
    def after(cls, seconds: float, clock: Clock = time.monotonic) -> Deadline:
        """The deadline ``seconds`` from now on ``clock``."""
        return cls(at=clock() + seconds, clock=clock)

    def left(self) -> float:
        """Seconds until time is up, never negative: the timeout a call is given."""
        return max(0.0, self.at - self.clock())

    def passed(self) -> bool:
        return self.clock() >= self.at

    async def cut(self, work: Awaitable[T]) -> T:
        """``await work``, cancelled when time is up (``DeadlineExceeded``); the work has
        finished cancelling by the time this raises. A ``TimeoutError`` the work raises itself
        before then is its own, and passes through."""
        try:
            return await asyncio.wait_for(work, self.left())
        except asyncio.TimeoutError:
            if not self.passed():
                raise
            raise DeadlineExceeded from None


def raise_if_cancelled_since(requests: int) -> None:
    """A cancellation of this task asked for while it awaited work that swallowed it (a tool
    that catches ``CancelledError``, or ``wait_for`` on Python 3.11 returning a result that came
    at the same moment) is still the run's: raise it now. ``requests``: ``cancel_requests()``
    before the work."""
    if cancel_requests() > requests:
        raise asyncio.CancelledError


async def awaited(deadline: Deadline | None, work: Awaitable[T]) -> T:
    """How a driver awaits a call: ``await work``, cut off when ``deadline`` passes
    (``DeadlineExceeded``), and a cancellation of this task during the work raised even if the
    work swallowed it."""
    requests = cancel_requests()
    result = await (work if deadline is None else deadline.cut(work))
    raise_if_cancelled_since(requests)
    return result
