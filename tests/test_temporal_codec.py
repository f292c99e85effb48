"""tracedagent.temporal without a server: what crosses Temporal comes back whole, and the
activities' time limits follow the call's own limit and the time budget."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

pytest.importorskip("temporalio")  # the test group installs it: never skipped in CI

from tracedagent import Agent, Budget, Completion, Stop, ToolCall, ToolOutcome, ToolResult, Usage  # noqa: E402
from tracedagent._core._records import error_type  # noqa: E402
from tracedagent.temporal import ActivitySettings, RemoteError  # noqa: E402
from tracedagent.temporal._codec import (budget_from_data, budget_to_data, completion_from_data,  # noqa: E402
                                         completion_to_data, error_from_data, error_to_data, run_from_data,
                                         run_to_data, run_within)
from tracedagent.testing import FakeModel, tool_call  # noqa: E402

from sample_tools import TOOLS  # noqa: E402


def through_json(data):
    """As Temporal's JSON converter stores it in the history."""
    return json.loads(json.dumps(data))


def test_a_run_with_every_kind_of_record_comes_back_equal():
    script = [Completion(text="thinking", tool_calls=[ToolCall("a", "search_help", {"q": "x"}),
                                                      ToolCall("b", "refund", '{"order": 1')],
                         usage=Usage(10, 5, cache_read_input_tokens=3), model="m", finish_reason="tool_calls",
                         response_id="r1", provider_data={"anthropic": {"thinking": [{"sig": "s"}]}}),
              tool_call("flaky", {"n": 1}), TimeoutError("read timed out")]
    run = Agent(FakeModel(script), TOOLS, budget=Budget(price_per_1k_input=0.01)).run("go", conversation_id="c")
    assert run.stop is Stop.MODEL_ERROR
    back = run_from_data(through_json(run_to_data(run)))
    for field in ("output", "stop", "step_count", "steps", "messages", "input_tokens", "output_tokens", "cost",
                  "trace_id", "conversation_id"):
        assert getattr(back, field) == getattr(run, field), field
    assert back.trajectory() == run.trajectory() and back.blocked_tools() == run.blocked_tools()
    assert isinstance(back.error, RemoteError) and error_type(back.error) == "TimeoutError"
    assert str(back.error) == "read timed out"


def test_a_run_over_the_payload_limit_is_cut_to_fit_keeping_what_its_caller_decides_on():
    """The workflow's result must fit (the server terminates a workflow whose result does not):
    the conversation goes first, then the contents, then the steps; ``cut`` says what went."""
    from tracedagent._core._payloads import payload_size

    big = "x" * 20_000
    run = Agent(FakeModel([tool_call("search_help", {"q": big}, id="a"), "done " + "y" * 3_000]), TOOLS).run(big)
    data = through_json(run_to_data(run))
    assert run_within(data, payload_size(data)) is data, "a run that fits is sent as it is"
    for limit, cut in ((60_000, ["messages"]), (30_000, ["messages", "contents"]), (6_000, ["messages", "contents", "steps"])):
        fitted = through_json(run_within(data, limit))
        assert payload_size(fitted) <= limit and fitted["cut"] == cut, limit
        back = run_from_data(fitted)
        assert (back.stop, back.output, back.step_count, back.input_tokens, back.trace_id) == \
            (run.stop, run.output, run.step_count, run.input_tokens, run.trace_id)
        if "steps" not in cut:
            assert back.requested_tools() == run.requested_tools() and back.trajectory() == run.trajectory()
    assert payload_size(data) > 60_000 > payload_size({**data, "messages": []})


def test_a_sub_run_comes_back_inside_its_run():
    inner = Agent(FakeModel(["found"]), name="researcher")
    outer = Agent(FakeModel([tool_call("researcher", {"task": "find"}), "done"]),
                  [inner.as_tool(description="Researches.")])
    run = outer.run("go")
    back = run_from_data(through_json(run_to_data(run)))
    assert [(r.stop, r.output, r.input_tokens) for r in back.sub_runs] == \
        [(r.stop, r.output, r.input_tokens) for r in run.sub_runs] and back.input_tokens == run.input_tokens


def test_an_answer_turn_keeps_no_calls_as_its_default_and_a_result_its_outcome():
    for completion in (Completion(text="done"), tool_call("x", {"a": [1, 2]})):
        assert completion_from_data(through_json(completion_to_data(completion))) == completion
    run = Agent(FakeModel([tool_call("charge_card", {"amount": 1}, id="c1")]), TOOLS).run("go")
    (result,) = run_from_data(through_json(run_to_data(run))).steps[0].tool_results
    assert result == ToolResult("c1", "charge_card", "Fatal error: payment credentials revoked", ToolOutcome.FATAL,
                                "FatalToolError")


def test_a_budget_comes_back_equal():
    budget = Budget(max_steps=4, max_tokens=100, max_cost=0.5, price_per_1k_input=0.1, max_seconds=2.5,
                    max_tool_calls=7, no_progress_limit=2)
    assert budget_from_data(through_json(budget_to_data(budget))) == budget


def test_an_error_message_is_redacted_before_it_is_stored_in_the_history():
    data = error_to_data(RuntimeError("auth failed: Authorization: Bearer sk-abcdefghijklmnopqrstuvwxyz123456"))
    assert data["type"] == "RuntimeError" and "sk-abcdefghijklmnop" not in data["message"]
    assert type(error_from_data(data)).__name__ == "RuntimeError"
    assert type(error_from_data(data)) is type(error_from_data(data)), "one class a name"


def test_an_attempts_limit_is_the_calls_own_plus_grace_never_past_the_time_budget():
    s = ActivitySettings(tool_timeout=300, grace=5)
    assert s.limit(None, None, s.tool_timeout) == timedelta(seconds=300)
    assert s.limit(10, None, s.tool_timeout) == timedelta(seconds=15)
    assert s.limit(10, 2, s.tool_timeout) == timedelta(seconds=7)
    assert s.limit(None, 0, s.tool_timeout) == timedelta(seconds=5)
    assert s.retry_policy().maximum_attempts == 3


def test_an_agent_with_a_tool_that_needs_approval_is_hosted_and_an_approved_call_stays_approved():
    from dataclasses import dataclass

    from tracedagent import Tool
    from tracedagent._core._tools import Approved
    from tracedagent.temporal._codec import call_from_data, call_to_data
    from tracedagent.temporal._hosting import host, is_hosted

    @dataclass(frozen=True, kw_only=True)
    class Asks(Tool):
        requires_approval: bool = True

    refund = Asks(name="refund", description="Refund.", fn=lambda: "done")
    host("q-approval", Agent(FakeModel(["x"]), [refund], name="payer"), ActivitySettings())
    assert is_hosted("q-approval", "payer")
    # the activity dispatches an approved call without asking again, a plain one fails closed
    assert isinstance(call_from_data(call_to_data(Approved("r1", "refund", {}))), Approved)
    assert not isinstance(call_from_data(call_to_data(ToolCall(id="r1", name="refund", arguments={}))), Approved)


def test_the_private_temporalio_module_used_is_there_and_temporalio_is_bounded_for_it():
    """tracedagent.temporal takes its workflow span ids from a private temporalio module: the
    extra bounds temporalio to the releases checked to have it, and the installed one must be
    one of them (else this import is what breaks)."""
    import importlib.metadata
    import re
    from pathlib import Path

    from packaging.specifiers import SpecifierSet

    from tracedagent.temporal import _telemetry

    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    [bound] = re.findall(r'^temporal = \["temporalio([^"]+)"\]', pyproject, re.M)
    assert "<" in bound, "no upper bound for a private import"
    assert importlib.metadata.version("temporalio") in SpecifierSet(bound)
    assert _telemetry.TemporalIdGenerator.__module__ == "temporalio.contrib.opentelemetry._id_generator"


def test_a_typed_run_crosses_as_its_text_and_the_client_decodes_it_with_the_type():
    from dataclasses import dataclass

    @dataclass
    class Weather:
        city: str
        celsius: int

    run = Agent(FakeModel(["sunny", '{"city": "Paris", "celsius": 21}']), output_type=Weather).run("go")
    data = through_json(run_to_data(run))
    assert data["typed"] and data["output"] == run.text
    from tracedagent._agent._loop import output_spec_of
    back = run_from_data(data, output_spec_of(Weather))
    assert back.ok and back.output == Weather("Paris", 21) and back.text == run.text and back.output_retries == 1
    assert run_from_data(data).output == run.text  # no type named: the JSON text
    with pytest.raises(ValueError, match="another output type"):
        run_from_data(data, output_spec_of(list[int]))
    stopped = Agent(FakeModel(["a", "b"]), output_type=Weather).run("go")
    back = run_from_data(through_json(run_to_data(stopped)), output_spec_of(Weather))
    assert back.stop is Stop.INVALID_OUTPUT and back.output == stopped.output and back.text == "b"
