"""Spans as a person reads them: one tree, one set of tables.

Every source of spans is converted into ``_trace.SpanRecord`` first, so there is exactly
one renderer to keep right. Everything shown is read off span attributes named in ``_names``: the terminal
shows what the trace says, not what the process happened to remember.

What a trace holds was partly chosen by a model - agent and tool names, error texts - and
a prompt injection chooses it. So nothing read from a span reaches the terminal as rich
markup or as raw control characters: every value is drawn through ``text()``, which
returns a markup-free ``Text`` with control characters written out as escapes.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from typing import Any, Mapping, Sequence

from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from .._core import _names as N
from .._traces._printable import MAX_SHOWN, printable
from .._traces._trace import RunSummary, SpanRecord, Trace, string_list

__all__ = ["output_width", "StopTally", "scenario_table", "trace_tree", "runs_table", "stop_counts_table", "format_duration", "format_cost",
           "stop_style", "printable", "text", "MAX_SHOWN"]


# --- what may reach the terminal ---------------------------------------------------------

def text(value: object, style: str = "", *, limit: int | None = MAX_SHOWN) -> Text:
    """``printable(value)`` as a rich ``Text``, which rich never reads as markup: the one way
    anything from a trace, a file or the command line is drawn."""
    return Text(printable(value, limit=limit), style=style)


def output_width() -> int | None:
    """A terminal keeps its own width; a pipe or file gets 120 columns (rich would assume 80
    and cut the tables). ``COLUMNS`` overrides both."""
    return None if "COLUMNS" in os.environ or sys.stdout.isatty() else 120


# --- formatting ------------------------------------------------------------------------

def format_duration(ns: int) -> str:
    """``0.4 ms``, ``183 ms``, ``2.41 s``: precision where it matters to a reader."""
    ms = ns / 1e6
    if ms < 1:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.2f} s"


def format_cost(usd: float) -> str:
    """No price, no number: a zero cost means nobody gave prices, not that it was free."""
    return f"${usd:.4f}" if usd > 0 else "-"


def stop_style(stop_reason: str) -> str:
    """Answered is green, a pause for approval yellow (not a failure), every other stop red."""
    return "green" if stop_reason == "answered" else "yellow" if stop_reason == "approval_required" else "red"


def _tools(run: RunSummary) -> Text:
    """``read_ticket 1/1, refund 0/1``: per tool, calls that succeeded out of calls requested -
    the gap is a denial, a call that ran and failed, or a stop before dispatch."""
    if not run.requested:
        return Text("-")
    requested, succeeded = Counter(run.requested), Counter(run.succeeded)
    return Text(", ").join(text(name) + f" {succeeded[name]}/{count}" for name, count in requested.items())


# --- tables ----------------------------------------------------------------------------

_STOP_WIDTH = max(len("repeated_identical_call"), len("token_budget_exhausted"))


def runs_table(runs: Sequence[RunSummary], *, title: str | None = None) -> Table:
    """What each run did: the demo's summary, and the head of ``tracedagent show``."""
    table = Table(title=_title(title), title_justify="left", header_style="bold")
    table.add_column("agent", no_wrap=True)
    table.add_column("stop reason", no_wrap=True, min_width=_STOP_WIDTH)
    table.add_column("steps", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("cost", justify="right")
    table.add_column("tools\nsucceeded/requested")
    for run in runs:
        table.add_row(text(run.agent), text(run.stop_reason, stop_style(run.stop_reason)), str(run.steps),
                      f"{run.tokens:,}", format_cost(run.cost), _tools(run))
    return table


class StopTally:
    """Runs per stop reason, and the agents that stopped that way: all that load mode
    prints, kept in memory that does not grow with the number of runs."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        """Runs by stop reason."""
        self.agents: dict[str, set[str]] = {}
        """The agents of those runs, by stop reason."""

    def add(self, run: RunSummary) -> None:
        self.runs[run.stop_reason] += 1
        self.agents.setdefault(run.stop_reason, set()).add(run.agent)


def stop_counts_table(tally: StopTally, *, title: str | None = None) -> Table:
    """How many runs ended for each reason: the load generator's summary."""
    table = Table(title=_title(title), title_justify="left", header_style="bold")
    table.add_column("stop reason", no_wrap=True, min_width=_STOP_WIDTH)
    table.add_column("runs", justify="right")
    table.add_column("agents")
    for stop, count in sorted(tally.runs.items(), key=lambda item: (-item[1], item[0])):
        table.add_row(text(stop, stop_style(stop)), str(count), Text(", ").join(map(text, sorted(tally.agents[stop]))))
    return table


def _title(title: str | None) -> Text | None:
    """A title names files and services the user chose: drawn like any other value, uncut."""
    return None if title is None else text(title, limit=None)


# --- the tree --------------------------------------------------------------------------

MAX_TREE_DEPTH = 16
"""Levels of spans the tree draws; below that, one line says how many spans were folded. A
run nests three levels a sub-agent (run, step, tool call), so this is five sub-agents deep, and
its guides take 64 of a terminal's 80 columns; a chain of thousands (a hostile file) would
otherwise cost time and output in the square of its depth, each line drawing a guide per level
above it."""


def trace_tree(trace: Trace) -> Tree:
    """The span tree of one trace, with durations and the attributes that explain it."""
    if len(trace.roots) == 1:
        tree = Tree(_label(trace.roots[0], with_trace_id=True))
        _add_children(tree, trace, trace.roots[0])
        return tree
    tree = Tree(Text.assemble(("trace ", "bold"), text(trace.trace_id, "dim")))
    for root in trace.roots:
        _add_children(tree.add(_label(root)), trace, root, depth=1)
    return tree


def _add_children(node: Tree, trace: Trace, span: SpanRecord, depth: int = 0) -> None:
    """Everything below ``span`` (drawn at ``depth``), walked with a list: a chain of spans may
    be longer than Python's recursion limit. At ``MAX_TREE_DEPTH`` a span's descendants are
    folded into one line that counts them."""
    pending = [(node, span, depth)]
    while pending:
        node, span, level = pending.pop()
        children = trace.children(span)
        if children and level + 1 >= MAX_TREE_DEPTH:
            node.add(Text(f"... {_descendants(trace, span):,} spans deeper: not drawn", "yellow"))
        else:
            pending += [(node.add(_label(child)), child, level + 1) for child in children]
        for event in span.events:
            if event.name == N.STOP_EVENT:
                reason = str(event.attributes.get(N.STOP_REASON, "?"))
                node.add(Text.assemble(("stopped here: ", "bold " + stop_style(reason)), text(reason, stop_style(reason))))


def _descendants(trace: Trace, span: SpanRecord) -> int:
    """How many spans hang below ``span`` (each span is below one fold at most: linear)."""
    count, pending = 0, list(trace.children(span))
    while pending:
        count += 1
        pending += trace.children(pending.pop())
    return count


def _label(span: SpanRecord, *, with_trace_id: bool = False) -> Text:
    """One line per span: its name, its duration, then what explains it (``_details``)."""
    name = f"step {span.attributes.get(N.STEP_INDEX, '?')}" if span.name == N.STEP_SPAN_NAME else span.name
    parts = [text(name, "bold"), Text(format_duration(span.duration_ns), "cyan"), *_details(span)]
    label = Text("  ").join(parts)
    if with_trace_id:
        label.append("\n").append_text(text("trace " + span.trace_id, "dim"))
    return label


def _details(span: SpanRecord) -> list[Text]:
    a = span.attributes
    failed = [text(f"error: {a.get(N.ERROR_TYPE) or span.status_message or 'unknown'}", "red")] \
        if span.status == "error" else []
    if span.is_run:
        run = RunSummary.of(span)
        return [text(run.stop_reason, "bold " + stop_style(run.stop_reason)),
                Text(f"{run.steps} step{'s' if run.steps != 1 else ''}", "dim"), Text(f"{run.tokens:,} tokens", "dim"),
                *([Text(format_cost(run.cost), "dim")] if run.cost > 0 else []),
                *([text("waiting for approval: " + ", ".join(run.pending), "yellow")] if run.pending else []),
                *([text("resumed from trace " + run.resumed_from, "dim")] if run.resumed_from else [])]
    if span.name == N.STEP_SPAN_NAME:
        return [_in_out(a, N.STEP_INPUT_TOKENS, N.STEP_OUTPUT_TOKENS)] if N.STEP_INPUT_TOKENS in a else []
    if span.name == N.RESUME_SPAN_NAME:  # in the paused run's trace: where its resumption went on
        return [text(f"resumed in trace {a.get(N.RESUMED_TRACE_ID, '?')}", "dim")]
    if span.operation == N.OP_CHAT:
        tokens = [_in_out(a, N.GEN_AI_USAGE_INPUT_TOKENS, N.GEN_AI_USAGE_OUTPUT_TOKENS)] \
            if N.GEN_AI_USAGE_INPUT_TOKENS in a else []
        finish = string_list(a.get(N.GEN_AI_RESPONSE_FINISH_REASONS))
        return tokens + ([text("finish=" + ",".join(finish), "dim")] if finish else []) + failed
    if span.operation == N.OP_EXECUTE_TOOL:
        outcome, error_type = str(a.get(N.TOOL_OUTCOME, "?")), a.get(N.ERROR_TYPE)
        style = "green" if outcome == "ok" else "yellow" if outcome == "denied" else "red"
        return [text(outcome if error_type in (None, outcome) else f"{outcome} ({error_type})", style)]
    return failed


def _in_out(attributes: Mapping[str, Any], input_key: str, output_key: str) -> Text:
    """``120 in / 30 out`` (attributes from a foreign span may hold anything: drawn as text)."""
    return text(f"{attributes[input_key]} in / {attributes.get(output_key, 0)} out", "dim")


def scenario_table(scenarios: Sequence[Any]) -> Table:
    """``tracedagent demo --list``: each scenario's name, the stop it shows, and its story."""
    table = Table(header_style="bold")
    table.add_column("scenario", no_wrap=True)
    table.add_column("stops with", no_wrap=True)
    table.add_column("what happens")
    for s in scenarios:
        table.add_row(text(s.name), text(s.stops_with.value), text(s.story))
    return table
