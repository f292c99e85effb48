"""Replay: a recorded run as a test - its model turns played back, its tools stubbed.

``Replay`` holds a ``Recording`` (``_recorded.py``) and builds from it what the loop needs to
run the same way again: a ``FakeModel`` that plays the recorded turns (text, tool calls with
their ids and raw arguments, usage, model, finish reason) and a ``Registry`` of stub tools
that give the recorded results under the recorded names. The loop itself is the real one,
so the stop reason, the steps and the tool lists are decided again, not copied.

How each recorded outcome is reproduced, and how exactly:

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
deadline raises the loop's own deadline signal. Replay drives the run as the run span says
(``run`` or ``arun``, parallel calls or not); a parallel turn's results are in call order.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
import uuid
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .._core import _names as N
from .._traces._jaeger import JaegerClient, JaegerError
from .._agent._loop import Agent
from .._traces._otlp_json import OtlpJsonError, read_file
from .._core._records import Completion, ToolCall, ToolOutcome, Usage, error_type
from .._traces._recorded import TOOL_LISTS, RecordedCall, RecordedStep, Recording, ReplayError
from .._traces._printable import printable
from ._compare import describe_step, first_divergence
from .._core._run import Run, canonical_arguments
from .._instrumentation._telemetry import tool_list_attributes
from ._fake import FakeModel
from .._core._checkpoint import Checkpoint, PendingCall, Spent
from .._core._budget import Stop
from .._core._deadline import DeadlineExceeded
from .._core._tools import Ask, FatalToolError, Registry, Tool, ToolError, ask
from .._traces._trace import SpanRecord, group_traces

if TYPE_CHECKING:
    from ._fake import ScriptItem

__all__ = ["Replay", "ReplayMismatch", "ReplayError", "load_spans", "first_divergence", "describe_step", "steps_of",
           "tool_lists_of"]


class ReplayMismatch(AssertionError):
    """The replayed run did not do what the recorded one did; the message is the diff."""


def load_spans(source: str, *, trace_id: str | None = None, jaeger: str | None = None) -> tuple[list[SpanRecord], str]:
    """The spans of one trace, and a name for it in messages: from an OTLP/JSON file (``source``
    a path; ``trace_id`` picks one of its traces, else it must hold one run's trace) or from
    Jaeger (``source`` a trace id). ``ReplayError`` when it is not there."""
    if jaeger is not None:
        try:
            return JaegerClient(jaeger).trace(source.lower()), f"trace {source}"
        except JaegerError as exc:
            raise ReplayError(str(exc)) from None
    try:
        traces = group_traces(read_file(Path(source)))
    except OtlpJsonError as exc:
        raise ReplayError(str(exc)) from None
    if trace_id is not None:
        traces = [t for t in traces if t.trace_id == trace_id.lower().zfill(32)]
        if not traces:
            raise ReplayError(f"{source}: no trace {trace_id}")
    elif len(traces) > 1:
        raise ReplayError(f"{source} holds {len(traces)} traces; choose one by its trace id "
                          f"(`replay FILE --trace ID`, `diff ID ID --file FILE`)")
    return traces[0].spans, source


class Replay:
    """A recorded run, ready to run again: ``replay.run()``, then ``replay.check(run)``."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.budget = recording.make_budget()
        """The recorded budget."""
        self.system_prompt = recording.system_prompt
        self.history = recording.history
        self.task = recording.task

    # --- building ----------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | Path, trace_id: str | None = None, *, agent: str | None = None) -> Replay:
        """From an OTLP/JSON file (``tracedagent demo --out``, a collector's file exporter), or a
        recording JSON written by ``tracedagent replay``. ``agent`` picks a sub-agent's run."""
        recording = _recording_file(Path(path))
        if recording is not None:
            return cls(recording)
        spans, name = load_spans(str(path), trace_id=trace_id)
        return cls(Recording.of(spans, agent=agent, source=name))

    @classmethod
    def from_jaeger(cls, trace_id: str, url: str = N.DEFAULT_JAEGER_URL, *, agent: str | None = None) -> Replay:
        spans, name = load_spans(trace_id, jaeger=url)
        return cls(Recording.of(spans, agent=agent, source=name))

    @property
    def model(self) -> FakeModel:
        """A fresh ``FakeModel`` playing the recorded turns (each run needs its own)."""

        r = self.recording
        return _ReplayModel([_turn(step) for step in r.steps], estimate_usage=False,
                            model_name=r.request_model or "fake-model", late=_answered_late(r),
                            max_seconds=r.budget.get("max_seconds") or 0)

    @property
    def registry(self) -> Registry:
        """Stub tools that give the recorded results, under the recorded names."""
        return _stub_registry(self.recording)

    def agent(self, registry: Registry | None = None, **options: Any) -> Agent:
        """An ``Agent`` with the recorded model turns, budget, system prompt and name, and the
        stub tools - or ``registry`` (your real tools); ``options`` go to ``Agent``."""
        options.setdefault("budget", self.budget)
        options.setdefault("system_prompt", self.system_prompt)
        options.setdefault("name", self.recording.agent)
        options.setdefault("parallel_tool_calls", self.recording.parallel_tool_calls)
        options.setdefault("max_tool_concurrency", self.recording.max_tool_concurrency)
        return Agent(self.model, self.registry if registry is None else registry, **options)

    def run(self, agent: Agent | None = None) -> Run:
        """Run the recorded task (after the recorded history) with the driver the trace shows."""
        agent = agent or self.agent()
        if self.recording.resumed is not None:
            return _resumed(agent, self.recording)
        driver = self.recording.driver
        if driver == "arun":
            return asyncio.run(agent.arun(self.task, self.history))
        if driver == "stream":
            with agent.stream(self.task, self.history) as stream:
                for _ in stream:
                    pass
            return stream.run
        if driver == "astream":
            return asyncio.run(_drained(agent.astream(self.task, self.history)))
        return agent.run(self.task, self.history)

    # --- checking ----------------------------------------------------------------------

    def check(self, run: Run, *, results: bool = True) -> None:
        """``ReplayMismatch`` unless ``run`` did what the recording did: the same steps (turns,
        tool calls, outcomes and, with ``results``, tool results), stop reason, tool lists and
        tokens. The message shows the first diverging step, expected against actual."""
        r = self.recording
        problems: list[str] = []
        diverged = first_divergence(r.steps, steps_of(run), results=results)
        if diverged is not None:
            index, expected, actual = diverged
            problems.append(f"step {index} diverged:\n  expected: {expected}\n  actual:   {actual}")
        lists, counts = tool_lists_of(run)  # as the run span would hold them: a long list is cut
        facts = [("stop reason", r.stop_reason, run.stop.value), ("steps", r.step_count, run.step_count),
                 ("requested tools", r.tools.get("requested", []), lists["requested"]),
                 ("executed tools", r.tools.get("executed", []), lists["executed"]),
                 ("blocked tools", r.tools.get("blocked", []), lists["blocked"]),
                 ("not dispatched", r.tools.get("not_dispatched", []), lists["not_dispatched"]),
                 ("pending", r.tools.get("pending", []), lists["pending"]),
                 ("lengths of the cut tool lists", r.tool_counts, counts)]
        if r.resumed is not None:  # the calls a person decided on, which no model turn holds
            facts.append(("decided calls", [(c["name"], c["outcome"], c["result"] if results else None)
                                            for c in r.resumed["decided"]], [(x.name, x.outcome.value, x.content if
                                            results else None) for s in run.steps if s.resumed for x in s.tool_results]))
        if r.input_tokens is not None:
            facts.append(("input tokens", r.input_tokens, run.own_input_tokens))
        if r.output_tokens is not None:
            facts.append(("output tokens", r.output_tokens, run.own_output_tokens))
        problems += [f"{what}: expected {printable(want)}, actual {printable(got)}"
                     for what, want, got in facts if want != got]
        if problems:
            raise ReplayMismatch(f"the replay of {printable(r.agent)} (trace {r.trace_id}) did not do what the "
                                 f"recorded run did:\n" + "\n".join(problems))


async def _drained(stream: Any) -> Run:
    """The run of an ``astream``, every event read."""
    async with stream:
        async for _ in stream:
            pass
    return stream.run


def _recording_file(path: Path) -> Recording | None:
    """The recording in ``path`` if it is one that ``tracedagent replay`` wrote, else ``None``
    (an OTLP/JSON file, or anything else, which ``load_spans`` reads or refuses)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or "format" not in data:
        return None
    try:
        return Recording.from_json(data)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ReplayError(f"{path}: not a recording this version of tracedagent can read ({exc})") from None


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


def _stub_registry(recording: Recording) -> Registry:
    stubs = recording.stubs
    max_seconds = recording.budget.get("max_seconds") or 0
    denied = {c.id: _after(c.result, "Denied: ") for c in stubs if c.outcome == ToolOutcome.DENIED.value}
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
            raise _exception(call.error_type or "FatalToolError", FatalToolError)(_after(text, "Fatal error: "))
        if call.outcome == ToolOutcome.TIMEOUT.value:
            raise DeadlineExceeded  # what the registry raises when a tool's own timeout cuts it off
        if call.outcome == ToolOutcome.ERROR.value:
            kind = call.error_type or "ToolError"
            if text == f"Error: {name} failed ({kind})":  # an unexpected exception: the class is all it showed
                raise _exception(kind, Exception)()
            raise _exception(kind, ToolError)(_after(text, "Error: "))
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


def _after(text: str | None, prefix: str) -> str:
    text = text or ""
    return text[len(prefix):] if text.startswith(prefix) else text


# --- a Run in the same form ------------------------------------------------------------

def steps_of(run: Run) -> list[RecordedStep]:
    """A finished ``Run``'s steps as ``RecordedStep``s, to compare with a recording's."""
    steps = []
    for step in (s for s in run.steps if not s.resumed):  # a resumed run's decided calls: no model turn
        c = step.completion
        calls = [RecordedCall(id=call.id, name=call.name, arguments=call.arguments) for call in c.tool_calls]
        dispatched = [call for i, call in enumerate(calls) if i not in step.waiting]
        for call, result in zip(dispatched, step.tool_results):
            call.outcome, call.result = result.outcome.value, result.content
            call.error_type = result.error_type
        for i in step.waiting if step.paused else ():
            calls[i].outcome = ToolOutcome.PENDING.value
        steps.append(RecordedStep(text=c.text, calls=calls, model=c.model, finish_reason=c.finish_reason,
                                  response_id=c.response_id, usage=_usage(c.usage)))
    if run.step_count > len(run.steps):  # the run ended on a model call that failed
        failed = N.ERROR_TIMEOUT if run.error is None else error_type(run.error)
        steps.append(RecordedStep(error=failed))
    return steps


def _resumed(agent: Agent, r: Recording) -> Run:
    """A resumed run again: a checkpoint of the recorded conversation, its calls decided as recorded."""
    info, system = r.resumed or {}, [{"role": "system", "content": r.system_prompt}] if r.system_prompt else []
    calls = [RecordedCall(**c) for c in info.get("decided", [])]
    checkpoint = Checkpoint(id=f"replay-{uuid.uuid4().hex}", agent=agent.name, tools=tuple(sorted(agent.registry.names)),
                            budget=agent.budget, step_index=info.get("step_index", 0), messages=[*system, *r.history],
                            spent=Spent(steps=info.get("step_index", 0) + 1, input_tokens=info.get("input_tokens", 0),
                                        output_tokens=info.get("output_tokens", 0)),
                            pending=tuple(PendingCall(id=c.id, name=c.name, arguments=c.arguments or {}, reason="recorded")
                                          for c in calls))
    decisions = {c.id: c.outcome != ToolOutcome.DENIED.value or _after(c.result, "Denied: ") for c in calls}
    if r.driver == "arun":
        return asyncio.run(agent.aresume(checkpoint, decisions))
    return agent.resume(checkpoint, decisions)


def tool_lists_of(run: Run) -> tuple[dict[str, list[str]], dict[str, int]]:
    """A ``Run``'s tool lists as its span holds them - bounded, with the full length of a list
    that was cut - in the form of ``Recording.tools`` and ``Recording.tool_counts``."""
    shown = tool_list_attributes(*run.tool_names())
    lists = {key: list(shown.get(name) or []) for key, name in TOOL_LISTS.items()}
    counts = {key: shown[name + N.COUNT_SUFFIX] for key, name in TOOL_LISTS.items() if name + N.COUNT_SUFFIX in shown}
    return lists, counts


def _usage(usage: Any) -> dict[str, int]:
    counts = dataclasses.asdict(usage)
    return {k: v for k, v in counts.items() if v or k in ("input_tokens", "output_tokens")}
