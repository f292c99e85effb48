"""Blanking credentials out of text tracedagent shows: log records, the doctor's table,
exceptions that carry a provider's error body (``redact``, for secrets it knows), and captured
content on spans (``Redactor``, for secrets it can only recognise by their shape).

A credential reaches such text when something echoes it back - an SDK exporter's error
naming the URL, a proxy quoting the ``Authorization`` header in its error body - so the
only safe place to stop it is where the text is shown. Every caller uses the one rule here.
"""

from __future__ import annotations

import re
from typing import Iterable

__all__ = ["MIN_SECRET_LENGTH", "MASK", "redact", "Redactor", "DEFAULT_PATTERNS"]

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


_SECRET_NAMES = ("api_key", "apikey", "api-key", "access_token", "password", "passwd", "pwd", "client_secret",
                 "aws_secret_access_key")
_KEYISH = re.compile(r"(?i)(api[_-]?key|secret|passw(or)?d|token|authorization|credential)")
DEFAULT_PATTERNS: tuple[str, ...] = (
    r"\bsk-[A-Za-z0-9_\-]{16,}",                      # OpenAI, Anthropic (sk-ant-...) keys
    r"\bAKIA[0-9A-Z]{16}\b",                          # AWS access key ids
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",                  # GitHub tokens
    r"\bxox[baprs]-[A-Za-z0-9-]{10,}",                # Slack tokens
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWTs
    r"(?i:(?<=bearer )|(?<=authorization: basic ))[A-Za-z0-9._~+/=-]{8,}",  # "Bearer <token>", Basic credentials
    r"(?<=://)[^/\s:@\"']+:[^@\s/\"']+(?=@)",          # user:password in a URL
    # a value given by a name that says it is a secret: query strings, env files, config lines
    # (not "token: " or "secret: ", which prose says too)
    r"(?i:" + "|".join([f"(?<={name}{sep})" for name in _SECRET_NAMES + ("token", "secret") for sep in ("=", " = ")]
                       + [f"(?<={name}: )" for name in _SECRET_NAMES]) + r")[^&\s\"',;]+",
)
"""Credential shapes the default ``Redactor`` blanks: provider API keys, cloud and chat
tokens, JWTs, bearer tokens and Basic credentials, passwords in URLs, and values given by a
secret's name (``password=...``, ``API_KEY=...``, ``aws_secret_access_key = ...``)."""


class Redactor:
    """Blanks credential-shaped text before captured content reaches a span.

    Callable on a string. ``Redactor()`` knows ``DEFAULT_PATTERNS``; ``extend(*patterns)``
    returns one that also blanks yours (regular expressions). In captured structures - tool
    arguments, and tool results that are JSON - a value whose key names a secret (``api_key``,
    ``password``, ``token``, ``credentials``...) is blanked whatever it is: a string, a number,
    a nested object.
    """

    def __init__(self, patterns: Iterable[str] = DEFAULT_PATTERNS) -> None:
        self.patterns = tuple(patterns)
        self._pattern = re.compile("|".join(f"(?:{p})" for p in self.patterns)) if self.patterns else None

    def extend(self, *patterns: str) -> Redactor:
        return Redactor((*self.patterns, *patterns))

    def __call__(self, text: str) -> str:
        return text if self._pattern is None else self._pattern.sub(MASK, text)

    @staticmethod
    def names_a_secret(key: str) -> bool:
        """Whether a mapping key says its value is a credential."""
        return bool(_KEYISH.search(key))
