"""``Agent.stream`` and ``Agent.astream``: the loop's events as they happen, with ``run``'s contract.

Every stop reason through both streaming drivers gives the ``Run``, the span tree and the
metrics that ``run`` / ``arun`` give for the same script (streaming adds only its own chat-span
attributes and the time-to-first-chunk histogram); however the consumer leaves, every span
ends and the run is counted; the deadline cuts a slow stream with the text so far kept.
The model adapters streaming through their SDKs are tested in ``test_stream_models.py``.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from typing import Any, AsyncIterator, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from async_support import DRIVER_ATTRIBUTES, OpenSpans, shape, watch
from sample_tools import search_help
from scenarios import OUTPUT_TYPES, RETURNED_STOPS, SCENARIOS, TOOLS
from test_async import assert_cancelled, error_types, metric_points, summary
from tracedagent import (Agent, Budget, Completion, RunEnd, Stop, StreamNotEnded, TextDelta, ToolCall, ToolCallDelta,
                         TurnEnd, Usage)
from tracedagent._core import _names as N
from tracedagent._core._run import current_run
from tracedagent._instrumentation import _telemetry
from tracedagent.testing import FakeModel, Recorder, tool_call

STREAMING_ATTRIBUTES = (N.GEN_AI_REQUEST_STREAM, N.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, N.RESPONSE_CHUNKS)
"""What a streamed chat span says that a completed one does not."""


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture(autouse=True)
def telemetry_never_fails(caplog, monkeypatch):
    """However a stream ends, its spans end where they began: no telemetry failure is reported
    (a span ended in another context than its own would be: its context token would not detach)."""
    monkeypatch.setattr(_telemetry, "_reported", set())
    yield
    assert [r.getMessage() for r in caplog.records if "telemetry failed" in r.getMessage()] == []


@pytest.fixture
def spans(rec) -> OpenSpans:
    return watch(rec)


def read(agent: Agent, task: str = "help me", **options: Any) -> tuple[list, Any]:
    """Every event of ``agent.stream``, and its ``run``."""
    with agent.stream(task, **options) as stream:
        events = list(stream)
    return events, stream.run


async def aread(agent: Agent, task: str = "help me", **options: Any) -> tuple[list, Any]:
    async with agent.astream(task, **options) as stream:
        events = [event async for event in stream]
    return events, stream.run


def unstreamed(spans: list) -> list:
    """The span tree without what streaming adds, nor the driver's name."""
    return [_without(node) for node in shape(spans)]


def _without(node: tuple) -> tuple:
    name, attributes, status, description, events, children = node
    attributes = {k: v for k, v in attributes.items() if k not in STREAMING_ATTRIBUTES}
    return name, attributes, status, description, events, [_without(child) for child in children]


def without_first_chunks(points: dict) -> dict:
    return {key: value for key, value in points.items() if key[0] != N.METRIC_TIME_TO_FIRST_CHUNK}


def assert_events_tell_the_run(events: list, run: Any, agent: str = "support") -> None:
    """The events are the run: each step's deltas are its text, its calls and results are its
    own, one ``step_end`` per recorded step, and ``run_end`` last, carrying the run."""
    assert events[-1] == RunEnd(agent=agent, run=run) and [e.type for e in events].count("run_end") == 1
    assert {e.agent for e in events} == {agent}
    by_step: list[list] = [[]]
    for event in events[:-1]:
        by_step[-1].append(event)
        if event.type == "step_end":
            by_step.append([])
    assert by_step[-1] == [] and len(by_step) - 1 == len(run.steps)
    for step, step_events in zip(run.steps, by_step):
        assert step_events[-1].step is step
        assert "".join(e.text for e in step_events if e.type == "text_delta") == step.completion.text
        assert [e.call for e in step_events if e.type == "tool_call"] == list(step.completion.tool_calls)
        assert [e.result for e in step_events if e.type == "tool_result"] == step.tool_results


# --- the same run as run / arun ------------------------------------------------------------------

@pytest.mark.parametrize("stop", sorted(RETURNED_STOPS))
async def test_stream_and_astream_make_the_same_run_and_trace_as_run_and_arun(stop):
    script, budget, steps = SCENARIOS[stop]
    turns = script()
    recorders = {driver: Recorder() for driver in ("run", "stream", "arun", "astream")}

    def agent(driver: str) -> Agent:
        model = FakeModel([_with_text(t) for t in turns], chunk_size=3)
        return Agent(model, TOOLS, budget=budget, name="support", output_type=OUTPUT_TYPES.get(stop),
                     **recorders[driver].providers)

    ran = agent("run").run("help me")
    streamed_events, streamed = read(agent("stream"))
    aran = await agent("arun").arun("help me")
    astreamed_events, astreamed = await aread(agent("astream"))

    assert streamed.stop is astreamed.stop is stop
    if steps is not None:
        assert streamed.step_count == steps
    for (a, b) in (("run", "stream"), ("arun", "astream")):
        ra, rb = {"run": ran, "arun": aran}[a], {"stream": streamed, "astream": astreamed}[b]
        assert summary(rb) == summary(ra)
        assert rb.steps == ra.steps
        assert unstreamed(recorders[b].spans()) == unstreamed(recorders[a].spans())
        assert without_first_chunks(metric_points(recorders[b])) == metric_points(recorders[a])
    assert_events_tell_the_run(streamed_events, streamed)
    assert_events_tell_the_run(astreamed_events, astreamed)
    for driver in ("stream", "astream"):
        assert recorders[driver].only_run().span.attributes[N.DRIVER] == driver


def _with_text(turn: Any) -> Any:
    """Tool-calling turns with some text too, so that every step streams."""
    if isinstance(turn, Completion) and not turn.text:
        return Completion(text="Let me look that up.", tool_calls=turn.tool_calls, finish_reason=turn.finish_reason)
    return turn


def test_a_streamed_chat_span_says_it_streamed_when_its_first_chunk_came_and_how_many_came(rec):
    model = FakeModel(["Refunds take five days."], chunk_size=5)  # 5 text chunks and the TurnEnd
    read(Agent(model, **rec.providers))

    chat = rec.span("chat fake-model")
    assert chat.attributes[N.GEN_AI_REQUEST_STREAM] is True
    assert chat.attributes[N.RESPONSE_CHUNKS] == 6
    assert 0 < chat.attributes[N.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] < (chat.end_time - chat.start_time) / 1e9
    assert not [e for s in rec.spans() for e in s.events if "chunk" in e.name]  # nothing per chunk
    assert rec.metric(N.METRIC_TIME_TO_FIRST_CHUNK, **{N.GEN_AI_PROVIDER_NAME: "fake"}) == 1


class Complete:
    """A model without ``stream``: its whole text is one delta, and its spans are ``run``'s."""

    def complete(self, messages, tools=None, max_output_tokens=None, temperature=None) -> Completion:
        return Completion(text="All at once.", finish_reason="stop")


def test_a_model_that_does_not_stream_is_one_delta_and_the_trace_of_run(rec):
    events, run = read(Agent(Complete(), name="support", **rec.providers))
    by_run = Recorder()
    Agent(Complete(), name="support", **by_run.providers).run("help me")

    assert [(e.type, getattr(e, "text", None)) for e in events[:2]] == [("text_delta", "All at once.")] + [
        ("step_end", None)]
    assert run.ok and run.output == "All at once."
    assert shape(rec.spans()) == shape(by_run.spans())
    assert rec.metric(N.METRIC_TIME_TO_FIRST_CHUNK) == 0


async def test_astream_reads_a_model_that_streams_only_synchronously_in_a_worker_thread(rec):
    class SyncOnly:
        def complete(self, *args: Any, **kwargs: Any) -> Completion:
            raise AssertionError("streamed, not completed")

        def stream(self, messages, tools=None, max_output_tokens=None, temperature=None) -> Iterator[Any]:
            yield "In a "
            yield "thread."
            yield TurnEnd(usage=Usage(input_tokens=3, output_tokens=2), finish_reason="stop")

    events, run = await aread(Agent(SyncOnly(), name="support", **rec.providers))
    assert [e.text for e in events if e.type == "text_delta"] == ["In a ", "thread."]
    assert run.ok and run.output == "In a thread." and run.input_tokens == 3


def test_tool_call_fragments_add_up_to_the_calls_a_completion_would_carry(rec):
    class Fragments:
        def complete(self, *args: Any, **kwargs: Any) -> Completion:
            raise AssertionError("streamed, not completed")

        def stream(self, messages, tools=None, max_output_tokens=None, temperature=None) -> Iterator[Any]:
            if len(messages) > 1:
                yield "Done."
                return
            yield ToolCallDelta(index=1, id="b", name="search_help")
            yield ToolCallDelta(index=0, id="a", name="search_help", arguments='{"q"')
            yield ToolCallDelta(index=1, arguments='{"q": "later"}')
            yield ToolCallDelta(index=0, arguments=': "first"}')
            yield ToolCallDelta(index=2, id="c", name="search_help", arguments="{not json")
            yield TurnEnd(finish_reason="tool_calls", model="m1", response_id="r1")

    events, run = read(Agent(Fragments(), [search_help], name="support", **rec.providers))
    assert run.steps[0].completion.tool_calls == [ToolCall("a", "search_help", {"q": "first"}),
                                                  ToolCall("b", "search_help", {"q": "later"}),
                                                  ToolCall("c", "search_help", "{not json")]
    assert [r.outcome.value for r in run.steps[0].tool_results] == ["ok", "ok", "invalid_arguments"]
    assert run.steps[0].completion.model == "m1" and run.steps[0].completion.response_id == "r1"
    assert_events_tell_the_run(events, run)


def test_a_stream_that_yields_something_else_is_the_models_error(rec):
    class Junk:
        def complete(self, *args: Any, **kwargs: Any) -> Completion:
            raise AssertionError

        def stream(self, messages, tools=None, max_output_tokens=None, temperature=None) -> Iterator[Any]:
            yield "Fine so far, "
            yield 42

    events, run = read(Agent(Junk(), **rec.providers))
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, TypeError)
    assert run.steps[0].completion.text == "Fine so far, "  # what came before is kept
    assert error_types(rec)["chat unknown"] == "TypeError"


# --- the stream's run -------------------------------------------------------------------------------

def test_stream_run_before_the_end_says_so(rec):
    stream = Agent(FakeModel(["Hello there."]), **rec.providers).stream("hi")
    with pytest.raises(StreamNotEnded, match="not been read"):
        stream.run
    first = next(stream)
    assert first.type == "text_delta"
    with pytest.raises(StreamNotEnded, match="has not ended"):
        stream.run
    rest = list(stream)
    assert rest[-1].type == "run_end" and stream.run is rest[-1].run
    stream.close()  # after the end: nothing changes
    assert stream.run.ok


def test_the_consumers_context_is_its_own_between_events(rec):
    outer = Agent(FakeModel(["One, two."], chunk_size=4), name="outer", **rec.providers)
    seen = []
    with outer.stream("hi") as stream:
        for event in stream:
            seen.append((trace.get_current_span().get_span_context().is_valid, current_run.get()))
            if event.type == "text_delta":  # a run started here is not a sub-run of the streamed one
                Agent(FakeModel(["Inner."]), name="inner", **rec.providers).run("inner")
    assert set(seen) == {(False, None)}
    assert len({v.trace_id for v in rec.runs()}) == len(rec.runs()) == 4


# --- however the consumer leaves, the trace ends ---------------------------------------------------------

SLOW = "This answer is long enough to stream in many chunks, and the consumer will not read it all."


def assert_left_early(rec: Recorder, spans: OpenSpans, run: Any) -> None:
    assert run.stop is Stop.CANCELLED and not run.ok
    assert run.output == "Stopped: the run was cancelled before it ended."
    assert_cancelled(rec, spans, {"chat fake-model"})
    chat = rec.span("chat fake-model")
    assert chat.attributes[N.RESPONSE_CHUNKS] >= 1 and N.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK in chat.attributes


def test_a_consumer_that_leaves_after_the_first_delta_ends_the_run_cancelled(rec, spans):
    with Agent(FakeModel([SLOW], chunk_size=2), **rec.providers).stream("go") as stream:
        for event in stream:
            assert event.type == "text_delta"
            break
    assert_left_early(rec, spans, stream.run)


def test_a_stream_dropped_without_closing_ends_its_run_when_collected(rec, spans):
    stream = Agent(FakeModel([SLOW], chunk_size=2), **rec.providers).stream("go")
    for _ in stream:
        break
    h = stream._h
    del stream, _
    gc.collect()
    assert h.run is not None
    assert_left_early(rec, spans, h.run)


def test_an_exception_in_the_consumers_block_ends_the_run_cancelled(rec, spans):
    with pytest.raises(KeyError):
        with Agent(FakeModel([SLOW], chunk_size=2), **rec.providers).stream("go") as stream:
            for event in stream:
                raise KeyError(event.type)
    assert_left_early(rec, spans, stream.run)


@pytest.mark.parametrize("first", ["the run's", "the model call's"])
def test_an_astream_left_open_when_asyncio_run_ends_is_cancelled_without_a_logged_error(rec, spans, caplog,
                                                                                        monkeypatch, first):
    """asyncio's shutdown of async generators closes it from asyncio's context, not the run's:
    its spans end there without restoring a span context that is not there to restore (which
    raised resetting the run's variable, then logged "Failed to detach context" per span). It
    closes every open generator, the model call's too, in no set order: both orders are here."""
    async def in_order(loop: asyncio.AbstractEventLoop) -> None:
        generators = sorted(loop._asyncgens, key=lambda g: (g.ag_code.co_name == "astream") == (first == "the run's"))
        loop._asyncgens.clear()
        for generator in generators:
            await generator.aclose()

    monkeypatch.setattr(asyncio.BaseEventLoop, "shutdown_asyncgens", in_order)
    kept = []

    async def leave_it_open() -> None:
        stream = Agent(FakeModel([SLOW], chunk_size=2), **rec.providers).astream("go")
        kept.append(stream)
        async for _ in stream:
            break

    asyncio.run(leave_it_open())
    assert_left_early(rec, spans, kept[0]._h.run)
    assert [r.getMessage() for r in caplog.records if r.levelno >= 40] == []


async def test_an_async_consumer_that_leaves_after_the_first_delta_ends_the_run_cancelled(rec, spans):
    async with Agent(FakeModel([SLOW], chunk_size=2), **rec.providers).astream("go") as stream:
        async for event in stream:
            break
    assert_left_early(rec, spans, stream.run)


async def test_an_async_stream_dropped_without_closing_is_closed_on_its_loop(rec, spans):
    stream = Agent(FakeModel([SLOW], chunk_size=2), **rec.providers).astream("go")
    async for _ in stream:
        break
    h = stream._h
    del stream
    gc.collect()
    for _ in range(20):  # the close is a task of its own on this loop
        if h.run is not None:
            break
        await asyncio.sleep(0)
    assert_left_early(rec, spans, h.run)


async def test_cancelling_the_task_reading_astream_is_cancelling_arun(rec, spans):
    model = FakeModel([SLOW], chunk_size=2, chunk_delay=0.01)
    first = asyncio.Event()
    holder: list = []

    async def consume() -> None:
        async with Agent(model, **rec.providers).astream("go") as stream:
            holder.append(stream)
            async for _ in stream:
                first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_cancelled(rec, spans, {"chat fake-model"})
    assert holder[0].run.stop is Stop.CANCELLED


# --- the deadline, mid-stream -------------------------------------------------------------------------

class Stalls:
    """Two chunks at once, then nothing for a long time (``stream``: each later chunk after
    ``pause`` seconds; ``astream``: never, until cancelled)."""

    provider_name = "slow"

    def __init__(self, pause: float) -> None:
        self.pause = pause

    def complete(self, *args: Any, **kwargs: Any) -> Completion:
        raise AssertionError("streamed, not completed")

    def stream(self, messages, tools=None, max_output_tokens=None, temperature=None) -> Iterator[Any]:
        yield "Hello, "
        yield "wor"
        while True:
            time.sleep(self.pause)
            yield "ld"

    async def astream(self, messages, tools=None, max_output_tokens=None, temperature=None) -> AsyncIterator[Any]:
        yield "Hello, "
        yield "wor"
        await asyncio.Event().wait()
        yield "never"


@pytest.mark.parametrize("driver", ["stream", "astream"])
async def test_the_deadline_in_the_middle_of_a_slow_stream_keeps_the_text_so_far(rec, spans, driver):
    agent = Agent(Stalls(pause=0.5), budget=Budget(max_seconds=0.3), name="support", **rec.providers)
    events, run = read(agent) if driver == "stream" else await aread(agent)

    deltas = "".join(e.text for e in events if e.type == "text_delta")
    assert run.stop is Stop.TIME_BUDGET and run.step_count == len(run.steps) == 1
    assert run.steps[0].completion.text == deltas
    assert deltas == ("Hello, world" if driver == "stream" else "Hello, wor")  # run: the chunk that came late
    assert_events_tell_the_run(events, run)
    assert error_types(rec) == {"chat slow": "timeout", "invoke_agent support": "time_budget_exhausted"}
    assert spans.open == []


# --- many at once ------------------------------------------------------------------------------------------

async def test_200_concurrent_astream_runs_keep_their_own_traces(rec, spans):
    async def one(i: int) -> tuple[list, Any]:
        model = FakeModel([tool_call("search_help", {"q": f"q{i}"}), f"Answer number {i}."], chunk_size=3,
                          chunk_delay=0.001)
        return await aread(Agent(model, [search_help], name=f"agent-{i}", **rec.providers), f"task {i}")

    results = await asyncio.gather(*(one(i) for i in range(200)))

    assert spans.open == [] and spans.started == spans.ended == 200 * 6  # a run, 2 steps, 2 chats and a tool call
    by_trace: dict[int, list] = {}
    for span in rec.spans():
        by_trace.setdefault(span.context.trace_id, []).append(span)
    assert len(by_trace) == 200
    for i, (events, run) in enumerate(results):
        assert run.ok and run.output == f"Answer number {i}."
        assert {e.agent for e in events} == {f"agent-{i}"}
        assert "".join(e.text for e in events if e.type == "text_delta") == f"Answer number {i}."
        own = by_trace[int(run.trace_id, 16)]
        assert {s.attributes.get(N.GEN_AI_AGENT_NAME) for s in own if N.GEN_AI_AGENT_NAME in s.attributes} == {
            f"agent-{i}"}
        assert len(own) == 6
    assert rec.metric("tracedagent.runs", stop_reason="answered") == 200


# --- found by review: a stream read straight from the call, and streams that fail to close -------

def test_a_stream_read_straight_from_the_call_yields_every_event(rec, spans):
    """``for event in agent.stream(task)`` holds nothing but the iterator: it must hold the stream."""
    events = [event.type for event in Agent(FakeModel(["hello world"], chunk_size=3), **rec.providers).stream("go")]
    assert events[-1] == "run_end" and events.count("text_delta") >= 3
    assert spans.started == spans.ended == 3


def test_a_models_own_cancelled_error_in_its_stream_is_its_failure_as_under_run(rec, spans):
    class Cancels:
        def complete(self, messages, tools=None, max_output_tokens=None, temperature=None):
            raise asyncio.CancelledError

        def stream(self, messages, tools=None, max_output_tokens=None, temperature=None):
            yield "hello"
            raise asyncio.CancelledError

    assert Agent(Cancels(), **rec.providers).run("go").stop is Stop.MODEL_ERROR
    events, run = read(Agent(Cancels(), **rec.providers))
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, asyncio.CancelledError)
    assert spans.started == spans.ended == 6


class ClosesBadly:
    """A provider response whose ``close`` raises, as a broken HTTP stream's may."""

    def __init__(self) -> None:
        self.chunks = iter(["hello ", "world"])

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        return next(self.chunks)

    def close(self) -> None:
        raise OSError("close failed")

    def __aiter__(self) -> ClosesBadly:
        return self

    async def __anext__(self) -> str:
        try:
            return next(self.chunks)
        except StopIteration:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        raise OSError("close failed")


class ClosingBadlyModel:
    def complete(self, messages, tools=None, max_output_tokens=None, temperature=None):
        return Completion(text="hello world")

    def stream(self, messages, tools=None, max_output_tokens=None, temperature=None):
        return ClosesBadly()

    def astream(self, messages, tools=None, max_output_tokens=None, temperature=None):
        return ClosesBadly()


async def test_a_model_stream_whose_close_fails_ends_every_span_however_the_stream_ends(rec, spans):
    events, run = read(Agent(ClosingBadlyModel(), **rec.providers))
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, OSError), "a failed close is the call's failure"
    events, arun = await aread(Agent(ClosingBadlyModel(), **rec.providers))
    assert arun.stop is Stop.MODEL_ERROR and isinstance(arun.error, OSError)
    assert spans.started == spans.ended == 6

    with Agent(ClosingBadlyModel(), **rec.providers).stream("go") as stream:
        for _ in stream:
            break  # the consumer leaves: cancelled, whatever the close says
    async with Agent(ClosingBadlyModel(), **rec.providers).astream("go") as astream:
        async for _ in astream:
            break
    assert stream.run.stop is astream.run.stop is Stop.CANCELLED
    assert spans.started == spans.ended == 12


async def test_astream_over_a_synchronous_stream_cancelled_mid_read_propagates_and_closes_the_stream(rec, spans):
    closed = []
    reading = threading.Event()

    class SyncOnly:
        def complete(self, messages, tools=None, max_output_tokens=None, temperature=None):
            return Completion(text="x")

        def stream(self, messages, tools=None, max_output_tokens=None, temperature=None):
            try:
                yield "hello "
                reading.set()
                time.sleep(0.5)  # a read still running in its worker thread when the task is cancelled
                yield "world"
            finally:
                closed.append(True)

    async def consume(stream) -> None:
        async for _ in stream:
            pass

    stream = Agent(SyncOnly(), **rec.providers).astream("go")
    task = asyncio.create_task(consume(stream))
    assert await asyncio.to_thread(reading.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stream.run.stop is Stop.CANCELLED and stream.run.error is None
    assert closed == [True], "the close waited for the read in its thread, then closed the generator"
    assert spans.started == spans.ended == 3


# --- the streams as pumps of the run machine: events between its halves --------------------------

async def leave_at(agent: Agent, driver: str, leave: Any) -> Any:
    """Read ``agent``'s stream until ``leave(event)``, then leave: the stream's ``run``."""
    if driver == "stream":
        with agent.stream("go") as stream:
            for event in stream:
                if leave(event):
                    break
        return stream.run
    async with agent.astream("go") as astream:
        async for event in astream:
            if leave(event):
                break
    return astream.run


@pytest.mark.parametrize("driver", ["stream", "astream"])
async def test_a_consumer_that_leaves_at_a_step_end_cancels_the_run_before_the_next_step_starts(rec, spans, driver):
    """``step_end`` comes between the step's end and the next one's start (``step_done`` then
    ``next_turn``): no step span was started for a turn nobody asked for, and the cancelled run
    span says what the run used (steps, tokens, tools), as ``stream.run`` does."""
    turns = [Completion(text="Looking.", tool_calls=[ToolCall("c1", "search_help", {"q": "refund"})],
                        usage=Usage(input_tokens=11, output_tokens=4)), "Refunds take five days."]
    agent = Agent(FakeModel(turns, chunk_size=3), [search_help], name="support", **rec.providers)
    run = await leave_at(agent, driver, lambda event: event.type == "step_end")

    assert run.stop is Stop.CANCELLED and run.step_count == len(run.steps) == 1
    assert run.input_tokens == 11 and run.steps[0].tool_results[0].outcome.value == "ok"
    assert spans.open == [] and [s.name for s in rec.spans()].count("step") == 1
    attributes = rec.only_run().span.attributes
    assert attributes[N.STOP_REASON] == "cancelled" and attributes[N.STEPS] == 1
    assert attributes[N.GEN_AI_USAGE_INPUT_TOKENS] == 11 and attributes[N.GEN_AI_USAGE_OUTPUT_TOKENS] == 4
    assert list(attributes[N.TOOLS_REQUESTED]) == list(attributes[N.TOOLS_EXECUTED]) == ["search_help"]
    assert rec.metric("tracedagent.runs", stop_reason="cancelled") == 1


@pytest.mark.parametrize("driver", ["stream", "astream"])
async def test_a_turns_tool_calls_are_told_before_the_run_decides_on_them(rec, spans, driver):
    """A consumer that leaves at the ``tool_call`` of a turn the repeat check would stop leaves
    a cancelled run: the check (``decide``) comes after the events (``record``)."""
    same = [tool_call("search_help", {"q": "refund"}) for _ in range(3)]
    agent = Agent(FakeModel(same + ["never"]), [search_help], budget=Budget(repeat_limit=1), name="support",
                  **rec.providers)
    calls = []
    run = await leave_at(agent, driver, lambda event: event.type == "tool_call" and calls.append(event) is None
                         and len(calls) == 2)
    assert run.stop is Stop.CANCELLED and run.step_count == 2
    assert spans.open == [] and rec.only_run().span.attributes[N.STOP_REASON] == "cancelled"
    assert [s.name for s in rec.spans()].count("execute_tool search_help") == 1
    _, read_to_the_end = read(Agent(FakeModel(same + ["never"]), [search_help], budget=Budget(repeat_limit=1)))
    assert read_to_the_end.stop is Stop.REPEATED_CALL


async def test_a_second_task_reading_an_astream_mid_event_is_refused_and_the_run_goes_on(rec, spans):
    """Two readers at once: the second is told the stream is being read, as an async generator
    says it, and the first reader's event - and the run - are untouched."""
    model = FakeModel(["Hello there, this is a slow answer."], chunk_size=4, chunk_delay=0.01)
    async with Agent(model, **rec.providers).astream("go") as stream:
        first = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.001)  # the first read waits for its chunk
        with pytest.raises(RuntimeError, match="already running"):
            await stream.__anext__()
        events = [await first] + [event async for event in stream]
    assert stream.run.ok and "".join(e.text for e in events if e.type == "text_delta") == stream.run.output
    assert spans.open == [] and spans.started == spans.ended == 3
