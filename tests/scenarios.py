"""One scripted run per stop reason, shared by the span tests and the real-stack tests."""

from __future__ import annotations

from dataclasses import dataclass

from sample_tools import TOOLS
from tracedagent import Budget, Stop
from tracedagent.testing import tool_call

__all__ = ["TOOLS", "SCENARIOS", "RETURNED_STOPS", "OUTPUT_TYPES", "TEMPORAL_ONLY_STOPS", "Verdict", "many"]  # TOOLS: the registry every scenario runs against


@dataclass
class Verdict:
    """The output type of the ``invalid_output`` scenario: its answers never are one."""

    approve: bool
    reason: str


def many(name: str, n: int = 12, same: bool = False):
    return [tool_call(name, {"q": "same" if same else f"q{i}"} if name == "search_help" else {"n": i})
            for i in range(n)]


# Each stop reason a Run can carry: (a function making a fresh script, budget, expected steps
# or None). Stop.CANCELLED has none: a cancelled run raises instead of returning (test_async.py).
SCENARIOS = {
    Stop.ANSWERED: (lambda: [tool_call("search_help", {"q": "a"}), "done"], Budget(), 2),
    Stop.STEP_BUDGET: (lambda: many("search_help"), Budget(max_steps=3), 3),
    Stop.TOKEN_BUDGET: (lambda: many("search_help"), Budget(max_tokens=250), None),
    Stop.COST_BUDGET: (lambda: many("search_help"), Budget(max_cost=0.001, price_per_1k_input=0.01,
                                                   price_per_1k_output=0.03), None),
    Stop.REPEATED_CALL: (lambda: many("search_help", same=True), Budget(repeat_limit=2), 3),
    Stop.TOOL_FATAL: (lambda: [tool_call("charge_card", {"amount": 1})], Budget(), 1),
    Stop.NO_PROGRESS: (lambda: many("flaky"), Budget(no_progress_limit=2), 2),
    Stop.MODEL_ERROR: (lambda: [tool_call("search_help", {"q": "a"}), TimeoutError("read timed out")], Budget(), 2),
    Stop.TIME_BUDGET: (lambda: many("search_help"), Budget(max_seconds=0), 0),
    Stop.TOOL_CALL_BUDGET: (lambda: many("search_help"), Budget(max_tool_calls=2), 3),
    Stop.APPROVAL_REQUIRED: (lambda: [tool_call("search_help", {"q": "a"}), tool_call("close_account", {"account": "A1"})],
                             Budget(), 2),
}
TEMPORAL_ONLY_STOPS = {Stop.PAYLOAD_LIMIT}
"""Stops only a run on Temporal reaches, so no ``run``/``arun`` scenario here (nor a demo one):
``payload_limit``, a model request over Temporal's payload limit (tests/test_temporal_pump.py,
tests/stack/test_temporal_limits.py)."""
RETURNED_STOPS = set(Stop) - {Stop.CANCELLED} - TEMPORAL_ONLY_STOPS
SCENARIOS[Stop.INVALID_OUTPUT] = (lambda: [tool_call("search_help", {"q": "a"}), "approve it", '{"approve": true}'],
                                  Budget(max_output_retries=1), 3)
OUTPUT_TYPES = {Stop.INVALID_OUTPUT: Verdict}
"""The scenarios whose agent has an output type: ``Agent(..., output_type=OUTPUT_TYPES.get(stop))``."""
