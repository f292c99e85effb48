"""Signing checkpoints: an HMAC-SHA256 over canonical JSON, with keys the application gives.

A paused run's checkpoint travels through the application's storage (a database row, a queue
message, a browser round trip) before a person's decision resumes it. Whoever can write there
could change what a "yes" runs; a signature made with a key only the application's processes
hold makes any change, or a checkpoint from elsewhere, detectable before anything runs.

**Canonical JSON** (what is signed): the checkpoint as JSON data - exactly what a reader gets
back from its text, so a signer and a verifier in different processes hash the same bytes -
written with sorted keys, no whitespace (``","`` and ``":"``), every non-ASCII character as a
``\\uXXXX`` escape, and Python's float repr (the shortest that reads back exactly).

**Keys**: ``Agent(checkpoint_key=...)`` (a key, or a sequence of keys) or, without it, the
``TRACEDAGENT_CHECKPOINT_KEY`` environment variable (keys separated by commas). A key is text
(UTF-8) or bytes, at least ``MIN_KEY_BYTES`` long (``WeakCheckpointKey`` otherwise: a short
password is guessable offline from any one signed checkpoint). The **first** key signs; every
key verifies, so rotating is: put the new key first, keep the old one after it until the
checkpoints it signed are resumed or expired, then drop it. A key's id (``key_id``) - a hash
of the key, never the key - names it in the signature, so a verifier knows which key to use.

**Trust** (``accept``): a checkpoint this process made is trusted as made; one read from text
remembers where it came from (``_Origin``) and is trusted once its signature is checked with
the resuming agent's keys, or - unsigned - once the agent was told to take unsigned ones.

Only the standard library (``hmac``, ``hashlib``) is used.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, Union

from ._checkpoint_errors import ExpiredCheckpoint, TamperedCheckpoint, UnsignedCheckpoint
from ._names import ENV_CHECKPOINT_KEY

__all__ = ["ALGORITHM", "MIN_KEY_BYTES", "KEY_SEPARATOR", "CheckpointKey", "Keyring", "WeakCheckpointKey",
           "canonical", "key_id", "keyring", "call_digest", "SIGNATURE", "Origin", "signature_block", "verify",
           "accept", "claim_key", "sign_with"]

ALGORITHM = "HMAC-SHA256"
"""The one signature algorithm a checkpoint names (``signature.alg``); any other is refused."""

MIN_KEY_BYTES = 32
"""The shortest key accepted: 256 bits, HMAC-SHA256's own strength."""

KEY_SEPARATOR = ","
"""Separates the keys in ``TRACEDAGENT_CHECKPOINT_KEY`` (the first signs)."""

SIGNATURE = "signature"
"""The key of a checkpoint's signature block: ``{"alg": "HMAC-SHA256", "kid", "expires", "mac"}``;
the MAC is over the canonical bytes of the whole checkpoint with the block less its ``mac``."""

CheckpointKey = Union[str, bytes, Sequence[Union[str, bytes]]]
"""What ``Agent(checkpoint_key=...)`` takes: one key, or several (the first signs)."""


class WeakCheckpointKey(ValueError):
    """A checkpoint key shorter than ``MIN_KEY_BYTES``, or an empty set of keys. Raised where
    the key is given (``Agent(...)``, ``Checkpoint.loads(key=...)``); its message never holds the key."""


def canonical(data: Any) -> bytes:
    """The canonical bytes of JSON data (see the module's docstring): the same for the same
    data in any process. ``data`` is JSON as read back (dicts with string keys, lists, str,
    int, float, bool, None); anything else is written as its ``str``."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str).encode("ascii")


def call_digest(name: str, arguments: Any) -> str:
    """What a person saw of a waiting call, as a digest: the SHA-256 of the canonical JSON of
    its tool name and arguments (hex). A decision that carries it (``Approve``) runs only that call."""
    try:
        payload = canonical(["tracedagent.call", name, arguments])
    except (TypeError, ValueError, RecursionError):  # not JSON data (a custom model's objects): its repr
        payload = repr(["tracedagent.call", name, arguments]).encode("utf-8", "backslashreplace")
    return hashlib.sha256(payload).hexdigest()


def key_id(key: bytes) -> str:
    """A key's public name in a signature: 16 hex digits of a domain-separated SHA-256 of it."""
    return hashlib.sha256(b"tracedagent.checkpoint.key-id\x00" + key).hexdigest()[:16]


@dataclass(frozen=True)
class Keyring:
    """The keys that sign (the first) and verify (every one) checkpoints, by key id."""

    keys: tuple[tuple[str, bytes], ...]
    """``(key id, key)`` pairs; never empty."""

    def __repr__(self) -> str:  # never the keys themselves
        return f"Keyring(key ids {[kid for kid, _ in self.keys]})"

    @property
    def signing_id(self) -> str:
        return self.keys[0][0]

    def sign(self, payload: bytes) -> str:
        """The MAC of ``payload`` with the first key (hex)."""
        return hmac.new(self.keys[0][1], payload, hashlib.sha256).hexdigest()

    def verify(self, payload: bytes, kid: str, mac: str) -> bool | None:
        """Whether ``mac`` is the MAC of ``payload`` with key ``kid`` (``None``: no such key here).
        Compared in constant time."""
        key = dict(self.keys).get(kid)
        if key is None:
            return None
        return hmac.compare_digest(hmac.new(key, payload, hashlib.sha256).hexdigest(), mac)


def keyring(setting: CheckpointKey | Keyring | None, environ: Mapping[str, str] | None = None) -> Keyring | None:
    """The keys of ``setting`` (``Agent(checkpoint_key=...)``), or of ``TRACEDAGENT_CHECKPOINT_KEY``
    when it is ``None``; ``None`` when neither gives a key. A key shorter than ``MIN_KEY_BYTES``
    is ``WeakCheckpointKey``."""
    if isinstance(setting, Keyring):
        return setting
    if setting is None:
        text = (os.environ if environ is None else environ).get(ENV_CHECKPOINT_KEY, "")
        given: list[str | bytes] = [k.strip() for k in text.split(KEY_SEPARATOR) if k.strip()]
        if not given:
            return None
        where = ENV_CHECKPOINT_KEY
    else:
        given = [setting] if isinstance(setting, (str, bytes)) else list(setting)
        where = "checkpoint_key"
        if not given:
            raise WeakCheckpointKey(f"{where} holds no key")
    pairs: dict[str, bytes] = {}
    for n, key in enumerate(given):
        if not isinstance(key, (str, bytes)):
            raise WeakCheckpointKey(f"{where}: key {n} is {type(key).__name__}, not str or bytes")
        raw = key.encode("utf-8") if isinstance(key, str) else bytes(key)
        if len(raw) < MIN_KEY_BYTES:
            raise WeakCheckpointKey(f"{where}: key {n} is {len(raw)} bytes; a checkpoint key must be at least "
                                    f"{MIN_KEY_BYTES} (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")
        pairs.setdefault(key_id(raw), raw)
    return Keyring(tuple(pairs.items()))


class Origin:
    """Where a checkpoint read from text came from: its data as read (signature included), and
    whether an agent accepted it. A sub-agent's checkpoint inside it shares its team's (``root``):
    the team's signature covers it."""

    __slots__ = ("data", "root", "accepted")

    def __init__(self, data: dict[str, Any], root: Origin | None = None) -> None:
        self.data, self.root, self.accepted = data, root, False

    @property
    def top(self) -> Origin:
        return self.root or self

    @property
    def signature(self) -> Any:
        return self.top.data.get(SIGNATURE)


def sign_with(cp: Any, keys: Keyring | None, max_age: float | None) -> Any:
    """Mark a checkpoint made in this process with the keys ``dumps`` signs it with and its
    maximum age in seconds (its signed ``expires``: ``paused_at`` + ``max_age``). Without keys
    (a driver that sets none) ``dumps`` signs with ``TRACEDAGENT_CHECKPOINT_KEY``, if set."""
    if keys is not None:
        object.__setattr__(cp, "_signing", (keys, max_age))
    return cp


def accept(cp: Any, keys: Keyring | None, *, unsigned: bool, now: float) -> None:
    """Trust ``cp`` for resuming, or raise: made in this process, or read from text and either
    signed with one of ``keys`` (and not expired) or unsigned and ``unsigned`` accepted."""
    origin: Origin | None = getattr(cp, "_origin", None)
    if origin is None or origin.top.accepted:
        return
    if origin.signature is None:
        if not unsigned:
            raise UnsignedCheckpoint("the checkpoint is not signed: resuming one read from outside needs a "
                                     "checkpoint key (Agent(checkpoint_key=...) or TRACEDAGENT_CHECKPOINT_KEY) "
                                     "that signed it, or Agent(accept_unsigned_checkpoints=True) (docs/approvals.md)")
    else:
        verify(origin.top, keys, now)
    origin.top.accepted = True


def signature_block(data: dict[str, Any], keys: Keyring, expires: float | None) -> dict[str, Any]:
    """``data`` (a checkpoint as JSON data) with its signature block: ``keys``' first key, ``expires``."""
    block: dict[str, Any] = {"alg": ALGORITHM, "kid": keys.signing_id, "expires": expires}
    signed = {**data, SIGNATURE: block}
    block["mac"] = keys.sign(canonical(signed))
    return signed


def verify(origin: Origin, keys: Keyring | None, now: float) -> None:
    """The signature of ``origin`` checked with ``keys``: ``TamperedCheckpoint`` unless it matches,
    ``ExpiredCheckpoint`` past its ``expires``."""
    block = origin.signature
    expires = block.get("expires") if isinstance(block, dict) else None
    if not (isinstance(block, dict) and block.get("alg") == ALGORITHM and isinstance(block.get("kid"), str)
            and isinstance(block.get("mac"), str) and set(block) == {"alg", "kid", "expires", "mac"}
            and (expires is None or (type(expires) in (int, float) and math.isfinite(expires)))):
        raise TamperedCheckpoint(f"the checkpoint's signature is not an {ALGORITHM} signature block")
    kid = block["kid"]
    if keys is None:
        raise TamperedCheckpoint(f"the checkpoint is signed (key id {kid[:20]!r}) and no checkpoint key is "
                                 "configured to check it (Agent(checkpoint_key=...) or TRACEDAGENT_CHECKPOINT_KEY)")
    matches = keys.verify(canonical({**origin.data, SIGNATURE: {k: v for k, v in block.items() if k != "mac"}}),
                          kid, block["mac"])
    if matches is None:
        raise TamperedCheckpoint(f"the checkpoint is signed with key id {kid[:20]!r}, not one of this agent's "
                                 f"{[k for k, _ in keys.keys]}: another application's, or a key rotated out")
    if not matches:
        raise TamperedCheckpoint("the checkpoint was changed after it was signed: its signature does not match it")
    if expires is not None and now > expires:
        raise ExpiredCheckpoint(f"the checkpoint expired {now - expires:,.0f} s ago (its signed maximum age)")


def claim_key(cp: Any) -> str:
    """What ``claim`` (and an agent's memory of resumed checkpoints) is given: the checkpoint's
    ``id`` when it is signed or made here; for an unsigned one, whose ``id`` anyone who edits
    it chooses, a digest of what a "yes" would run (the agent and each waiting call's id and
    digest), so that a copy with a new ``id`` is the same claim."""
    origin = getattr(cp, "_origin", None)
    if origin is None or origin.signature is not None:
        return cp.id
    calls = canonical([cp.agent, [[c.id, c.digest] for c in cp.calls()]])
    return "unsigned-" + hashlib.sha256(calls).hexdigest()[:32]
