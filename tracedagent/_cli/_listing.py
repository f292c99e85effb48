"""The run listing of ``tracedagent traces``: every column, at any terminal width.

Left to itself, rich fits a table too wide for the terminal by collapsing its last columns
to nothing, so a narrow terminal silently lost the steps, tokens and cost. The listing
therefore lays itself out for the width it is drawn at, giving up as little as it can:

1. trace ids are always cut to their first 16 hex digits (``full_ids`` keeps them whole);
2. the start time puts its date above its time;
3. the agent name wraps, and the stop reason breaks after an underscore, the wider of the
   two first, down to a floor each;
4. only when that is still too wide are whole columns left out, least useful first, and a
   line under the table names them.

A light table style (no vertical rules, one space between columns) is what lets all eight
columns fit in 80.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Sequence

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from ._render import format_cost, format_duration, printable, stop_style, text
from .._traces._trace import RunSummary

__all__ = ["Listing", "SHORT_ID_DIGITS"]

SHORT_ID_DIGITS = 16
"""Hex digits of a trace id the listing shows unless asked for whole ids."""

_DATE_WIDTH = len("2024-05-01")
_AGENT_FLOOR = 8
"""The narrowest the agent column gets: a name folds onto more lines below this."""
_LEAVE_OUT = ("started", "duration", "cost", "tokens", "steps", "agent")
"""The columns given up, in this order, when narrowing the others is not enough; the trace
id (to look a run up) and the stop reason (why it ended) stay."""


@dataclass(kw_only=True)
class _Column:
    """One column's header and cells (printable already), and how narrow it may get."""

    header: str
    """The column's header."""
    cells: list[str]
    """One value per run."""
    justify: Literal["left", "right"] = "left"
    """Numbers right, words left."""
    style: list[str] | None = None
    """A style per cell, where the column colours its values."""
    floor: int = 0
    """The narrowest width it may take; 0: never narrower than its widest value."""
    breaks_at_underscores: bool = False
    """Its values break after an underscore, not anywhere, when it is narrowed (rich wraps
    only at spaces)."""
    natural: int = 0
    """The width of its widest value (or header)."""
    width: int = 0
    """The width it is drawn at: ``natural`` unless ``_fit`` narrowed it."""

    def __post_init__(self) -> None:
        self.natural = self.width = max(cell_len(value) for value in [self.header, *self.cells])
        self.floor = min(self.floor, self.natural) if self.floor else self.natural

    def cell(self, row: int) -> str:
        value = self.cells[row]
        return _break_lines(_pieces(value), self.width) if self.breaks_at_underscores else value


class Listing:
    """Recent runs found in Jaeger, one row each, laid out for the width it is drawn at."""

    def __init__(self, runs: Sequence[RunSummary], *, full_ids: bool = False, title: str | None = None) -> None:
        self.runs = runs
        self.full_ids = full_ids
        self.title = title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        columns = _fit(self._columns(), options.max_width)
        table = Table(title=None if self.title is None else text(self.title, limit=None), title_justify="left",
                      header_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=0)
        for column in columns:
            table.add_column(column.header, justify=column.justify, width=column.width, overflow="fold")
        for row in range(len(self.runs)):
            table.add_row(*(Text(column.cell(row), style=column.style[row] if column.style else "")
                            for column in columns))
        yield table
        left_out = [name for name in _LEAVE_OUT if name not in {column.header for column in columns}]
        if left_out:
            yield Text(f"Left out at {options.max_width} columns: {', '.join(left_out)}; "
                       "a wider terminal (or COLUMNS=...) shows them.", style="yellow")

    def _columns(self) -> list[_Column]:
        runs = self.runs
        ids = [run.trace_id if self.full_ids else run.trace_id[:SHORT_ID_DIGITS] for run in runs]
        stops = [printable(run.stop_reason) for run in runs]
        return [
            _Column(header="trace id", cells=[printable(i) for i in ids]),
            _Column(header="started", cells=[_started(run.start_ns) for run in runs], floor=_DATE_WIDTH),
            _Column(header="agent", cells=[printable(run.agent) for run in runs], floor=_AGENT_FLOOR),
            _Column(header="stop reason", cells=stops, style=[stop_style(run.stop_reason) for run in runs],
                    floor=max((cell_len(piece) for stop in stops for piece in _pieces(stop)), default=1),
                    breaks_at_underscores=True),
            _Column(header="steps", cells=[str(run.steps) for run in runs], justify="right"),
            _Column(header="tokens", cells=[f"{run.tokens:,}" for run in runs], justify="right"),
            _Column(header="cost", cells=[format_cost(run.cost) for run in runs], justify="right"),
            _Column(header="duration", cells=[format_duration(run.duration_ns) for run in runs], justify="right"),
        ]


def _fit(columns: list[_Column], width: int) -> list[_Column]:
    """The columns to draw at ``width``, narrowed as far as they need: all of them, unless
    even the narrowest layout is too wide; then the fewest left out that make it fit."""
    for leave_out in range(len(_LEAVE_OUT) + 1):
        shown = [column for column in columns if column.header not in _LEAVE_OUT[:leave_out]]
        if _narrow(shown, width):
            break
    return shown


def _narrow(columns: list[_Column], width: int) -> bool:
    """Narrows ``columns`` (from their natural widths) until their row fits ``width``, the
    cheapest way first; says whether it fits."""
    for column in columns:
        column.width = column.natural
    by_name = {column.header: column for column in columns}

    def excess() -> int:
        return sum(column.width for column in columns) + len(columns) - 1 - width  # one space between columns

    if excess() > 0 and "started" in by_name:  # the date above the time: a second line, nothing lost
        by_name["started"].width = by_name["started"].floor
    wrapping = [by_name[name] for name in ("agent", "stop reason") if name in by_name]
    while excess() > 0 and (narrowable := [c for c in wrapping if c.width > c.floor]):
        max(narrowable, key=lambda column: column.width).width -= 1
    return excess() <= 0


def _pieces(value: str) -> list[str]:
    """``repeated_identical_call`` as ``repeated_``, ``identical_``, ``call``."""
    return re.findall(r"[^_]*_|[^_]+", value) or [value]


def _break_lines(pieces: list[str], width: int) -> str:
    """The pieces joined on lines of at most ``width`` cells (a longer piece is folded by rich)."""
    lines = [""]
    for piece in pieces:
        if lines[-1] and cell_len(lines[-1] + piece) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(lines)


def _started(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")
