"""The tools the tests share, written once.

A help desk (``search_help`` succeeds, ``flaky`` fails, ``charge_card`` fails for good,
``refund`` is denied by the ``no_refunds`` policy, ``close_account`` waits for a person's
approval, all five in ``TOOLS``), an order lookup,
and two small typed tools (``add``, ``shout``) whose schemas travel to each model provider.
A tool that only one test needs is written in that test, where its behaviour is the point.
"""

from __future__ import annotations

from tracedagent import FatalToolError, Registry, ToolCall, ToolError, tool

__all__ = ["add", "shout", "search_help", "flaky", "charge_card", "lookup_order", "refund", "close_account", "no_refunds",
           "TOOLS", "registry"]


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


@tool
def shout(text: str) -> str:
    """Upper-case a text.

    Args:
        text: What to upper-case.
    """
    return text.upper()


@tool
def search_help(q: str) -> str:
    """Search the help centre.

    Args:
        q: What to look for.
    """
    return f"3 articles about {q}"


@tool
def flaky(n: int) -> str:
    """Always fails."""
    raise ToolError("backend unavailable")


@tool
def charge_card(amount: int) -> str:
    """Charge the customer's card."""
    raise FatalToolError("payment credentials revoked")


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order's status.

    Args:
        order_id: The order number.
    """
    return f"order {order_id}: shipped"


@tool
def refund(order_id: str, amount: float) -> str:
    """Refund an order.

    Args:
        order_id: The order number.
        amount: USD to refund.
    """
    return f"refunded {amount} on {order_id}"


@tool(requires_approval=True)
def close_account(account: str) -> str:
    """Close a customer's account: a person approves every call.

    Args:
        account: The account to close.
    """
    return f"closed {account}"


def no_refunds(call: ToolCall) -> str | None:
    """The guardrail: a refund always needs a human."""
    return "refunds need a human" if call.name == "refund" else None


TOOLS = Registry([search_help, charge_card, flaky, refund, close_account], policy=no_refunds)


def registry(*tools: object, policy=None) -> Registry:
    """A registry of just these tools."""
    return Registry(list(tools), policy=policy)
