"""Test doubles that ship with the library: a scripted model, and helpers to script it.

No model can be reached from a test, so ``FakeModel`` plays one: each item of its script
is the next turn. Its token counts are estimated from what it was sent, so the quadratic
growth of input tokens over a run is visible in tests and traces, as with a real model.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from typing import Any, Iterable, Union

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_trace_id

from . import _names as N
from ._records import Completion, Message, ToolCall, Usage

__all__ = ["FakeModel", "ScriptExhausted", "tool_call", "estimate_tokens", "Recorder", "RunView"]

ScriptItem = Union[str, Completion, BaseException]
_call_ids = itertools.count(1)


class ScriptExhausted(RuntimeError):
    """The model was called more often than its script has turns."""


def tool_call(name: str, args: dict[str, Any] | str | None = None, *, id: str | None = None,
              text: str = "") -> Completion:
    """A turn requesting one tool call; ``args`` may be a raw (even malformed) JSON string."""
    call = ToolCall(id=id or f"call_{next(_call_ids)}", name=name, arguments={} if args is None else args)
    return Completion(text=text, tool_calls=[call], finish_reason="tool_calls")


def estimate_tokens(payload: Any) -> int:
    """About four characters a token, never zero: deterministic, like a tokenizer."""
    text = payload if isinstance(payload, str) else json.dumps(payload, sort_keys=True, default=str)
    return max(1, math.ceil(len(text) / 4))


class FakeModel:
    """A ``Model`` that plays a script: ``str`` answers, ``Completion`` turns (see ``tool_call``),
    or exceptions to raise. An exhausted script raises ``ScriptExhausted``.

    ``calls`` records what each call was sent (a copy of the messages at that moment).
    ``latency`` sleeps that many seconds per call, so a demo's waterfall looks real.
    """

    provider_name = "fake"

    def __init__(self, script: Iterable[ScriptItem], *, model_name: str = "fake-model",
                 latency: float = 0.0) -> None:
        self.script = list(script)
        self.model_name = model_name
        self.latency = latency
        self.calls: list[dict[str, Any]] = []

    @property
    def call_count(self) -> int:
        return len(self.calls)

    def complete(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                 max_output_tokens: int | None = None, temperature: float | None = None) -> Completion:
        self.calls.append({"messages": [dict(m) for m in messages], "tools": tools,
                           "max_output_tokens": max_output_tokens, "temperature": temperature})
        if self.latency:
            time.sleep(self.latency)
        index = len(self.calls) - 1
        if index >= len(self.script):
            raise ScriptExhausted(f"FakeModel was called {index + 1} times but its script has "
                                  f"{len(self.script)} turns")
        item = self.script[index]
        if isinstance(item, BaseException):
            raise item
        completion = Completion(text=item, finish_reason="stop") if isinstance(item, str) else item
        if completion.usage == Usage():
            sent = estimate_tokens({"messages": messages, "tools": tools})
            answered = estimate_tokens([completion.text, [tc.as_dict() for tc in completion.tool_calls]])
            completion = Completion(text=completion.text, tool_calls=completion.tool_calls,
                                    usage=Usage(input_tokens=sent, output_tokens=answered),
                                    model=completion.model or self.model_name,
                                    finish_reason=completion.finish_reason, response_id=completion.response_id)
        return completion


class Recorder:
    """A private SDK tracer and meter provider that keep every span and metric in memory.

    Pass ``**recorder.providers`` to an ``Agent`` (the global providers can be set only
    once per process, so tests should not rely on them). ``runs()`` gives one ``RunView``
    per finished run span; ``metric()`` sums a metric's points matching some labels.
    """

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.metric_reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metric_reader])

    @property
    def providers(self) -> dict[str, Any]:
        return {"tracer_provider": self.tracer_provider, "meter_provider": self.meter_provider}

    def spans(self) -> list[ReadableSpan]:
        """Finished spans, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def clear(self) -> None:
        self.exporter.clear()

    def runs(self) -> list[RunView]:
        """One view per ``invoke_agent`` span, in the order the runs ended."""
        spans = self.spans()
        return [RunView(span, spans) for span in spans
                if span.attributes.get(N.GEN_AI_OPERATION_NAME) == N.OP_INVOKE_AGENT]

    def metric(self, name: str, **labels: Any) -> float:
        """The sum (counters) or count (histograms) of ``name`` over points whose attributes
        match ``labels``; label keys may use ``_`` for ``.`` (``stop_reason=`` matches
        ``tracedagent.stop_reason``)."""
        total = 0.0
        data = self.metric_reader.get_metrics_data()
        for resource_metrics in data.resource_metrics if data else ():
            for scope in resource_metrics.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        if _labels_match(point.attributes, labels):
                            total += point.value if hasattr(point, "value") else point.count
        return total


def _labels_match(attributes: Any, wanted: dict[str, Any]) -> bool:
    for key, value in wanted.items():
        candidates = [k for k in attributes if k == key or k.replace(".", "_").endswith(key)]
        if not any(attributes[k] == value for k in candidates):
            return False
    return True


class RunView:
    """One run as its spans tell it: the run span's facts and its descendants."""

    def __init__(self, span: ReadableSpan, all_spans: list[ReadableSpan]) -> None:
        self.span = span
        trace_id = span.context.trace_id
        same_trace = [s for s in all_spans if s.context.trace_id == trace_id]
        children: dict[int, list[ReadableSpan]] = {}
        for s in same_trace:
            if s.parent is not None:
                children.setdefault(s.parent.span_id, []).append(s)
        self._children = children
        self.descendants = self._below(span)

    def _below(self, span: ReadableSpan) -> list[ReadableSpan]:
        found = []
        for child in sorted(self._children.get(span.context.span_id, []), key=lambda s: s.start_time or 0):
            found.append(child)
            found.extend(self._below(child))
        return found

    def _attr(self, key: str, default: Any = None) -> Any:
        return self.span.attributes.get(key, default)

    @property
    def trace_id(self) -> str:
        return format_trace_id(self.span.context.trace_id)

    @property
    def stop_reason(self) -> str | None:
        return self._attr(N.STOP_REASON)

    @property
    def steps(self) -> int | None:
        return self._attr(N.STEPS)

    @property
    def input_tokens(self) -> int | None:
        return self._attr(N.GEN_AI_USAGE_INPUT_TOKENS)

    @property
    def output_tokens(self) -> int | None:
        return self._attr(N.GEN_AI_USAGE_OUTPUT_TOKENS)

    @property
    def cost(self) -> float | None:
        return self._attr(N.COST_USD)

    @property
    def requested_tools(self) -> list[str]:
        return list(self._attr(N.TOOLS_REQUESTED, ()))

    @property
    def executed_tools(self) -> list[str]:
        return list(self._attr(N.TOOLS_EXECUTED, ()))

    @property
    def blocked_tools(self) -> list[str]:
        return list(self._attr(N.TOOLS_BLOCKED, ()))

    def _operation(self, operation: str) -> list[ReadableSpan]:
        return [s for s in self.descendants if s.attributes.get(N.GEN_AI_OPERATION_NAME) == operation]

    @property
    def step_spans(self) -> list[ReadableSpan]:
        return [s for s in self.descendants if s.name == N.STEP_SPAN_NAME]

    @property
    def chat_spans(self) -> list[ReadableSpan]:
        return self._operation(N.OP_CHAT)

    @property
    def tool_spans(self) -> list[ReadableSpan]:
        return self._operation(N.OP_EXECUTE_TOOL)

    def children(self, span: ReadableSpan | None = None) -> list[ReadableSpan]:
        span = span or self.span
        return sorted(self._children.get(span.context.span_id, []), key=lambda s: s.start_time or 0)

    def __repr__(self) -> str:
        return (f"<RunView stop_reason={self.stop_reason!r} steps={self.steps} "
                f"requested={self.requested_tools} executed={self.executed_tools}>")
