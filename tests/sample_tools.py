"""Small typed tools the adapter tests share: their schemas travel to each provider."""

from tracedagent import tool


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
