"""Blanking credentials out of text tracedagent shows: log records, the doctor's table,
exceptions that carry a provider's error body.

A credential reaches such text when something echoes it back - an SDK exporter's error
naming the URL, a proxy quoting the ``Authorization`` header in its error body - so the
only safe place to stop it is where the text is shown. Every caller uses the one rule here.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["MIN_SECRET_LENGTH", "MASK", "redact"]

MASK = "***"
"""What a secret becomes."""

MIN_SECRET_LENGTH = 4
"""Values shorter than this are not blanked: a one- to three-character value (a URL's user
``u``) would be blanked inside every ordinary word that contains it, and guards nothing a
reader could not guess. Callers that know their secrets are long pass a larger ``min_length``
(the model adapters: an API key under 16 characters is a local server's placeholder such as
``ollama``, and blanking it would mangle the server's own error messages)."""


def redact(text: str, secrets: Iterable[str | None], *, min_length: int = MIN_SECRET_LENGTH) -> str:
    """``text`` with every occurrence of each secret of at least ``min_length`` characters
    replaced by ``MASK``; longest first, so a secret containing another is blanked whole.
    ``None`` and other non-strings among ``secrets`` are ignored (an SDK client without a key)."""
    found = sorted({s for s in secrets if isinstance(s, str) and len(s) >= min_length}, key=len, reverse=True)
    for secret in found:
        text = text.replace(secret, MASK)
    return text
