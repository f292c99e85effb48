"""A retried Temporal activity as a user sees it in Jaeger's UI: a real browser on the real UI.

The browser test's Jaeger (its own, on free ports) and Chromium, over a run on the Temporal dev
server (worker in this process) whose tool call's first attempt runs past its time limit: the
worker cuts it, Temporal retries it, the second attempt answers. The step is then a bar as long
as both attempts and the wait between them; what explains it is in the trace: the first
attempt's tool span, failed, at attempt 1; the second's at attempt 2, with its
``tracedagent.retry`` event under Logs.

Needs Temporal: without its dev server the test skips, or fails under ``TRACEDAGENT_REQUIRE_STACK``
(``require_temporal``), like the browser test's Jaeger and Chromium.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tracedagent import Agent, tool
from tracedagent._core import _names as N
from tracedagent.testing import FakeModel, tool_call

from ._temporal import TEMPORAL, require_temporal
from .test_jaeger_ui import _details, _get, _logs, _open, _rows, _screenshot, _switch_on, _until
from .test_jaeger_ui import browser, jaeger, page  # noqa: F401 (fixtures)

pytest.importorskip("temporalio")  # the test group installs it: never skipped in CI
from temporalio.client import Client  # noqa: E402

from tracedagent.temporal import ActivitySettings, run_on_temporal, worker  # noqa: E402

ATTEMPT_LIMIT = 1.0
"""Seconds a tool call's attempt may take here (``ActivitySettings.tool_timeout``): the first
attempt overruns it."""


async def _retried_run(otlp: str, stall: Path) -> Any:
    @tool
    async def track(order: str) -> str:
        """Where an order is."""
        if stall.exists():  # the first attempt only: it outlives its limit and is cut
            stall.unlink()
            await asyncio.sleep(ATTEMPT_LIMIT * 10)
        return f"{order}: delivered"

    provider = TracerProvider(resource=Resource.create({"service.name": "tracedagent-ui-retry"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=otlp, insecure=True)))
    agent = Agent(FakeModel([tool_call("track", {"order": "A1"}, id="c1"), "A1 was delivered."], by_step=True),
                  [track], name="tracker", tracer_provider=provider)
    client = await Client.connect(TEMPORAL)
    queue = f"q-{uuid.uuid4().hex}"
    try:
        async with worker(client, [agent], task_queue=queue,
                          settings=ActivitySettings(tool_timeout=ATTEMPT_LIMIT, retry_interval=0.1)):
            return await run_on_temporal(client, "tracker", "Where is A1?", task_queue=queue, tracer_provider=provider)
    finally:
        provider.shutdown()


@pytest.fixture(scope="module")
def retried(jaeger) -> dict[str, Any]:  # noqa: F811
    """The run's trace id and its spans as Jaeger holds them, by operation name."""
    require_temporal()
    stall = jaeger["folder"] / "stall"
    stall.touch()
    run = asyncio.run(_retried_run(jaeger["otlp"], stall))
    assert run.ok and run.trajectory() == ["track"] and not stall.exists()
    # The client span, the run, two steps, two chat spans, and the tool call's two attempts.
    trace = _until("Jaeger holding the retried run", lambda: (t if len((t := json.loads(
        _get(f"{jaeger['url']}/api/traces/{run.trace_id}"))["data"][0])["spans"]) == 8 else None))
    spans: dict[str, list[dict]] = {}
    for span in sorted(trace["spans"], key=lambda s: s["startTime"]):
        spans.setdefault(span["operationName"], []).append(span)
    return {"trace_id": run.trace_id, "spans": spans}


def _tags(span: dict) -> dict[str, Any]:
    return {t["key"]: t["value"] for t in span["tags"]}


def _attribute(page: Any, key: str) -> Any:
    """The value cell of one of the open span's attributes (Jaeger's "Tags" table, opened)."""
    header = page.locator(".AccordionAttributes--header:visible", has_text=re.compile("^(Tags|Attributes)"))
    _switch_on(header.first)
    row = page.locator(".KeyValueTable--row:visible", has=page.locator(".KeyValueTable--keyColumn", has_text=key))
    return row.first.locator(".KeyValueTable--valueColumn .json-markup")  # not its Copy / JSON buttons


def test_a_retried_tool_call_shows_its_attempts_and_what_the_step_waited_for(jaeger, retried, page):  # noqa: F811
    from playwright.sync_api import expect

    first, second = retried["spans"]["execute_tool track"]
    step = next(s for s in retried["spans"]["step"] if s["spanID"] == first["references"][0]["spanID"])
    assert [_tags(first)[N.TEMPORAL_ATTEMPT], _tags(second)[N.TEMPORAL_ATTEMPT]] == [1, 2]
    assert second["references"][0]["spanID"] == step["spanID"], "both attempts are the one step's"
    assert _tags(first).get("error") is True and not _tags(second).get("error")
    # The step's bar, in order: the first attempt (cut at its limit), the wait, the second attempt.
    end = lambda span: span["startTime"] + span["duration"]  # noqa: E731 (microseconds)
    assert step["startTime"] <= first["startTime"] < end(first) <= second["startTime"] < end(second) <= end(step)
    # Cut at its limit, not failed at once (its span starts a moment after the attempt's clock).
    assert first["duration"] >= ATTEMPT_LIMIT * 0.8e6
    assert [log["fields"] for log in second["logs"]] == [[{"key": "event", "type": "string", "value": N.RETRY_EVENT},
                                                          {"key": N.TEMPORAL_ATTEMPT, "type": "int64", "value": 2}]]

    page.goto(f"{jaeger['url']}/trace/{retried['trace_id']}")
    rows = _rows(page, "execute_tool track")
    expect(rows).to_have_count(2)  # both attempts under the step, in start order

    # The second attempt: attempt 2, and under Logs the retry that explains the gap before it.
    rows.nth(1).click()
    expect(page.locator(".GenAITab")).to_have_count(1)
    _details(page)
    expect(_attribute(page, N.TEMPORAL_ATTEMPT)).to_have_text("2")
    logs = _logs(page)
    expect(logs).to_contain_text(N.RETRY_EVENT)
    expect(logs).to_contain_text(f"{N.TEMPORAL_ATTEMPT}=2")
    _screenshot(page, "retry-attempt-2")
    rows.nth(1).click()
    expect(page.locator(".AccordionEvents--header")).to_have_count(0)

    # The first attempt: attempt 1, failed (cut at its limit): the first part of the step's bar.
    _open(page, "execute_tool track")
    _details(page)
    expect(_attribute(page, N.TEMPORAL_ATTEMPT)).to_have_text("1")
    expect(_attribute(page, "error")).to_have_text("true")
    _screenshot(page, "retry-attempt-1")
