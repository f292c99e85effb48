"""Tool arguments read from a function's types by pydantic (``tracedagent.tool``, the ``_typed``
wing): the schema the model is shown, the values the function receives, and what the model is
told when its arguments do not fit."""

from __future__ import annotations

import dataclasses
import json
from datetime import date, datetime, timezone
from decimal import Decimal
from enum import Enum
from typing import Annotated, Any, Literal, Optional, TypedDict, Union
from uuid import UUID

import pytest
from pydantic import BaseModel, Field, field_validator

import sample_tools
from tracedagent import Agent, Registry, ToolCall, ToolOutcome, tool
from tracedagent._core import _tools as core
from tracedagent.testing import FakeModel, tool_call


class Color(Enum):
    RED = "red"
    GREEN = "green"


class Address(BaseModel):
    street: str
    zip: Annotated[str, Field(pattern=r"^\d{5}$")]


@dataclasses.dataclass
class Box:
    width: int
    height: int


class Size(TypedDict):
    width: int
    unit: Literal["cm", "in"]


received: list[dict[str, Any]] = []


@tool
def ship(color: Color, addr: Address, when: date) -> str:
    """Ship a parcel.

    Args:
        color: The parcel's colour.
        addr: Where it goes.
        when: The day it leaves.
    """
    received.append({"color": color, "addr": addr, "when": when})
    return "shipped"


@pytest.fixture(autouse=True)
def nothing_received():
    received.clear()


# --- the function receives its types --------------------------------------------------------

def test_a_tool_taking_an_enum_a_model_and_a_date_receives_those_types_in_a_run():
    model = FakeModel([tool_call("ship", {"color": "red", "addr": {"street": "Main St 1", "zip": "12345"},
                                          "when": "2025-06-01"}), "Shipped."])
    run = Agent(model, [ship]).run("ship it")
    assert run.ok and run.steps[0].tool_results[0].outcome is ToolOutcome.OK
    assert received == [{"color": Color.RED, "addr": Address(street="Main St 1", zip="12345"),
                         "when": date(2025, 6, 1)}]


def test_wrong_values_are_invalid_arguments_each_named_and_the_function_never_called():
    result = Registry([ship]).dispatch(ToolCall("1", "ship", {"color": 7, "addr": "nowhere", "when": []}))
    assert result.outcome is ToolOutcome.INVALID_ARGUMENTS and received == []
    assert result.content == ("Error: invalid arguments for ship: 'color': Input should be 'red' or 'green'; "
                              "'addr' must be object, got string; 'when': Input should be a valid date.")


def every_type(box: Box, size: Size, at: datetime, ref: UUID, price: Decimal, counts: dict[str, int],
               pair: tuple[int, str], tags: set[str], maybe: Optional[Color] = None,
               either: Union[int, Address] = 0) -> str:
    """Takes one of each."""
    received.append(dict(box=box, size=size, at=at, ref=ref, price=price, counts=counts, pair=pair, tags=tags,
                         maybe=maybe, either=either))
    return "ok"


def test_dataclasses_typeddicts_dates_uuids_decimals_containers_and_unions_are_converted():
    arguments = {"box": {"width": 2, "height": 3}, "size": {"width": 4, "unit": "cm"}, "at": "2025-06-01T12:00:00Z",
                 "ref": "12345678-1234-5678-1234-567812345678", "price": "9.99", "counts": {"a": 1},
                 "pair": [1, "x"], "tags": ["a", "a", "b"], "maybe": "green", "either": {"street": "s", "zip": "00000"}}
    assert Registry([every_type]).dispatch(ToolCall("1", "every_type", arguments)).ok
    assert received == [dict(box=Box(2, 3), size={"width": 4, "unit": "cm"},
                             at=datetime(2025, 6, 1, 12, tzinfo=timezone.utc),
                             ref=UUID("12345678-1234-5678-1234-567812345678"), price=Decimal("9.99"), counts={"a": 1},
                             pair=(1, "x"), tags={"a", "b"}, maybe=Color.GREEN, either=Address(street="s", zip="00000"))]


@pytest.mark.parametrize("change, problem", [
    ({"counts": {"a": "many"}}, "'counts'['a'] must be integer, got string"),  # a dict keeps its value type
    ({"pair": [1, 2, 3]}, "'pair': Tuple should have at most 2 items after validation, not 3"),  # a tuple its shape
    ({"size": {"width": 1, "unit": "m"}}, "'size'['unit']: Input should be 'cm' or 'in'"),
    ({"box": {"width": 1}}, "'box'['height'] is required"),
    ({"ref": "not-a-uuid"}, "'ref': Input should be a valid UUID"),
    ({"extra": 1}, "unexpected argument 'extra'"),
])
def test_each_kind_says_where_its_value_went_wrong(change, problem):
    good = {"box": {"width": 2, "height": 3}, "size": {"width": 4, "unit": "cm"}, "at": "2025-06-01T12:00:00Z",
            "ref": "12345678-1234-5678-1234-567812345678", "price": "1", "counts": {}, "pair": [1, "x"], "tags": []}
    result = Registry([every_type]).dispatch(ToolCall("1", "every_type", {**good, **change}))
    assert result.outcome is ToolOutcome.INVALID_ARGUMENTS and problem in result.content, result.content
    assert received == []


@tool
def pick(n: Annotated[int, Field(ge=1, le=10, description="How many.")], name: Annotated[str, Field(max_length=5)] = "x"
         ) -> int:
    """Pick some."""
    return n


@pytest.mark.parametrize("arguments, problem", [
    ({"n": 10}, None),
    ({"n": "3"}, None),  # pydantic's lax mode: a number sent as a string is the number
    ({"n": 0}, "'n': Input should be greater than or equal to 1"),
    ({"n": 11}, "'n': Input should be less than or equal to 10"),
    ({"n": 1, "name": "toolong"}, "'name': String should have at most 5 characters"),
])
def test_field_bounds_are_kept_in_the_schema_and_enforced(arguments, problem):
    assert pick.parameters["properties"] == {
        "n": {"type": "integer", "minimum": 1, "maximum": 10, "description": "How many."},
        "name": {"type": "string", "maxLength": 5, "default": "x"}}
    result = Registry([pick]).dispatch(ToolCall("1", "pick", arguments))
    assert result.ok if problem is None else problem in result.content, result.content


# --- the schema shown to the model ----------------------------------------------------------

@pytest.mark.parametrize("hint, shown", [
    (str, {"type": "string"}),
    (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
    (Literal["a", "b"], {"enum": ["a", "b"]}),
    (list[str], {"type": "array", "items": {"type": "string"}}),
    (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    (tuple[int, str], {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                       "minItems": 2, "maxItems": 2}),
    (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
    (date, {"type": "string", "format": "date"}),
    (datetime, {"type": "string", "format": "date-time"}),
    (UUID, {"type": "string", "format": "uuid"}),
    (Color, {"$ref": "#/$defs/Color"}),
    (Address, {"$ref": "#/$defs/Address"}),
    (Size, {"$ref": "#/$defs/Size"}),
    (Box, {"$ref": "#/$defs/Box"}),
    (Annotated[float, Field(gt=0, lt=1)], {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}),
])
def test_the_json_schema_shown_for_each_type(hint, shown):
    def f(x):  # the hint set below, as a module-level annotation would be
        """F."""
    f.__annotations__ = {"x": hint}
    parameters = tool(f).parameters
    assert parameters["properties"]["x"] == shown
    assert (parameters["type"], parameters["required"], parameters["additionalProperties"]) == ("object", ["x"], False)
    if "$ref" in shown:
        name = shown["$ref"].rsplit("/", 1)[1]
        assert parameters["$defs"][name]["title"] == name and json.dumps(parameters)


def test_the_model_is_shown_the_definitions_at_the_top():
    model = FakeModel(["ok"])
    Agent(model, [ship]).run("hi")
    [shown] = model.calls[0]["tools"]
    assert shown["parameters"]["$defs"]["Color"] == {"enum": ["red", "green"], "title": "Color", "type": "string"}
    assert shown["parameters"]["$defs"]["Address"]["properties"]["zip"] == {"pattern": r"^\d{5}$", "type": "string"}
    assert shown["parameters"]["properties"]["color"] == {"$ref": "#/$defs/Color", "description": "The parcel's colour."}


@pytest.mark.parametrize("fn", [sample_tools.add.fn, sample_tools.search_help.fn, sample_tools.refund.fn])
def test_plain_json_tools_are_shown_exactly_as_before_pydantic(fn):
    def plain(q: str, n: int = 3, ratio: float = 0.5, on: bool = False, tags: list[str] | None = None,
              mode: Literal["a", "b"] = "a", anything: Any = None, raw: dict = {}) -> str:  # noqa: B006
        """Plain.

        Args:
            q: The query.
        """
    for f in (fn, plain):
        assert tool(f).parameters == core.tool(f).parameters
        assert core.tool(f).validator is None, "the core's own tool stays the standard library's"


class Opaque:
    """A class pydantic cannot read."""


def test_a_type_pydantic_cannot_read_takes_anything_as_before():
    seen = []

    def take(thing: Opaque) -> str:
        """Takes anything."""
        seen.append(thing)
        return "ok"

    t = tool(take)
    assert t.parameters["properties"]["thing"] == {}
    assert Registry([t]).dispatch(ToolCall("1", "take", {"thing": [1, "x"]})).ok and seen == [[1, "x"]]


# --- what the model is told ----------------------------------------------------------------

class Login(BaseModel):
    user: str

    @field_validator("user")
    @classmethod
    def known(cls, value: str) -> str:
        raise ValueError(f"no user {value}")


def test_the_summary_is_bounded_and_never_echoes_a_secret():
    secret = "sk-" + "a1B2" * 12

    def log_in(login: Login, pin: int) -> str:
        """Log in."""
        return "in"

    reg = Registry([log_in])
    result = reg.dispatch(ToolCall("1", "log_in", {"login": {"user": secret}, "pin": secret, secret: 1}))
    assert result.outcome is ToolOutcome.INVALID_ARGUMENTS and secret not in result.content, result.content
    assert "'login'['user']: Value error, no user ***" in result.content
    many = reg.dispatch(ToolCall("1", "log_in", {**{f"extra_{i}_" + "x" * 100: i for i in range(200)}}))
    assert len(many.content) < 520 and "more" in many.content, many.content


# --- docstrings --------------------------------------------------------------------------

def google(a: int, b: str = "") -> None:
    """Do a thing.

    Longer text.

    Args:
        a (int): The first one,
            continued.
        b: The second.

    Returns:
        Nothing.
    """


def numpy(a: int, b: str = "") -> None:
    """Do a thing.

    Parameters
    ----------
    a : int
        The first one,
        continued.
    b : str, optional
        The second.

    Returns
    -------
    None
    """


def sphinx(a: int, b: str = "") -> None:
    """Do a thing.
    :param a: The first one,
        continued.
    :param str b: The second.
    :returns: nothing
    """


@pytest.mark.parametrize("fn", [google, numpy, sphinx])
def test_parameter_descriptions_from_google_numpy_and_sphinx_docstrings(fn):
    t = tool(fn)
    assert t.description == "Do a thing."
    assert t.parameters["properties"] == {"a": {"type": "integer", "description": "The first one, continued."},
                                          "b": {"type": "string", "description": "The second.", "default": ""}}
