"""A run's output type as an ``OutputSpec``, validated by pydantic.

``output_spec(T)`` takes anything pydantic's ``TypeAdapter`` takes - a pydantic model, a
dataclass, a ``TypedDict``, a container or scalar type, a ``Literal``, a union of them - and
gives the run machine its name, its JSON schema and ``validate(text)``: the answer's text read
as JSON and validated in pydantic's JSON mode (so ``"2026-01-02"`` is a ``date``, a whole-number
float an ``int``), every problem summarized without the input's values (the summary is shown to
the model and, when the retries run out, in the run's output sentence: no content in telemetry).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any, get_args, get_origin

from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError

from .._core._output import MAX_TYPE_PATH_LENGTH, OutputCheck, bounded_problem

__all__ = ["TypedOutput", "output_spec", "type_name", "import_path"]

MAX_ERRORS = 5
"""At most this many of pydantic's errors are summarized for the model."""

_OPENING_FENCE = re.compile(r"^\s*```[A-Za-z]*\s*\n?")
_FENCE = re.compile(r"^\s*```[A-Za-z]*\s*\n?(.*?)\n?```\s*$", re.DOTALL)


@dataclass(frozen=True, eq=False)
class TypedOutput:
    """An ``OutputSpec`` for the Python type ``type``."""

    type: Any
    """The output type, as given to ``Agent(output_type=...)``."""
    name: str
    """Its name (``Weather``, ``list[int]``, ``Literal['yes', 'no']``)."""
    schema: dict[str, Any]
    """Its JSON schema (pydantic's, for validation)."""
    path: str | None
    """Where it lives, ``module:qualname`` (``tracedagent.output.type_path``: replay imports it);
    ``None`` for a type that cannot be imported by a path (``import_path``)."""
    _adapter: TypeAdapter[Any] = field(repr=False)

    def validate(self, text: str) -> OutputCheck:
        """``text`` (JSON, a code fence around it tolerated) as a value of the type, or the problem."""
        if (fenced := _FENCE.match(text)) is not None:
            text = fenced.group(1)
        try:
            return OutputCheck(self._adapter.validate_json(text))
        except ValidationError as exc:
            return OutputCheck(problem=summary(exc))


    def partial(self, text: str) -> OutputCheck:
        """The value so far of a JSON ``text`` still arriving (pydantic's partial JSON: an unfinished
        last item or string is left out; a model's required fields must all have begun)."""
        text = _OPENING_FENCE.sub("", text, count=1).rstrip("`")
        try:
            return OutputCheck(self._adapter.validate_json(text, experimental_allow_partial=True))
        except (ValidationError, ValueError) as exc:
            return OutputCheck(problem=type(exc).__name__)


def output_spec(output_type: Any) -> TypedOutput:
    """The ``OutputSpec`` of ``output_type``; a type pydantic cannot validate is a ``TypeError``
    when the agent is built, not a surprise in the middle of a run."""
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = adapter.json_schema()
    except (PydanticSchemaGenerationError, PydanticUserError) as exc:
        raise TypeError(f"output_type {type_name(output_type)} cannot be validated: {exc}") from None
    return TypedOutput(type=output_type, name=type_name(output_type), schema=schema,
                       path=import_path(output_type), _adapter=adapter)


def type_name(output_type: Any) -> str:
    """A type's readable name: a class's own, else the typing form's spelling without ``typing.``."""
    if isinstance(output_type, type) and not get_args(output_type) and get_origin(output_type) is None:
        return output_type.__name__
    return repr(output_type).replace("typing.", "").replace("typing_extensions.", "")


def import_path(output_type: Any) -> str | None:
    """``module:qualname`` of a class that this path finds again (in its module, already
    imported), e.g. ``myapp.types:Weather``; ``None`` for a typing form (``list[int]``), a class
    defined in a function or in ``__main__`` (no other process imports it), or a long path."""
    if not isinstance(output_type, type) or get_args(output_type) or get_origin(output_type) is not None:
        return None
    module, qualname = getattr(output_type, "__module__", None), getattr(output_type, "__qualname__", "")
    if not isinstance(module, str) or module == "__main__" or "<" in qualname:
        return None
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    path = f"{module}:{qualname}"
    return path if found is output_type and len(path) <= MAX_TYPE_PATH_LENGTH else None


def summary(exc: ValidationError) -> str:
    """pydantic's errors, each ``location: message``, at most ``MAX_ERRORS``, without input values."""
    errors = exc.errors()  # each error's "input" is left out below
    parts = []
    for error in errors[:MAX_ERRORS]:
        where = ".".join(str(part) for part in error["loc"])
        parts.append(f"{where}: {error['msg']}" if where else error["msg"])
    if len(errors) > MAX_ERRORS:
        parts.append(f"and {len(errors) - MAX_ERRORS} more")
    return bounded_problem("; ".join(parts))
