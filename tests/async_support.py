"""What the async and concurrency tests share: a span processor that knows which spans are
still open (and lets a test act at a span's start or end), turns of several calls, the
shape of a trace with ids and times left out, and one run driven by any driver."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from typing import Any, Callable

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from tracedagent import Completion, ToolCall
from tracedagent._core import _names as N
from tracedagent.testing import Recorder

__all__ = ["OpenSpans", "turn", "shape", "watch", "most_at_once"]


class OpenSpans(SpanProcessor):
    """Counts span starts and ends, so a test can say no span was left open; ``on_start`` and
    ``on_end`` also call the test's hooks, which is how a test cancels or stalls a run at an
    exact point (a span starting or ending) instead of after a guessed delay."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[int, str] = {}
        self.started = 0
        self.ended = 0
        self.start_hooks: list[Callable[[Span], Any]] = []
        self.end_hooks: list[Callable[[ReadableSpan], Any]] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        with self._lock:
            self.started += 1
            self._open[span.context.span_id] = span.name
        for hook in list(self.start_hooks):
            hook(span)

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self.ended += 1
            self._open.pop(span.context.span_id, None)
        for hook in list(self.end_hooks):
            hook(span)

    @property
    def open(self) -> list[str]:
        """Names of the spans that started and have not ended."""
        with self._lock:
            return sorted(self._open.values())


def watch(rec: Recorder) -> OpenSpans:
    """An ``OpenSpans`` on ``rec``'s tracer provider."""
    spans = OpenSpans()
    rec.tracer_provider.add_span_processor(spans)
    return spans


def drive(agent: Any, driver: str, task: str) -> Any:
    """``agent``'s run of ``task`` under ``driver`` (``run``, ``arun`` or ``stream``, read to
    its end), and the ``Run``."""
    if driver == "run":
        return agent.run(task)
    if driver == "arun":
        return asyncio.run(agent.arun(task))
    with agent.stream(task) as stream:
        for _ in stream:
            pass
    return stream.run


def turn(*calls: tuple[str, dict[str, Any]], prefix: str = "c") -> Completion:
    """A model turn requesting these ``(name, arguments)`` calls, in this order, with ids
    ``c0, c1, ...`` (so two runs of one script send the same conversation)."""
    return Completion(tool_calls=[ToolCall(f"{prefix}{i}", name, args) for i, (name, args) in enumerate(calls)],
                      finish_reason="tool_calls")


DRIVER_ATTRIBUTES = (N.DRIVER, N.TOOLS_PARALLEL, N.TOOLS_MAX_CONCURRENCY)
"""What a run span says of the method that drove it: the one way ``run``'s and ``arun``'s
traces of the same run are meant to differ."""


ID_ATTRIBUTES = {"tracedagent.checkpoint.id", "tracedagent.resumed_checkpoint.id", "tracedagent.resumed_from"}
"""Ids a run makes up (a checkpoint's) or links to: different in every run, like span ids."""


def shape(spans: list[ReadableSpan]) -> list[tuple]:
    """Each root span as ``(name, attributes, status, description, events, children)``, the
    children in the order they started: everything a trace says but ids, times and the driver."""
    children: dict[int | None, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        children[span.parent.span_id if span.parent else None].append(span)

    def node(span: ReadableSpan) -> tuple:
        kids = sorted(children[span.context.span_id], key=lambda s: s.start_time)
        attributes = {k: v for k, v in span.attributes.items() if k not in DRIVER_ATTRIBUTES and k not in ID_ATTRIBUTES}
        return (span.name, attributes, span.status.status_code, span.status.description,
                [(e.name, dict(e.attributes)) for e in span.events], [node(k) for k in kids])

    return [node(root) for root in sorted(children[None], key=lambda s: s.start_time)]


def most_at_once(intervals: list) -> int:
    """The largest number of spans running at one instant."""
    edges = sorted([(s.start_time, 1) for s in intervals] + [(s.end_time, -1) for s in intervals])
    running = peak = 0
    for _, change in edges:  # at a tie an end (-1) sorts first: touching spans do not overlap
        running += change
        peak = max(peak, running)
    return peak
