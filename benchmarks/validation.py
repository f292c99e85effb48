"""What checking a tool call's arguments costs (issue #37): a three-argument call validated by
pydantic (``tracedagent.tool``: the arguments converted to the function's types) against the
standard library's hand-written validator (the core's ``tool``, before pydantic: a check, no
conversion), on the same function in the same run, and the ratio. Then the same for a typed
call (an Enum, a pydantic model, a date), which only pydantic can check, and for an invalid
call (the problem summarized for the model). Each figure is the best of ``--repeats`` rounds of
``--number`` calls, in microseconds per call, of the validator the registry calls at dispatch.

    python benchmarks/validation.py [--repeats 7] [--number 20000]
"""

from __future__ import annotations

import argparse
import sys
import timeit
from datetime import date
from enum import Enum
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import BaseModel  # noqa: E402

from tracedagent import tool  # noqa: E402
from tracedagent._core import _tools as core  # noqa: E402
from tracedagent._core._schemas import InvalidArguments, schema_validator  # noqa: E402


def search(q: str, limit: int, tags: list[str]) -> str:
    """Search the help centre."""
    return q


class Color(Enum):
    RED = "red"


class Address(BaseModel):
    street: str
    zip: str


def ship(color: Color, addr: Address, when: date) -> str:
    """Ship a parcel."""
    return "shipped"


def best(call, repeats: int, number: int) -> float:
    return min(timeit.repeat(call, number=number, repeat=repeats)) / number * 1e6


def refused(validate, arguments):
    def call() -> None:
        try:
            validate(arguments)
        except InvalidArguments:
            pass
    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    plain = {"q": "refunds", "limit": 5, "tags": ["billing", "eu"]}
    typed = {"color": "red", "addr": {"street": "Main St 1", "zip": "12345"}, "when": "2025-06-01"}
    pydantic_plain = tool(search).validator
    hand_plain = schema_validator(core.tool(search).parameters)
    pydantic_typed = tool(ship).validator
    rows = {
        "three plain arguments, pydantic": (pydantic_plain, plain),
        "three plain arguments, hand validator": (hand_plain, plain),
        "Enum + model + date, pydantic": (pydantic_typed, typed),
    }
    figures = {name: best(lambda v=v, a=a: v(a), args.repeats, args.number) for name, (v, a) in rows.items()}
    figures["invalid call (3 problems), pydantic"] = best(
        refused(pydantic_typed, {"color": 7, "addr": "nowhere", "when": []}), args.repeats, args.number)
    figures["invalid call (1 problem), hand validator"] = best(
        refused(hand_plain, {"q": 3, "limit": 5, "tags": []}), args.repeats, args.number)
    print(f"Validating a call's arguments (best of {args.repeats} x {args.number} calls; Python "
          f"{sys.version.split()[0]}):")
    for name, micros in figures.items():
        print(f"  {name:<44} {micros:7.2f} us")
    ratio = figures["three plain arguments, pydantic"] / figures["three plain arguments, hand validator"]
    print(f"  pydantic / hand validator (three plain arguments) = {ratio:.2f}")


if __name__ == "__main__":
    main()
