"""One scripted run per stop reason, shared by the span tests and the real-stack tests."""

from __future__ import annotations

from tracedagent import Budget, FatalToolError, Registry, Stop, ToolCall, ToolError, tool
from tracedagent.testing import tool_call


@tool
def search_help(q: str) -> str:
    """Search the help centre."""
    return f"3 articles about {q}"


@tool
def charge_card(amount: int) -> str:
    """Charge the card."""
    raise FatalToolError("credentials revoked")


@tool
def flaky(n: int) -> str:
    """Always fails."""
    raise ToolError("unavailable")


@tool
def refund(order_id: str) -> str:
    """Refund an order."""
    return "refunded"


def deny_refund(call: ToolCall) -> str | None:
    return "refunds need a human" if call.name == "refund" else None


TOOLS = Registry([search_help, charge_card, flaky, refund], policy=deny_refund)


def many(name: str, n: int = 12, same: bool = False):
    return [tool_call(name, {"q": "same" if same else f"q{i}"} if name == "search_help" else {"n": i})
            for i in range(n)]


# Each stop reason: (a function making a fresh script, budget, expected steps or None)
SCENARIOS = {
    Stop.ANSWERED: (lambda: [tool_call("search_help", {"q": "a"}), "done"], Budget(), 2),
    Stop.STEP_BUDGET: (lambda: many("search_help"), Budget(max_steps=3), 3),
    Stop.TOKEN_BUDGET: (lambda: many("search_help"), Budget(max_tokens=250), None),
    Stop.COST_BUDGET: (lambda: many("search_help"), Budget(max_cost=0.001, price_per_1k_input=0.01,
                                                   price_per_1k_output=0.03), None),
    Stop.REPEATED_CALL: (lambda: many("search_help", same=True), Budget(repeat_limit=2), 3),
    Stop.TOOL_FATAL: (lambda: [tool_call("charge_card", {"amount": 1})], Budget(), 1),
    Stop.NO_PROGRESS: (lambda: many("flaky"), Budget(no_progress_limit=2), 2),
    Stop.MODEL_ERROR: (lambda: [tool_call("search_help", {"q": "a"}), TimeoutError("read timed out")], Budget(), 1),
}
