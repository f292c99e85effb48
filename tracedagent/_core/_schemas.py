"""JSON schemas for tools: compiled into argument validators, and derived from signatures.

A tool's parameters are checked on every call, so each schema is compiled once, when the
``Registry`` is built, into a ``Validator``; ``tool`` derives the schema from a typed,
documented function in the first place.

This is the standard library's reading of a signature (JSON's own types). The public
``tracedagent.tool`` reads it with pydantic instead (``_typed/``): what the registry sees of
either is an ``ArgumentValidator``, the one protocol a tool's arguments pass through.
"""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any, Callable, Literal, Protocol

__all__ = ["Validator", "ArgumentValidator", "InvalidArguments", "SignatureReader", "compile_schema",
           "schema_validator", "read_signature", "json_type", "parameters_schema", "type_schema"]

_JSON_TYPE_NAMES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                                     list: "array", tuple: "array", dict: "object", type(None): "null"}


def json_type(value: Any) -> str:
    return _JSON_TYPE_NAMES.get(type(value)) or type(value).__name__


Validator = Callable[[Any, str], "str | None"]
"""A compiled schema: ``check(value, where)`` returns ``None`` or the problem, naming ``where``."""


class InvalidArguments(ValueError):
    """A call's arguments do not fit its tool: the message is the problem, written for the model
    (bounded, and quoting nothing secret-shaped of what it sent). The call is not made."""


class ArgumentValidator(Protocol):
    """How a tool's call arguments (a JSON object, decoded) become the keyword arguments its
    function is called with: checked, and converted where the tool's types say so (a ``date``
    from its string). Raises ``InvalidArguments`` for arguments that do not fit."""

    def __call__(self, arguments: dict[str, Any], /) -> dict[str, Any]: ...


class SignatureReader(Protocol):
    """What ``tool`` reads a function with: the JSON schema shown to the model for its
    parameters (``arg_docs``: each parameter's description, from the docstring) and the
    validator its calls go through (``None``: the schema's, compiled by ``compile_schema``)."""

    def __call__(self, fn: Callable[..., Any], arg_docs: dict[str, str], /
                 ) -> tuple[dict[str, Any], ArgumentValidator | None]: ...


def schema_validator(schema: Any) -> ArgumentValidator:
    """The ``ArgumentValidator`` of a JSON schema in the subset ``compile_schema`` checks: the
    arguments are passed on as they came."""
    check = compile_schema(schema)

    def validate(arguments: dict[str, Any]) -> dict[str, Any]:
        problem = check(arguments, "arguments")
        if problem is not None:
            raise InvalidArguments(problem)
        return arguments
    return validate


def read_signature(fn: Callable[..., Any], arg_docs: dict[str, str]) -> tuple[dict[str, Any], None]:
    """The standard library's ``SignatureReader``: JSON's own types, checked by the schema."""
    return parameters_schema(fn, arg_docs), None


_MAX_SHOWN = 80


def _shown(value: Any) -> str:
    """``repr(value)`` as a problem quotes it: bounded, and never raising (an int of thousands
    of digits, a ``__repr__`` that raises or recurses are the model's or the caller's doing)."""
    try:
        text = repr(value)
    except (Exception, RecursionError):
        return f"a {type(value).__name__} that cannot be shown"
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "..."


def _accept(value: Any, where: str) -> str | None:
    return None


def _reject(value: Any, where: str) -> str | None:
    return f"{where} is not allowed"


def compile_schema(schema: Any) -> Validator:
    """The subset of JSON Schema that ``tool`` generates (type, enum, items, properties,
    required, additionalProperties, anyOf), resolved once per tool so that dispatch does not
    re-read the schema every call. ``true`` accepts anything and ``false`` nothing, as in JSON
    Schema; keywords outside the subset are not checked."""
    if schema is False:
        return _reject
    if not isinstance(schema, dict):
        return _accept
    if "anyOf" in schema:
        options = [compile_schema(option) for option in schema["anyOf"]]

        def any_of(value: Any, where: str) -> str | None:
            if any(option(value, where) is None for option in options):
                return None
            return f"{where} does not match any allowed type"
        return any_of

    checks: list[Validator] = []
    expected = schema.get("type")
    object_keywords = "properties" in schema or "required" in schema or schema.get("additionalProperties") is False
    # An object schema's own check tells a non-object apart: one check a call, not two.
    typed_object = expected == "object" and object_keywords
    if expected is not None and not typed_object:
        kinds = [str(k) for k in (expected if isinstance(expected, list) else [expected])]
        allowed = set(kinds) | ({"integer"} if "number" in kinds else set())  # an integer is a number
        allowed_types = frozenset(t for t, kind in _JSON_TYPE_NAMES.items() if kind in allowed)
        wanted = " or ".join(kinds)

        def of_type(value: Any, where: str) -> str | None:
            if type(value) in allowed_types:
                return None
            return f"{where} must be {wanted}, got {json_type(value)}"
        checks.append(of_type)
    if "enum" in schema:
        choices = schema["enum"]
        if not isinstance(choices, (list, tuple)):
            raise TypeError(f"'enum' must be a list of values, not {type(choices).__name__}")

        def in_enum(value: Any, where: str) -> str | None:
            try:
                if value in choices:
                    return None
            except Exception:  # an object whose == raises is no choice of a JSON schema
                pass
            return f"{where} must be one of {_shown(choices)}, got {_shown(value)}"
        checks.append(in_enum)
    if "items" in schema:
        item_check = compile_schema(schema["items"])

        def items(value: Any, where: str) -> str | None:
            if isinstance(value, (list, tuple)):
                for i, item in enumerate(value):
                    if (problem := item_check(item, f"{where}[{i}]")) is not None:
                        return problem
            return None
        checks.append(items)
    if object_keywords:
        checks.append(_compile_object(schema, typed=typed_object))

    if not checks:
        return _accept
    if len(checks) == 1:
        return checks[0]

    def every(value: Any, where: str) -> str | None:
        for check in checks:
            if (problem := check(value, where)) is not None:
                return problem
        return None
    return every


def _compile_object(schema: dict[str, Any], *, typed: bool) -> Validator:
    """Properties, required and additionalProperties; with ``typed``, also ``type: object``."""
    # Each property's check with the name its problems are reported under, built once.
    properties: dict[str, tuple[Validator, str]] = {
        key: (compile_schema(sub), repr(key)) for key, sub in (schema.get("properties") or {}).items()}
    required = schema.get("required", [])
    if not isinstance(required, (list, tuple)):
        raise TypeError(f"'required' must be a list of names, not {type(required).__name__}")
    closed = schema.get("additionalProperties") is False

    def object_(value: Any, where: str) -> str | None:
        if not isinstance(value, dict):
            return f"{where} must be object, got {json_type(value)}" if typed else None
        for key in required:
            if key not in value:
                return f"{key!r} is required"
        if closed and not properties.keys() >= value.keys():
            extra = sorted(map(str, value.keys() - properties.keys()))
            return f"unexpected argument{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))}"
        for key, item in value.items():
            known = properties.get(key)
            if known is not None and (problem := known[0](item, known[1])) is not None:
                return problem
        return None
    return object_


# --- Schemas from signatures ----------------------------------------------------------

def parameters_schema(fn: Callable[..., Any], arg_docs: dict[str, str]) -> dict[str, Any]:
    hints = typing.get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        prop = type_schema(hints.get(param.name, Any))
        if param.name in arg_docs:
            prop["description"] = arg_docs[param.name]
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        elif param.default is None or isinstance(param.default, (str, int, float, bool)):
            prop["default"] = param.default
        properties[param.name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                            type(None): "null"}


def type_schema(hint: Any) -> dict[str, Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [type_schema(a) for a in args]}
    if hint in (list, tuple, set) or origin in (list, tuple, set, typing.Sequence):
        return {"type": "array", **({"items": type_schema(args[0])} if args else {})}
    if hint is dict or origin is dict:
        return {"type": "object"}
    return {}  # Any, or a type JSON schema cannot express: accept whatever the model sends
