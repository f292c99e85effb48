"""``tracedagent traces`` in a terminal narrower than its table: every column still there,
or a line that names the ones left out.

Rich, left to itself, collapsed the last columns of a too-wide table to nothing (steps,
tokens, cost and duration vanished at the default 120 columns of a pipe). The listing now
cuts trace ids to 16 hex digits (``--full-ids`` for whole ones), puts the start date above
its time, wraps agent names and breaks stop reasons after underscores. These tests run the
command as a user does - a subprocess, its width from ``COLUMNS`` or, on a pipe, the
default - against a local server answering Jaeger-shaped JSON, and read each cell back
from the columns under its header, joining the lines a cell wrapped onto.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import pytest
from rich.console import Console

from _fake_servers import RoutedServer
from tracedagent._core import _names as N
from tracedagent._traces._jaeger import decode_trace
from tracedagent._cli._listing import Listing
from tracedagent._traces._trace import Trace

ROOT = Path(__file__).resolve().parent.parent
HEADERS = ["trace id", "started", "agent", "stop reason", "steps", "tokens", "cost", "duration"]
RIGHT_ALIGNED = {"steps", "tokens", "cost", "duration"}
START_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z

# One row per run: what the run span says, and the cells the listing must show for it.
RUNS: list[dict[str, Any]] = [
    {"trace_id": "4a0adba974c16a1a21150d03d02714d6", "agent": "token-hungry-reader", "stop": "repeated_identical_call",
     "steps": 12, "input": 10_000, "output": 2_345, "cost": 0.0213, "duration_us": 2_410_000,
     "cells": {"steps": "12", "tokens": "12,345", "cost": "$0.0213", "duration": "2.41 s"}},
    {"trace_id": "c6d53aaed8962f4b0c0ab14c96c2d1be", "agent": "help-desk", "stop": "answered",
     "steps": 2, "input": 300, "output": 49, "cost": 0.0, "duration_us": 183_000,
     "cells": {"steps": "2", "tokens": "349", "cost": "-", "duration": "183 ms"}},
    {"trace_id": "2d2551f182774004762b3f619fae51e0", "agent": "night-shift-escalation-summariser",
     "stop": "token_budget_exhausted", "steps": 4, "input": 7_000, "output": 72, "cost": 0.0,
     "duration_us": 12_410_000, "cells": {"steps": "4", "tokens": "7,072", "cost": "-", "duration": "12.41 s"}},
]


def jaeger_trace(run: dict[str, Any], index: int) -> dict[str, Any]:
    tags = {N.GEN_AI_OPERATION_NAME: N.OP_INVOKE_AGENT, N.GEN_AI_AGENT_NAME: run["agent"], N.STOP_REASON: run["stop"],
            N.STEPS: run["steps"], N.GEN_AI_USAGE_INPUT_TOKENS: run["input"],
            N.GEN_AI_USAGE_OUTPUT_TOKENS: run["output"], N.COST_USD: run["cost"]}
    span = {"traceID": run["trace_id"], "spanID": f"{index + 1:016x}", "operationName": f"invoke_agent {run['agent']}",
            "references": [], "startTime": START_US + index * 60_000_000, "duration": run["duration_us"],
            "processID": "p1", "logs": [],
            "tags": [{"key": k, "type": "string" if isinstance(v, str) else "float64", "value": v} for k, v in tags.items()]}
    return {"traceID": run["trace_id"], "spans": [span], "processes": {"p1": {"serviceName": "shop", "tags": []}}}


def expected_cells(run: dict[str, Any], index: int, *, id_digits: int = 16) -> dict[str, str]:
    started = datetime.fromtimestamp((START_US + index * 60_000_000) / 1e6).strftime("%Y-%m-%d %H:%M:%S")
    return {"trace id": run["trace_id"][:id_digits], "started": started, "agent": run["agent"],
            "stop reason": run["stop"], **run["cells"]}


@pytest.fixture(scope="module")
def jaeger() -> Iterator[RoutedServer]:
    server = RoutedServer()
    server.answer("/api/traces", {"data": [jaeger_trace(run, i) for i, run in enumerate(RUNS)], "errors": None})
    yield server
    server.close()


def traces(jaeger: RoutedServer, *args: str, columns: int | None) -> str:
    """``tracedagent traces`` on a pipe; ``columns`` as the terminal's width (None: the default)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS" and not k.startswith("OTEL_")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    done = subprocess.run([sys.executable, "-m", "tracedagent", "traces", "--jaeger", jaeger.url, "--since", "1000d",
                           *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


# --- reading the table back ------------------------------------------------------------

def header_columns(lines: list[str]) -> tuple[dict[str, int], int]:
    """Where each header that is shown starts, and the index of the rule under the headers.

    The headers sit between the title (the first line) and the rule; a narrowed column's
    header may stand on two lines (``stop`` above ``reason``).
    """
    rule = next(i for i, line in enumerate(lines) if line and set(line) == {"─"})
    header_lines = lines[1:rule]
    found = {}
    for name in HEADERS:
        first, *rest = name.split()
        for i, line in enumerate(header_lines):
            for match in re.finditer(rf"(?<!\S){re.escape(first)}(?!\S)", line):
                column = match.start()
                on_one_line = line[column:].startswith(name) and line[column + len(name):column + len(name) + 1] in ("", " ")
                stacked = all(i + k + 1 < len(header_lines) and header_lines[i + k + 1][column:].split(" ")[0] == word
                              for k, word in enumerate(rest))
                if on_one_line or (rest and stacked):
                    found.setdefault(name, column)
    return found, rule


def read_listing(stdout: str) -> tuple[list[str], list[dict[str, str]]]:
    """The headers shown, and each row's cells with their wrapped lines joined.

    A left-aligned column starts where its header starts and ends before the next column; a
    right-aligned one ends where its header ends and is as wide as its widest value (the
    numbers never wrap).
    """
    lines = stdout.splitlines()
    columns, rule = header_columns(lines)
    shown = [name for name in HEADERS if name in columns]
    widest = {name: max(len(name), *(len(run["cells"][name]) for run in RUNS)) for name in RIGHT_ALIGNED}
    bounds: list[tuple[int, int | None]] = []
    for name in shown:
        start = columns[name]
        bounds.append((start + len(name) - widest[name], start + len(name)) if name in RIGHT_ALIGNED else (start, None))
    bounds = [(start, end if end is not None else (bounds[i + 1][0] - 1 if i + 1 < len(bounds) else None))
              for i, (start, end) in enumerate(bounds)]
    rows: list[list[str]] = []
    for line in lines[rule + 1:]:
        if re.match(r"^[0-9a-f]{16}", line):
            rows.append([line])
        elif rows and line.startswith(" "):
            rows[-1].append(line)
        else:
            break
    return shown, [{name: "".join(line[start:end].strip() for line in row) for name, (start, end) in zip(shown, bounds)}
                   for row in rows]


def squeezed(cells: dict[str, str]) -> dict[str, str]:
    """Cells without whitespace: a date and its time, or a wrapped name, joined."""
    return {name: re.sub(r"\s", "", value) for name, value in cells.items()}


# --- the widths ------------------------------------------------------------------------

@pytest.mark.parametrize("columns, width", [(80, 80), (120, 120), (None, 120)], ids=["80", "120", "a pipe's default"])
def test_every_column_and_every_value_is_visible(jaeger, columns, width):
    stdout = traces(jaeger, columns=columns)
    assert max(len(line) for line in stdout.splitlines()) <= width
    shown, rows = read_listing(stdout)
    assert shown == HEADERS
    newest_first = list(reversed(list(enumerate(RUNS))))
    assert [squeezed(row) for row in rows] == [squeezed(expected_cells(run, i)) for i, run in newest_first]
    assert "Left out" not in stdout
    assert "(whole ids: `--full-ids`)" in stdout


def test_at_80_columns_the_long_values_wrap_instead_of_vanishing(jaeger):
    stdout = traces(jaeger, columns=80)
    # both are read back whole by the test above; here, they were not cut off on one line
    assert "repeated_identical_call" not in stdout and "night-shift-escalation-summariser" not in stdout
    assert re.search(r"^\S+ \S+ +\S+ +repeated_ ", stdout, re.M), stdout


def test_full_ids_are_whole(jaeger):
    shown, rows = read_listing(traces(jaeger, "--full-ids", columns=200))
    assert shown == HEADERS
    assert [row["trace id"] for row in rows] == [run["trace_id"] for run in reversed(RUNS)]


@pytest.mark.parametrize("args, columns, left_out", [
    ((), 50, ["started", "duration", "cost"]),
    (("--full-ids",), 80, ["started", "duration"]),
], ids=["50 columns", "whole ids at 80"])
def test_a_column_that_cannot_fit_is_left_out_with_a_line_that_says_so(jaeger, args, columns, left_out):
    stdout = traces(jaeger, *args, columns=columns)
    shown, rows = read_listing(stdout)
    assert shown == [name for name in HEADERS if name not in left_out]
    assert f"Left out at {columns} columns: {', '.join(left_out)};" in " ".join(stdout.split())
    assert {row["stop reason"] for row in rows} == {run["stop"] for run in RUNS}


@pytest.mark.parametrize("width", range(20, 161))
def test_at_any_width_no_line_is_wider_and_every_column_is_shown_or_named(width):
    runs = [run for i, run in enumerate(RUNS) for run in Trace(decode_trace(jaeger_trace(run, i))).runs()]
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(Listing(runs, title="runs"))
    output = console.file.getvalue()
    assert max(len(line) for line in output.splitlines()) <= width
    missing = [name for name in HEADERS if name not in header_columns(output.splitlines())[0]]
    said = re.search(r"Left out at \d+ columns: ([a-z, ]+);", " ".join(output.split()))
    if width >= 27:  # the trace id and the stop reason always stay
        assert sorted(missing) == sorted(said.group(1).split(", ") if said else [])
