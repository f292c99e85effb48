"""The event loop an ``MCPServer``'s session lives on, in a thread of its own.

The ``mcp`` SDK is async and its sessions are bound to the loop that opened them (anyio task
groups and memory streams). A tool of the session must be callable from ``run`` (where the
registry runs an async tool on a private loop of its own, one per call) and from ``arun``'s
loop alike, and from several runs at once, so the session cannot live on any caller's loop: it
lives on this one, and every caller hands it work as a coroutine and awaits the answer. A
caller that stops waiting (its timeout, the run's deadline) cancels the work on this loop too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Coroutine, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """One daemon thread running one event loop until ``close()``."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self._cancel_leftovers()
            self.loop.close()

    def _cancel_leftovers(self) -> None:
        """Tasks still pending when the loop stops (work nobody awaited any more) are cancelled
        and given the chance to end, so that no coroutine is destroyed while pending."""
        pending = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))

    def submit(self, work: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(work, self.loop)

    def call(self, work: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``work`` on the loop and wait for it here (from a thread that is not the loop's)."""
        future = self.submit(work)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None
        except BaseException:
            future.cancel()  # an interrupt while waiting: the work stops too
            raise

    async def acall(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the loop and await it from another loop; cancelling this await
        cancels the work."""
        return await asyncio.wrap_future(self.submit(work))

    @property
    def current(self) -> bool:
        """Whether the caller is on this loop's thread (where waiting on it would deadlock)."""
        return threading.current_thread() is self._thread

    def close(self) -> None:
        """Stop the loop (after the work it has cancelled ends) and wait for the thread."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        if not self.current:
            self._thread.join()
