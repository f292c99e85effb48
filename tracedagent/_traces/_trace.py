"""A trace as tracedagent reads it back: spans, their tree, and the runs in it.

Three sources feed the command line - spans just recorded by ``tracedagent demo``, an
OTLP/JSON file (``tracedagent show``) and Jaeger's HTTP API (``tracedagent trace``) - and
each is converted into ``SpanRecord`` first, so that everything after (the tables and trees
of ``_render``, replay's ``Recording``) reads one shape. A trace may come from anywhere, so
its tree is built to survive what a tampered file holds: shared ids, cycles, wrong types.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .._core import _names as N

__all__ = ["SpanEvent", "SpanRecord", "Trace", "RunSummary", "group_traces", "is_int", "int_or_none", "finite_or_none",
           "str_or_none", "list_or_empty", "string_list"]


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
    pending: tuple[str, ...] = ()
    """Tools whose calls wait for a person's decision (``tracedagent.tools.pending``): the run paused."""
    resumed_from: str | None = None
    """For a resumed run, the trace id of the run it continued (``tracedagent.resumed_from``)."""

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
                   else str(a[N.GEN_AI_CONVERSATION_ID]),
                   pending=tuple(string_list(a.get(N.TOOLS_PENDING))), resumed_from=str_or_none(a.get(N.RESUMED_FROM)))

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


# --- attributes a foreign or tampered span may hold anything under ----------------------

def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def int_or_none(value: Any) -> int | None:
    return value if is_int(value) else None


def finite_or_none(value: Any) -> float | int | None:
    """A finite number (``NaN`` or infinity would neither compare nor budget sensibly)."""
    if is_int(value) or isinstance(value, float) and math.isfinite(value):
        return value  # type: ignore[no-any-return]
    return None


def str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def list_or_empty(value: Any) -> list[Any]:
    """A list attribute or JSON array; anything else is none."""
    return value if isinstance(value, list) else []


def string_list(value: Any) -> list[str]:
    """A list attribute (``tracedagent.tools.requested`` ...) as strings: what a foreign or
    tampered span holds there instead - one value, a number - is one item, never iterated
    or joined as it is."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]
