"""Nothing escapes a run but the BaseExceptions it documents, and every span it starts ends.

Issue #30, item 1 and the SIGINT handler of item 7: each case here raised out of ``run`` or
``arun``, or left a span open, before it was fixed. A span processor counts starts and ends.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any, Literal

import pytest
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from tracedagent import Agent, Completion, Registry, Stop, ToolCall, tool


class Counting(SpanProcessor):
    """Counts every span started and ended."""

    def __init__(self) -> None:
        self.started = 0
        self.ended = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.started += 1

    def on_end(self, span: Any) -> None:
        self.ended += 1


def counted(model: Any, tools: Any = (), **options: Any) -> tuple[Agent, Counting]:
    provider = TracerProvider(shutdown_on_exit=False)
    counter = Counting()
    provider.add_span_processor(counter)
    return Agent(model, tools, tracer_provider=provider, **options), counter


class Turns:
    """A model playing its turns; an exception among them is raised instead of returned."""

    def __init__(self, *turns: Any) -> None:
        self.turns = list(turns)

    def complete(self, messages, tools=None, max_output_tokens=None, temperature=None):
        turn = self.turns.pop(0) if self.turns else Completion(text="done")
        if isinstance(turn, BaseException):
            raise turn
        return turn


@tool
def pick(n: Literal[1, 2]) -> str:
    """Picks one of two."""
    return "picked"


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("cannot show myself")

    __repr__ = __str__


def drive(agent: Agent, driver: str):
    return agent.run("go") if driver == "run" else asyncio.run(agent.arun("go"))


DRIVERS = pytest.mark.parametrize("driver", ["run", "arun"])


@DRIVERS
@pytest.mark.parametrize("capture", [False, True])
@pytest.mark.parametrize("argument", [10**5000, Unprintable()], ids=["5000-digit-int", "str-raises"])
def test_an_argument_that_cannot_be_shown_is_invalid_arguments(driver, capture, argument):
    agent, spans = counted(Turns(Completion(tool_calls=[ToolCall("c", "pick", {"n": argument})])), [pick],
                           capture_content=capture)
    run = drive(agent, driver)
    assert run.ok
    [result] = run.steps[0].tool_results
    # pydantic's message names what was expected and never quotes the value the model sent
    assert result.outcome.value == "invalid_arguments" and result.content.startswith("Error: invalid arguments for pick: 'n': ")
    assert len(result.content) < 200 and spans.started == spans.ended


@DRIVERS
def test_a_models_own_cancelled_error_is_its_failure_and_the_chat_span_ends(driver):
    agent, spans = counted(Turns(asyncio.CancelledError()))
    if driver == "arun" and sys.version_info < (3, 11):
        # Python 3.10 cannot tell a model's own CancelledError from a cancellation of the task
        # (no Task.cancelling), so arun takes it as one, as docs/async.md says: it propagates,
        # and every span still ends.
        with pytest.raises(asyncio.CancelledError):
            drive(agent, driver)
        assert spans.started == spans.ended == 3
        return
    run = drive(agent, driver)
    assert run.stop is Stop.MODEL_ERROR and isinstance(run.error, asyncio.CancelledError)
    assert spans.started == spans.ended == 3


def policy_cancelled(call: ToolCall) -> str | None:
    raise asyncio.CancelledError


@DRIVERS
def test_a_policys_own_cancelled_error_denies_the_call(driver):
    agent, spans = counted(Turns(Completion(tool_calls=[ToolCall("c", "pick", {"n": 1})])),
                           Registry([pick], policy=policy_cancelled))
    run = drive(agent, driver)
    assert run.ok and run.blocked_tools() == ["pick"]
    assert run.steps[0].tool_results[0].outcome.value == "denied"
    assert spans.started == spans.ended


class Custom(BaseException):
    """Not an Exception: Python's way of saying "stop", which a run lets through."""


@DRIVERS
@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt(), GeneratorExit(), Custom()],
                         ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("where", ["model", "tool", "policy"])
def test_a_base_exception_propagates_and_every_span_ends(driver, exc, where):
    @tool
    def act() -> str:
        """Acts."""
        raise exc

    def policy(call: ToolCall) -> str | None:
        if where == "policy":
            raise exc
        return None

    model = Turns(exc) if where == "model" else Turns(Completion(tool_calls=[ToolCall("c", "act", {})]))
    agent, spans = counted(model, Registry([act], policy=policy))
    with pytest.raises(type(exc)):
        drive(agent, driver)
    assert spans.started == spans.ended > 0


class Alarm(BaseException):
    pass


class ReprRaises:
    def __repr__(self) -> str:
        raise Alarm

    __str__ = __repr__


@pytest.mark.parametrize("outcome", ["returns", "raises"])
def test_an_async_tool_under_run_never_leaves_asyncios_sigint_handler_behind(outcome):
    class Failure(Exception):
        def __repr__(self) -> str:
            raise Alarm

    @tool
    async def odd() -> str:
        """Returns something whose repr raises."""
        if outcome == "raises":
            raise Failure()
        return ReprRaises()

    before = signal.getsignal(signal.SIGINT)
    agent, spans = counted(Turns(Completion(tool_calls=[ToolCall("c", "odd", {})])), [odd])
    try:
        agent.run("go")
    except Alarm:  # str() of the value raised it: documented as let through
        pass
    assert signal.getsignal(signal.SIGINT) is before
    assert spans.started == spans.ended

    async def one() -> int:
        return 1
    assert asyncio.run(one()) == 1


# --- the property ----------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tracedagent import Usage  # noqa: E402


class RaisesOn:
    """A value whose every rendering raises ``exc``."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __str__(self) -> str:
        raise self.exc

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        raise self.exc

    __hash__ = object.__hash__


EXCEPTIONS = st.sampled_from([ValueError, RuntimeError, RecursionError, asyncio.CancelledError, StopIteration,
                              TypeError, KeyboardInterrupt, SystemExit, Custom]).map(lambda cls: cls())
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30),
                    st.sampled_from([-(2**80), float("nan"), "\ud800", "x" * 50_000]),
                    st.just(5000).map(lambda digits: 10**digits))  # built, not listed: hypothesis reprs a list
VALUES = st.recursive(st.one_of(SCALARS, EXCEPTIONS.map(RaisesOn)),
                      lambda inner: st.one_of(st.lists(inner, max_size=4),
                                              st.dictionaries(st.one_of(st.text(max_size=10), st.integers()), inner,
                                                              max_size=4)),
                      max_leaves=12)
ARGUMENTS = st.one_of(st.dictionaries(st.sampled_from(["n", "q", "password", "x"]), VALUES, max_size=3),
                      st.text(max_size=40), st.just(5000).map(lambda digits: '{"n": ' + "9" * digits + "}"))
COUNTS = st.one_of(st.integers(0, 10_000), st.sampled_from([2**40 + 1, 2**64, -1]))
TURN = st.builds(lambda calls, usage, text: Completion(text=text, tool_calls=calls, usage=usage),
                 st.lists(st.builds(ToolCall, st.text(min_size=1, max_size=8), st.sampled_from(["pick", "echo", "x"]),
                                    ARGUMENTS), max_size=3),
                 st.builds(Usage, COUNTS, COUNTS), st.text(max_size=40))
MODEL_TURN = st.one_of(TURN, EXCEPTIONS, VALUES)


def is_documented(exc: BaseException) -> bool:
    """What a run lets through (docs/async.md): not an ``Exception``."""
    return not isinstance(exc, Exception)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(turns=st.lists(MODEL_TURN, min_size=1, max_size=3), results=st.lists(st.one_of(VALUES, EXCEPTIONS), max_size=3),
       capture=st.booleans(), driver=st.sampled_from(["run", "arun"]))
def test_nothing_but_a_documented_base_exception_leaves_a_run_and_every_span_ends(turns, results, capture, driver):
    results = list(results)

    @tool
    def echo(**kwargs: Any) -> str:
        """Echoes."""
        value = results.pop(0) if results else "ok"
        if isinstance(value, BaseException):
            raise value
        return value

    class Hostile:
        def complete(self, messages, tools=None, max_output_tokens=None, temperature=None):
            turn = turns.pop(0) if turns else Completion(text="done")
            if isinstance(turn, BaseException):
                raise turn
            return turn

    agent, spans = counted(Hostile(), [pick, echo], capture_content=capture)
    try:
        run = drive(agent, driver)
    except BaseException as exc:  # noqa: BLE001 - the property is about what leaves
        assert is_documented(exc), repr(type(exc))
    else:
        assert isinstance(run.stop, Stop)
    assert spans.started == spans.ended > 0
