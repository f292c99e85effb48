"""Blanking credentials out of text tracedagent shows: log records, the doctor's table,
exceptions that carry a provider's error body (``redact``, for secrets it knows), and captured
content on spans (``Redactor``, for secrets it can only recognise by their shape).

A credential reaches such text when something echoes it back - an SDK exporter's error
naming the URL, a proxy quoting the ``Authorization`` header in its error body - so the
only safe place to stop it is where the text is shown. Every caller uses the one rule here.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

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
                 "aws_secret_access_key", "passphrase", "private_key", "db_pass", "db_password")
_KEY_WORDS = r"api[_-]?key|secret|passw(?:or)?d|passphrase|token|authorization|credential|private[_-]?key"
_KEYISH = re.compile(rf"(?i)(?:{_KEY_WORDS})|(?:^|[_.-])(?:pwd|pass|auth)$")
"""A mapping key that names a secret: one containing a secret's word (``db_password``,
``x-api-key``), or ending in a short one (``pwd``, ``db_pass``, ``auth``; not ``author``)."""
_JSON_KEY = re.compile(r'(\\?)"([^"\\\n]{1,64})\1"\s*:\s*')
"""A key in JSON *text* (a tool result that is JSON, arguments sent as a malformed string, JSON
cut short), or in JSON held in a JSON string (its quotes escaped: ``\\"password\\": \\"...\\"``)."""
_JSON_STRING = {"": re.compile(r'"(?:[^"\\]|\\.)*"?'), "\\": re.compile(r'\\"(?:[^"\\]|\\{4}|\\{3}"|\\[^"\\])*(?:\\")?')}
"""A JSON string value - to the end of the text when its closing quote was cut off - plain or
escaped once."""
_JSON_SCALAR = re.compile(r"-?[0-9][0-9.eE+-]*|true|false")
_JSON_SYNTAX = re.compile(r'[{}\[\]"\\]')
_PEM_PRIVATE_KEY = (r"-----BEGIN ([A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?)-----"
                    r"[\s\S]*?(?:-----END \1-----|\Z)")
_STRIPE_KEY = r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{10,}"
_SENDGRID_KEY = r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])"
_TWILIO_KEY = r"(?<![A-Za-z0-9])SK[0-9a-fA-F]{32}(?![A-Za-z0-9])"
_AZURE_KEY = r"(?i:(?<=AccountKey=)|(?<=SharedAccessKey=))[A-Za-z0-9+/=]{16,}"
_GOOGLE_KEY = r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"
_NPM_TOKEN = r"\bnpm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"
_AWS_SECRET = r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[0-9])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
DEFAULT_PATTERNS: tuple[str, ...] = (
    r"\bsk-[A-Za-z0-9_\-]{16,}",                      # OpenAI, Anthropic (sk-ant-...) keys
    r"\bAKIA[0-9A-Z]{16}\b",                          # AWS access key ids
    _AWS_SECRET,                                      # AWS secret access keys: 40 of base64's characters,
                                                      # upper and lower case and digits (not a hex digest)
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",                  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,}",                # GitHub fine-grained tokens
    r"\bxox[baprs]-[A-Za-z0-9-]{10,}",                # Slack tokens
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWTs
    r"(?i:(?<=bearer )|(?<=authorization: basic ))[A-Za-z0-9._~+/=-]{8,}",  # "Bearer <token>", Basic credentials
    r"(?<=://)[^/\s:@\"']+:[^@\s/\"']+(?=@)",          # user:password in a URL
    # a value given by a name that says it is a secret: query strings, env files, config lines
    # (not "token: " or "secret: ", which prose says too)
    r"(?i:" + "|".join([f"(?<={name}{sep})" for name in _SECRET_NAMES + ("token", "secret") for sep in ("=", " = ")]
                       + [f"(?<={name}: )" for name in _SECRET_NAMES]) + r")[^&\s\"',;]+",
    _PEM_PRIVATE_KEY,                                 # PEM private key blocks, to their END line (or the
                                                      # end of the text, when cut short)
    _STRIPE_KEY,                                      # Stripe secret and restricted keys (sk_live_, rk_live_)
    _SENDGRID_KEY,                                    # SendGrid API keys: SG.<22>.<43>
    _TWILIO_KEY,                                      # Twilio API key SIDs: SK and 32 hex digits
    _AZURE_KEY,                                       # Azure storage and service bus keys in connection strings
    _GOOGLE_KEY,                                      # Google API keys: AIza and 35 more
    _NPM_TOKEN,                                       # npm access tokens: npm_ and 36 more
)
"""Credential shapes the default ``Redactor`` blanks: provider API keys, AWS access key ids and
secret access keys, cloud, GitHub and chat tokens, JWTs, bearer tokens and Basic credentials,
passwords in URLs, values given by a secret's name (``password=...``, ``API_KEY=...``,
``aws_secret_access_key = ...``), PEM private keys, Stripe, SendGrid, Twilio, Azure, Google
and npm keys. Beside these, every ``Redactor`` blanks a secret-named key's value in JSON text
(``"password": "..."``, an object or array too), and in captured structures whatever such a
key holds."""


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
        self._passes = [_FAST.get(p) or _Pass(p) for p in self.patterns]

    def extend(self, *patterns: str) -> Redactor:
        return Redactor((*self.patterns, *patterns))

    def __call__(self, text: str) -> str:
        lowered = text.lower()
        for one in self._passes:
            # One pass per pattern, run only where its literal occurs: most text holds no
            # "sk-" or "password", and a regex of many alternatives is slow on every character.
            if one.needed(text, lowered):
                text = one(text)
                lowered = text.lower() if one.guard else lowered
        if '":' in text or '" :' in text:
            text = _masked_json_values(text)
        return text

    @staticmethod
    def names_a_secret(key: str) -> bool:
        """Whether a mapping key says its value is a credential."""
        return bool(_KEYISH.search(key))


def _masked_json_values(text: str) -> str:
    """``text`` with the value of every secret-named key of the JSON in it blanked, whatever the
    value is (a string, a number, an object, an array), as a structure's would be; JSON held in
    a JSON string (escaped quotes) too. Reads JSON that is malformed or cut short."""
    out: list[str] = []
    last = 0
    for key in _JSON_KEY.finditer(text):
        if key.start() < last or not _KEYISH.search(key.group(2)):
            continue
        end = _json_value_end(text, key.end(), key.group(1))
        if end is not None:
            out += (text[last:key.end()], f'{key.group(1)}"{MASK}{key.group(1)}"')
            last = end
    return "".join(out) + text[last:] if out else text


def _json_value_end(text: str, start: int, escape: str) -> int | None:
    """Where the JSON value at ``start`` ends (the end of the text if it was cut off), or
    ``None`` when there is none to blank (``null``, or not a value)."""
    if text.startswith(escape + '"', start):
        return _JSON_STRING[escape].match(text, start).end()  # type: ignore[union-attr]
    if text.startswith(("{", "["), start):
        at, depth, in_string = start, 0, False
        while (found := _JSON_SYNTAX.search(text, at)) is not None:
            c, at = found.group(), found.end()
            if c == "\\":
                at += 1  # the escaped character, whatever it is
            elif c == '"':
                in_string = not in_string
            elif not in_string:
                depth += 1 if c in "{[" else -1
                if depth == 0:
                    return at
        return len(text)
    scalar = _JSON_SCALAR.match(text, start)
    return scalar.end() if scalar else None


class _Pass:
    """One pattern of a ``Redactor``, with the literals (lower case) one of which it needs."""

    def __init__(self, pattern: str, guard: tuple[str, ...] = (), regex: str | None = None,
                 replacement: Any = MASK) -> None:
        self.guard = guard
        """Literals in lower case, sought in the lowered text; one with capitals is sought as it is
        (``SK`` would be found in every "task" and "ask")."""
        self._lower = tuple(literal for literal in guard if literal == literal.lower())
        self._cased = tuple(literal for literal in guard if literal != literal.lower())
        self._regex = re.compile(regex or pattern)
        self._replacement = replacement

    def needed(self, text: str, lowered: str) -> bool:
        """Whether ``text`` holds one of the literals the pattern needs (any text, without any)."""
        if not self.guard:
            return True
        for literal in self._lower:
            if literal in lowered:
                return True
        for literal in self._cased:
            if literal in text:
                return True
        return False

    def __call__(self, text: str) -> str:
        return self._regex.sub(self._replacement, text)


def _after(disallowed: str) -> Callable[[re.Match[str]], str]:
    """A replacement that masks a match unless the character before it is one of ``disallowed``:
    a lookbehind at the start of a pattern would make the regex try every position, while a
    pattern that starts with a literal is searched for it."""
    def masked(match: re.Match[str]) -> str:
        start = match.start()
        return match.group() if start and match.string[start - 1] in disallowed else MASK
    return masked


_WORD = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _aws_secret(match: re.Match[str]) -> str:
    value = match.group(0)
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)
    return MASK if mixed else value


_NAMED_VALUE = re.compile(r"[^&\s\"',;]+")
_EQUALS_NAMES = tuple(dict.fromkeys(_SECRET_NAMES + ("token", "secret")))


class _NamedValues(_Pass):
    """``DEFAULT_PATTERNS[9]`` (a value after ``password=``, ``API_KEY = ``, ``pwd: ``...) found
    from the names forward: its 42 lookbehinds would run at every character."""

    def __call__(self, text: str) -> str:
        lowered = text.lower()
        if len(lowered) != len(text):  # a character whose lower case is longer: positions differ
            return _Pass.__call__(self, text)
        cuts: list[tuple[int, int]] = []
        for name in _EQUALS_NAMES:
            at = lowered.find(name)
            while at >= 0:
                end = at + len(name)
                for sep in ("=", " = ", ": "):
                    if lowered.startswith(sep, end) and (sep != ": " or name in _SECRET_NAMES):
                        value = _NAMED_VALUE.match(text, end + len(sep))
                        if value is not None:
                            cuts.append(value.span())
                        break
                at = lowered.find(name, at + 1)
        if not cuts:
            return text
        out, last = [], 0
        for start, stop in sorted(cuts):
            if start >= last:
                out += (text[last:start], MASK)
                last = stop
        return "".join(out) + text[last:]


_FAST: dict[str, _Pass] = {
    # A default pattern as it runs: guarded by its literals, and where its own lookarounds would
    # run at every character, an equivalent that does not.
    DEFAULT_PATTERNS[0]: _Pass(DEFAULT_PATTERNS[0], ("sk-",)),
    DEFAULT_PATTERNS[1]: _Pass(DEFAULT_PATTERNS[1], ("akia",)),
    _AWS_SECRET: _Pass(_AWS_SECRET, (), r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])", _aws_secret),
    DEFAULT_PATTERNS[3]: _Pass(DEFAULT_PATTERNS[3], ("gh",)),
    DEFAULT_PATTERNS[4]: _Pass(DEFAULT_PATTERNS[4], ("github_pat_",)),
    DEFAULT_PATTERNS[5]: _Pass(DEFAULT_PATTERNS[5], ("xox",)),
    DEFAULT_PATTERNS[6]: _Pass(DEFAULT_PATTERNS[6], ("eyj",)),
    DEFAULT_PATTERNS[7]: _Pass(DEFAULT_PATTERNS[7], ("bearer ", "basic ")),
    DEFAULT_PATTERNS[8]: _Pass(DEFAULT_PATTERNS[8], ("://",)),
    DEFAULT_PATTERNS[9]: _NamedValues(DEFAULT_PATTERNS[9], _EQUALS_NAMES),
    _PEM_PRIVATE_KEY: _Pass(_PEM_PRIVATE_KEY, ("private key",)),
    _STRIPE_KEY: _Pass(_STRIPE_KEY, ("k_live_", "k_test_")),
    _SENDGRID_KEY: _Pass(_SENDGRID_KEY, ("SG.",)),
    _TWILIO_KEY: _Pass(_TWILIO_KEY, ("SK",), _TWILIO_KEY.split(")", 1)[1], _after(_WORD)),
    _AZURE_KEY: _Pass(_AZURE_KEY, ("accountkey=", "sharedaccesskey=")),
    _GOOGLE_KEY: _Pass(_GOOGLE_KEY, ("AIza",), _GOOGLE_KEY.split(")", 1)[1], _after(_WORD + "_-")),
    _NPM_TOKEN: _Pass(_NPM_TOKEN, ("npm_",)),
}
