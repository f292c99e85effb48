"""The agent loop: call, check, dispatch, append, repeat, stop.

``Agent.run`` reads top to bottom as those six verbs. Its decisions - the repeat check,
the budget checks, the one finish path - are methods of ``RunState`` so that another
driver (an async one, say) can share them rather than copy them.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Sequence

from opentelemetry import metrics, trace

from ._budget import Budget, Stop
from ._names import MAX_NAME_LENGTH
from ._records import Completion, Message, Model, ToolCall, ToolOutcome, error_type
from ._run import Run, Step
from ._telemetry import AgentTelemetry
from ._tools import Registry, Tool

__all__ = ["Agent", "RunState"]


class Agent:
    """A model, the tools it may call, and the budget that bounds every run.

    ``run`` always returns a ``Run``; it does not raise on budget exhaustion, a failing
    tool or a failing model. Check ``run.ok`` (or ``run.stop``) before using
    ``run.output``.
    """

    def __init__(self, model: Model, registry: Registry | Iterable[Tool | Callable[..., Any]] | None = None, *,
                 budget: Budget = Budget(), system_prompt: str | None = None, name: str = "agent",
                 max_output_tokens: int | None = None, temperature: float | None = None,
                 tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: metrics.MeterProvider | None = None,
                 capture_content: bool | None = None) -> None:
        """``capture_content`` opts in to recording prompts, tool arguments and tool results
        on spans (truncated); ``None`` reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.
        ``tracer_provider`` / ``meter_provider`` default to the global ones."""
        self._raw_model = model
        self._registry = registry if isinstance(registry, Registry) else Registry(registry or ())
        self.budget = budget
        self.system_prompt = system_prompt
        self._name = name
        self.max_output_tokens = max_output_tokens
        self.temperature = temperature
        self._telemetry = AgentTelemetry(agent_name=name, model=model,
                                         tracer_provider=tracer_provider, meter_provider=meter_provider,
                                         capture_content=capture_content)
        self._model = self._telemetry.instrument_model(model)
        self._dispatch = self._telemetry.instrument_dispatch(self._registry)

    # Read-only: the instrumented wrappers and the spans' fixed attributes are built from these.
    @property
    def name(self) -> str:
        """``gen_ai.agent.name`` on every run's spans and metrics."""
        return self._name

    @property
    def model(self) -> Model:
        return self._raw_model

    @property
    def registry(self) -> Registry:
        return self._registry

    def run(self, task: str, history: Sequence[Message] | None = None) -> Run:
        state = RunState(self.budget, initial_messages(self.system_prompt, history, task))
        tools = self._registry.schemas() or None  # no tools: None, not []
        with self._telemetry.run(state) as traced:
            for i in range(self.budget.max_steps):
                with traced.step(i):
                    # 1. call the model with the whole conversation
                    try:
                        completion = self._model.complete(
                            state.messages, tools=tools,
                            max_output_tokens=self.max_output_tokens, temperature=self.temperature)
                    except Exception as exc:
                        return state.finish(Stop.MODEL_ERROR, error=exc)
                    step = state.record(i, completion)
                    # 2. check: a turn without tool calls is the answer
                    if not completion.wants_tools:
                        return state.finish(Stop.ANSWERED)
                    if stopped := state.repeated_call(completion.tool_calls):
                        return stopped
                    # 3. dispatch each call through the registry, 4. append its result
                    for call in completion.tool_calls:
                        result = self._dispatch(call)
                        step.tool_results.append(result)
                        if result.outcome is ToolOutcome.FATAL:
                            return state.finish(Stop.TOOL_FATAL)
                        state.messages.append(result.as_message())
                    if stopped := state.over_budget():
                        return stopped
                # 5. repeat, until an exit above or the end of range(max_steps)
            # 6. stop: the ceiling is the loop's structure, not a condition
            return state.finish(Stop.STEP_BUDGET)


def initial_messages(system_prompt: str | None, history: Sequence[Message] | None, task: str) -> list[Message]:
    """System prompt first if there is one, then the history, then the task."""
    messages: list[Message] = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.extend(dict(m) for m in history or ())
    messages.append({"role": "user", "content": task})
    return messages


def _stable_encoder() -> Callable[[Any], str]:
    """``json.dumps(value, sort_keys=True, default=str)``, at a third of its cost per call.

    ``json.dumps`` builds an encoder (and its C accelerator) on every call, which made the
    repeat check one of the loop's dearest steps. The C encoder is built once here, without
    cycle detection (a cycle ends in ``RecursionError`` instead, which ``_stable`` handles);
    where the accelerator is missing or answers differently, the standard encoder is used.
    """
    standard = json.JSONEncoder(sort_keys=True, default=str).encode
    try:
        from json.encoder import c_make_encoder, encode_basestring_ascii

        c_encode = c_make_encoder(None, str, encode_basestring_ascii, None, ": ", ", ", True, False, True)

        def fast(value: Any) -> str:
            return "".join(c_encode(value, 0))

        probe = {"b": [1, 1.0, True, None, "\u00e9"], "a": {"y": float("nan"), "x": object}}
        return fast if fast(probe) == standard(probe) else standard
    except Exception:  # no C accelerator (c_make_encoder is None), or its signature changed
        return standard


_encode_stable = _stable_encoder()


def _stable(arguments: Any) -> str:
    """Argument identity for the repeat check: key order does not make a call new, and what
    JSON tells apart (1, 1.0, true, "1") stays apart."""
    try:
        return _encode_stable(arguments)
    except (TypeError, ValueError, RecursionError):  # unsortable keys (a custom model's tuples), a cycle
        try:
            return repr(arguments)
        except RecursionError:  # nested past the interpreter's limit: never counted as a repeat
            return f"<arguments at {id(arguments):#x}>"


class RunState:
    """Everything one run accumulates, and the decisions made on it."""

    def __init__(self, budget: Budget, messages: list[Message]) -> None:
        self.budget = budget
        self.messages = messages
        self.steps: list[Step] = []
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0.0
        self.trace_id: str | None = None
        self.run: Run | None = None
        """Set by ``finish``; the telemetry reads the outcome from here."""
        self._seen_calls: dict[tuple[str, str], int] = {}
        self._steps_without_progress = 0

    def record(self, index: int, completion: Completion) -> Step:
        """Account for a model turn and append it to the conversation."""
        step = Step(index=index, completion=completion)
        self.steps.append(step)
        self.messages.append(completion.as_message())
        self.input_tokens += completion.usage.input_tokens
        self.output_tokens += completion.usage.output_tokens
        self.cost = self.budget.cost_of(self.input_tokens, self.output_tokens)
        return step

    def repeated_call(self, calls: Sequence[ToolCall]) -> Run | None:
        """Stop a stuck agent before it pays for the same call again: runs before dispatch."""
        for call in calls:
            key = (call.name, _stable(call.arguments))
            times = self._seen_calls[key] = self._seen_calls.get(key, 0) + 1
            if times > self.budget.repeat_limit:
                return self.finish(Stop.REPEATED_CALL, detail=(call.name, times))
        return None

    def over_budget(self) -> Run | None:
        """Token, cost and progress ceilings, checked once the step's work is done."""
        b = self.budget
        if b.max_tokens is not None and self.input_tokens + self.output_tokens > b.max_tokens:
            return self.finish(Stop.TOKEN_BUDGET)
        if b.max_cost is not None and self.cost > b.max_cost:
            return self.finish(Stop.COST_BUDGET)
        if b.no_progress_limit is not None:
            progressed = bool(self.steps and self.steps[-1].succeeded_names)
            self._steps_without_progress = 0 if progressed else self._steps_without_progress + 1
            if self._steps_without_progress >= b.no_progress_limit:
                return self.finish(Stop.NO_PROGRESS)
        return None

    def finish(self, stop: Stop, *, error: BaseException | None = None, detail: Any = None) -> Run:
        """The one exit: every stop produces a ``Run`` with a named reason."""
        output = self.steps[-1].completion.text if stop is Stop.ANSWERED else self._explain(stop, error, detail)
        self.run = Run(output=output, stop=stop, steps=self.steps, messages=self.messages,
                       input_tokens=self.input_tokens, output_tokens=self.output_tokens, cost=self.cost,
                       trace_id=self.trace_id, error=error)
        return self.run

    def _explain(self, stop: Stop, error: BaseException | None, detail: Any) -> str:
        b = self.budget
        if stop is Stop.STEP_BUDGET:
            return f"Stopped: reached the {b.max_steps}-step limit without an answer."
        if stop is Stop.REPEATED_CALL:
            name, times = detail
            name = name if len(name) <= MAX_NAME_LENGTH else name[:MAX_NAME_LENGTH] + "..."  # the model chose it
            return f"Stopped: repeated the same {name} call {times} times without progress."
        if stop is Stop.TOOL_FATAL:
            return "Stopped: the run hit an unrecoverable tool error."
        if stop is Stop.TOKEN_BUDGET:
            return (f"Stopped: used {self.input_tokens + self.output_tokens} tokens, "
                    f"over the {b.max_tokens}-token budget.")
        if stop is Stop.COST_BUDGET:
            return f"Stopped: spent ${self.cost:.4f}, over the ${b.max_cost:.4f} cost budget."
        if stop is Stop.NO_PROGRESS:
            return f"Stopped: {self._steps_without_progress} steps in a row without a successful tool call."
        if stop is Stop.MODEL_ERROR:
            return f"Stopped: the model call failed ({error_type(error)})."
        raise AssertionError(f"no explanation for {stop!r}")  # pragma: no cover - Stop is closed
