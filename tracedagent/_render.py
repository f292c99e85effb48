"""Spans as a person reads them: one span shape, one tree, one set of tables.

Three sources feed the command line - spans just recorded by ``tracedagent demo``, an
OTLP/JSON file (``tracedagent show``) and Jaeger's HTTP API (``tracedagent trace``) - and
each is converted into ``SpanRecord`` first, so there is exactly one renderer to keep
right. Everything shown is read off span attributes named in ``_names``: the terminal
shows what the trace says, not what the process happened to remember.

What a trace holds was partly chosen by a model - agent and tool names, error texts - and
a prompt injection chooses it. So nothing read from a span reaches the terminal as rich
markup or as raw control characters: every value is drawn through ``text()``, which
returns a markup-free ``Text`` with control characters written out as escapes.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from . import _names as N

__all__ = ["SpanEvent", "SpanRecord", "Trace", "RunSummary", "StopTally", "group_traces", "trace_tree",
           "runs_table", "stop_counts_table", "format_duration", "format_cost", "stop_style", "printable",
           "text", "string_list", "MAX_SHOWN"]


# --- what may reach the terminal ---------------------------------------------------------

MAX_SHOWN = 200
"""Characters of one value (a name, an error message) shown before it is cut: names are
read, not scrolled through, and a span may carry thousands of characters."""

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 control characters and DEL (a terminal obeys them: ``\\x1b[2J`` clears the
screen), lone surrogates (which no encoder writes, so printing one raises), the line and
paragraph separators, and the bidirectional overrides that make text read other than it is."""


def printable(value: object, *, limit: int | None = MAX_SHOWN) -> str:
    """``value`` as text a terminal shows as it is: each unprintable character becomes a
    Python-style escape (``\\x1b``, ``\\ud800``), and beyond ``limit`` characters the rest is
    cut and counted."""
    shown = value if isinstance(value, str) else str(value)
    if limit is not None and len(shown) > limit:
        shown = f"{shown[:limit]}… (+{len(shown) - limit:,} characters)"
    return _UNPRINTABLE.sub(_escape, shown)


_NAMED_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED_ESCAPES.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def text(value: object, style: str = "", *, limit: int | None = MAX_SHOWN) -> Text:
    """``printable(value)`` as a rich ``Text``, which rich never reads as markup: the one way
    anything from a trace, a file or the command line is drawn."""
    return Text(printable(value, limit=limit), style=style)


# --- spans -------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class SpanEvent:
    """A timestamped event on a span (``tracedagent.stop`` marks where a run stopped)."""

    name: str
    """The event's name."""
    time_ns: int
    """When it happened, in nanoseconds since the epoch."""
    attributes: Mapping[str, Any] = field(default_factory=dict)
    """Its attributes, decoded to Python values."""


@dataclass(frozen=True, kw_only=True)
class SpanRecord:
    """One finished span, whatever format it was read from."""

    trace_id: str
    """32 lowercase hex digits."""
    span_id: str
    """16 lowercase hex digits."""
    parent_id: str | None
    """The parent's span id, ``None`` for a root span."""
    name: str
    """The span name, e.g. ``invoke_agent support`` or ``execute_tool refund``."""
    start_ns: int
    """Start time, nanoseconds since the epoch."""
    end_ns: int
    """End time, nanoseconds since the epoch."""
    kind: str = "internal"
    """``internal``, ``client``, ``server``, ``producer``, ``consumer`` or ``unspecified``."""
    attributes: Mapping[str, Any] = field(default_factory=dict)
    """Attributes decoded to Python values (arrays as lists)."""
    status: str = "unset"
    """``unset``, ``ok`` or ``error``."""
    status_message: str | None = None
    """The status description, set only on errors."""
    events: tuple[SpanEvent, ...] = ()
    """Span events in time order."""
    service: str | None = None
    """``service.name`` of the resource that produced the span."""

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    @property
    def operation(self) -> str | None:
        """``gen_ai.operation.name``: ``invoke_agent``, ``chat`` or ``execute_tool``."""
        return self.attributes.get(N.GEN_AI_OPERATION_NAME)

    @property
    def is_run(self) -> bool:
        return self.operation == N.OP_INVOKE_AGENT


class Trace:
    """One trace's spans, arranged as the tree the renderer walks.

    A span whose parent is missing (a partial trace, or a run nested in a caller's span
    that was not exported) is treated as a root rather than dropped. So is a span that
    only a cycle of parent ids leads back to (a tampered or broken file): without that it
    would hang under no root and be silently left out, and anything that walked up its
    parents would walk forever. Of spans that share a span id, the first is the parent
    its children hang under. So every span is in the tree exactly once.
    """

    def __init__(self, spans: Iterable[SpanRecord]) -> None:
        self.spans = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
        if not self.spans:
            raise ValueError("a trace needs at least one span")
        self.trace_id = self.spans[0].trace_id
        by_id: dict[str, SpanRecord] = {}
        for span in self.spans:
            by_id.setdefault(span.span_id, span)
        # Keyed by id(span): a span id may be shared, and a SpanRecord is not hashable.
        parents: dict[int, SpanRecord | None] = {}
        self._children: dict[int, list[SpanRecord]] = {}
        for span in self.spans:
            parent = by_id.get(span.parent_id) if span.parent_id is not None else None
            parents[id(span)] = parent if parent is not span else None  # its own parent: a root
            if parents[id(span)] is not None:
                self._children.setdefault(id(parent), []).append(span)
        self.roots: list[SpanRecord] = []
        self._depths: dict[int, int] = {}
        for span in self.spans:
            if parents[id(span)] is None:
                self._add_root(span, parent=None)
        for span in self.spans:  # left over: below a cycle of parent ids
            if id(span) not in self._depths:
                root = _first_in_cycle(span, parents)
                self._add_root(root, parent=parents[id(root)])
        self.roots.sort(key=lambda s: (s.start_ns, s.end_ns))  # as the spans: in start order

    def _add_root(self, root: SpanRecord, *, parent: SpanRecord | None) -> None:
        """``root`` as a root (no longer a child of ``parent``), and every span below it, with
        their depths: walked with a list, as a chain of spans may be longer than Python's
        recursion limit."""
        if parent is not None:
            self._children[id(parent)] = [c for c in self._children[id(parent)] if c is not root]
        self.roots.append(root)
        self._depths[id(root)] = 0
        pending = [root]
        while pending:
            span = pending.pop()
            for child in self._children.get(id(span), []):
                self._depths[id(child)] = self._depths[id(span)] + 1
                pending.append(child)

    def children(self, span: SpanRecord) -> list[SpanRecord]:
        """The spans below ``span``, one of this trace's own ``spans``, in start order."""
        return self._children.get(id(span), [])

    def depth(self, span: SpanRecord) -> int:
        """How many spans ``span`` hangs below its root (0 for a root)."""
        return self._depths[id(span)]

    def runs(self) -> list[RunSummary]:
        """One summary per ``invoke_agent`` span, in start order."""
        return [RunSummary.of(span) for span in self.spans if span.is_run]

    @property
    def start_ns(self) -> int:
        return self.spans[0].start_ns

    def __len__(self) -> int:
        return len(self.spans)


def _first_in_cycle(span: SpanRecord, parents: Mapping[int, SpanRecord | None]) -> SpanRecord:
    """The span that started first in the cycle of parent ids above ``span`` (which reaches no
    root, so its ancestors end in one)."""
    path: list[SpanRecord] = []
    where: dict[int, int] = {}
    current: SpanRecord | None = span
    while current is not None and id(current) not in where:
        where[id(current)] = len(path)
        path.append(current)
        current = parents[id(current)]
    cycle = path[where[id(current)]:] if current is not None else path[-1:]
    return min(cycle, key=lambda s: (s.start_ns, s.end_ns))


def group_traces(spans: Iterable[SpanRecord]) -> list[Trace]:
    """Split spans by trace id; traces come out in the order they started."""
    by_trace: dict[str, list[SpanRecord]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    return sorted((Trace(group) for group in by_trace.values()), key=lambda t: t.start_ns)


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """What a run's ``invoke_agent`` span says about it: the row of every table here."""

    trace_id: str
    """The run's trace."""
    agent: str
    """``gen_ai.agent.name``."""
    stop_reason: str
    """``tracedagent.stop_reason``; ``?`` when the span lacks it (a run that crashed)."""
    steps: int
    """Model turns."""
    input_tokens: int
    """Input tokens over the run."""
    output_tokens: int
    """Output tokens over the run."""
    cost: float
    """USD at the run's prices; zero when none were given."""
    requested: tuple[str, ...]
    """Every tool the model asked for, denied calls included."""
    succeeded: tuple[str, ...]
    """Tools that ran and succeeded (``tracedagent.tools.executed``): a call that ran and failed
    is requested, not succeeded."""
    start_ns: int
    """When the run started."""
    duration_ns: int
    """How long it took."""
    conversation_id: str | None = None
    """``gen_ai.conversation.id``, when the run was part of a conversation."""

    @classmethod
    def of(cls, span: SpanRecord) -> RunSummary:
        a = span.attributes
        return cls(trace_id=span.trace_id, agent=str(a.get(N.GEN_AI_AGENT_NAME, span.name)),
                   stop_reason=str(a.get(N.STOP_REASON, "?")), steps=int(_number(a.get(N.STEPS))),
                   input_tokens=int(_number(a.get(N.GEN_AI_USAGE_INPUT_TOKENS))),
                   output_tokens=int(_number(a.get(N.GEN_AI_USAGE_OUTPUT_TOKENS))),
                   cost=_number(a.get(N.COST_USD)),
                   requested=tuple(string_list(a.get(N.TOOLS_REQUESTED))),
                   succeeded=tuple(string_list(a.get(N.TOOLS_EXECUTED))),
                   start_ns=span.start_ns, duration_ns=span.duration_ns,
                   conversation_id=None if a.get(N.GEN_AI_CONVERSATION_ID) is None
                   else str(a[N.GEN_AI_CONVERSATION_ID]))

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def _number(value: Any) -> float:
    """A numeric attribute, or 0 when a foreign span carries something else under the name
    (text, a list, infinity, a number too large for a float)."""
    try:
        number = float(value) if value is not None and not isinstance(value, bool) else 0.0
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def string_list(value: Any) -> list[str]:
    """A list attribute (``tracedagent.tools.requested`` ...) as strings: what a foreign or
    tampered span holds there instead - one value, a number - is one item, never iterated
    or joined as it is."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


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
    return "green" if stop_reason == "answered" else "red"


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

def trace_tree(trace: Trace) -> Tree:
    """The span tree of one trace, with durations and the attributes that explain it."""
    if len(trace.roots) == 1:
        tree = Tree(_label(trace.roots[0], with_trace_id=True))
        _add_children(tree, trace, trace.roots[0])
        return tree
    tree = Tree(Text.assemble(("trace ", "bold"), text(trace.trace_id, "dim")))
    for root in trace.roots:
        _add_children(tree.add(_label(root)), trace, root)
    return tree


def _add_children(node: Tree, trace: Trace, span: SpanRecord) -> None:
    """Everything below ``span``, walked with a list: a chain of spans may be longer than
    Python's recursion limit."""
    pending = [(node, span)]
    while pending:
        node, span = pending.pop()
        pending += [(node.add(_label(child)), child) for child in trace.children(span)]
        for event in span.events:
            if event.name == N.STOP_EVENT:
                node.add(Text.assemble(("stopped here: ", "bold red"),
                                       text(event.attributes.get(N.STOP_REASON, "?"), "red")))


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
                *([Text(format_cost(run.cost), "dim")] if run.cost > 0 else [])]
    if span.name == N.STEP_SPAN_NAME:
        return [_in_out(a, N.STEP_INPUT_TOKENS, N.STEP_OUTPUT_TOKENS)] if N.STEP_INPUT_TOKENS in a else []
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
