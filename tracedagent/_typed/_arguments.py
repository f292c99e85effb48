"""A tool's arguments read from its signature by pydantic: the JSON schema the model is shown,
and the validator that turns a call's arguments into the function's types.

The parameters become one ``TypedDict`` (extra keys forbidden, a parameter with a default not
required), validated by pydantic in its lax mode: ``"2025-06-01"`` becomes a ``date``, ``"red"``
an ``Enum`` member, an object a model or dataclass instance, and the function gets only the
arguments the model sent (its own defaults apply to the rest). Validating into a dict is the
cheapest thing pydantic does (``benchmarks/validation.py``: cheaper than tracedagent's own
schema check), so every ``@tool`` goes through it, plain-JSON ones too.

A parameter of plain JSON type (``str``, ``int``, ``list[str]``, ``Literal["a", "b"]``,
``Optional[float]``...) is shown to the model by the standard library's schema, unchanged from
before pydantic; any other is shown by pydantic's (``$defs`` at the top). A type pydantic
cannot read (an arbitrary class) is ``Any``, as it was: anything accepted, shown as ``{}``.
"""

from __future__ import annotations

import inspect
import sys
import types
import typing
from typing import Annotated, Any, Callable, Literal

from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import to_jsonable_python
from typing_extensions import NotRequired, Required, TypedDict, is_typeddict

from .._core._schemas import InvalidArguments, json_type, type_schema
from .._core._secrets import Redactor

__all__ = ["read_signature", "PydanticArguments", "summarize"]


def read_signature(fn: Callable[..., Any], arg_docs: dict[str, str]) -> tuple[dict[str, Any], PydanticArguments]:
    """``tool``'s ``SignatureReader``: the parameters' JSON schema and their pydantic validator."""
    hints = typing.get_type_hints(fn, include_extras=True)
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    types_ = {p.name: _readable(hints.get(p.name, Any)) for p in params}
    fields = {p.name: types_[p.name] if p.default is p.empty else NotRequired[types_[p.name]] for p in params}
    arguments = TypedDict(f"{fn.__name__}_arguments", fields)  # type: ignore[misc, operator]
    arguments.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]
    adapter = TypeAdapter(arguments)
    shown = adapter.json_schema(schema_generator=_Untitled)

    properties: dict[str, Any] = {}
    for p in params:
        hint = types_[p.name]
        prop = type_schema(hint) if _plain(hint) else dict(shown["properties"][p.name])
        if p.name in arg_docs and "description" not in prop:
            prop["description"] = arg_docs[p.name]
        if p.default is not p.empty and (default := _shown_default(p.default, _plain(hint))) is not _NOTHING:
            prop["default"] = default
        properties[p.name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    required = [p.name for p in params if p.default is p.empty]
    if required:
        schema["required"] = required
    if "$defs" in shown:
        schema["$defs"] = shown["$defs"]
    return schema, PydanticArguments(adapter)


class PydanticArguments:
    """An ``ArgumentValidator``: a call's arguments validated by pydantic into the function's
    keyword arguments, or ``InvalidArguments`` with pydantic's errors summarized (``summarize``)."""

    __slots__ = ("_validate",)

    def __init__(self, adapter: TypeAdapter[Any]) -> None:
        self._validate = adapter.validate_python

    def __call__(self, arguments: dict[str, Any], /) -> dict[str, Any]:
        try:
            return self._validate(arguments)  # type: ignore[no-any-return]
        except ValidationError as exc:
            raise InvalidArguments(summarize(exc, arguments)) from None


# --- what the model is told of invalid arguments ---------------------------------------

_MAX_PROBLEMS = 3
_MAX_LENGTH = 400
_MAX_KEY = 40
_redact = Redactor()

_KINDS = {"string_type": "string", "int_type": "integer", "int_parsing": "integer", "float_type": "number",
          "float_parsing": "number", "bool_type": "boolean", "bool_parsing": "boolean", "list_type": "array",
          "tuple_type": "array", "set_type": "array", "frozen_set_type": "array", "dict_type": "object",
          "model_type": "object", "model_attributes_type": "object", "dataclass_type": "object"}
"""pydantic's error types that mean "not the JSON type wanted", said as the standard library's
validator says it: ``'q' must be string, got integer``."""


def summarize(exc: ValidationError, arguments: dict[str, Any]) -> str:
    """pydantic's errors as one line for the model: the first few, each naming where (``'addr'
    ['zip']``, ``'tags'[1]``), bounded, and with what looks like a secret blanked (a message
    of the user's own validator, or a key the model sent, may quote what it was given)."""
    errors = exc.errors(include_url=False, include_context=False)
    problems = [_problem(error, arguments) for error in errors[:_MAX_PROBLEMS]]
    if len(errors) > _MAX_PROBLEMS:
        problems.append(f"and {len(errors) - _MAX_PROBLEMS} more")
    text = _redact("; ".join(problems))
    return text if len(text) <= _MAX_LENGTH else text[:_MAX_LENGTH] + "..."


def _problem(error: Any, arguments: dict[str, Any]) -> str:
    kind, loc = error["type"], error["loc"]
    where = _where(loc, arguments, missing=kind == "missing")
    if kind == "missing":
        return f"{where} is required"
    if kind == "extra_forbidden":
        return f"unexpected argument {where}" if len(loc) == 1 else f"{where} is not allowed"
    if kind in _KINDS:
        return f"{where} must be {_KINDS[kind]}, got {json_type(error.get('input'))}"
    return f"{where}: {error['msg']}"


def _where(loc: tuple[Any, ...], arguments: Any, *, missing: bool) -> str:
    """The path of ``loc`` in the arguments: keys and indexes, without the names pydantic gives
    the members of a union it tried (``int``, ``function-after[...]``), which are no keys."""
    path, value = "", arguments
    for i, step in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(step, int) and isinstance(value, (list, tuple)):
            path += f"[{step}]"
            value = value[step] if 0 <= step < len(value) else None
        elif isinstance(value, dict) and (step in value or (missing and last)):
            key = str(step) if len(str(step)) <= _MAX_KEY else str(step)[:_MAX_KEY] + "..."
            path += repr(key) if not path else f"[{key!r}]"
            value = value.get(step)
    return path or "arguments"


# --- the schema ---------------------------------------------------------------------------

class _Untitled(GenerateJsonSchema):
    """pydantic's schema without a ``title`` per field (``"title": "Q"`` tells the model nothing)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


_SCALARS = (str, int, float, bool, type(None))
_NOTHING = object()


def _plain(hint: Any) -> bool:
    """A type JSON itself has, which the standard library's schema shows as it always did."""
    if hint in _SCALARS or hint in (Any, list, dict):
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return all(type(a) in _SCALARS for a in args)
    if origin in (typing.Union, types.UnionType, list):
        return all(_plain(a) for a in args)
    return False


def _readable(hint: Any) -> Any:
    """``hint``, or ``Any`` where pydantic cannot validate it or show it as JSON Schema (an
    arbitrary class): such a parameter takes whatever the model sends, as before pydantic."""
    try:
        hint = _modern(hint)
        TypeAdapter(hint).json_schema()
    except Exception:  # PydanticSchemaGenerationError, PydanticInvalidForJsonSchema, a TypeError of a bad hint
        return Any
    return hint


def _shown_default(default: Any, plain: bool) -> Any:
    """A parameter's default as the schema shows it: a JSON scalar as it is (and for a plain
    type, only that, as before pydantic); an Enum member as its value, a model as its JSON."""
    if default is None or isinstance(default, (str, int, float, bool)):
        return default
    if plain:
        return _NOTHING
    try:
        return to_jsonable_python(default)
    except Exception:  # a default JSON cannot show is just not shown
        return _NOTHING


def _modern(hint: Any) -> Any:
    """``hint`` with each ``typing.TypedDict`` in it made again as a ``typing_extensions`` one:
    before Python 3.12, pydantic reads only those (the standard one lacks what it needs)."""
    if sys.version_info >= (3, 12):
        return hint
    if is_typeddict(hint) and type(hint).__module__ == "typing":
        required = hint.__required_keys__
        fields = {key: (Required if key in required else NotRequired)[_modern(value)]
                  for key, value in typing.get_type_hints(hint, include_extras=True).items()}
        return TypedDict(hint.__name__, fields)  # type: ignore[misc, operator]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if not args or origin is Literal:
        return hint
    if origin is Annotated:
        return Annotated[(_modern(args[0]), *hint.__metadata__)]  # type: ignore[valid-type]
    modern = tuple(_modern(arg) for arg in args)
    if modern == args:
        return hint
    if origin in (typing.Union, types.UnionType):
        return typing.Union[modern]
    return origin[modern] if isinstance(hint, types.GenericAlias) else hint.copy_with(modern)
