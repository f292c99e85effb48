"""Tools, and the registry that decides which requested calls actually run.

Dispatch never raises for anything a model or a tool can do: every call becomes a
``ToolResult`` with a named ``ToolOutcome``, so the loop can append it as an observation
the model can route around. Only ``FatalToolError`` is meant to end a run, and even that
comes back as a result (outcome ``fatal``) for the loop to act on.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, ClassVar, Iterable, Protocol, Sequence, overload

from ._deadline import Deadline, DeadlineExceeded, RunDeadlineExceeded
from ._records import (ToolCall, ToolOutcome, ToolResult, being_cancelled, cancel_requests, error_type, in_thread,
                       message_of)
from ._run import DEADLINE_CUT_RESULT
from ._docstrings import parse_docstring
from ._schemas import ArgumentValidator, InvalidArguments, SignatureReader, json_type, read_signature, schema_validator

__all__ = ["Tool", "tool", "Registry", "Policy", "ToolError", "FatalToolError", "Ask", "ask", "Approved",
           "Paused"]


class ToolError(Exception):
    """A failure the model should see and may route around (bad input, not found, ...)."""


class FatalToolError(Exception):
    """A failure no retry can fix (revoked credentials, a tripped kill switch): ends the run."""


class Paused(Exception):
    """Raised by a tool whose work is waiting for a person (a sub-agent whose run stopped
    ``approval_required``): the call is neither a success nor a failure, and the run pauses
    with it. ``pending`` is what the tool's own run is waiting for."""

    def __init__(self, pending: Any) -> None:
        super().__init__("waiting for approval")
        self.pending = pending


@dataclass(frozen=True)
class Ask:
    """A policy's answer that a person must decide on this call: see ``ask``."""

    reason: str
    """Why the call needs a decision, shown to the person deciding (``Run.pending``)."""


def ask(reason: str) -> Ask:
    """What a ``Policy`` returns for a call a person must approve first (a refund over the
    limit): the call is not dispatched, and the run stops ``approval_required`` with it pending."""
    return Ask(str(reason))


class Policy(Protocol):
    """Decides whether a requested call may run: ``None`` allows it, a string denies it
    and is the reason the model is shown, ``ask("why")`` holds it for a person's decision.
    It sees the call as the model sent it, so ``arguments`` may be a raw string when the
    model sent malformed JSON. It may be asked twice about one call: before the turn is
    dispatched (is anything waiting?) and as the call is dispatched."""

    def __call__(self, call: ToolCall, /) -> str | Ask | None: ...


@dataclass(frozen=True)
class Approved(ToolCall):
    """A call a person approved (``Agent.resume``): dispatched without asking again."""


@dataclass(frozen=True, kw_only=True)
class Tool:
    """A function the model may call, with the JSON schema it is described by."""

    name: str
    """The name the model uses to call it."""
    description: str
    """What the model is told the tool does."""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON schema (an object schema) of the keyword arguments."""
    fn: Callable[..., Any]
    """Called with the validated arguments as keyword arguments; may be ``async def``."""
    validator: ArgumentValidator | None = None
    """What a call's arguments go through before ``fn`` is called: checked, and converted to the
    function's types (``tracedagent.tool`` makes one with pydantic; an MCP tool's checks the
    server's JSON Schema). ``None``: ``parameters`` checked by tracedagent's own JSON-schema
    subset, the arguments passed on as they came."""
    timeout: float | None = None
    """Seconds one call may take. ``arun`` cancels a call that runs longer (outcome
    ``timeout``), as ``run`` does for an async tool; a running sync function cannot be
    stopped, so in ``run`` it is not enforced for one."""

    requires_approval: bool = False
    """Every call needs a person's decision before it runs (``Agent.resume``)."""

    ends_itself_at_deadline: ClassVar[bool] = False
    """A tool that stops itself at the run's deadline (a sub-agent, whose run inherits it and is
    recorded as ``time_budget_exhausted``): the driver does not cut it from outside."""

    @functools.cached_property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def schema(self) -> dict[str, Any]:
        """The provider-neutral definition sent to the model."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(*, name: str | None = None, description: str | None = None, timeout: float | None = None,
         requires_approval: bool = False, reader: SignatureReader = ...) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None,
         timeout: float | None = None, requires_approval: bool = False,
         reader: SignatureReader = read_signature) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed, documented function (plain or ``async def``) into a ``Tool``; usable bare
    or with arguments.

    The description is the docstring's first paragraph; parameter descriptions come from its
    ``Args:`` (Google), ``Parameters`` (NumPy) or ``:param`` (Sphinx) entries; the schema and
    the validator from ``reader`` (here JSON's own types; the public ``tracedagent.tool`` reads
    the signature with pydantic).
    """

    def build(f: Callable[..., Any]) -> Tool:
        if inspect.isasyncgenfunction(f):
            raise TypeError(f"{f.__name__} is an async generator; a tool returns one result")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        summary, arg_docs = parse_docstring(inspect.getdoc(f) or "")
        parameters, validator = reader(f, arg_docs)
        return Tool(name=name or f.__name__, description=description or summary, parameters=parameters,
                    fn=f, validator=validator, timeout=timeout, requires_approval=requires_approval)

    return build(fn) if fn is not None else build


class Registry:
    """The tools a model may call, and the policy that may deny any call."""

    make_tool: ClassVar[Callable[[Callable[..., Any]], Tool]] = staticmethod(tool)
    """How a plain function among the tools becomes a ``Tool`` (the public ``Registry``'s:
    ``tracedagent.tool``, which reads its types with pydantic)."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = (), *,
                 policy: Policy | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            t = item if isinstance(item, Tool) else self.make_tool(item)
            if t.name in self._tools:
                raise ValueError(f"two tools are named {t.name!r}")
            self._tools[t.name] = t
        self.policy = policy
        self._approvals = any(t.requires_approval for t in self._tools.values())
        self._schemas = [t.schema() for t in self._tools.values()]
        self._checks = {name: t.validator or _checker(t) for name, t in self._tools.items()}
        names = list(self._tools)
        listed = ", ".join(names[:_MAX_MENU_NAMES]) or "none"
        more = f" and {len(names) - _MAX_MENU_NAMES} more" if len(names) > _MAX_MENU_NAMES else ""
        self._menu = f"Available tools: {listed}{more}."

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def deadline_for(self, call: ToolCall, deadline: Deadline | None) -> Deadline | None:
        """When the driver cuts ``call`` off: the run's ``deadline``, unless its tool stops
        itself there (``Tool.ends_itself_at_deadline``)."""
        found = self._tools.get(call.name)
        return None if found is not None and found.ends_itself_at_deadline else deadline

    def schemas(self) -> list[dict[str, Any]]:
        """Tool definitions for the model; empty when there are no tools. Built once (the
        loop asks every step); treat the list as read-only."""
        return self._schemas

    @property
    def has_async_tools(self) -> bool:
        return any(t.is_async for t in self._tools.values())

    def dispatch(self, call: ToolCall) -> ToolResult:
        """Run one call, turning every way it can go wrong into a named outcome. An async tool
        runs to completion on a private event loop (so not inside a running one: use ``arun``)."""
        checked = self._check(call)
        if isinstance(checked, ToolResult):
            return checked
        t, arguments = checked
        try:
            if t.is_async:
                value = asyncio.run(_boxed(_within(t.timeout, t.fn(**arguments)))).unbox()
            else:
                value = t.fn(**arguments)
            text = to_text(value)  # a value that cannot be shown is the tool's failure too
        except (Exception, asyncio.CancelledError) as exc:  # nothing but the tool cancels its private loop
            return _failure(call, t, exc)
        return _result(call, ToolOutcome.OK, text)

    async def adispatch(self, call: ToolCall) -> ToolResult:
        """``dispatch`` for ``arun``: an async tool is awaited, a plain function runs in a worker
        thread (which carries the caller's context, so spans it makes nest under its call)."""
        checked = self._check(call)
        if isinstance(checked, ToolResult):
            return checked
        t, arguments = checked
        try:
            work = t.fn(**arguments) if t.is_async else in_thread(t.fn, **arguments)
            value = await (work if t.timeout is None else Deadline.after(t.timeout).cut(work))
            text = to_text(value)
        except Exception as exc:
            return _failure(call, t, exc)
        except asyncio.CancelledError as exc:
            if being_cancelled():
                raise
            return _failure(call, t, exc)  # the tool's own (it awaited something cancelled): a failed call
        return _result(call, ToolOutcome.OK, text)

    def waiting(self, calls: Sequence[ToolCall]) -> dict[int, str]:
        """The calls of a turn (by position) that must wait for a person's decision, and why."""
        if self.policy is None and not self._approvals:  # the common case: nothing ever waits
            return {}
        return {i: why for i, call in enumerate(calls) if (why := self.approval_reason(call)) is not None}

    def approval_reason(self, call: ToolCall) -> str | None:
        """Why ``call`` must wait for a person's decision, or ``None`` when it need not: the
        policy answered ``ask(...)``, or its tool ``requires_approval``. A call that would
        not run anyway (denied, unknown, invalid arguments) does not wait: the model is told
        at once. An ``Approved`` call has its decision."""
        checked = self._verdict(call)
        return None if isinstance(checked, ToolResult) else checked[2]

    def _verdict(self, call: ToolCall) -> ToolResult | tuple[Tool, dict[str, Any], str | None]:
        """The policy, the tool's name and the arguments: a result saying why the call cannot
        run, or the tool, the arguments to run it with, and why a person must decide first."""
        verdict = None if self.policy is None else _ask(self.policy, call)
        if isinstance(verdict, str):
            return _result(call, ToolOutcome.DENIED, f"Denied: {verdict}")
        t = self._tools.get(call.name)
        if t is None:
            return _result(call, ToolOutcome.UNKNOWN_TOOL, f"Error: unknown tool {_shown(call.name)}. {self._menu}")
        arguments, problem = _parse_arguments(call.arguments, self._checks[t.name])
        if problem is not None:
            return _result(call, ToolOutcome.INVALID_ARGUMENTS, f"Error: invalid arguments for {t.name}: {problem}.")
        waits = None
        if not isinstance(call, Approved):
            if verdict is not None:
                waits = verdict.reason
            elif t.requires_approval:
                waits = f"{t.name} requires approval"
        return t, arguments, waits

    def check(self, call: ToolCall) -> ToolResult | tuple[Tool, dict[str, Any]]:
        """The policy and argument checks ``dispatch`` runs before it calls the tool, without
        calling it: a result saying why the call does not run, or the tool and the arguments to
        run it with. For a driver that runs a call its own way (a durable workflow runs a
        sub-agent as a child workflow): then ``result`` turns what the call did into its result."""
        return self._check(call)

    @staticmethod
    def result(call: ToolCall, t: Tool, work: Callable[[], Any]) -> ToolResult:
        """What ``dispatch`` makes of a tool's work done elsewhere (``work()`` gives its value,
        or raises what the tool raised): its value shown to the model, its exception named."""
        try:
            text = to_text(work())
        except Exception as exc:
            return _failure(call, t, exc)
        return _result(call, ToolOutcome.OK, text)

    def _check(self, call: ToolCall) -> ToolResult | tuple[Tool, dict[str, Any]]:
        """``_verdict`` as dispatch acts on it: a call that needs a decision it does not have is
        not run (a driver that does not pause: fail closed)."""
        checked = self._verdict(call)
        if isinstance(checked, ToolResult):
            return checked
        t, arguments, waits = checked
        if waits is not None:
            return _result(call, ToolOutcome.DENIED, f"Denied: needs a person's approval ({waits})")
        return t, arguments


async def _within(timeout: float | None, work: Awaitable[Any]) -> Any:
    """``await work``, cancelled after ``timeout`` seconds (``DeadlineExceeded``)."""
    return await (work if timeout is None else Deadline.after(timeout).cut(work))


class _Box:
    """What a private loop's task returns: asyncio's ``Runner`` puts its task's repr, and so the
    result's, into the SIGINT handler it must remove at the end, and a result whose ``repr``
    raises would leave that handler installed, failing every later ``asyncio.run``."""

    __slots__ = ("value", "error")

    def __init__(self, value: Any, error: Exception | None = None) -> None:
        self.value = value
        self.error = error

    def __repr__(self) -> str:
        return "<a tool's outcome>"

    def unbox(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


async def _boxed(work: Awaitable[Any]) -> _Box:
    """``work``'s value or exception (whose repr may raise as well), in a ``_Box``."""
    try:
        return _Box(await work)
    except Exception as exc:
        return _Box(None, exc)


def _failure(call: ToolCall, t: Tool, exc: BaseException) -> ToolResult:
    """What a tool's exception means for the run and what the model is shown of it."""
    if isinstance(exc, FatalToolError):
        return _result(call, ToolOutcome.FATAL, f"Fatal error: {message_of(exc)}", error_type(exc))
    if isinstance(exc, Paused):  # waiting for a person: the run pauses with it
        return ToolResult(call_id=call.id, name=call.name, content="Waiting for approval.",
                          outcome=ToolOutcome.PENDING, pending=exc.pending)
    if isinstance(exc, ToolError):  # written for the model to read
        return _result(call, ToolOutcome.ERROR, f"Error: {message_of(exc)}", error_type(exc))
    if isinstance(exc, RunDeadlineExceeded):  # the run's deadline, which the tool watched itself
        return ToolResult(call.id, call.name, DEADLINE_CUT_RESULT, ToolOutcome.TIMEOUT, deadline_cut=True)
    if isinstance(exc, DeadlineExceeded):  # its own timeout: error.type is the outcome
        return _result(call, ToolOutcome.TIMEOUT, f"Error: {t.name} timed out after {t.timeout:g} s")
    # A tool bug is an observation, not a crash of the run. Only the class goes to the
    # model: an unexpected message can carry paths, connection strings or tokens.
    return _result(call, ToolOutcome.ERROR, f"Error: {t.name} failed ({error_type(exc)})", error_type(exc))


def _shown(name: str) -> str:
    """A model-chosen name as an error message quotes it: bounded, like every echo of the model."""
    return repr(name if len(name) <= _MAX_SHOWN_NAME else name[:_MAX_SHOWN_NAME] + "...")


_MAX_SHOWN_NAME = 128
_MAX_MENU_NAMES = 32
"""An ``unknown_tool`` reply lists at most this many tool names, so that a hostile model cannot
make every bad call cost a message the size of the registry."""


def _ask(policy: Policy, call: ToolCall) -> str | Ask | None:
    """The policy's verdict on a call: ``None`` to allow, ``Ask`` to hold it for a person, else
    the reason it is denied."""
    try:
        verdict = policy(call)
    except (Exception, asyncio.CancelledError) as exc:  # fail closed: a broken guardrail must not wave calls through
        # A policy is a plain function: nothing is awaited in it, so its CancelledError is its own,
        # unless a cancellation of the run is pending (which Python 3.11+ counts): then let it through.
        if isinstance(exc, asyncio.CancelledError) and cancel_requests() > 0:
            raise
        return f"the policy failed ({error_type(exc)}), so the call was not run"
    if verdict is None or isinstance(verdict, (str, Ask)):
        return verdict
    return f"the policy returned {type(verdict).__name__}, not None, a reason or ask(...), so the call was not run"


def _result(call: ToolCall, outcome: ToolOutcome, content: str, error_type: str | None = None) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=content, outcome=outcome, error_type=error_type)


_TEXT_JSON = json.JSONEncoder(default=str, ensure_ascii=False)  # built once: json.dumps builds one a call


def to_text(value: Any) -> str:
    """What the model (and, when opted in, a span) is shown for a value: strings as they are,
    anything else as JSON, and what JSON cannot hold (tuple keys, cycles) as ``str``."""
    if isinstance(value, str):
        return value
    try:
        return _TEXT_JSON.encode(value)
    except (TypeError, ValueError, RecursionError):  # what str() cannot show either, it raises
        return str(value)


# --- Arguments -------------------------------------------------------------------------

def _parse_arguments(raw: dict[str, Any] | str, check: ArgumentValidator) -> tuple[dict[str, Any], str | None]:
    """Decode and validate arguments; returns ``(the function's keyword arguments, None)`` or
    ``({}, problem)``."""
    arguments: Any = raw
    if isinstance(raw, str):
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            return {}, f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
        except ValueError:  # valid JSON that Python will not read: an integer of thousands of digits
            return {}, "arguments hold a number too long to read"
        except RecursionError:
            return {}, "arguments are nested too deeply to decode"
    if not isinstance(arguments, dict):
        return {}, f"arguments must be a JSON object, got {json_type(arguments)}"
    try:
        return check(arguments), None
    except InvalidArguments as exc:
        return {}, str(exc)


def _checker(t: Tool) -> ArgumentValidator:
    """The compiled check of a tool's parameters; a schema it cannot read fails the Registry
    now, naming the tool, rather than every call to it later."""
    try:
        return schema_validator(t.parameters)
    except (TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise ValueError(f"tool {t.name!r}: its parameters are not a JSON schema tracedagent can "
                         f"check ({type(exc).__name__}: {exc})") from exc
