"""Your own attributes on a run (a user id, a tenant, tags): checked where they come in, bounded.

``Agent(attributes={...})`` gives an agent's defaults, ``run(..., attributes={...})`` (every entry
point) a call's; both go on the run span (``invoke_agent``), at its start, so that a backend's
tag search on run spans finds them and a sampler sees them. They are checked at the call,
before anything runs, and a bad one is ``BadAttributes`` naming the key and the ``reason``:

* a key is a non-empty printable string of at most ``MAX_ATTRIBUTE_KEY_LENGTH`` characters, not
  under a reserved prefix (``gen_ai.``, ``tracedagent.``, ``otel.``: a run span's own names), and
  not one that names a secret (``api_key``, ``password``, ``token``...: ``Redactor.names_a_secret``);
* a value is what an OpenTelemetry attribute holds: a ``str``, ``bool``, ``int`` (64-bit) or
  ``float``, or a list or tuple of at most ``MAX_ATTRIBUTE_ITEMS`` of one of them;
* at most ``MAX_RUN_ATTRIBUTES`` keys, the agent's defaults and the call's together.

A string (alone or in a sequence) longer than ``MAX_ATTRIBUTE_VALUE_LENGTH`` is cut, ending with
``TRUNCATION_MARK``, as a description is: its length is rarely the program's choice, while the
number of keys and items is. Credential shapes in strings are blanked (``Redactor``), as in
captured content: a value is the user's, but it may quote what came from outside.

Which attributes a run gets (``run_attributes``): the call's win over what its caller's run
carried (a sub-agent's run, started inside a tool of another), which win over the agent's
defaults, which win over what was copied from OpenTelemetry baggage (``from_baggage``); at
most ``MAX_RUN_ATTRIBUTES`` in all, the nearest kept first. They are never metric labels (a
user id would explode a metric's series) and never content.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from . import _names as N
from ._secrets import Redactor

__all__ = ["BadAttributes", "check_attributes", "baggage_keys", "from_baggage", "run_attributes", "NO_ATTRIBUTES"]

NO_ATTRIBUTES: Mapping[str, Any] = {}
"""A run without attributes of its own (shared: never written to)."""

_SCALARS = (str, bool, int, float)
_INT64 = (-(2**63), 2**63 - 1)
_redact = Redactor()
_SURROGATES = dict.fromkeys(range(0xD800, 0xE000), "\ufffd")


class BadAttributes(ValueError):
    """Your own attributes were refused before the run started: ``key`` is the one at fault
    (``None`` when it is the whole: not a mapping, too many), ``reason`` says what is wrong,
    one of ``REASONS``."""

    REASONS = ("not_a_mapping", "bad_key", "reserved", "secret", "bad_value", "too_many", "too_many_items")

    def __init__(self, message: str, *, key: str | None, reason: str) -> None:
        super().__init__(message)
        self.key = key
        self.reason = reason


def _key_problem(key: Any) -> str | None:
    """Why ``key`` cannot be one of your attributes' keys, as ``(reason)``, or ``None``."""
    if type(key) is not str or not key.strip() or len(key) > N.MAX_ATTRIBUTE_KEY_LENGTH or not key.isprintable():
        return "bad_key"
    if key.lower().startswith(N.RESERVED_ATTRIBUTE_PREFIXES):
        return "reserved"
    if Redactor.names_a_secret(key):
        return "secret"
    return None


def _string(value: str) -> str:
    """A string value as a span may carry it: credential shapes blanked, cut, encodable."""
    value = _redact(value)
    if len(value) > N.MAX_ATTRIBUTE_VALUE_LENGTH:
        value = value[: N.MAX_ATTRIBUTE_VALUE_LENGTH - len(N.TRUNCATION_MARK)] + N.TRUNCATION_MARK
    return value.translate(_SURROGATES)  # a lone surrogate would cost the span the attribute


def _scalar(value: Any) -> Any:
    """The value as recorded, or ``None`` if it is not an attribute's scalar."""
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is bool or kind is float or (kind is int and _INT64[0] <= value <= _INT64[1]):
        return value
    return None


def _value(key: str, value: Any) -> Any:
    scalar = _scalar(value)
    if scalar is not None:
        return scalar
    if type(value) in (list, tuple):
        if len(value) > N.MAX_ATTRIBUTE_ITEMS:
            raise BadAttributes(f"attribute {key!r} holds {len(value)} items; at most {N.MAX_ATTRIBUTE_ITEMS}",
                                key=key, reason="too_many_items")
        items = [_scalar(item) for item in value]
        if None not in items and len({type(item) for item in value}) <= 1:  # homogeneous, as OTel requires
            return tuple(items)
    raise BadAttributes(f"attribute {key!r} is a {type(value).__name__}: a value is a str, bool, int (64-bit) or "
                        "float, or a list of one of them", key=key, reason="bad_value")


def check_attributes(attributes: Any, defaults: Mapping[str, Any] = NO_ATTRIBUTES) -> Mapping[str, Any]:
    """``attributes`` (``None``: none) as the run span will carry them, or ``BadAttributes``;
    with ``defaults`` (the agent's, checked already), the two together are bounded too."""
    if attributes is None:
        return NO_ATTRIBUTES
    if not isinstance(attributes, Mapping):
        raise BadAttributes(f"attributes are a {type(attributes).__name__}, not a mapping of names to values",
                            key=None, reason="not_a_mapping")
    if len(attributes) > N.MAX_RUN_ATTRIBUTES or len(defaults.keys() | attributes.keys()) > N.MAX_RUN_ATTRIBUTES:
        raise BadAttributes(f"{len(defaults.keys() | attributes.keys())} attributes (the agent's and the call's "
                            f"together); at most {N.MAX_RUN_ATTRIBUTES}", key=None, reason="too_many")
    checked: dict[str, Any] = {}
    for key, value in attributes.items():
        reason = _key_problem(key)
        if reason is not None:
            shown = key[:80] if type(key) is str else type(key).__name__
            why = {"bad_key": f"a key is a non-empty printable string of at most {N.MAX_ATTRIBUTE_KEY_LENGTH} "
                              "characters",
                   "reserved": f"keys under {', '.join(N.RESERVED_ATTRIBUTE_PREFIXES)} are reserved",
                   "secret": "it names a secret, and secrets never go on spans"}[reason]
            raise BadAttributes(f"attribute key {shown!r} refused: {why}", key=shown, reason=reason)
        checked[key] = _value(key, value)
    return checked


def baggage_keys(wanted: bool | Iterable[str] | None) -> bool | frozenset[str]:
    """``Agent(attributes_from_baggage=...)``: ``False`` (none, the default), ``True`` (every
    entry) or the keys to copy, each a valid attribute key (``BadAttributes`` otherwise)."""
    if wanted is None or wanted is False:
        return False
    if wanted is True:
        return True
    if isinstance(wanted, str) or not isinstance(wanted, Iterable):
        raise BadAttributes("attributes_from_baggage is True, False or the baggage keys to copy",
                            key=None, reason="bad_key")
    keys = frozenset(wanted)
    for key in keys:
        if _key_problem(key) is not None:
            check_attributes({key: ""})  # raises, naming the key and the reason
    return keys


def from_baggage(entries: Mapping[str, Any], wanted: bool | frozenset[str]) -> Mapping[str, Any]:
    """The baggage entries asked for (``wanted``), as attributes: baggage comes from outside the
    program (a caller's service), so an entry that could not be one of your attributes (a
    reserved or secret-naming key, a value of another type) is left out, never an error - a
    run does not fail for its telemetry -, strings are bounded as yours are, and at most
    ``MAX_RUN_ATTRIBUTES`` are taken."""
    copied: dict[str, Any] = {}
    for key, value in entries.items():
        if len(copied) == N.MAX_RUN_ATTRIBUTES:
            break
        if (wanted is True or key in wanted) and _key_problem(key) is None:  # type: ignore[operator]
            scalar = _scalar(value)
            if scalar is not None:
                copied[key] = scalar
    return copied


def run_attributes(defaults: Mapping[str, Any], call: Mapping[str, Any],
                   inherited: Mapping[str, Any] | None = None,
                   baggage: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """A run's own attributes. A key's value is the ``call``'s, else its caller's run's
    (``inherited``: a sub-agent's run), else the agent's ``defaults``, else the ``baggage``
    copied. At most ``MAX_RUN_ATTRIBUTES`` keys: the call's and the defaults' first (together
    they fit: ``check_attributes`` saw to it), then the caller's, then the baggage's."""
    layers = [layer for layer in (call, inherited, defaults, baggage) if layer]
    if len(layers) < 2:
        return layers[0] if layers else NO_ATTRIBUTES
    keys: dict[str, None] = {}
    for layer in (call, defaults, inherited or NO_ATTRIBUTES, baggage or NO_ATTRIBUTES):
        for key in layer:
            if len(keys) == N.MAX_RUN_ATTRIBUTES:
                break
            keys.setdefault(key)
    return {key: next(layer[key] for layer in layers if key in layer) for key in keys}
