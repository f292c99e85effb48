"""tracedagent.temporal's activities without a server (Temporal's ``ActivityEnvironment``): an
activity exports the spans its call ended before it returns, in bounded time, and a collector
out of reach costs it that time, never its result."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("temporalio")  # the test group installs it: never skipped in CI

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from temporalio.testing import ActivityEnvironment  # noqa: E402

from tracedagent import Agent, tool  # noqa: E402
from tracedagent._instrumentation._telemetry import flush_spans  # noqa: E402
from tracedagent.temporal import ActivitySettings  # noqa: E402
from tracedagent.temporal._activities import tool_call  # noqa: E402
from tracedagent.temporal._hosting import host, unhost  # noqa: E402
from tracedagent.testing import FakeModel  # noqa: E402


class Hanging(SpanExporter):
    """A collector out of reach: each export hangs until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def export(self, spans):
        self.calls += 1
        self.release.wait(30)
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.release.set()


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def hosted_echo(provider, settings=ActivitySettings()):
    agent = Agent(FakeModel(["done"]), [echo], name="echo", tracer_provider=provider)
    host("test", agent, settings)  # ActivityEnvironment's task queue
    return agent


def request(**arguments):
    return {"agent": "echo", "traceparent": {}, "seconds_left": None,
            "call": {"id": "c1", "name": "echo", "arguments": arguments}}


async def test_a_tool_activity_has_exported_its_span_when_it_returns():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    hosted_echo(provider)
    try:
        result = await ActivityEnvironment().run(tool_call, request(text="hi"))
    finally:
        unhost("test", "echo")
    assert result["outcome"] == "ok"
    assert [s.name for s in exporter.get_finished_spans()] == ["execute_tool echo"], \
        "exported before the result, not after the batch's 60 s delay"
    provider.shutdown()


async def test_a_collector_out_of_reach_costs_the_activity_the_flush_timeout_never_its_result():
    exporter = Hanging()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    hosted_echo(provider, ActivitySettings(flush_timeout=0.2))
    try:
        result = await ActivityEnvironment().run(tool_call, request(text="hi"))
    finally:
        unhost("test", "echo")
        exporter.release.set()
    assert result["outcome"] == "ok" and exporter.calls == 1, "the flush was tried, hung, and was left"
    provider.shutdown()


def test_flush_spans_is_bounded_and_never_raises():
    exporter = Hanging()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    provider.get_tracer("t").start_span("s").end()
    try:
        assert flush_spans(provider, 0.1) is False, "not exported in time: said so"
        assert exporter.calls == 1 and not exporter.release.is_set(), "the export still hangs: it was left"
    finally:
        exporter.release.set()
        provider.shutdown()

    class Broken:
        def force_flush(self, timeout_millis):
            raise RuntimeError("boom")

    assert flush_spans(Broken(), 1.0) is True  # the failure is telemetry's, reported once, swallowed
    assert flush_spans(object(), 1.0) is False, "a provider that cannot flush: nothing to do"
    assert flush_spans(TracerProvider(), 0) is False, "0 turns it off"
