"""The agent: ``run`` and ``arun``, each a pump of the run machine.

The loop's order (call, check, dispatch, append, repeat, stop) and every decision in it are
the ``RunMachine``'s (``_core/_machine.py``); its run and step spans are its observer's
(``RunScope``). ``Agent._pump`` only performs what the machine asks - call the model, dispatch
a turn's calls - in this thread, and ``Agent._apump`` awaits the same requests under the run's
deadline (``_acalls``), a turn's calls concurrently. The model and tool spans are the
instrumented model's and registry's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections import OrderedDict
from typing import Any, Callable, Generic, Iterable, Mapping, Sequence, overload

from opentelemetry import metrics, trace

from .._core._attributes import NO_ATTRIBUTES, baggage_keys, check_attributes, from_baggage, run_attributes
from .._core._budget import Budget
from .._core._checkpoint import Checkpoint
from .._core._decisions import Decision
from .._core._machine import Action, CallModel, Dispatch, RunMachine
from .._core._output import OUTPUT_TOOL_NAME, OutputSpec, with_instruction
from .._core._output import output_mode as _resolved_mode
from .._core._records import Message, ToolResult
from .._core._request import Model, ModelSettings
from .._core._signing import CheckpointKey, keyring
from .._core._run import Run, RunState, current_run, initial_messages
from .._core._result import OutputT
from ._stream import AgentStream, AsyncAgentStream
from . import _resume
from .._core._tools import Registry, Tool
from .._typed import _tools as typed
from .._instrumentation._instrumented import InstrumentedModel, InstrumentedRegistry
from .._instrumentation._observer import Resumed, RunScope, baggage_entries, caller_attributes
from .._instrumentation._telemetry import AgentTelemetry, RunEnded
from . import _acalls
from ._team import agent_tool

__all__ = ["Agent", "output_spec_of"]


class Agent(Generic[OutputT]):
    """A model, the tools it may call, and the budget that bounds every run.

    ``run`` always returns a ``Run``; it does not raise on budget exhaustion, a failing
    tool or a failing model. Check ``run.ok`` (or ``run.stop``) before using
    ``run.output``: with ``output_type=T`` an ``Agent[T]``, whose ok runs' ``output`` is a ``T``.
    """

    # What a type checker infers from output_type: Agent[str] without one, Agent[T] for a class T
    # (a typing form such as Literal[...] or a union: Agent[Any]). The other keywords are the
    # implementation's, below.
    @overload
    def __init__(self: Agent[str], model: Model, registry: Any = None, *, output_type: None = None,
                 **options: Any) -> None: ...

    @overload
    def __init__(self: Agent[OutputT], model: Model, registry: Any = None, *, output_type: type[OutputT],
                 **options: Any) -> None: ...

    @overload
    def __init__(self: Agent[Any], model: Model, registry: Any = None, *, output_type: Any,
                 **options: Any) -> None: ...

    def __init__(self, model: Model, registry: Registry | Iterable[Tool | Callable[..., Any]] | None = None, *,
                 budget: Budget = Budget(), system_prompt: str | None = None, name: str = "agent",
                 max_output_tokens: int | None = None, temperature: float | None = None,
                 tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: metrics.MeterProvider | None = None,
                 capture_content: bool | None = None, redact: Callable[[str], str] | None = None,
                 parallel_tool_calls: bool = True, max_tool_concurrency: int | None = None,
                 description: str | None = None, version: str | None = None, agent_id: str | None = None,
                 checkpoint_key: CheckpointKey | None = None, checkpoint_max_age: float | None = None,
                 accept_unsigned_checkpoints: bool = False, provider_spans: str | None = None,
                 attributes: Mapping[str, Any] | None = None,
                 attributes_from_baggage: bool | Iterable[str] = False,
                 output_type: Any = None, output_mode: str = "auto",
                 graders: RunEnded | None = None) -> None:  # type: ignore[misc]
        """``capture_content`` opts in to recording prompts, tool arguments and tool results
        on spans (truncated); ``None`` reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.
        ``redact`` is applied to every captured string before it reaches a span (default: a
        ``Redactor`` that blanks credential shapes; pass ``Redactor().extend(...)`` to add yours).
        ``tracer_provider`` / ``meter_provider`` default to the global ones.
        ``parallel_tool_calls``: ``arun`` dispatches a turn's calls concurrently, at most
        ``max_tool_concurrency`` at once (``None``: all); ``run`` is always sequential.
        ``description`` and ``version`` are ``gen_ai.agent.description``/``.version`` on every run
        span; ``agent_id`` is ``gen_ai.agent.id`` (default: a UUID derived from the name and version,
        the same in every process, so one agent definition's runs can be found together).
        ``checkpoint_key`` signs this agent's checkpoints and checks those it resumes: a key of at
        least 32 bytes, or several (the first signs, each verifies: rotation); ``None`` reads
        ``TRACEDAGENT_CHECKPOINT_KEY``. ``checkpoint_max_age``: seconds after the pause a signed
        checkpoint can still be resumed (``ExpiredCheckpoint`` after). A checkpoint read from outside
        must be signed with one of its keys unless ``accept_unsigned_checkpoints`` (docs/approvals.md).
        ``provider_spans``: ``"suppress"`` (default; ``None`` reads ``TRACEDAGENT_PROVIDER_SPANS``)
        turns off provider instrumentations (OpenInference's, OpenTelemetry's openai/anthropic
        ones) inside each chat span, so that a call is one LLM span; ``"keep"`` leaves them on
        (docs/telemetry.md).
        ``attributes``: your own attributes on every run span of this agent (a tenant, a
        component); a call's ``attributes=`` win over them. ``attributes_from_baggage``: ``True``
        copies every OpenTelemetry baggage entry current at a run's start onto its span, or name
        the keys to copy; off by default (docs/telemetry.md, "Your own attributes"). A bad one
        is ``BadAttributes`` here.
        ``output_type``: what every answer must be (a pydantic model, dataclass, ``TypedDict``,
        container or scalar type, ``Literal``, or a union; docs/typed.md): an answer that does not
        validate is sent back to the model with the problem (``Budget.max_output_retries``), then
        the run stops ``invalid_output``; ``run.output`` of an ok run is the value, ``run.text``
        the answer's text. ``output_mode`` is how the model is asked for it: ``"auto"`` (the
        model's own structured output where its adapter has one, else ``"prompted"``),
        ``"prompted"`` (the schema in the system prompt: any model), ``"native"``, ``"tool"``.
        ``graders``: online grading of this agent's runs as they end, after the run span ended and
        on a thread of its own (``tracedagent.evals.OnlineGrading([...])``; docs/evals.md)."""
        if max_tool_concurrency is not None and max_tool_concurrency < 1:
            raise ValueError(f"max_tool_concurrency must be at least 1, got {max_tool_concurrency}")
        self._raw_model = model
        self._registry = registry if isinstance(registry, Registry) else typed.Registry(registry or ())
        self.budget = budget
        self.system_prompt = system_prompt
        self._name = name
        self._settings = ModelSettings(max_output_tokens=max_output_tokens, temperature=temperature)
        self.parallel_tool_calls = parallel_tool_calls
        self.max_tool_concurrency = max_tool_concurrency
        self._telemetry = AgentTelemetry(agent_name=name, model=model, description=description, version=version,
                                         agent_id=agent_id,
                                         tracer_provider=tracer_provider, meter_provider=meter_provider,
                                         capture_content=capture_content, redact=redact,
                                         provider_spans=provider_spans)
        self._model = InstrumentedModel(model, self._telemetry)
        self._tools = InstrumentedRegistry(self._registry, self._telemetry)
        self._output = output_spec_of(output_type)
        self.output_mode = _resolved_mode(output_mode, model)
        if self.output_mode == "tool" and OUTPUT_TOOL_NAME in self._registry:
            raise ValueError(f"a tool is named {OUTPUT_TOOL_NAME!r}, the output tool's name: rename it, or "
                             f"choose another output_mode")
        self._telemetry.output_typed(self._output, self.output_mode)
        if graders is not None:
            if not callable(getattr(graders, "run_ended", None)):  # a list of graders, say
                raise TypeError(f"graders= takes tracedagent.evals.OnlineGrading([...]), not {type(graders).__name__}")
            self._telemetry.run_listener = graders
        if checkpoint_max_age is not None and not checkpoint_max_age > 0:
            raise ValueError(f"checkpoint_max_age must be a positive number of seconds, got {checkpoint_max_age}")
        self._checkpoint_keys = keyring(checkpoint_key)
        self.checkpoint_max_age = checkpoint_max_age
        self.accept_unsigned_checkpoints = accept_unsigned_checkpoints
        self._resumed: OrderedDict[str, None] = OrderedDict()
        self._resumed_lock = threading.Lock()
        self._attributes = check_attributes(attributes)
        self._from_baggage = baggage_keys(attributes_from_baggage)

    # Read-only: the instrumented wrappers and the spans' fixed attributes are built from these.
    @property
    def name(self) -> str:
        """``gen_ai.agent.name`` on every run's spans and metrics."""
        return self._name

    @property
    def max_output_tokens(self) -> int | None:
        """The most tokens one answer may have (``gen_ai.request.max_tokens``): every call's
        ``ModelRequest.settings``."""
        return self._settings.max_output_tokens

    @max_output_tokens.setter
    def max_output_tokens(self, value: int | None) -> None:
        self._settings = dataclasses.replace(self._settings, max_output_tokens=value)

    @property
    def temperature(self) -> float | None:
        """Sampling temperature (``gen_ai.request.temperature``), as ``max_output_tokens``."""
        return self._settings.temperature

    @temperature.setter
    def temperature(self, value: float | None) -> None:
        self._settings = dataclasses.replace(self._settings, temperature=value)

    @property
    def attributes(self) -> Mapping[str, Any]:
        """Your own attributes on every run span of this agent (``Agent(attributes=...)``), as checked."""
        return dict(self._attributes)

    @property
    def output_type(self) -> Any:
        """What an ok run's ``output`` is (``str`` without an output type)."""
        return str if self._output is None else getattr(self._output, "type", self._output)

    @property
    def model(self) -> Model:
        return self._raw_model

    @property
    def registry(self) -> Registry:
        return self._registry

    def as_tool(self, name: str | None = None, *, description: str, budget: Budget | None = None,
                fatal_is_fatal: bool = True) -> Tool:
        """This agent as a tool another agent's model calls with ``{"task": "..."}``: a sub-agent
        whose run is a child of the caller's ``execute_tool`` span, bounded by its own budget
        (``budget``, else the agent's) and by what the calling run has left. See ``_team.py``."""
        return agent_tool(self, name=name or self._name, description=description, budget=budget,
                          fatal_is_fatal=fatal_is_fatal)

    def run(self, task: str, history: Sequence[Message] | None = None, *, budget: Budget | None = None,
            conversation_id: str | None = None, attributes: Mapping[str, Any] | None = None) -> Run[OutputT]:
        """Run the loop on ``task`` (after ``history``, if any) until it stops for a named reason.

        ``budget`` replaces the agent's for this run; ``conversation_id`` is recorded as
        ``gen_ai.conversation.id``; ``attributes`` are your own on the run span, over the agent's
        (``BadAttributes`` before anything runs if one is refused). A run started inside another
        run's tool is its sub-run: bounded by what that run has left, counted in its totals,
        inheriting its conversation and its attributes.
        An async tool runs on a private event loop, which cannot be inside a running one:
        from async code, ``await agent.arun(...)``."""
        if self._registry.has_async_tools and _acalls.in_event_loop():
            raise RuntimeError("Agent.run was called inside a running event loop and this agent has "
                               "async tools; use `await agent.arun(...)` instead")
        own = check_attributes(attributes, self._attributes)
        with self._machine(task, history, budget, conversation_id, own, asynchronous=False) as machine:
            return self._pump(machine, machine.start())

    async def arun(self, task: str, history: Sequence[Message] | None = None, *, budget: Budget | None = None,
                   conversation_id: str | None = None, attributes: Mapping[str, Any] | None = None) -> Run[OutputT]:
        """``run`` for async code: the same decisions, stops, spans and metrics. The time
        budget is a deadline that cancels a call still running; cancelling the task running
        ``arun`` ends every span it opened and propagates ``CancelledError``."""
        own = check_attributes(attributes, self._attributes)
        with self._machine(task, history, budget, conversation_id, own, asynchronous=True) as machine:
            return await self._apump(machine, machine.start())

    def stream(self, task: str, history: Sequence[Message] | None = None, *, budget: Budget | None = None,
               conversation_id: str | None = None, attributes: Mapping[str, Any] | None = None) -> AgentStream:
        """``run``, its events as they happen: ``with agent.stream(task) as stream: for event in
        stream: ...``, then ``stream.run``. The same decisions, stops, spans and metrics as ``run``
        (``_stream.py``); a consumer that stops reading ends the run ``cancelled``."""
        if self._registry.has_async_tools and _acalls.in_event_loop():
            raise RuntimeError("Agent.stream was called inside a running event loop and this agent has "
                               "async tools; use `async with agent.astream(...)` instead")
        own = check_attributes(attributes, self._attributes)  # refused here, not at the first event
        return AgentStream(self, task, history, budget, conversation_id, own)

    def astream(self, task: str, history: Sequence[Message] | None = None, *, budget: Budget | None = None,
                conversation_id: str | None = None, attributes: Mapping[str, Any] | None = None) -> AsyncAgentStream:
        """``arun``, its events as they happen: ``async with agent.astream(task) as stream: async
        for event in stream: ...``, then ``stream.run``."""
        own = check_attributes(attributes, self._attributes)
        return AsyncAgentStream(self, task, history, budget, conversation_id, own)

    def resume(self, checkpoint: str | bytes | Checkpoint, decisions: Mapping[str, Decision], *,
               claim: _resume.Claim | None = None, budget: Budget | None = None,
               attributes: Mapping[str, Any] | None = None) -> Run[OutputT]:
        """Continue a run that stopped ``approval_required`` (``run.checkpoint()``), once a person
        decided on each of ``run.pending``: ``decisions`` maps every waiting call's id to
        ``approve(call)`` (run it if it is still the call the person saw), ``True`` (run it, with
        exactly the checkpoint's arguments), ``False`` or a string (deny it; the string is what the
        model is shown). A new trace, linked to the paused run's; bounded by what is left of the
        checkpoint's budget (``budget`` may lower its ceilings, never raise them); it may pause
        again. A checkpoint read from text must be signed with this agent's key (unless
        ``accept_unsigned_checkpoints``). A bad, altered or foreign checkpoint or bad decisions
        raise a ``CheckpointError`` before anything runs. A checkpoint is resumed once: this
        agent remembers the last ids it resumed; across processes, pass ``claim`` (docs/approvals.md).
        ``attributes`` as ``run``'s: the paused run's are not in the checkpoint, pass them again."""
        own = check_attributes(attributes, self._attributes)  # before the checkpoint is claimed
        return _resume.resume(self, checkpoint, decisions, claim, budget, own)

    async def aresume(self, checkpoint: str | bytes | Checkpoint, decisions: Mapping[str, Decision], *,
                      claim: _resume.Claim | None = None, budget: Budget | None = None,
                      attributes: Mapping[str, Any] | None = None) -> Run[OutputT]:
        """``resume`` for async code, continuing as ``arun`` does."""
        own = check_attributes(attributes, self._attributes)
        return await _resume.aresume(self, checkpoint, decisions, claim, budget, own)

    REMEMBERED_RESUMES = 10_000
    """How many resumed checkpoint ids an agent remembers (the oldest forgotten first): a
    long-lived agent's memory stays bounded. ``claim=`` is the guard that does not forget."""

    def _claim(self, checkpoint_id: str) -> bool:
        """Whether this agent has not resumed ``checkpoint_id`` yet (among the last
        ``REMEMBERED_RESUMES``), marking it resumed."""
        with self._resumed_lock:
            if checkpoint_id in self._resumed:
                return False
            self._resumed[checkpoint_id] = None
            if len(self._resumed) > self.REMEMBERED_RESUMES:
                self._resumed.popitem(last=False)
            return True

    def _start(self, task: str, history: Sequence[Message] | None, budget: Budget | None,
               conversation_id: str | None, attributes: Mapping[str, Any] = NO_ATTRIBUTES, *,
               asynchronous: bool) -> tuple[RunScope, RunState, RunState | None]:
        """The run span and the run's state; under a parent run, the parent's limits and conversation."""
        parent = current_run.get()
        budget = budget or self.budget
        if parent is not None:
            budget = parent.child_budget(budget)
            conversation_id = conversation_id or parent.conversation_id
        messages = initial_messages(with_instruction(self.system_prompt, self._output, self.output_mode), history, task)
        traced, state = self._begin(budget, messages, conversation_id, parent, asynchronous=asynchronous,
                                    attributes=attributes)
        return traced, state, parent

    def _begin(self, budget: Budget, messages: list[Message], conversation_id: str | None,
               parent: RunState | None, *, asynchronous: bool,
               resumed: Resumed | None = None,
               attributes: Mapping[str, Any] = NO_ATTRIBUTES) -> tuple[RunScope, RunState]:
        """The one place an agent's run span starts (with how this agent dispatches), and its state.
        Its own attributes: the call's (``attributes``, checked), its caller's run's under a
        parent run, the agent's defaults, the baggage asked for (``run_attributes``)."""
        if parent is not None or self._from_baggage:  # a sub-run, or baggage to copy
            copied = from_baggage(baggage_entries(), self._from_baggage) if self._from_baggage else None
            attributes = run_attributes(self._attributes, attributes, caller_attributes() if parent else None, copied)
        elif self._attributes:
            attributes = run_attributes(self._attributes, attributes)
        traced = RunScope(self._telemetry, budget, messages, conversation_id, asynchronous=asynchronous,
                          parallel_tool_calls=self.parallel_tool_calls, max_tool_concurrency=self.max_tool_concurrency,
                          resumed=resumed, attributes=attributes)
        with traced:  # a bug: no run, but no span left open
            state = RunState(budget, messages, trace_id=traced.trace_id, conversation_id=conversation_id,
                             parent=parent, agent=self._name, tools=self._registry.names, span_id=traced.span_id)
            state.checkpoint_keys, state.checkpoint_max_age = self._checkpoint_keys, self.checkpoint_max_age
        return traced, state

    def _machine(self, task: str, history: Sequence[Message] | None, budget: Budget | None,
                 conversation_id: str | None, attributes: Mapping[str, Any], *, asynchronous: bool) -> RunMachine:
        traced, state, _ = self._start(task, history, budget, conversation_id, attributes, asynchronous=asynchronous)
        return self._driven(state, traced)

    def _driven(self, state: RunState, traced: RunScope) -> RunMachine:
        """The machine of a run, its spans its observer's."""
        return RunMachine(state, self._registry, traced, settings=self._settings, output=self._output,
                          output_mode=self.output_mode)

    def _pump(self, machine: RunMachine, action: Action) -> Run:
        """``run``: the machine's requests performed in this thread, one call after another."""
        model, tools = self._model, self._tools
        while True:
            if action.__class__ is CallModel:
                try:
                    completion = model.complete(action.request)
                except (Exception, asyncio.CancelledError) as exc:  # no task to cancel here: the model's own
                    action = machine.model_failed(exc)
                    continue
                action = machine.model_returned(completion)
            elif action.__class__ is Dispatch:
                results: list[ToolResult] = []
                for call in machine.one_by_one(action.calls, results):
                    results.append(tools.dispatch(call))
                action = machine.tools_done(results)
            else:
                return action.run

    async def _apump(self, machine: RunMachine, action: Action) -> Run:
        """``arun``: the machine's requests awaited under the run's deadline (the model's
        ``acomplete``, ``_acalls`` for the tools), a turn's calls concurrently unless the agent
        says otherwise."""
        model, tools = self._model, self._tools
        while True:
            if action.__class__ is CallModel:
                try:
                    completion = await model.acomplete(action.request, deadline=machine.deadline)
                except (Exception, asyncio.CancelledError) as exc:  # which it is, the machine decides
                    action = machine.model_failed(exc)
                    continue
                action = machine.model_returned(completion)
            elif action.__class__ is Dispatch:
                results = await _acalls.dispatch_turn(tools, machine, action.calls, parallel=self.parallel_tool_calls,
                                                      concurrency=self.max_tool_concurrency)
                action = machine.tools_done(results)
            else:
                return action.run


def output_spec_of(output_type: Any) -> OutputSpec | None:
    """The spec of an output type (``None``: text, ``str`` included). An ``OutputSpec`` is taken as
    it is; a type is given to pydantic (``tracedagent._typed``, imported only here, so an untyped
    agent never imports pydantic)."""
    if output_type is None or output_type is str:
        return None
    if isinstance(output_type, OutputSpec) and not isinstance(output_type, type):
        return output_type
    from .._typed._output import output_spec  # the one wing that imports pydantic
    return output_spec(output_type)
