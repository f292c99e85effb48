"""Replay: a recorded run as a test - its model turns played back, its tools stubbed.

``Replay`` holds a ``Recording`` (``_recorded.py``) and builds from it what the loop needs to
run the same way again: a ``FakeModel`` that plays the recorded turns (text, tool calls with
their ids and raw arguments, usage, model, finish reason) and a ``Registry`` of stub tools
that give the recorded results under the recorded names. The loop itself is the real one,
so the stop reason, the steps and the tool lists are decided again, not copied.

How each recorded outcome is reproduced, and how exactly: ``_stubs.py``. Replay runs the agent
through its own entries, ``run`` or ``arun`` as the run span says (``_AWAITING``: the one
difference of drivers that changes what a run does), parallel calls or not; a parallel
turn's results are in call order. A resumed run resumes the recorded pause, made again by a run
machine (``_repaused``). ``Replay.play`` is the re-run with its spans (``Played``), as an
evaluation grades it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import re
from pathlib import Path
from typing import Any

from .._core import _names as N
from .._traces._jaeger import JaegerClient, JaegerError
from .._agent._loop import Agent, output_spec_of
from .._core._output import instruction
from .._traces._otlp_json import OtlpJsonError, read_file
from .._core._records import Completion, Message, ToolCall, ToolOutcome, ToolResult, Usage, error_type
from .._traces._recorded import TOOL_LISTS, RecordedCall, RecordedStep, Recording, ReplayError
from .._traces._printable import printable
from ._compare import describe_step, first_divergence
from .._core._run import Run, RunState
from .._instrumentation._telemetry import tool_list_attributes
from ._fake import FakeModel
from ._played import Played, played
from ._recorder import Recorder
from ._stubs import after, replay_model, stub_registry
from .._core._checkpoint import Checkpoint
from .._core._decisions import Decision
from .._core._machine import CallModel, Dispatch, Finish, RunMachine
from .._core._tools import Ask, Registry, Tool, ask
from .._traces._trace import SpanRecord, group_traces

__all__ = ["Replay", "ReplayMismatch", "ReplayError", "load_spans", "recorded_output_type", "TYPE_PATH", "imported", "first_divergence", "describe_step", "steps_of",
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
        return replay_model(self.recording)

    @property
    def registry(self) -> Registry:
        """Stub tools that give the recorded results, under the recorded names."""
        return stub_registry(self.recording)

    def agent(self, registry: Registry | None = None, **options: Any) -> Agent:
        """An ``Agent`` with the recorded model turns, budget, system prompt, name and output type
        (imported from its recorded path: ``recorded_output_type``), and the stub tools - or
        ``registry`` (your real tools); ``options`` go to ``Agent`` (``output_type=`` wins)."""
        options.setdefault("budget", self.budget)
        options.setdefault("name", self.recording.agent)
        options.setdefault("parallel_tool_calls", self.recording.parallel_tool_calls)
        options.setdefault("max_tool_concurrency", self.recording.max_tool_concurrency)
        if "output_type" not in options and self.recording.output_type is not None:
            options["output_type"] = recorded_output_type(self.recording)
        options.setdefault("system_prompt", _without_instruction(self.system_prompt, options.get("output_type")))
        return Agent(self.model, self.registry if registry is None else registry, **options)

    def run(self, agent: Agent | None = None) -> Run:
        """Run the recorded task (after the recorded history) again, or resume a resumed run's
        pause with the recorded decisions: ``agent`` (default: ``agent()``) as ``_rerun`` says."""
        return _rerun(agent or self.agent(), self.recording)

    def play(self, registry: Registry | None = None, **options: Any) -> Played:
        """``run`` with its spans: the agent (``agent(registry, **options)``) reports to a
        ``Recorder`` of its own, and ``Played`` holds the ``Run``, the spans and their ``view``
        (the shape a grader reads, live or recorded)."""
        recorder = Recorder()
        return played(_rerun(self.agent(registry, **recorder.providers, **options), self.recording), recorder)

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


TYPE_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$", re.ASCII)
"""A type path replay imports and a generated test names: dotted identifiers, ``module:qualname``."""


def recorded_output_type(r: Recording) -> Any:
    """The typed run's output type, imported from where its trace says it lives
    (``tracedagent.output.type_path``). ``ReplayError`` naming the path when it cannot be: the trace
    holds none (a class defined in a function or in ``__main__``, a form like ``list[int]``), the
    path is not ``module:qualname``, or the import fails; pass ``output_type=`` then."""
    path, what = r.output_type_path, f"the output type {printable(r.output_type)} of the run of {printable(r.agent)}"
    fix = "pass output_type= (Replay.agent(output_type=T), tracedagent replay --output-type MODULE:NAME)"
    if path is None:
        raise ReplayError(f"{what} was recorded without an import path (a type defined in a function or in "
                          f"__main__, or a form like list[int]): {fix}")
    if not TYPE_PATH.match(path):
        raise ReplayError(f"{what} has the path {printable(path)}, which is not module:qualname: {fix}")
    try:
        return imported(path)
    except Exception as exc:  # the user's module: anything it raises on import
        raise ReplayError(f"cannot import {what} from {path} ({type(exc).__name__}: {exc}): {fix}") from None


def _without_instruction(system_prompt: str | None, output_type: Any) -> str | None:
    """The recorded system prompt without the prompted mode's instruction for ``output_type``, which
    the agent adds again (the trace holds the prompt as the model was sent it, instruction included)."""
    spec = output_spec_of(output_type)
    if spec is None or system_prompt is None:
        return system_prompt
    added = instruction(spec)
    if system_prompt == added:
        return None
    return system_prompt[:-len(added) - 2] if system_prompt.endswith("\n\n" + added) else system_prompt


def imported(spec: str) -> Any:
    """``module:dotted.attribute`` imported (whatever the import raises, raised)."""
    module, attribute = spec.split(":")
    found: Any = importlib.import_module(module)
    for part in attribute.split("."):
        found = getattr(found, part)
    return found


_AWAITING = frozenset({N.DRIVER_ARUN, N.DRIVER_ASTREAM})
"""The drivers that await their calls: they cut a call off at the run's deadline and run a
turn's calls side by side, which a driver in one thread (``run``, ``stream``) does not do."""


def _rerun(agent: Agent, r: Recording) -> Run:
    """The recorded run again, through the agent's own entries: ``run`` (``resume`` for a resumed
    run), or ``arun`` (``aresume``) for a run whose driver awaited its calls (``_AWAITING``). That
    is the one branch on the recorded driver, because there what a run does differs: only a
    driver that awaits cuts a call off at the deadline and runs a turn's calls side by side,
    and only ``run`` lets a model's late answer through (``_stubs._ReplayModel``). A streamed
    run is the same run as one that was not (the per-stop equivalence tests hold every driver
    to it), so it is replayed as one."""
    awaits = r.driver in _AWAITING
    if r.resumed is not None:
        checkpoint, decisions = _repaused(agent, r)
        return asyncio.run(agent.aresume(checkpoint, decisions)) if awaits else agent.resume(checkpoint, decisions)
    return asyncio.run(agent.arun(r.task, r.history)) if awaits else agent.run(r.task, r.history)


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


# --- a resumed run's pause, made again ---------------------------------------------------

class _Unobserved:
    """The observer of a pause made again: no spans (the pause is the paused run's, in its own trace)."""

    def step_started(self, index: int) -> None: ...
    def step_ended(self, step: Any) -> None: ...
    def run_ended(self, run: Run) -> None: ...
    def run_failed(self, error: BaseException, used: Run) -> None: ...


def _repaused(agent: Agent, r: Recording) -> tuple[Checkpoint, dict[str, Decision]]:
    """The checkpoint of the pause a resumed run continued, and the decisions it was given. The
    checkpoint is the one a run makes when it pauses (``RunState.pause``): a run machine of
    ``agent``, its state the recorded conversation before the paused turn, is fed that turn
    (the conversation's last model turn, carrying what the run had spent before), holds the
    calls a person decided on, is given the results its other calls had shown, and pauses. The
    turns before are in the paused run's own trace: this one goes on from the paused turn."""
    info = r.resumed or {}
    decided = [RecordedCall(**c) for c in info.get("decided", [])]
    messages = [*([{"role": "system", "content": r.system_prompt}] if r.system_prompt else []), *r.history]
    at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("tool_calls")), None)
    if at is None:
        raise ReplayError(f"the resumed run of {r.agent!r} (trace {r.trace_id}) shows no paused turn in its conversation")
    shown = {m.get("tool_call_id"): m for m in messages[at + 1:]}
    held = {c.id for c in decided}
    state = RunState(agent.budget, [dict(m) for m in messages[:at]], agent=agent.name, tools=agent.registry.names)
    state.first_step = info.get("step_index", 0)
    machine = RunMachine(state, _holding(held, {c.name for c in decided}), _Unobserved())
    action = machine.start()
    if isinstance(action, CallModel):
        action = machine.model_returned(_paused_turn(messages[at], info))
    if isinstance(action, Dispatch):
        action = machine.tools_done([ToolResult(c.id, c.name, str(shown[c.id].get("content", "")))
                                     for c in action.calls if c.id in shown])
    checkpoint = action.run.paused if isinstance(action, Finish) else None
    if checkpoint is None:
        raise ReplayError(f"the pause the run of {r.agent!r} (trace {r.trace_id}) resumed does not recur")
    decisions: dict[str, Decision] = {c.id: c.outcome != ToolOutcome.DENIED.value or after(c.result, "Denied: ")
                                      for c in decided}
    return checkpoint, {call.id: decisions[call.id] for call in checkpoint.pending}


def _holding(held: set[str], names: set[str]) -> Registry:
    """What the machine asks which calls wait: the calls a person decided on, by id."""
    def policy(call: ToolCall) -> Ask | None:
        return ask("decided on when recorded") if call.id in held else None

    return Registry([Tool(name=name, description="", fn=_unreached, parameters={"type": "object"}) for name in names],
                    policy=policy)


def _unreached(**arguments: Any) -> None:
    raise AssertionError("a pause made again dispatches nothing")


def _paused_turn(message: Message, info: dict[str, Any]) -> Completion:
    """The paused model turn, from the conversation, with the tokens spent before the pause."""
    calls = [ToolCall(id=str(c.get("id")), name=str(c.get("name")), arguments=c.get("arguments") or {})
             for c in message.get("tool_calls") or ()]
    return Completion(text=str(message.get("content") or ""), tool_calls=calls,
                      usage=Usage(input_tokens=info.get("input_tokens", 0), output_tokens=info.get("output_tokens", 0)))
