"""What a trace viewer shows of a run's story (issue #40, finding 5): a stopped run's output is
not an assistant's answer and says its stop reason; decisions, a retry and cut content are
events or marks the view shows; a cancelled stream keeps what it had received; a paused run's
trace leads to its resumption. Jaeger's GenAI view itself is driven in tests/stack/test_jaeger_ui.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Iterator

import pytest

from sample_tools import TOOLS, close_account, search_help
from tracedagent import Agent, Budget, Completion, Registry, Stop, tool
from tracedagent._core import _names as N
from tracedagent.testing import FakeModel, Recorder, tool_call


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def _output(span: Any) -> list[dict[str, Any]]:
    return json.loads(span.attributes[N.GEN_AI_OUTPUT_MESSAGES])


def _events(span: Any, name: str) -> list[dict[str, Any]]:
    return [dict(e.attributes) for e in span.events if e.name == name]


# --- 1. a stopped run's output ------------------------------------------------------------

def test_a_stopped_runs_sentence_is_a_system_message_with_its_stop_reason_as_a_part(rec):
    agent = Agent(FakeModel([tool_call("search_help", {"q": str(i)}) for i in range(5)]), TOOLS, name="support",
                  budget=Budget(max_steps=2), capture_content=True, **rec.providers)
    run = agent.run("Where is my order?")
    [message] = _output(rec.span("invoke_agent support"))
    assert run.stop is Stop.STEP_BUDGET and run.output.startswith("Stopped:")
    assert message["role"] == "system" != "assistant"
    assert message["parts"] == [{"type": "text", "content": run.output},
                                {"type": "tracedagent.stop", "stop_reason": "step_budget_exhausted"}]
    assert message["finish_reason"] == "step_budget_exhausted"


def test_a_paused_runs_output_says_how_many_calls_wait(rec):
    agent = Agent(FakeModel([tool_call("close_account", {"account": "A1"})]), [search_help, close_account],
                  name="desk", capture_content=True, **rec.providers)
    run = agent.run("close A1")
    [message] = _output(rec.span("invoke_agent desk"))
    assert run.stop is Stop.APPROVAL_REQUIRED and run.output.startswith("Paused")
    assert message["role"] == "system"
    assert message["parts"][-1] == {"type": "tracedagent.stop", "stop_reason": "approval_required", "pending_calls": 1}


def test_an_answer_is_still_the_assistants(rec):
    Agent(FakeModel(["It ships today."]), TOOLS, name="support", capture_content=True, **rec.providers).run("q")
    assert [m["role"] for m in _output(rec.span("invoke_agent support"))] == ["assistant"]


async def test_a_cancelled_run_says_so_where_its_answer_would_be(rec):
    started = asyncio.Event()

    class Slow:
        async def acomplete(self, request, deadline=None):
            started.set()
            await asyncio.sleep(60)

        def complete(self, request):  # pragma: no cover - arun awaits acomplete
            raise AssertionError

    task = asyncio.ensure_future(Agent(Slow(), name="slow", capture_content=True, **rec.providers).arun("q"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    span = rec.span("invoke_agent slow")
    assert span.attributes[N.STOP_REASON] == "cancelled"
    assert _output(span) == [{"role": "system", "parts": [{"type": "tracedagent.stop", "stop_reason": "cancelled"}],
                              "finish_reason": "cancelled"}]


def test_without_capture_the_stop_reason_is_still_an_attribute_and_an_event(rec):
    Agent(FakeModel([tool_call("search_help", {"q": str(i)}) for i in range(5)]), TOOLS, name="support",
          budget=Budget(max_steps=2), **rec.providers).run("q")
    span = rec.span("invoke_agent support")
    assert N.GEN_AI_OUTPUT_MESSAGES not in span.attributes
    assert span.attributes[N.STOP_REASON] == "step_budget_exhausted"
    assert _events(span, N.STOP_EVENT)[0][N.STOP_REASON] == "step_budget_exhausted"


# --- 2. decisions, cut content ------------------------------------------------------------

def _paused(rec: Recorder) -> Any:
    turn = Completion(tool_calls=[tool_call("close_account", {"account": "A1"}, id="c0").tool_calls[0],
                                  tool_call("close_account", {"account": "B2"}, id="c1").tool_calls[0]])
    return Agent(FakeModel([turn]), [search_help, close_account], name="desk", **rec.providers).run("close both")


def test_each_decision_is_an_event_on_the_resumed_runs_span(rec):
    paused = _paused(rec)
    rec.clear()
    run = Agent(FakeModel(["done"]), [search_help, close_account], name="desk", **rec.providers).resume(
        paused.checkpoint(), {"c0": True, "c1": "not this one"})
    assert run.ok
    events = _events(rec.span("invoke_agent desk"), N.APPROVAL_EVENT)
    assert events == [
        {N.GEN_AI_TOOL_NAME: "close_account", N.GEN_AI_TOOL_CALL_ID: "c0", N.DECISION: "approved"},
        {N.GEN_AI_TOOL_NAME: "close_account", N.GEN_AI_TOOL_CALL_ID: "c1", N.DECISION: "denied"}]


def test_a_100_kb_tool_result_ends_with_a_cut_mark_saying_how_much_is_shown(rec):
    @tool
    def dump_log() -> str:
        """The whole log."""
        return "x" * 100_000

    Agent(FakeModel([tool_call("dump_log", {}), "ok"]), [dump_log], name="ops", capture_content=True,
          **rec.providers).run("q")
    span = rec.span("execute_tool dump_log")
    result = span.attributes[N.GEN_AI_TOOL_CALL_RESULT]
    assert len(result) <= N.DEFAULT_CONTENT_MAX_LENGTH
    shown = len(result) - len(result.lstrip("x"))  # the x's kept, then the mark
    assert shown > 30_000 and result == "x" * shown + N.CONTENT_CUT_MARK.format(shown=shown, length=100_000)
    assert result.endswith(f" [cut: {shown:,} of 100,000 characters shown]")
    assert list(span.attributes[N.CONTENT_TRUNCATED]) == [N.GEN_AI_TOOL_CALL_RESULT]
    # The next chat span's conversation shows the same mark inside its (still JSON) tool message.
    chat = [s for s in rec.spans() if s.name.startswith("chat ")][-1]
    messages = json.loads(chat.attributes[N.GEN_AI_INPUT_MESSAGES])
    assert "characters shown]" in messages[-1]["parts"][0]["response"]


def test_a_result_that_fits_has_no_mark(rec):
    Agent(FakeModel([tool_call("search_help", {"q": "a"}), "ok"]), TOOLS, name="s", capture_content=True,
          **rec.providers).run("q")
    assert "characters shown]" not in rec.span("execute_tool search_help").attributes[N.GEN_AI_TOOL_CALL_RESULT]


# --- 3. a cancelled stream --------------------------------------------------------------

class _Streaming:
    def complete(self, request):  # pragma: no cover - streamed only
        raise AssertionError

    def stream(self, request) -> Iterator[Any]:
        yield "The order "
        yield "ships "
        yield "tomorrow, and "
        yield "then..."


def test_a_stream_its_reader_left_keeps_the_text_received_marked_partial(rec):
    stream = Agent(_Streaming(), name="support", capture_content=True, **rec.providers).stream("q")
    for event in stream:
        if event.type == "text_delta" and event.text == "ships ":
            break
    stream.close()
    chat = rec.span("chat unknown")
    assert chat.attributes[N.RESPONSE_PARTIAL] is True
    assert chat.attributes[N.ERROR_TYPE] == "cancelled"
    [message] = _output(chat)
    assert message["role"] == "assistant" and message["finish_reason"] == "cancelled"
    assert message["parts"] == [{"type": "text", "content": "The order ships "},
                                {"type": "tracedagent.partial", "reason": "cancelled"}]


def test_without_capture_a_partial_stream_keeps_no_text(rec):
    stream = Agent(_Streaming(), name="support", **rec.providers).stream("q")
    next(e for e in stream if e.type == "text_delta")
    stream.close()
    chat = rec.span("chat unknown")
    assert chat.attributes[N.RESPONSE_PARTIAL] is True and N.GEN_AI_OUTPUT_MESSAGES not in chat.attributes


# --- 4. from the pause to its resumption --------------------------------------------------

def test_a_resume_span_in_the_paused_trace_links_to_the_resumed_run(rec):
    paused = _paused(rec)
    paused_span = rec.span("invoke_agent desk")
    rec.clear()
    run = Agent(FakeModel(["done"]), [search_help, close_account], name="desk", **rec.providers).resume(
        paused.checkpoint(), {"c0": True, "c1": True})
    resumed_span = rec.span("invoke_agent desk")
    marker = rec.span(N.RESUME_SPAN_NAME)
    # In the paused trace, under the paused run span...
    assert marker.context.trace_id == paused_span.context.trace_id
    assert marker.parent.span_id == paused_span.context.span_id
    # ...linked to the resumed run's span, which still links back.
    [link] = marker.links
    assert link.context.trace_id == resumed_span.context.trace_id != paused_span.context.trace_id
    assert link.context.span_id == resumed_span.context.span_id
    assert marker.attributes[N.RESUMED_TRACE_ID] == run.trace_id
    assert marker.attributes[N.RESUMED_CHECKPOINT_ID] == paused.checkpoint_id
    assert [e[N.DECISION] for e in _events(marker, N.APPROVAL_EVENT)] == ["approved", "approved"]
    assert resumed_span.links[0].context.span_id == paused_span.context.span_id


# --- the retried Temporal activity --------------------------------------------------------

def test_a_span_of_a_retried_activity_has_a_retry_event(rec, monkeypatch):
    pytest.importorskip("temporalio")
    from temporalio import activity

    from tracedagent.temporal._telemetry import ActivityTracer

    class Info:
        attempt = 2

    monkeypatch.setattr(activity, "in_activity", lambda: True)
    monkeypatch.setattr(activity, "info", lambda: Info())
    tracer = ActivityTracer(rec.tracer_provider.get_tracer("t"))
    tracer.start_span("execute_tool lookup").end()
    Info.attempt = 1
    tracer.start_span("execute_tool first").end()
    retried, first = rec.span("execute_tool lookup"), rec.span("execute_tool first")
    assert retried.attributes[N.TEMPORAL_ATTEMPT] == 2
    assert _events(retried, N.RETRY_EVENT) == [{N.TEMPORAL_ATTEMPT: 2}]
    assert _events(first, N.RETRY_EVENT) == []


async def test_a_temporal_run_that_waited_for_decisions_has_their_events():
    """The Temporal workflow's run waits within itself (no resume, one trace): its own span has the events."""
    pytest.importorskip("temporalio")
    from test_temporal_pump import PAUSING, drive, recording

    provider, exporter = recording()
    run = await drive(Agent(FakeModel([PAUSING, "done"]), TOOLS, name="desk", tracer_provider=provider),
                      decide=lambda cp: {"c2": "no"})
    assert run.ok
    [span] = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent desk"]
    assert _events(span, N.APPROVAL_EVENT) == [
        {N.GEN_AI_TOOL_NAME: "close_account", N.GEN_AI_TOOL_CALL_ID: "c2", N.DECISION: "denied"}]
    assert not [s for s in exporter.get_finished_spans() if s.name == N.RESUME_SPAN_NAME]  # one trace: no way to mark


def test_the_demo_draws_the_resume_span_in_the_paused_runs_tree_and_writes_it(tmp_path):
    """The demo writes a trace when its root span ends; the resume span comes later, under a
    remote parent: written on its own, and drawn in the paused run's tree, as `show` draws the file."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    from tracedagent._traces._otlp_json import read_file

    out = tmp_path / "runs.otlp.json"
    done = subprocess.run([sys.executable, "-m", "tracedagent", "demo", "--pace", "0", "--only", "refund-approval",
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    spans = read_file(Path(out))
    runs = {s.attributes[N.STOP_REASON]: s.trace_id for s in spans if s.name == "invoke_agent refund-approval"}
    [marker] = [s for s in spans if s.name == N.RESUME_SPAN_NAME]
    assert marker.trace_id == runs["approval_required"] and marker.attributes[N.RESUMED_TRACE_ID] == runs["answered"]
    drawn = re.sub(r"[\s\u2500-\u257f]+", " ", done.stdout)  # a narrow terminal wraps the line inside the tree
    assert re.search(rf"tracedagent\.resume \S+ ms resumed in trace {runs['answered']}", drawn), done.stdout
