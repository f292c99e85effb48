"""How a test names span attributes and metric labels with keyword arguments.

Attribute keys contain dots (``gen_ai.tool.name``), which keyword arguments cannot. The
rule is deliberately simple so that a query never matches an attribute it did not name:

1. a keyword listed in ``ATTRIBUTE_ALIASES`` means that one attribute
   (``stop_reason=`` is ``tracedagent.stop_reason``);
2. any other keyword is the exact attribute key, so a dotted key is passed by unpacking
   a dict: ``recorder.spans(**{"gen_ai.tool.name": "refund"})``.

There is no suffix or fuzzy matching: ``name=`` is the attribute ``name``, not any key
that happens to end in ``name``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from opentelemetry.sdk.trace import ReadableSpan

from .._core import _names as N

__all__ = ["ATTRIBUTE_ALIASES", "attribute_key", "attributes_match", "find_spans"]

ATTRIBUTE_ALIASES: Mapping[str, str] = {
    # Each alias is the attribute's distinctive last segments joined by underscores.
    "stop_reason": N.STOP_REASON,
    "steps": N.STEPS,
    "agent_name": N.GEN_AI_AGENT_NAME,
    "conversation_id": N.GEN_AI_CONVERSATION_ID,
    "sub_agent_stop_reason": N.SUB_AGENT_STOP_REASON,
    "operation_name": N.GEN_AI_OPERATION_NAME,
    "provider_name": N.GEN_AI_PROVIDER_NAME,
    "request_model": N.GEN_AI_REQUEST_MODEL,
    "response_model": N.GEN_AI_RESPONSE_MODEL,
    "token_type": N.GEN_AI_TOKEN_TYPE,
    "tool_name": N.GEN_AI_TOOL_NAME,
    "tool_call_id": N.GEN_AI_TOOL_CALL_ID,
    "outcome": N.TOOL_OUTCOME,
    "step_index": N.STEP_INDEX,
    "error_type": N.ERROR_TYPE,
    "checkpoint_id": N.CHECKPOINT_ID,
}
"""Keyword → attribute key for the names tracedagent emits most often (see module doc)."""

_MISSING = object()


def attribute_key(keyword: str) -> str:
    """The attribute key a query keyword stands for: its alias, or the keyword itself."""
    return ATTRIBUTE_ALIASES.get(keyword, keyword)


def _equal(actual: Any, wanted: Any) -> bool:
    # Sequence attributes come back from the SDK as tuples; let a test write a list.
    if isinstance(actual, tuple) and isinstance(wanted, list):
        return list(actual) == wanted
    return actual == wanted


def attributes_match(attributes: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    """True when every wanted keyword's attribute is present and equal (``Stop`` members
    compare equal to their string values)."""
    attributes = attributes or {}
    return all(_equal(attributes.get(attribute_key(k), _MISSING), v) for k, v in wanted.items())


def find_spans(spans: Iterable[ReadableSpan], name: str | None = None, **attributes: Any) -> list[ReadableSpan]:
    """The spans named ``name`` (when given) whose attributes match, in the given order."""
    return [s for s in spans if (name is None or s.name == name) and attributes_match(s.attributes, attributes)]
