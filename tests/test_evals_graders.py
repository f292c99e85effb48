"""The built-in graders, each on a run it passes and one it fails (real runs of a scripted agent,
graded from their spans as an evaluation grades them)."""

from __future__ import annotations

import dataclasses

import pytest

from tracedagent import Agent, Budget, Registry, Stop, tool
from tracedagent.evals import (Case, GradedRun, answered, cost_under, duration_under, no_denied_calls, no_failed_calls,
                               no_repeated_calls, output_contains, output_equals, output_matches, output_validates,
                               steps_under, stop_reason_in, tokens_under, tool_success_rate, trajectory_contains,
                               trajectory_excludes, trajectory_in_order)
from tracedagent.evals._grade import decide
from tracedagent.testing import FakeModel, Recorder, json_answer, play, tool_call


@tool
def lookup(order_id: str) -> str:
    """Looks an order up."""
    return f"{order_id}: shipped"


@tool
def refund(order_id: str) -> str:
    """Refunds an order."""
    return "refunded"


@tool
def broken(order_id: str) -> str:
    """Always fails."""
    raise ValueError("down")


@dataclasses.dataclass
class Weather:
    city: str
    celsius: int


def no_refunds(call):
    return "refunds need a person" if call.name == "refund" else None


def graded(script, *, case=None, output_type=None, **options) -> GradedRun:
    recorder = Recorder()
    registry = Registry([lookup, refund, broken], policy=no_refunds)
    agent = Agent(FakeModel(script), registry, output_type=output_type, **options, **recorder.providers)
    played = play(agent, case.task if case else "task", recorder=recorder)
    return GradedRun(played.view, run=played.run, case=case)


LOOKUP = tool_call("lookup", {"order_id": "A1"})
GOOD = graded([LOOKUP, tool_call("lookup", {"order_id": "B2"}), "A1 and B2 shipped."], case=Case(task="where?", expected_output="A1 and B2 shipped."))
PLAIN = graded(["I cannot tell."], case=Case(task="where?", expected_output="A1 and B2 shipped."))
DENIED = graded([tool_call("refund", {"order_id": "A1"}), "No refund."])
FAILED = graded([tool_call("broken", {"order_id": "A1"}), LOOKUP, "Half done."])
LOOPING = graded([LOOKUP] * 5, budget=Budget(repeat_limit=2))
STEPPED_OUT = graded([tool_call("lookup", {"order_id": str(i)}) for i in range(5)], budget=Budget(max_steps=2))
PRICED = graded(["ok"], budget=Budget(price_per_1k_input=10.0, price_per_1k_output=10.0))
TYPED = graded([json_answer(Weather(city="Oslo", celsius=3))], output_type=Weather)
TWICE = graded([LOOKUP, LOOKUP, "A1 shipped."])


def passes(grader, run: GradedRun) -> bool:
    grade = decide(grader, run)
    assert grade.error is None, grade.explanation  # a built-in never raises on a real run
    return bool(grade.passed)


@pytest.mark.parametrize("grader, passing, failing", [
    (stop_reason_in([Stop.ANSWERED]), GOOD, STEPPED_OUT),
    (stop_reason_in(["step_budget_exhausted"]), STEPPED_OUT, GOOD),
    (answered(), GOOD, LOOPING),
    (output_equals(), GOOD, PLAIN),
    (output_equals("I cannot tell."), PLAIN, GOOD),
    (output_equals({"city": "Oslo", "celsius": 3}), TYPED, GOOD),
    (output_contains("B2"), GOOD, PLAIN),
    (output_contains("i CANNOT", case_sensitive=False), PLAIN, GOOD),
    (output_matches(r"A\d and B\d"), GOOD, PLAIN),
    (output_validates(Weather), TYPED, PLAIN),
    (trajectory_contains(["lookup"]), GOOD, PLAIN),
    (trajectory_excludes(["refund"]), GOOD, DENIED),
    (trajectory_in_order(["lookup", "lookup"]), GOOD, FAILED),
    (no_denied_calls(), GOOD, DENIED),
    (no_failed_calls(), GOOD, FAILED),
    (no_repeated_calls(), GOOD, TWICE),
    (no_repeated_calls(), GOOD, LOOPING),
    (tool_success_rate(), GOOD, FAILED),
    (tool_success_rate(threshold=0.5), FAILED, DENIED),
    (steps_under(2), PLAIN, GOOD),
    (tokens_under(10_000), GOOD, None),
    (cost_under(5.0), PRICED, GOOD),  # GOOD has no prices: its cost is unknown, not free
    (duration_under(60.0), GOOD, None),
], ids=lambda v: getattr(v, "name", None))
def test_each_built_in_passes_and_fails(grader, passing, failing):
    assert passes(grader, passing)
    if failing is not None:
        grade = decide(grader, failing)
        assert grade.passed is False and grade.explanation, grader.name


def test_bounds_fail_over_the_bound():
    assert not passes(tokens_under(1), GOOD)
    assert not passes(duration_under(0.0), GOOD)
    assert not passes(cost_under(0.0), PRICED)
    assert decide(cost_under(5.0), GOOD).label == "unknown"


def test_tool_success_rate_is_the_share_of_dispatched_calls_that_succeeded():
    assert decide(tool_success_rate(), FAILED).score == 0.5
    assert decide(tool_success_rate(), PLAIN).score == 1.0  # no calls


def test_output_graders_say_when_there_is_nothing_to_compare_with():
    grade = decide(output_equals(), DENIED)  # no case, no expected output
    assert grade.passed is False and grade.error == "LookupError" and "expected_output" in grade.explanation


def test_a_built_in_explains_a_failure_without_quoting_the_run_s_content():
    grade = decide(output_equals(), PLAIN)
    assert "cannot tell" not in grade.explanation and "shipped" not in grade.explanation


def test_a_repeated_call_is_explained_without_its_arguments():
    """Tool arguments are content (on spans only with capture on): the explanation, which goes
    on the grade's span and log record, names the tool, never what it was called with."""
    grade = decide(no_repeated_calls(), TWICE)
    assert grade.passed is False and "lookup" in grade.explanation
    assert "A1" not in grade.explanation and "order_id" not in grade.explanation
