"""Untrusted text made safe to show: what a trace holds was partly chosen by a model.

Agent and tool names, error texts and arguments come from a model (and a prompt injection
chooses them), then from a file or an HTTP answer. ``printable`` writes every control
character as an escape and cuts what is too long, so the terminal, a test failure's message
or a replay report shows the text as it is and cannot be steered by it.
"""

from __future__ import annotations

import re

__all__ = ["printable", "MAX_SHOWN"]


MAX_SHOWN = 200
"""Characters of one value (a name, an error message) shown before it is cut: names are
read, not scrolled through, and a span may carry thousands of characters."""

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 control characters and DEL (a terminal obeys them: ``\\x1b[2J`` clears the
screen), lone surrogates (which no encoder writes, so printing one raises), the line and
paragraph separators, and the bidirectional overrides that make text read other than it is."""


def printable(value: object, *, limit: int | None = MAX_SHOWN) -> str:
    """``value`` as text a terminal shows as it is: each unprintable character becomes a
    Python-style escape (``\\x1b``, ``\\ud800``), and beyond ``limit`` characters the rest is
    cut and counted."""
    shown = value if isinstance(value, str) else str(value)
    if limit is not None and len(shown) > limit:
        shown = f"{shown[:limit]}… (+{len(shown) - limit:,} characters)"
    return _UNPRINTABLE.sub(_escape, shown)


_NAMED_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED_ESCAPES.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
