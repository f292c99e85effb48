"""The public ``tool`` decorator and ``Registry``: the core's, with a function's signature read
by pydantic (``_arguments``), so that a tool receives the types it declares."""

from __future__ import annotations

from typing import Any, Callable, overload

from .._core import _tools
from .._core._tools import Tool
from ._arguments import read_signature

__all__ = ["tool", "Registry"]


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(*, name: str | None = None, description: str | None = None, timeout: float | None = None,
         requires_approval: bool = False) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None,
         timeout: float | None = None, requires_approval: bool = False) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed, documented function (plain or ``async def``) into a ``Tool``; usable bare
    or with arguments (``name``, ``description``, ``timeout`` in seconds, ``requires_approval``).

    The description is the docstring's first paragraph; each parameter's comes from its
    ``Args:`` (Google), ``Parameters`` (NumPy) or ``:param`` (Sphinx) entry, or from
    ``Annotated[..., Field(description=...)]``. The parameters' types are read by pydantic:
    ``Enum``, ``Literal``, pydantic models, dataclasses, ``TypedDict``, ``date``, ``datetime``,
    ``UUID``, ``Decimal``, containers, ``Optional`` and unions, with ``Field`` constraints
    (``ge``, ``max_length``, ``pattern``...). The model is shown their JSON schema; a call's
    arguments are validated and converted, so the function receives an ``Enum`` member, a model
    instance, a ``date``; arguments that do not fit are the outcome ``invalid_arguments`` and
    the function is not called.
    """
    return _tools.tool(fn, name=name, description=description, timeout=timeout,  # type: ignore[call-overload, no-any-return]
                       requires_approval=requires_approval, reader=read_signature)


class Registry(_tools.Registry):
    """The tools a model may call, and the policy that may deny any call. A plain function
    among ``tools`` becomes a tool as ``tool`` makes one: its types read by pydantic."""

    make_tool = staticmethod(tool)
