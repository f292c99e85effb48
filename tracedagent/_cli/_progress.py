"""Progress on a terminal: the demo's bar of the runs done with a streamed run's text as it
arrives, and ``eval run``'s bar of the trials graded (``counting``).

The bar is ``rich``'s ``Progress``, transient (gone once the runs are over) and off when the
output is not a terminal. Below it, while a scenario streams (``Agent.stream``), its text grows
chunk by chunk, as a chat window would show it; when that run ends the whole text is printed
above the bar and stays. A pipe or a file gets neither: the span trees and the run's output
attributes hold the same text.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from .._agent._loop import Agent
from .._core._run import Run
from ._demo import Scenario, run_plan
from ._render import printable

__all__ = ["run_with_progress", "counting"]

_SHOWN = 100
"""The most characters of a streaming text the live line shows (its end)."""


class _Progress(Progress):
    """The bar, and one line per run streaming right now."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.streaming: dict[int, tuple[str, str]] = {}
        """Per thread running a streamed scenario: its name and its text so far."""
        self.lock = threading.Lock()
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]  # it may draw at once: set up first

    def get_renderables(self) -> Iterator[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        with self.lock:
            lines = list(self.streaming.values())
        for name, so_far in lines:
            yield Text.assemble((f"{printable(name)} ", "bold"), printable(so_far[-_SHOWN:], limit=None))


def _columns(what: str) -> tuple[ProgressColumn, ...]:
    return (TextColumn(what, style="bold"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())


@contextmanager
def counting(total: int, what: str, console: Console) -> Iterator[Callable[[], None]]:
    """A bar of ``total`` things, advanced by the function it yields (from any thread): transient,
    and off when ``console`` is not a terminal (a pipe or a CI log gets no bar)."""
    with Progress(*_columns(what), console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task(what, total=total)
        yield lambda: progress.advance(task)


def run_with_progress(plan: Iterable[Scenario], total: int, concurrency: int, make_agent: Callable[[Scenario], Agent],
                      on_finished: Callable[[int, Run], None], console: Console) -> int:
    """``run_plan`` under a progress bar, streamed text shown live (on a terminal; a pipe gets neither)."""
    on_terminal = console.is_terminal
    with _Progress(*_columns("runs"), console=console, transient=True, disable=not on_terminal) as progress:
        task = progress.add_task("runs", total=total)

        def streamed(scenario: Scenario, chunk: str) -> None:
            with progress.lock:
                name, so_far = progress.streaming.get(threading.get_ident(), (scenario.name, ""))
                progress.streaming[threading.get_ident()] = (name, so_far + chunk)

        def finished(index: int, run: Run) -> None:
            with progress.lock:
                shown = progress.streaming.pop(threading.get_ident(), None)
            if shown is not None:
                name, text = shown
                ended = "" if run.ok else f"  [{run.stop.value}]"
                progress.console.print(Text.assemble((f"{printable(name)} streamed: ", "bold"),
                                                     printable(text, limit=None), (ended, "red")))
            on_finished(index, run)
            progress.advance(task)

        return run_plan(plan, concurrency=concurrency, make_agent=make_agent, on_finished=finished,
                        on_text=streamed if on_terminal else None)
