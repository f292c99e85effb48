"""What ``Agent.stream`` / ``astream`` yield: small frozen records, one per thing that happened.

Each has a ``type`` string (a class attribute, so that an event is no bigger than its fields)
and names the agent that produced it, so that a team's events can be told apart. The order
is the run's: a step's ``text_delta`` events as the model writes (a typed agent's
``partial_output`` after those that change the value so far), its ``tool_call`` events
once its turn is whole, a ``tool_result`` per dispatched call, ``step_end`` for every step the
run records, and ``run_end`` - always the last event, once every span of the run has ended.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Union

from ._output import OutputCheck, OutputSpec
from ._records import ToolCall, ToolResult
from ._run import Run, Step

__all__ = ["event_sink", "text_delta", "TextDelta", "PartialOutput", "PartialOutputs", "partial_outputs", "ToolCallEvent", "ToolResultEvent", "StepEnd", "RunEnd", "StreamEvent"]


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta:
    """Text the model added to its answer, as it arrived."""

    type: ClassVar[str] = "text_delta"
    agent: str
    """The name of the agent whose model wrote it."""
    text: str
    """The new text (never empty); a step's deltas joined are its ``completion.text``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PartialOutput:
    """A typed agent's answer as far as its JSON has arrived, validated (``OutputSpec.partial``):
    after a ``text_delta``, only when the value so far differs from the last one of the turn."""

    type: ClassVar[str] = "partial_output"
    agent: str
    """The name of the agent whose model is writing it."""
    value: Any
    """The value so far, of the output type (a field still being written may yet change; the answer
    is only checked whole, at the turn's end: a turn of tool calls or prose may have shown some)."""


class PartialOutputs:
    """One turn's partial values: ``feed`` each text delta, get a ``PartialOutput`` when the value
    so far changed (each delta parses the text so far: typed answers are short JSON)."""

    __slots__ = ("agent", "parse", "text", "last")

    def __init__(self, agent: str, parse: Callable[[str], OutputCheck]) -> None:
        self.agent, self.parse, self.text, self.last = agent, parse, "", _NOTHING

    def feed(self, text: str) -> PartialOutput | None:
        self.text += text
        check = self.parse(self.text)
        if check.problem is not None or check.value == self.last:
            return None
        self.last = check.value
        return PartialOutput(agent=self.agent, value=check.value)


_NOTHING = object()


def partial_outputs(agent: str, spec: OutputSpec | None) -> PartialOutputs | None:
    """A turn's ``PartialOutputs`` for a typed agent whose spec parses partial JSON, else ``None``."""
    parse = getattr(spec, "partial", None)
    return None if parse is None else PartialOutputs(agent, parse)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallEvent:
    """A tool call the model's turn asked for, once the turn is whole (its arguments complete),
    before the run decides whether to dispatch it."""

    type: ClassVar[str] = "tool_call"
    agent: str
    """The name of the agent whose model asked."""
    call: ToolCall
    """The call, as ``Step.completion.tool_calls`` holds it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResultEvent:
    """What dispatching one call produced (a call that was not dispatched has none)."""

    type: ClassVar[str] = "tool_result"
    agent: str
    """The name of the agent that dispatched the call."""
    result: ToolResult
    """The result, as ``Step.tool_results`` holds it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StepEnd:
    """A step the run recorded has ended (the run's last step ends just before ``RunEnd``)."""

    type: ClassVar[str] = "step_end"
    agent: str
    """The name of the agent whose step it was."""
    step: Step
    """The step, as ``Run.steps`` holds it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunEnd:
    """The run has ended, for a named reason, and every span it opened has ended: the last event."""

    type: ClassVar[str] = "run_end"
    agent: str
    """The name of the agent whose run it was."""
    run: Run
    """The run, which ``stream.run`` also gives from now on."""


_new = object.__new__
_set_agent = TextDelta.agent.__set__  # type: ignore[attr-defined]
_set_text = TextDelta.text.__set__  # type: ignore[attr-defined]


def text_delta(agent: str, text: str) -> TextDelta:
    """``TextDelta(agent=agent, text=text)`` at half the cost: the drivers make one per chunk,
    and a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``."""
    event = _new(TextDelta)
    _set_agent(event, agent)
    _set_text(event, text)
    return event


StreamEvent = Union[TextDelta, PartialOutput, ToolCallEvent, ToolResultEvent, StepEnd, RunEnd]
"""Any event a stream yields; ``event.type`` says which."""


event_sink: contextvars.ContextVar[tuple[object, Callable[[StreamEvent], None]] | None] = contextvars.ContextVar(
    "tracedagent_event_sink", default=None)
"""Where a sub-agent started from a streamed run's tool (``Agent.as_tool``) sends its events, and
that run's state: the streamed run sets both in its context, so that a team's events reach the
one consumer, each naming its agent. A sub-agent forwards only when the run calling it is that
one (``current_run``): an agent run inside an ordinary tool of a streamed run inherits the
context but is not streamed, and its sub-agents' events are not the stream's. Outside a streamed
run it is ``None`` and sub-agents run as ``arun``."""
