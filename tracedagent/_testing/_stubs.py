"""What a recording answers a replay with: its model's turns played back, its tools stubbed.

``replay_model`` is a ``FakeModel`` that plays the recorded turns (text, tool calls with their
ids and raw arguments, usage, model, finish reason); ``stub_registry`` is a ``Registry`` of
stub tools that give the recorded results under the recorded names. How each recorded outcome
is reproduced, and how exactly:

* ``ok``: the stub returns the recorded result. Exact (the result as captured: redacted).
* ``error``: the stub raises an exception of the recorded class name - a ``ToolError`` whose
  message is the recorded text, or, for a tool's unexpected exception, an ``Exception`` (the
  registry then shows its class only, as it did). Exact, ``error.type`` included.
* ``fatal``: a ``FatalToolError`` with the recorded text. Exact.
* ``denied``: the registry's policy denies that call id with the recorded reason. Exact.
* ``unknown_tool``: no stub of that name. Exact; the reply lists the stubs, which are the
  tools the trace names (an ``unknown_tool`` reply lists the original registry's first 32).
* ``invalid_arguments``: malformed JSON or a non-object is refused by the registry itself,
  exactly. A JSON object the original schema refused is refused by the stub's schema (an
  ``enum`` of the arguments the tool did accept): the outcome is exact, the message
  approximate, so ``check`` compares that call's outcome and not its text.
* ``timeout`` (the tool's own timeout): the stub has the recorded timeout and is cut off as
  the registry cuts a tool off at its timeout. Exact.
* a call the run's time budget cut off, or during which it ran out: the stub sleeps past the
  deadline (or, for a call that never reached a tool, the stub registry's policy does). The
  stop is reproduced; the tokens are; the wall time is the budget's.

A model call that failed raises an exception of the recorded class; one cut off by the run's
deadline raises the loop's own deadline signal.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from .._core import _names as N
from .._core._budget import Stop
from .._core._deadline import DeadlineExceeded
from .._core._records import Completion, ToolCall, ToolOutcome, Usage
from .._core._run import canonical_arguments
from .._core._tools import Ask, FatalToolError, Registry, Tool, ToolError, ask
from .._traces._recorded import RecordedCall, RecordedStep, Recording
from ._fake import FakeModel

if TYPE_CHECKING:
    from ._fake import ScriptItem

__all__ = ["replay_model", "stub_registry", "after"]


def replay_model(r: Recording) -> FakeModel:
    """A fresh ``FakeModel`` playing the recorded turns (each run needs its own)."""
    return _ReplayModel([_turn(step) for step in r.steps], estimate_usage=False,
                        model_name=r.request_model or "fake-model", late=_answered_late(r),
                        max_seconds=r.budget.get("max_seconds") or 0)


# --- the model's turns -------------------------------------------------------------------

def _turn(step: RecordedStep) -> ScriptItem:
    if step.error == N.ERROR_TIMEOUT:
        return DeadlineExceeded()  # what ``arun`` raises when the deadline cuts a call off
    if step.error is not None:
        return _exception(step.error, Exception)("the model call failed (replayed from its trace)")
    usage = Usage(**{k: v for k, v in step.usage.items() if k in Usage.__dataclass_fields__})
    calls = [ToolCall(id=c.id, name=c.name, arguments={} if c.arguments is None else c.arguments) for c in step.calls]
    return Completion(text=step.text or "", tool_calls=calls, usage=usage, model=step.model,
                      finish_reason=step.finish_reason, response_id=step.response_id)


def _answered_late(r: Recording) -> int | None:
    """The turn whose answer came once the run's time was up, if one did: the run's last, it
    stopped out of time, and none of the turn's calls was dispatched (no driver starts a call
    once the time is up: ``RunState.may_start``)."""
    last = r.steps[-1] if r.steps else None
    if r.stop_reason != Stop.TIME_BUDGET.value or last is None or last.error is not None or not last.calls:
        return None
    return len(r.steps) - 1 if all(c.outcome is None for c in last.calls) else None


class _ReplayModel(FakeModel):
    """The recorded turns; under ``run``, the one answered once the time was up (``late``)
    answers past the deadline again. (``arun`` cuts a late answer off at the deadline: such a
    turn is a race it did not lose when recorded, which replay does not stage.)"""

    def __init__(self, script: list[ScriptItem], *, late: int | None, max_seconds: float, **options: Any) -> None:
        super().__init__(script, **options)
        self._late = late
        self._max_seconds = max_seconds

    def complete(self, messages: Any, tools: Any = None, max_output_tokens: int | None = None,
                 temperature: float | None = None) -> Completion:
        if self.call_count == self._late:
            time.sleep(self._max_seconds)
        return super().complete(messages, tools, max_output_tokens, temperature)


def _exception(name: str, base: type[Exception]) -> type[Exception]:
    """An exception class whose name is the recorded ``error.type`` (``error_type`` reads it)."""
    if name == base.__name__:
        return base
    cls = type(name if name.isidentifier() else "RecordedError", (base,), {})
    cls.__qualname__ = name
    return cls


# --- the stub tools ----------------------------------------------------------------------

_OWN_TIMEOUT = re.compile(r" timed out after (\d+(?:\.\d+)?) s$")


_REFUSED_BEFORE_THE_TOOL = {ToolOutcome.DENIED.value, ToolOutcome.UNKNOWN_TOOL.value,
                            ToolOutcome.INVALID_ARGUMENTS.value}


_NOT_RUN = {ToolOutcome.DENIED.value, ToolOutcome.PENDING.value}
"""Recorded calls no stub answers: the policy denied them, or they waited for a person."""


def stub_registry(recording: Recording) -> Registry:
    """Stub tools that give the recorded results, under the recorded names."""
    stubs = recording.stubs
    max_seconds = recording.budget.get("max_seconds") or 0
    denied = {c.id: after(c.result, "Denied: ") for c in stubs if c.outcome == ToolOutcome.DENIED.value}
    # The call during which the time ran out may never have reached a tool: the policy, which
    # sees every call first, waits past the deadline for it instead of a stub.
    waits = {c.id for c in stubs if c.until_deadline and c.outcome in _REFUSED_BEFORE_THE_TOOL}

    held = {c.id for c in stubs if c.outcome == ToolOutcome.PENDING.value}  # waited for a person's decision

    def policy(call: ToolCall) -> str | Ask | None:
        if call.id in waits:
            time.sleep(max_seconds)  # under arun this holds up the event loop, as nothing else runs then
        return ask("held for approval when recorded") if call.id in held else denied.get(call.id)

    tools = [_stub(name, [c for c in stubs if c.name == name and c.outcome not in _NOT_RUN],
                   max_seconds)
             for name in recording.tool_names]
    return Registry(tools, policy=policy if denied or waits or held else None)


def _stub(name: str, calls: list[RecordedCall], max_seconds: float) -> Tool:
    """A tool that answers each recorded call to ``name`` in turn (matched on its arguments)."""
    queues: dict[str, deque[RecordedCall]] = {}
    for call in calls:
        queues.setdefault(canonical_arguments(_parsed(call.arguments)), deque()).append(call)

    def next_call(arguments: dict[str, Any]) -> RecordedCall:
        queue = queues.get(canonical_arguments(arguments))
        if not queue:
            raise ToolError(f"replay has no recorded result for {name} with these arguments")
        return queue.popleft()

    def answer(call: RecordedCall) -> Any:
        text = call.result or ""
        if call.outcome == ToolOutcome.FATAL.value:
            raise _exception(call.error_type or "FatalToolError", FatalToolError)(after(text, "Fatal error: "))
        if call.outcome == ToolOutcome.TIMEOUT.value:
            raise DeadlineExceeded  # what the registry raises when a tool's own timeout cuts it off
        if call.outcome == ToolOutcome.ERROR.value:
            kind = call.error_type or "ToolError"
            if text == f"Error: {name} failed ({kind})":  # an unexpected exception: the class is all it showed
                raise _exception(kind, Exception)()
            raise _exception(kind, ToolError)(after(text, "Error: "))
        return text

    fn: Callable[..., Any]
    if any(call.until_deadline for call in calls):
        async def fn(**arguments: Any) -> Any:
            call = next_call(arguments)
            if call.until_deadline:
                await asyncio.sleep(max_seconds)  # past the deadline: arun cuts it off, run stops after it
            return answer(call)
    else:
        def fn(**arguments: Any) -> Any:
            return answer(next_call(arguments))

    timeouts = [float(m.group(1)) for c in calls if (m := _OWN_TIMEOUT.search(c.result or ""))
                and c.outcome == ToolOutcome.TIMEOUT.value]
    return Tool(name=name, description=f"Replays the recorded results of {name}.", fn=fn,
                parameters=_schema(calls), timeout=timeouts[0] if timeouts else None)


def _schema(calls: list[RecordedCall]) -> dict[str, Any]:
    """Any object - unless the original schema refused an object, which the stub refuses
    too by accepting only the arguments the tool did accept."""
    refused = [c for c in calls if c.outcome == ToolOutcome.INVALID_ARGUMENTS.value
               and isinstance(_parsed(c.arguments), dict)]
    if not refused:
        return {"type": "object"}
    accepted = [_parsed(c.arguments) for c in calls if c.outcome != ToolOutcome.INVALID_ARGUMENTS.value]
    return {"type": "object", "enum": accepted}


def _parsed(arguments: Any) -> Any:
    """Arguments as the registry sees them once parsed (a raw JSON string decoded)."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return arguments
    return {} if arguments is None else arguments


def after(text: str | None, prefix: str) -> str:
    """``text`` without ``prefix`` (a result's \"Denied: \", \"Error: \"...)."""
    text = text or ""
    return text[len(prefix):] if text.startswith(prefix) else text
