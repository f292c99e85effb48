"""tracedagent.temporal's activities without a server (Temporal's ``ActivityEnvironment``): an
activity exports the spans its call ended before it returns, in bounded time, and a collector
out of reach costs it that time, never its result; a tool result too large for Temporal is the
call's ``PayloadTooLarge`` error, and the limit is a setting."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("temporalio")  # the test group installs it: never skipped in CI

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (BatchSpanProcessor, SimpleSpanProcessor, SpanExporter,  # noqa: E402
                                            SpanExportResult)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402
from temporalio.testing import ActivityEnvironment  # noqa: E402

from tracedagent import Agent, tool  # noqa: E402
from tracedagent._core import _names as N  # noqa: E402
from tracedagent._core._payloads import PayloadTooLarge, payload_size, too_large  # noqa: E402
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


# --- Temporal's payload limit -----------------------------------------------------------------

@tool
def dump(size: int) -> str:
    """A result of ``size`` characters."""
    return "x" * size


async def test_a_tool_result_too_large_for_temporal_is_the_calls_payload_too_large_error():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(FakeModel(["done"]), [dump], name="dumper", tracer_provider=provider)
    host("test", agent, ActivitySettings(max_payload=10_000))
    try:
        env = ActivityEnvironment()
        big = await env.run(tool_call, {"agent": "dumper", "traceparent": {}, "seconds_left": None,
                                        "call": {"id": "c1", "name": "dump", "arguments": {"size": 20_000}}})
        small = await env.run(tool_call, {"agent": "dumper", "traceparent": {}, "seconds_left": None,
                                          "call": {"id": "c2", "name": "dump", "arguments": {"size": 9_000}}})
    finally:
        unhost("test", "dumper")
    assert (big["outcome"], big["error_type"]) == ("error", "PayloadTooLarge")
    assert "PayloadTooLarge" in big["content"] and "10,000" in big["content"] and len(big["content"]) < 400
    assert small["outcome"] == "ok" and len(small["content"]) == 9_000
    first, second = exporter.get_finished_spans()
    assert first.status.status_code is StatusCode.ERROR and first.attributes["error.type"] == "PayloadTooLarge"
    assert first.attributes["tracedagent.tool.outcome"] == "error"
    assert second.status.status_code is StatusCode.UNSET


def test_the_payload_check_measures_what_temporals_json_converter_sends():
    from temporalio.converter import JSONPlainPayloadConverter

    data = {"messages": [{"role": "tool", "content": "é" * 1000 + "\n\"quoted\""}], "n": [1, 2.5, None, True]}
    assert payload_size(data) == len(JSONPlainPayloadConverter().to_payload(data).data)
    assert too_large(data, payload_size(data), "model request") is None
    over = too_large(data, payload_size(data) - 1, "model request")
    assert isinstance(over, PayloadTooLarge) and (over.what, over.size, over.limit) == (
        "model request", payload_size(data), payload_size(data) - 1)


def test_the_payload_limit_is_a_setting_2_mb_unless_the_environment_says_otherwise(monkeypatch):
    monkeypatch.delenv(N.ENV_TEMPORAL_MAX_PAYLOAD, raising=False)
    assert ActivitySettings().max_payload == N.DEFAULT_TEMPORAL_MAX_PAYLOAD == 2 * 1024 * 1024
    monkeypatch.setenv(N.ENV_TEMPORAL_MAX_PAYLOAD, "4194304")
    assert ActivitySettings().max_payload == 4 * 1024 * 1024
    assert ActivitySettings(max_payload=1000).max_payload == 1000
    for bad in ("2MB", "0", "-1"):
        monkeypatch.setenv(N.ENV_TEMPORAL_MAX_PAYLOAD, bad)
        with pytest.raises(ValueError, match=N.ENV_TEMPORAL_MAX_PAYLOAD):
            ActivitySettings()
    monkeypatch.delenv(N.ENV_TEMPORAL_MAX_PAYLOAD)
    with pytest.raises(ValueError, match="max_payload"):
        ActivitySettings(max_payload=0)


def test_the_workflow_runner_exports_an_activations_spans_before_its_completion_leaves():
    from tracedagent.temporal._telemetry import WORKFLOW_TASK_FLUSH_LIMIT, FlushingRunner

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))

    class Instance:
        def activate(self, act):
            provider.get_tracer("t").start_span(f"ended in {act}").end()  # as workflow code ends a step
            return f"completion of {act}"

    class Runner:
        def create_instance(self, det):
            return Instance()

    runner = FlushingRunner(Runner(), lambda: [provider, provider], timeout=30)
    assert runner.timeout == WORKFLOW_TASK_FLUSH_LIMIT, "bounded well below Temporal's 2 s deadlock detection"
    assert runner.create_instance(None).activate("task 1") == "completion of task 1"
    assert [s.name for s in exporter.get_finished_spans()] == ["ended in task 1"]
    provider.shutdown()
