"""Runs side by side: 500 ``arun`` tasks in one event loop and 16 threads calling ``run`` on one
shared ``Agent``, each run inside a caller's span, and a caller's span carried (or not) into
the thread a run is started in.

Every span must land in its own run's trace under the right parent, every run's token totals
must be the sum of its own chat spans, and no span may be left open.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import random
import threading
import time
from collections import defaultdict
from typing import Any, Callable

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from async_support import OpenSpans, most_at_once, turn, watch
from tracedagent import Agent, Run, Stop, tool
from tracedagent.testing import FakeModel, Recorder

SCRIPT = [turn(("lookup", {"key": "a"}), ("compute", {"n": 1}), ("annotate", {}), prefix="first"),
          turn(("lookup", {"key": "b"}), ("compute", {"n": 2}), prefix="second"),
          "done"]
PARENTS = {"step": "invoke_agent agent", "chat fake-model": "step", "execute_tool lookup": "step",
           "execute_tool compute": "step", "execute_tool annotate": "step", "annotating": "execute_tool annotate",
           "invoke_agent agent": "request"}
"""The name of each span's parent, for every span a run of ``SCRIPT`` makes."""


class Conversational:
    """A model many runs can share: a conversation's n-th assistant turn is ``script[n]``, so
    concurrent runs cannot take each other's turns (as they would from one FakeModel's script).
    Each call is played by a one-turn FakeModel, with its latency and its token estimates."""

    provider_name = "fake"
    model_name = "fake-model"

    def __init__(self, script: list, latency: Callable[[], float]) -> None:
        self.script = script
        self.latency = latency

    def _turn(self, messages: list[dict[str, Any]]) -> FakeModel:
        return FakeModel([self.script[sum(m["role"] == "assistant" for m in messages)]], latency=self.latency())

    def complete(self, messages, tools=None, max_output_tokens=None, temperature=None):
        return self._turn(messages).complete(messages, tools, max_output_tokens, temperature)

    async def acomplete(self, messages, tools=None, max_output_tokens=None, temperature=None):
        return await self._turn(messages).acomplete(messages, tools, max_output_tokens, temperature)


def shared_agent(rec: Recorder, seed: int) -> Agent:
    """One agent for every run: an async tool, a sync one, and a sync one tracing its own work."""
    rng = random.Random(seed)
    tracer = rec.tracer_provider.get_tracer("the tool's own code")

    @tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        await asyncio.sleep(rng.uniform(0, 0.005))
        return f"value of {key}"

    @tool
    def compute(n: int) -> int:
        """Compute something."""
        time.sleep(rng.uniform(0, 0.002))
        return n * n

    @tool
    def annotate() -> str:
        """Annotate, tracing its own work."""
        with tracer.start_as_current_span("annotating"):
            return "annotated"

    return Agent(Conversational(SCRIPT, lambda: rng.uniform(0, 0.005)), [lookup, compute, annotate],
                 **rec.providers)


def task(i: int) -> str:
    """Tasks of different lengths, so runs' token totals differ and a span in the wrong run shows."""
    return f"task {i} " + "x" * (i % 37)


def check(rec: Recorder, spans: OpenSpans, handled: list[tuple[ReadableSpan, Run]]) -> None:
    """Each run's spans form its own intact tree under its caller's ``request`` span."""
    assert spans.open == [] and spans.started == spans.ended
    traces: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in rec.spans():
        traces[span.context.trace_id].append(span)
    assert len(traces) == len(handled), "one trace per run, nothing in a trace of its own"

    for request, run in handled:
        assert run.stop is Stop.ANSWERED and run.trajectory() == ["lookup", "compute", "annotate", "lookup", "compute"]
        mine = traces[request.context.trace_id]
        assert int(run.trace_id, 16) == request.context.trace_id
        by_id = {s.context.span_id: s for s in mine}
        assert len(mine) == 1 + 1 + 3 + 3 + 5 + 1  # request, run, steps, chats, tools, the tool's own span
        for span in mine:
            if span.context.span_id == request.context.span_id:
                assert span.parent is None
                continue
            parent = by_id[span.parent.span_id]  # KeyError: the parent is in another trace
            assert parent.name == PARENTS[span.name], span.name
        steps = sorted((s for s in mine if s.name == "step"), key=lambda s: s.attributes["tracedagent.step.index"])
        for step, completion in zip(steps, SCRIPT):
            under = [s for s in mine if s.parent and s.parent.span_id == step.context.span_id]
            calls = sorted(s.attributes["gen_ai.tool.call.id"] for s in under if s.name.startswith("execute_tool "))
            assert calls == sorted(c.id for c in getattr(completion, "tool_calls", ())), "each call under its step"
            assert [s.name for s in under].count("chat fake-model") == 1
        chats = [s for s in mine if s.name == "chat fake-model"]
        [root] = [s for s in mine if s.name == "invoke_agent agent"]
        for key, total in (("gen_ai.usage.input_tokens", run.input_tokens),
                           ("gen_ai.usage.output_tokens", run.output_tokens)):
            assert sum(c.attributes[key] for c in chats) == total == root.attributes[key]
    assert rec.metric("tracedagent.runs", stop_reason="answered") == len(handled)
    assert rec.metric("tracedagent.tool.calls", outcome="ok") == 5 * len(handled)


async def test_500_concurrent_aruns_in_one_loop_keep_their_spans_apart():
    rec = Recorder()
    spans = watch(rec)
    agent = shared_agent(rec, seed=500)
    tracer = rec.tracer_provider.get_tracer("a web handler")

    async def handle(i: int) -> tuple[ReadableSpan, Run]:
        with tracer.start_as_current_span("request") as request:
            return request, await agent.arun(task(i))

    handled = await asyncio.gather(*(handle(i) for i in range(500)))

    check(rec, spans, handled)
    assert len({run.input_tokens for _, run in handled}) > 1, "the runs' totals differ, so a mixed-up span would show"
    assert most_at_once(rec.spans("invoke_agent agent")) == 500, "all 500 were in flight at once"


def test_16_threads_sharing_one_agent_keep_their_spans_apart():
    rec = Recorder()
    spans = watch(rec)
    agent = shared_agent(rec, seed=16)
    tracer = rec.tracer_provider.get_tracer("a worker")
    start = threading.Barrier(16, timeout=10)

    def work(thread: int) -> list[tuple[ReadableSpan, Run]]:
        start.wait()
        handled = []
        for i in range(thread * 8, thread * 8 + 8):
            with tracer.start_as_current_span("request") as request:
                handled.append((request, agent.run(task(i))))
        return handled

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        handled = [pair for result in pool.map(work, range(16)) for pair in result]

    assert len(handled) == 128
    check(rec, spans, handled)
    assert most_at_once(rec.spans("invoke_agent agent")) > 1, "runs in different threads overlapped"


# --- a caller's span ---------------------------------------------------------------------------

@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def small_agent(rec: Recorder) -> Agent:
    return Agent(FakeModel(["done"] * 3), **rec.providers)


def assert_child_of(rec: Recorder, caller: ReadableSpan) -> None:
    run = rec.only_run().span
    assert run.parent is not None and run.parent.span_id == caller.context.span_id
    assert run.context.trace_id == caller.context.trace_id


def test_a_run_in_sync_code_is_a_child_of_the_callers_span(rec):
    with rec.tracer_provider.get_tracer("caller").start_as_current_span("request") as caller:
        small_agent(rec).run("go")
    assert_child_of(rec, caller)


async def test_a_run_in_async_code_is_a_child_of_the_callers_span(rec):
    with rec.tracer_provider.get_tracer("caller").start_as_current_span("request") as caller:
        await small_agent(rec).arun("go")
    assert_child_of(rec, caller)


async def test_a_run_through_asyncio_to_thread_is_a_child_of_the_callers_span(rec):
    with rec.tracer_provider.get_tracer("caller").start_as_current_span("request") as caller:
        run = await asyncio.to_thread(small_agent(rec).run, "go")
    assert run.ok
    assert_child_of(rec, caller)


async def test_a_raw_executor_carries_the_callers_span_only_inside_copy_context(rec):
    """What docs/async.md says: ``run_in_executor`` and ``pool.submit`` do not copy the caller's
    context (the run starts a trace of its own); ``contextvars.copy_context().run`` does."""
    agent = small_agent(rec)
    tracer = rec.tracer_provider.get_tracer("caller")
    loop = asyncio.get_running_loop()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with tracer.start_as_current_span("request") as caller:
            await loop.run_in_executor(pool, agent.run, "go")
            pool.submit(agent.run, "go").result()
        assert [run.span.parent for run in rec.runs()] == [None, None], "each started a trace of its own"
        rec.clear()
        with tracer.start_as_current_span("request") as caller:
            await loop.run_in_executor(pool, contextvars.copy_context().run, agent.run, "go")
    assert_child_of(rec, caller)
