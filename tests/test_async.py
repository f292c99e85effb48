"""The async driver: ``arun`` decides and traces as ``run`` does; a turn's calls run at once;
async tools, per-tool timeouts, the time budget as a deadline, and cancellation at every point.

No assertion here is about how long anything took: concurrency is proven from span start
and end times, or by tools that can only finish if they run at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
import time
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import HistogramDataPoint
from opentelemetry.trace import StatusCode

from async_support import OpenSpans, most_at_once, shape, turn, watch
from sample_tools import charge_card, search_help
from scenarios import OUTPUT_TYPES, RETURNED_STOPS, SCENARIOS, TOOLS
from tracedagent import Agent, Budget, Completion, Stop, ToolCall, ToolOutcome, Usage, tool
from tracedagent.testing import FakeModel, Recorder, tool_call


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def spans(rec) -> OpenSpans:
    return watch(rec)


async def drive(agent: Agent, driver: str, task: str = "go"):
    """The run by either driver (``run`` blocks this loop: only for agents with sync tools)."""
    return agent.run(task) if driver == "run" else await agent.arun(task)


def tool_spans(rec: Recorder) -> list:
    return sorted((s for s in rec.spans() if s.name.startswith("execute_tool ")), key=lambda s: s.start_time)


def error_types(rec: Recorder) -> dict[str, Any]:
    """Every span that ended failed, by name, with its ``error.type``."""
    return {s.name: s.attributes["error.type"] for s in rec.spans() if s.status.status_code is StatusCode.ERROR}


# --- the same run by both drivers -------------------------------------------------------------

def summary(run) -> dict[str, Any]:
    return {"stop": run.stop, "output": run.output, "step_count": run.step_count, "steps": len(run.steps),
            "trajectory": run.trajectory(), "requested": run.requested_tools(), "blocked": run.blocked_tools(),
            "tokens": (run.input_tokens, run.output_tokens), "cost": run.cost, "messages": run.messages,
            "error": type(run.error)}


def metric_points(rec: Recorder) -> dict[tuple, Any]:
    """Every metric point by name and labels: a counter's value, a histogram's count (and its
    sum, unless it measures seconds)."""
    points: dict[tuple, Any] = {}
    for rm in rec.metric_reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    key = (metric.name, tuple(sorted(p.attributes.items())))
                    if isinstance(p, HistogramDataPoint):
                        points[key] = (p.count, None if metric.unit == "s" else p.sum)
                    else:
                        points[key] = p.value
    return points


@pytest.mark.parametrize("stop", sorted(RETURNED_STOPS - {Stop.TIME_BUDGET}))
async def test_arun_and_run_make_the_same_run_and_the_same_trace(stop):
    script, budget, _ = SCENARIOS[stop]
    turns = script()  # one script for both, so both conversations carry the same call ids
    by_run, by_arun = Recorder(), Recorder()
    typed = OUTPUT_TYPES.get(stop)
    ran = Agent(FakeModel(turns), TOOLS, budget=budget, name="support", output_type=typed,
                **by_run.providers).run("help me")
    aran = await Agent(FakeModel(turns), TOOLS, budget=budget, name="support", output_type=typed,
                       **by_arun.providers).arun("help me")

    assert aran.stop is stop
    assert summary(aran) == summary(ran)
    assert shape(by_arun.spans()) == shape(by_run.spans())
    assert metric_points(by_arun) == metric_points(by_run)
    assert len(by_arun.spans()) > 2


async def test_a_spent_time_budget_stops_both_drivers_before_the_first_model_call():
    """The time budget is checked before each model call: with none left, neither driver calls
    the model (the deadline cutting a call in flight is tested below, at every point)."""
    script, budget, steps = SCENARIOS[Stop.TIME_BUDGET]
    by_run, by_arun = Recorder(), Recorder()
    ran_model, aran_model = FakeModel(script()), FakeModel(script())
    ran = Agent(ran_model, TOOLS, budget=budget, **by_run.providers).run("help me")
    aran = await Agent(aran_model, TOOLS, budget=budget, **by_arun.providers).arun("help me")

    assert ran.stop is aran.stop is Stop.TIME_BUDGET
    assert ran.step_count == aran.step_count == steps == 0
    assert ran_model.call_count == aran_model.call_count == 0
    for rec in (by_run, by_arun):
        view = rec.only_run()
        assert view.stop_reason == "time_budget_exhausted" and view.steps == 0 and view.step_spans == []
        assert [e.name for e in view.span.events] == ["tracedagent.stop"]
        assert rec.metric("tracedagent.runs", stop_reason="time_budget_exhausted") == 1


# --- parallel tool calls ------------------------------------------------------------------------

def chain(n: int) -> list:
    """``link0`` ... ``link{n-1}``, async tools each of which finishes only after the next one
    has: they finish in reverse call order, and only if they run at once (one at a time,
    ``link0`` would wait for a call that has not started, until its timeout)."""
    finished = [asyncio.Event() for _ in range(n)]

    def make(i: int):
        async def link() -> str:
            if i + 1 < n:
                await finished[i + 1].wait()
            finished[i].set()
            return f"link {i} done"
        return tool(name=f"link{i}", description="One link of a chain.", timeout=5)(link)

    return [make(i) for i in range(n)]


def meeting(n: int) -> list:
    """``seat0`` ... ``seat{n-1}``, sync tools that each wait until all ``n`` are running: they
    succeed only when they run in ``n`` threads at once (else the barrier breaks)."""
    barrier = threading.Barrier(n, timeout=5)

    def make(i: int):
        def seat() -> str:
            barrier.wait()
            return f"seat {i} taken by thread {threading.get_ident()}"
        return tool(name=f"seat{i}", description="Wait for everyone.")(seat)

    return [make(i) for i in range(n)]


@pytest.mark.parametrize("tools", [chain, meeting], ids=["async tools", "sync tools in threads"])
async def test_a_turns_calls_run_at_once_as_overlapping_sibling_spans(rec, spans, tools):
    toolset = tools(3)
    names = [t.name for t in toolset]
    model = FakeModel([turn(*((name, {}) for name in names)), "done"])
    run = await Agent(model, toolset, **rec.providers).arun("go")

    assert run.stop is Stop.ANSWERED and run.trajectory() == names
    step = rec.spans("step", step_index=0)[0]
    calls = tool_spans(rec)
    assert [s.name for s in calls] == [f"execute_tool {name}" for name in names], "started in call order"
    assert {s.parent.span_id for s in calls} == {step.context.span_id}
    assert max(s.start_time for s in calls) < min(s.end_time for s in calls), "all three were running at once"
    assert spans.open == []


async def test_results_are_appended_in_the_models_call_order_not_the_order_they_finish(rec):
    links = chain(3)
    model = FakeModel([turn(("link0", {}), ("link1", {}), ("link2", {})), "done"])
    run = await Agent(model, links, **rec.providers).arun("go")

    finished = [s.attributes["gen_ai.tool.call.id"] for s in sorted(tool_spans(rec), key=lambda s: s.end_time)]
    assert finished == ["c2", "c1", "c0"]
    assert [r.call_id for r in run.steps[0].tool_results] == ["c0", "c1", "c2"]
    shown = [m for m in model.calls[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in shown] == [("c0", "link 0 done"), ("c1", "link 1 done"),
                                                                  ("c2", "link 2 done")]


@tool
async def pause(n: int) -> int:
    """Take a moment, then give ``n`` back."""
    await asyncio.sleep(0.02)
    return n


@pytest.mark.parametrize("options, peak", [
    ({"max_tool_concurrency": 1}, 1),
    ({"parallel_tool_calls": False}, 1),
    ({"max_tool_concurrency": 2}, 2),
    ({}, 4),
])
async def test_max_tool_concurrency_bounds_how_many_calls_run_at_once(rec, spans, options, peak):
    model = FakeModel([turn(*(("pause", {"n": i}) for i in range(4))), "done"])
    run = await Agent(model, [pause], **rec.providers, **options).arun("go")

    assert [r.content for r in run.steps[0].tool_results] == ["0", "1", "2", "3"]
    assert most_at_once(tool_spans(rec)) == peak
    assert spans.open == []


def test_max_tool_concurrency_must_allow_a_call():
    with pytest.raises(ValueError, match="max_tool_concurrency"):
        Agent(FakeModel([]), [pause], max_tool_concurrency=0)


@pytest.mark.parametrize("driver", ["run", "arun"])
@pytest.mark.parametrize("budget, stop", [(Budget(repeat_limit=1), Stop.REPEATED_CALL),
                                          (Budget(max_tool_calls_per_step=2), Stop.TOOL_CALL_BUDGET)],
                         ids=["repeat check", "tool calls per turn"])
async def test_a_turn_is_checked_whole_before_any_of_its_calls_is_dispatched(rec, driver, budget, stop):
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Write a note down."""
        ran.append(text)
        return "noted"

    calls = turn(("note", {"text": "a"}), ("note", {"text": "b"}), ("note", {"text": "a"}))
    run = await drive(Agent(FakeModel([calls, "done"]), [note], budget=budget, **rec.providers), driver)

    assert run.stop is stop
    assert ran == [] and tool_spans(rec) == [], "the repeat is the last call, but not even the first one ran"
    assert run.requested_tools() == ["note"] * 3 and run.trajectory() == []


@tool
async def slow_ok() -> str:
    """Succeeds, after a while."""
    await asyncio.sleep(0.05)
    return "slow done"


async def test_a_fatal_call_stops_the_run_once_the_turns_other_calls_have_finished(rec, spans):
    model = FakeModel([turn(("slow_ok", {}), ("charge_card", {"amount": 1}), ("search_help", {"q": "x"})),
                       "never asked"])
    run = await Agent(model, [slow_ok, charge_card, search_help], **rec.providers).arun("go")

    assert run.stop is Stop.TOOL_FATAL and model.call_count == 1
    results = run.steps[0].tool_results
    assert [(r.call_id, r.outcome) for r in results] == [("c0", ToolOutcome.OK), ("c1", ToolOutcome.FATAL),
                                                         ("c2", ToolOutcome.OK)]
    assert run.trajectory() == ["slow_ok", "search_help"] and run.blocked_tools() == ["charge_card"]
    assert [m["tool_call_id"] for m in run.messages if m["role"] == "tool"] == ["c0", "c2"], \
        "the model is never shown the fatal error"
    slow, fatal, _ = tool_spans(rec)
    assert slow.end_time > fatal.end_time and slow.attributes["tracedagent.tool.outcome"] == "ok", \
        "the slow call went on after the fatal one and was not cancelled"
    assert rec.only_run().executed_tools == ["slow_ok", "search_help"]
    assert spans.open == []


@pytest.mark.parametrize("driver, options", [("run", {}), ("arun", {"parallel_tool_calls": False})])
async def test_one_call_at_a_time_a_fatal_call_ends_the_turn_there(rec, driver, options):
    model = FakeModel([turn(("search_help", {"q": "x"}), ("charge_card", {"amount": 1}), ("search_help", {"q": "y"}))])
    run = await drive(Agent(model, [charge_card, search_help], **rec.providers, **options), driver)

    assert run.stop is Stop.TOOL_FATAL
    assert [r.call_id for r in run.steps[0].tool_results] == ["c0", "c1"]
    assert len(tool_spans(rec)) == 2


# --- async tools, sync tools in threads, and what context they run in ------------------------

async def test_async_tools_are_awaited_on_the_loop_and_sync_tools_run_in_a_thread_inside_their_span(rec, spans):
    tracer = rec.tracer_provider.get_tracer("the tools' own code")
    seen: dict[str, tuple] = {}

    @tool
    async def fetch(url: str) -> str:
        """Fetch a page."""
        with tracer.start_as_current_span("http get"):
            seen["fetch"] = (threading.get_ident(), asyncio.get_running_loop())
            await asyncio.sleep(0)
        return "<html>"

    @tool
    def parse(html: str) -> str:
        """Parse a page."""
        with tracer.start_as_current_span("parse html"):
            seen["parse"] = (threading.get_ident(), None)
        return "parsed"

    model = FakeModel([turn(("fetch", {"url": "u"}), ("parse", {"html": "h"})), "done"])
    run = await Agent(model, [fetch, parse], **rec.providers).arun("go")

    assert run.trajectory() == ["fetch", "parse"]
    assert seen["fetch"] == (threading.get_ident(), asyncio.get_running_loop()), "awaited on this loop"
    assert seen["parse"][0] != threading.get_ident(), "a sync tool does not block the loop"
    for own, call in (("http get", "execute_tool fetch"), ("parse html", "execute_tool parse")):
        assert rec.span(own).parent.span_id == rec.span(call).context.span_id
        assert rec.span(own).context.trace_id == rec.span(call).context.trace_id
    assert spans.open == []


def test_run_runs_an_async_tool_on_a_private_loop_inside_its_span(rec, spans):
    tracer = rec.tracer_provider.get_tracer("the tools' own code")
    loops = []

    @tool
    async def fetch(url: str) -> str:
        """Fetch a page."""
        loops.append(asyncio.get_running_loop())
        with tracer.start_as_current_span("http get"):
            await asyncio.sleep(0)
        return "<html>"

    run = Agent(FakeModel([tool_call("fetch", {"url": "u"}), tool_call("fetch", {"url": "v"}), "done"]), [fetch],
                **rec.providers).run("go")

    assert run.stop is Stop.ANSWERED and run.trajectory() == ["fetch", "fetch"]
    assert len(loops) == 2 and all(loop.is_closed() for loop in loops), "each call ran on a loop of its own"
    for own, call in zip(rec.spans("http get"), rec.spans("execute_tool fetch")):
        assert own.parent.span_id == call.context.span_id
    assert spans.open == []


async def test_run_inside_a_running_loop_with_async_tools_points_to_arun(rec):
    model = FakeModel(["never asked"])
    agent = Agent(model, [pause, search_help], **rec.providers)
    with pytest.raises(RuntimeError, match=r"await agent\.arun"):
        agent.run("go")
    assert model.call_count == 0 and rec.spans() == []
    # An agent whose tools are all sync may still run (blocking) inside a loop.
    assert Agent(FakeModel(["fine"]), [search_help], **rec.providers).run("go").output == "fine"


@tool
async def orphaned() -> str:
    """Awaits work that something else cancelled: the tool fails, the run was not cancelled."""
    work = asyncio.get_running_loop().create_future()
    work.cancel()
    return await work


@pytest.mark.parametrize("driver", [
    "run",
    pytest.param("arun", marks=pytest.mark.skipif(sys.version_info < (3, 11), reason=(
        "before Python 3.11 a task cannot tell its own cancellation from a CancelledError it was handed"))),
])
async def test_a_tool_raising_cancelled_error_of_its_own_is_a_failed_call_not_a_cancelled_run(rec, driver):
    model = FakeModel([tool_call("orphaned"), "done"])
    agent = Agent(model, [orphaned], **rec.providers)
    run = await (asyncio.to_thread(agent.run, "go") if driver == "run" else agent.arun("go"))

    assert run.stop is Stop.ANSWERED
    [result] = run.steps[0].tool_results
    assert result.outcome is ToolOutcome.ERROR and result.error_type == "CancelledError"
    assert rec.metric("tracedagent.runs", stop_reason="cancelled") == 0


class RecordsTimeouts:
    """A model adapter without ``acomplete`` that takes a request ``timeout``, as the real ones
    do: it records what it was given, in which thread, and under which span."""

    provider_name = "fake"
    model_name = "fake-model"

    def __init__(self, script: list) -> None:
        self.fake = FakeModel(script)
        self.timeouts: list[float | None] = []
        self.threads: list[int] = []
        self.spans: list = []

    def complete(self, messages, tools=None, max_output_tokens=None, temperature=None, timeout=None):
        self.timeouts.append(timeout)
        self.threads.append(threading.get_ident())
        self.spans.append(trace.get_current_span())
        return self.fake.complete(messages, tools, max_output_tokens, temperature)


class RecordsTimeoutsAsync(RecordsTimeouts):
    """The same with ``acomplete``, as the real adapters have."""

    async def acomplete(self, messages, tools=None, max_output_tokens=None, temperature=None, timeout=None):
        self.timeouts.append(timeout)
        self.threads.append(threading.get_ident())
        self.spans.append(trace.get_current_span())
        return await self.fake.acomplete(messages, tools, max_output_tokens, temperature)


@pytest.mark.parametrize("driver, adapter", [("run", RecordsTimeouts), ("arun", RecordsTimeouts),
                                             ("arun", RecordsTimeoutsAsync)])
async def test_adapters_get_what_is_left_of_the_time_budget_as_their_timeout(rec, driver, adapter):
    script = [tool_call("search_help", {"q": "a"}), tool_call("search_help", {"q": "b"}), "done"]
    model = adapter(script)
    run = await drive(Agent(model, [search_help], budget=Budget(max_seconds=60), **rec.providers), driver)

    assert run.stop is Stop.ANSWERED and len(model.timeouts) == 3
    assert all(0 < t <= 60 for t in model.timeouts)
    assert model.timeouts == sorted(model.timeouts, reverse=True), "what is left only shrinks"
    chats = rec.spans("chat fake-model")
    assert [s.get_span_context().span_id for s in model.spans] == [c.context.span_id for c in chats], \
        "the model ran inside its chat span, in whichever thread"
    if driver == "arun" and adapter is RecordsTimeouts:
        assert threading.get_ident() not in model.threads, "a sync model runs in a worker thread under arun"

    unbounded = adapter(script)
    await drive(Agent(unbounded, [search_help], **rec.providers), driver)
    assert unbounded.timeouts == [None] * 3, "no time budget, no timeout"


class TimesOut(RecordsTimeouts):
    """An adapter whose request fails when its timeout passes, as an HTTP client's does."""

    def complete(self, messages, tools=None, max_output_tokens=None, temperature=None, timeout=None):
        self.timeouts.append(timeout)
        time.sleep(timeout)
        raise TimeoutError("read timed out")


def test_run_a_model_call_that_fails_on_the_time_left_ends_the_run_on_its_time_budget(rec):
    model = TimesOut([])
    run = Agent(model, [search_help], budget=Budget(max_seconds=0.05), **rec.providers).run("go")

    assert run.stop is Stop.TIME_BUDGET and isinstance(run.error, TimeoutError)
    assert run.step_count == 1 and run.steps == [] and 0 < model.timeouts[0] <= 0.05
    assert error_types(rec) == {"chat fake-model": "TimeoutError", "invoke_agent agent": "time_budget_exhausted"}


# --- per-tool timeouts --------------------------------------------------------------------------

@pytest.fixture
async def release():
    """An event a stalled sync tool waits on; set when the test ends, so its thread ends too
    (async: set before the test's event loop closes, which waits for its worker threads)."""
    event = threading.Event()
    yield event
    event.set()


def stalls(kind: str, release: threading.Event, timeout: float | None = None):
    """A tool named ``stall`` that does not finish by itself (an async one until cancelled, a
    sync one until ``release`` is set)."""
    if kind == "async":
        async def stall() -> str:
            await asyncio.sleep(60)
            return "finished"
    else:
        def stall() -> str:
            release.wait(60)
            return "finished"
    return tool(name="stall", description="Takes forever.", timeout=timeout)(stall)


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_tool_past_its_timeout_is_an_observation_and_the_run_goes_on(rec, spans, release, kind):
    model = FakeModel([turn(("stall", {}), ("search_help", {"q": "x"})), "done"])
    run = await Agent(model, [stalls(kind, release, timeout=0.05), search_help], **rec.providers).arun("go")

    assert run.stop is Stop.ANSWERED and run.output == "done"
    stalled, helped = run.steps[0].tool_results
    assert stalled.outcome is ToolOutcome.TIMEOUT and helped.outcome is ToolOutcome.OK
    assert "timed out after 0.05 s" in model.calls[1]["messages"][-2]["content"], "the model sees the timeout"
    assert run.blocked_tools() == ["stall"] and run.trajectory() == ["search_help"]
    span = rec.span("execute_tool stall")
    assert span.attributes["tracedagent.tool.outcome"] == "timeout" and span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "timeout", "as for a call the run's deadline cut"
    assert rec.metric("tracedagent.tool.calls", tool_name="stall", outcome="timeout") == 1
    assert spans.open == []


def test_run_enforces_an_async_tools_timeout_but_cannot_stop_a_sync_function(rec, release):
    model = FakeModel([turn(("stall", {})), "done"])
    run = Agent(model, [stalls("async", release, timeout=0.05)], **rec.providers).run("go")
    assert run.steps[0].tool_results[0].outcome is ToolOutcome.TIMEOUT and run.stop is Stop.ANSWERED

    @tool(timeout=0.01)
    def overruns() -> str:
        """Takes longer than it says."""
        time.sleep(0.05)
        return "late but done"

    run = Agent(FakeModel([turn(("overruns", {})), "done"]), [overruns], **rec.providers).run("go")
    assert run.steps[0].tool_results[0].outcome is ToolOutcome.OK, "a running sync call cannot be interrupted"


# --- the time budget at every point --------------------------------------------------------------

async def test_deadline_during_the_model_call_cuts_the_call(rec, spans):
    model = FakeModel(["never finishes"], latency=60)
    run = await Agent(model, TOOLS, budget=Budget(max_seconds=0.05), **rec.providers).arun("go")

    assert run.stop is Stop.TIME_BUDGET and run.step_count == 1 and run.steps == []
    assert error_types(rec) == {"chat fake-model": "timeout", "invoke_agent agent": "time_budget_exhausted"}
    [step] = rec.spans("step")
    assert [(e.name, dict(e.attributes)) for e in step.events] == [
        ("tracedagent.stop", {"tracedagent.stop_reason": "time_budget_exhausted"})]
    assert rec.metric("tracedagent.runs", stop_reason="time_budget_exhausted") == 1
    assert spans.open == []


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_deadline_during_a_tool_cuts_the_call_and_keeps_the_turns_finished_results(rec, spans, release, kind):
    model = FakeModel([turn(("search_help", {"q": "x"}), ("stall", {})), "never asked"])
    agent = Agent(model, [search_help, stalls(kind, release)], budget=Budget(max_seconds=0.2), **rec.providers)
    run = await agent.arun("go")

    assert run.stop is Stop.TIME_BUDGET and run.step_count == 1 and model.call_count == 1
    assert [(r.name, r.outcome) for r in run.steps[0].tool_results] == [("search_help", ToolOutcome.OK),
                                                                         ("stall", ToolOutcome.TIMEOUT)]
    assert error_types(rec) == {"execute_tool stall": "timeout", "invoke_agent agent": "time_budget_exhausted"}
    assert rec.span("execute_tool stall").attributes["tracedagent.tool.outcome"] == "timeout"
    view = rec.only_run()
    assert view.executed_tools == ["search_help"] and view.blocked_tools == ["stall"]
    assert spans.open == []


async def test_deadline_between_steps_ends_the_run_before_the_next_model_call(rec, spans):
    # The run's work stalls after its tool has finished, while no call is in flight (a span
    # processor that blocks, as a slow exporter would), until the budget is gone.
    budget = Budget(max_seconds=0.3)
    spans.end_hooks.append(lambda s: s.name == "execute_tool search_help" and time.sleep(budget.max_seconds))
    model = FakeModel([tool_call("search_help", {"q": "x"}), "never asked"])
    run = await Agent(model, [search_help], budget=budget, **rec.providers).arun("go")

    assert run.stop is Stop.TIME_BUDGET and model.call_count == 1
    assert run.trajectory() == ["search_help"] and run.step_count == 1
    assert error_types(rec) == {"invoke_agent agent": "time_budget_exhausted"}, "no call was cut"
    assert spans.open == []


def test_run_checks_the_time_budget_after_each_steps_tools(rec, spans):
    @tool
    def slow() -> str:
        """Takes longer than the whole budget."""
        time.sleep(0.15)
        return "done slowly"

    model = FakeModel([tool_call("slow"), "never asked"])
    run = Agent(model, [slow], budget=Budget(max_seconds=0.1), **rec.providers).run("go")

    assert run.stop is Stop.TIME_BUDGET and model.call_count == 1
    assert run.trajectory() == ["slow"], "the sync call ran to its end"
    assert error_types(rec) == {"invoke_agent agent": "time_budget_exhausted"}
    assert spans.open == []


# --- cancellation at every point -------------------------------------------------------------------

def assert_cancelled(rec: Recorder, spans: OpenSpans, in_flight: set[str]) -> None:
    """Every span ended; the calls in flight and the run marked cancelled; counted as cancelled."""
    assert spans.open == [] and spans.started == spans.ended
    failed = error_types(rec)
    run_span = rec.only_run().span
    assert failed.pop(run_span.name) == "cancelled"
    assert run_span.attributes["tracedagent.stop_reason"] == "cancelled"
    assert run_span.status.status_code is StatusCode.ERROR
    assert failed.pop("step") == "cancelled"
    assert failed == {name: "cancelled" for name in in_flight}
    assert rec.metric("tracedagent.runs", stop_reason="cancelled") == 1
    assert rec.metric("tracedagent.runs") == 1, "counted once, as cancelled only"


async def cancel_at_start_of(span_name: str, spans: OpenSpans, agent: Agent) -> None:
    """Start ``agent.arun`` in a task and cancel it once ``span_name`` has started (the task is
    then suspended inside that call); ``CancelledError`` must come out of the task."""
    started = asyncio.Event()
    spans.start_hooks.append(lambda s: s.name == span_name and started.set())
    task = asyncio.create_task(agent.arun("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_cancelled_during_the_model_call(rec, spans):
    model = FakeModel(["never finishes"], latency=60)
    await cancel_at_start_of("chat fake-model", spans, Agent(model, TOOLS, **rec.providers))
    assert_cancelled(rec, spans, {"chat fake-model"})
    assert rec.metric("gen_ai.client.operation.duration", error_type="cancelled") == 1


@pytest.mark.parametrize("kinds", [["async"], ["sync"], ["async", "sync"]], ids=["async", "sync", "both at once"])
async def test_cancelled_during_tools(rec, spans, release, kinds):
    toolset = [tool(name=f"stall_{kind}", description="Takes forever.")(stalls(kind, release).fn) for kind in kinds]
    model = FakeModel([turn(*((t.name, {}) for t in toolset)), "never asked"])
    await cancel_at_start_of(f"execute_tool stall_{kinds[-1]}", spans, Agent(model, toolset, **rec.providers))

    assert_cancelled(rec, spans, {f"execute_tool {t.name}" for t in toolset})
    for t in toolset:
        assert rec.metric("tracedagent.tool.calls", tool_name=t.name, outcome="cancelled") == 1


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "sequential"])
async def test_cancelled_between_steps(rec, spans, parallel):
    # Cancelled the moment its step's only tool call has ended: nothing is in flight, and the
    # run goes no further, whether or not the turn's calls would have had tasks of their own.
    model = FakeModel([tool_call("search_help", {"q": "x"}), "never asked"])
    task = asyncio.create_task(Agent(model, [search_help], parallel_tool_calls=parallel, **rec.providers).arun("go"))
    spans.end_hooks.append(lambda s: s.name == "execute_tool search_help" and task.cancel())
    with pytest.raises(asyncio.CancelledError):
        await task

    assert_cancelled(rec, spans, set())
    assert model.call_count == 1
    assert rec.span("execute_tool search_help").attributes["tracedagent.tool.outcome"] == "ok"


async def test_a_run_cancelled_after_two_model_calls_says_what_it_used(rec, spans):
    # Its span carries its steps, its tokens and its tool lists, as a run that returned does.
    started = asyncio.Event()

    @tool
    async def stall(q: str) -> str:
        """Takes forever."""
        started.set()
        await asyncio.sleep(60)
        return "never"

    first = Completion(tool_calls=[ToolCall("c0", "search_help", {"q": "x"})], usage=Usage(100, 10))
    second = Completion(tool_calls=[ToolCall("c1", "stall", {"q": "y"})], usage=Usage(120, 7))
    model = FakeModel([first, second, "never asked"])
    task = asyncio.create_task(Agent(model, [search_help, stall], **rec.providers).arun("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert_cancelled(rec, spans, {"execute_tool stall"})
    attributes = rec.only_run().span.attributes
    assert attributes["tracedagent.steps"] == 2
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (220, 17)
    assert (attributes["tracedagent.usage.total_input_tokens"],
            attributes["tracedagent.usage.total_output_tokens"]) == (220, 17)
    assert list(attributes["tracedagent.tools.requested"]) == ["search_help", "stall"]
    assert list(attributes["tracedagent.tools.executed"]) == ["search_help"]


needs_cancelling = pytest.mark.skipif(sys.version_info < (3, 11), reason=(
    "Task.cancelling, which tells a cancellation a call swallowed, is new in Python 3.11"))


@needs_cancelling
@pytest.mark.parametrize("calls", [1, 2], ids=["one call", "two calls"])
async def test_a_cancellation_a_tool_swallows_still_cancels_the_run(rec, spans, calls):
    started = asyncio.Event()

    @tool
    async def tidy(q: str) -> str:
        """Cleans up when cancelled, and says what it had."""
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return "partial"
        return "full"

    first = turn(*[("tidy", {"q": str(i)}) for i in range(calls)])
    model = FakeModel([first, "never asked"])
    task = asyncio.create_task(Agent(model, [tidy], **rec.providers).arun("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert model.call_count == 1, "the run went no further"
    assert rec.only_run().span.attributes["tracedagent.stop_reason"] == "cancelled"
    assert spans.open == []


@needs_cancelling
@pytest.mark.parametrize("budget", [Budget(), Budget(max_seconds=60)], ids=["no deadline", "a deadline"])
async def test_a_cancellation_as_a_model_call_returns_is_not_lost(rec, spans, budget):
    # A TaskGroup sibling fails the moment the model's answer is ready: under a deadline the
    # call is awaited through wait_for, which on Python 3.11 would hand back the answer and
    # drop the cancellation.
    returned = asyncio.Event()

    class Signals(FakeModel):
        async def acomplete(self, messages, **options):
            completion = await super().acomplete(messages, **options)
            returned.set()
            return completion

    model = Signals([tool_call("search_help", {"q": "x"}), "never asked"])

    async def failing_sibling() -> None:
        await returned.wait()
        raise RuntimeError("a sibling failed")

    with pytest.raises(ExceptionGroup):  # noqa: F821 - Python 3.11+, as the mark says
        async with asyncio.TaskGroup() as group:  # type: ignore[attr-defined]
            run_task = group.create_task(Agent(model, [search_help], budget=budget, **rec.providers).arun("go"))
            group.create_task(failing_sibling())

    assert run_task.cancelled() and model.call_count == 1
    assert rec.only_run().span.attributes["tracedagent.stop_reason"] == "cancelled"
    assert spans.open == []


@pytest.mark.parametrize("first, options", [
    (tool_call("login", {"user_name": "ana"}), {}),
    (tool_call("login", {"user_name": "ana"}), {"budget": Budget(max_seconds=60)}),
    (turn(("login", {"user_name": "ana"}), ("whoami", {})), {}),
    (turn(("login", {"user_name": "ana"}), ("whoami", {})), {"parallel_tool_calls": False}),
], ids=["one call", "one call, a deadline", "two calls", "two calls in sequence"])
async def test_what_a_tool_sets_in_its_context_stays_in_its_call(first, options):
    user: contextvars.ContextVar[str | None] = contextvars.ContextVar("user", default=None)
    seen: list[str | None] = []

    @tool
    async def login(user_name: str) -> str:
        """Log in as a user (as structlog's bind_contextvars would bind it)."""
        user.set(user_name)
        return "ok"

    @tool
    async def whoami() -> str:
        """Who is logged in."""
        seen.append(user.get())
        return str(user.get())

    class Watching(FakeModel):
        async def acomplete(self, messages, **kwargs):
            seen.append(user.get())
            return await super().acomplete(messages, **kwargs)

    run = await Agent(Watching([first, tool_call("whoami"), "done"]), [login, whoami], **options).arun("go")
    assert run.ok and run.blocked_tools() == []
    assert seen and seen == [None] * len(seen), "neither the model nor a later call sees the tool's context"
    assert user.get() is None, "nor does the caller"


@pytest.mark.parametrize("options", [{"parallel_tool_calls": False}, {"max_tool_concurrency": 1}],
                         ids=["in sequence", "one at a time"])
async def test_calls_the_deadline_kept_from_starting_are_not_dispatched(rec, spans, options):
    started: list[int] = []

    @tool
    async def work(n: int) -> str:
        """Works for a long time."""
        started.append(n)
        await asyncio.sleep(60)
        return "done"

    model = FakeModel([turn(("work", {"n": 1}), ("work", {"n": 2}), ("work", {"n": 3})), "never asked"])
    run = await Agent(model, [work], budget=Budget(max_seconds=0.2), **rec.providers, **options).arun("go")

    assert run.stop is Stop.TIME_BUDGET and started == [1]
    assert run.blocked_tools() == ["work"] and run.not_dispatched_tools() == ["work", "work"]
    assert len(tool_spans(rec)) == 1, "no span for a call that never started"
    assert rec.span("step").attributes["tracedagent.tools.not_dispatched_reason"] == "time_budget_exhausted"
    assert spans.open == []


async def test_a_tools_own_timeout_error_is_its_failure_not_its_timeout(rec):
    @tool(timeout=30)
    async def fetch(url: str) -> str:
        """Fetch a page."""
        raise asyncio.TimeoutError("the upstream's own timeout")

    run = await Agent(FakeModel([tool_call("fetch", {"url": "u"}), "done"]), [fetch], **rec.providers).arun("go")
    [result] = run.steps[0].tool_results
    assert result.outcome is ToolOutcome.ERROR and result.error_type == "TimeoutError"
    assert rec.span("execute_tool fetch").attributes["error.type"] == "TimeoutError"


async def _under_wait_for(run):
    return await asyncio.wait_for(run, 0.05)


async def _under_timeout(run):
    async with asyncio.timeout(0.05):  # type: ignore[attr-defined]  # Python 3.11+
        return await run


@pytest.mark.parametrize("bounded", [
    _under_wait_for,
    pytest.param(_under_timeout, marks=pytest.mark.skipif(sys.version_info < (3, 11),
                                                          reason="asyncio.timeout is new in Python 3.11")),
], ids=["asyncio.wait_for", "asyncio.timeout"])
async def test_a_callers_timeout_around_arun_cancels_the_run(rec, spans, bounded):
    model = FakeModel(["never finishes"], latency=60)
    with pytest.raises(asyncio.TimeoutError):
        await bounded(Agent(model, TOOLS, **rec.providers).arun("go"))
    assert_cancelled(rec, spans, {"chat fake-model"})


def interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize("point, in_flight", [
    ("model call", {"chat fake-model"}),
    ("tool", {"execute_tool interrupted"}),
    ("between steps", set()),
])
def test_keyboard_interrupt_in_run_ends_every_span_and_counts_a_cancelled_run(rec, spans, point, in_flight):
    @tool
    def interrupted() -> str:
        """Ctrl-C arrives while it runs."""
        raise KeyboardInterrupt

    if point == "model call":
        script = [KeyboardInterrupt()]
    elif point == "tool":
        script = [tool_call("interrupted")]
    else:
        script = [tool_call("search_help", {"q": "x"}), "never asked"]
        spans.end_hooks.append(lambda s: s.name == "execute_tool search_help" and interrupt())
    agent = Agent(FakeModel(script), [interrupted, search_help], **rec.providers)
    with pytest.raises(KeyboardInterrupt):
        agent.run("go")
    assert_cancelled(rec, spans, in_flight)
