"""An MCP tool's input checked against the server's JSON Schema, in full, by ``jsonschema``
(which the ``mcp`` SDK brings; imported when a server's tools are listed).

Every keyword is honoured (``minimum``, ``pattern``, ``$ref``, ``oneOf``...) and nothing
beyond JSON Schema is asked: ``3.0`` is an integer, ``format`` is not asserted. The arguments
are passed to the server as they came. What the model is told of invalid input names where and
which keyword, never quoting the value it sent (bounded, secret-shaped text blanked).
"""

from __future__ import annotations

from typing import Any

from .._core._schemas import ArgumentValidator, InvalidArguments, json_type
from .._core._secrets import Redactor

__all__ = ["input_validator"]

_MAX_LENGTH = 300
_MAX_SHOWN = 80
_redact = Redactor()

_SAID = {"minimum": "must be >= {}", "maximum": "must be <= {}", "exclusiveMinimum": "must be > {}",
         "exclusiveMaximum": "must be < {}", "multipleOf": "must be a multiple of {}", "pattern": "must match {}",
         "minLength": "must have at least {} characters", "maxLength": "must have at most {} characters",
         "minItems": "must have at least {} items", "maxItems": "must have at most {} items",
         "uniqueItems": "must not repeat an item", "enum": "must be one of {}", "const": "must be {}",
         "oneOf": "must match exactly one of the allowed shapes", "anyOf": "does not match any allowed shape",
         "not": "matches a shape that is not allowed", "minProperties": "must have at least {} properties",
         "maxProperties": "must have at most {} properties"}
"""How a failed keyword is said, with the schema's value (the server's, bounded), not the input's."""


def input_validator(schema: dict[str, Any]) -> ArgumentValidator:
    """The validator of a tool's ``inputSchema``. A schema JSON Schema itself rejects is the
    server's mistake: each call to that tool is ``invalid_arguments`` saying so, and the rest of
    the server's tools work."""
    from jsonschema.exceptions import SchemaError, best_match
    from jsonschema.validators import Draft202012Validator, validator_for

    try:
        kind = validator_for(schema, default=Draft202012Validator)
        kind.check_schema(schema)
        checker = kind(schema)
    except (SchemaError, ValueError, TypeError, LookupError, RecursionError) as exc:
        problem = f"the server's input schema for this tool is not valid JSON Schema ({type(exc).__name__})"

        def refuse(arguments: dict[str, Any], /) -> dict[str, Any]:
            raise InvalidArguments(problem)
        return refuse

    def validate(arguments: dict[str, Any], /) -> dict[str, Any]:
        try:
            error = best_match(checker.iter_errors(arguments))
        except Exception as exc:  # an unresolvable $ref, a pattern Python cannot compile, a schema too deep
            raise InvalidArguments(f"the server's input schema could not be applied ({type(exc).__name__})") from None
        if error is None:
            return arguments
        raise InvalidArguments(_said(error))
    return validate


def _said(error: Any) -> str:
    where = _where(error.absolute_path)
    keyword, value, instance = error.validator, error.validator_value, error.instance
    if keyword == "type":
        text = f"{where} must be {_joined(value)}, got {json_type(instance)}"
    elif keyword == "required":
        missing = [key for key in value if isinstance(instance, dict) and key not in instance]
        text = f"{_where([*error.absolute_path, missing[0]]) if missing else where} is required"
    elif keyword in ("additionalProperties", "unevaluatedProperties") and isinstance(instance, dict):
        extra = sorted(map(str, instance.keys() - (error.schema.get("properties") or {}).keys()))[:3]
        named = ", ".join(_where([key]) for key in extra)
        text = f"unexpected argument {named}" if not error.absolute_path else f"{where} has {named}, not allowed"
    elif keyword in _SAID:
        text = f"{where} {_SAID[keyword].format(_shown(value))}"
    else:
        text = f"{where} does not satisfy {keyword!r}"
    text = _redact(text)
    return text if len(text) <= _MAX_LENGTH else text[:_MAX_LENGTH] + "..."


def _where(path: Any) -> str:
    shown = ""
    for step in path:
        if isinstance(step, int):
            shown += f"[{step}]"
        else:
            key = str(step) if len(str(step)) <= 40 else str(step)[:40] + "..."
            shown += repr(key) if not shown else f"[{key!r}]"
    return shown or "arguments"


def _joined(kinds: Any) -> str:
    return " or ".join(map(str, kinds)) if isinstance(kinds, list) else str(kinds)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "..."
