"""The values that cross the loop: what the model said, what a tool returned, what it cost."""

from __future__ import annotations

import asyncio
import sys
import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

__all__ = ["Usage", "ToolCall", "Completion", "ToolOutcome", "ToolResult", "Message", "error_type",
           "message_of", "being_cancelled", "cancel_requests", "in_thread", "check_completion", "MAX_TOKEN_COUNT"]

T = TypeVar("T")

Message = dict[str, Any]
"""One conversation turn in the loop's provider-neutral shape.

``{"role": "system" | "user" | "assistant" | "tool", "content": str}``; an assistant turn
may add ``"tool_calls": [{"id", "name", "arguments"}]`` and ``"provider_data"``, a tool turn adds
``"tool_call_id"`` and ``"name"``. Model adapters translate it to their API's format.
"""


def error_type(exc: BaseException) -> str:
    """The ``error.type`` of an exception everywhere tracedagent records one: its class name
    (never its message, which can echo request content or credentials)."""
    try:
        name = type(exc).__qualname__
    except Exception:  # a metaclass that will not say: the run goes on regardless
        return "Exception"
    return name if isinstance(name, str) else "Exception"


def message_of(exc: BaseException) -> str:
    """``str(exc)``, or a placeholder when the exception cannot render itself (a ``__str__``
    that raises or recurses): a failing tool's message must not fail the run."""
    try:
        return str(exc)
    except (Exception, RecursionError):
        return f"({error_type(exc)} whose message could not be read)"


async def in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``asyncio.to_thread``, except that a ``StopIteration`` ``fn`` raises comes back as a
    ``RuntimeError`` - as Python turns one raised in a coroutine (PEP 479) - because a Future
    cannot carry it: the task awaiting it would never wake."""
    return await asyncio.to_thread(_stop_iteration_as_runtime_error, fn, *args, **kwargs)


def _stop_iteration_as_runtime_error(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    try:
        return fn(*args, **kwargs)
    except StopIteration as exc:
        raise RuntimeError(f"{error_type(exc)} raised in a worker thread") from exc


def being_cancelled() -> bool:
    """Whether the running task was asked to cancel, rather than handed a ``CancelledError`` by
    something it awaited (a tool's or a model's own). Python 3.10 cannot tell the two apart:
    there, it is always taken as a cancellation. Without a running event loop (the sync
    ``run``) nothing can cancel the run, so a ``CancelledError`` is its raiser's own."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running event loop
        return False
    return task is None or not hasattr(task, "cancelling") or task.cancelling() > 0


def cancel_requests() -> int:
    """How many cancellations of the running task are pending (``Task.cancelling``): 0 outside
    a task, and always on Python 3.10, which does not count them. (A 3.10 task may still have
    ``cancelling``: pytest-asyncio's backported runner adds it, but 3.10's asyncio and anyio never
    ``uncancel``, so a cancellation anyio caught and swallowed inside an SDK would count for ever.)"""
    if sys.version_info < (3, 11):
        return 0
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running event loop
        return 0
    return task.cancelling() if task is not None and hasattr(task, "cancelling") else 0


@dataclass(frozen=True)
class Usage:
    """Tokens one model call consumed, as the provider reported them."""

    input_tokens: int = 0
    """Prompt tokens, including any served from a cache."""
    output_tokens: int = 0
    """Completion tokens."""
    cache_read_input_tokens: int = 0
    """Of ``input_tokens``, those read from the provider's prompt cache (Anthropic)."""
    cache_creation_input_tokens: int = 0
    """Of ``input_tokens``, those written to the provider's prompt cache (Anthropic)."""
    reasoning_output_tokens: int = 0
    """Of ``output_tokens``, those the model spent reasoning before it answered (OpenAI's
    ``reasoning_tokens``); zero where the provider does not report them apart."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ToolCall:
    """One tool invocation the model requested."""

    id: str
    """The provider's call id; the tool message answering it carries the same id."""
    name: str
    """The tool the model asked for, which the registry may not know."""
    arguments: dict[str, Any] | str = field(default_factory=dict)
    """Parsed JSON arguments, or the raw string when the model sent malformed JSON
    (the registry then answers ``invalid_arguments`` instead of guessing)."""

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class Completion:
    """One model turn: text, requested tool calls, and what it cost."""

    text: str = ""
    """The assistant's text; the run's output when no tools are requested."""
    tool_calls: Sequence[ToolCall] = ()
    """Tool calls in the order the model listed them."""
    usage: Usage = field(default_factory=Usage)
    """Tokens the call consumed."""
    model: str | None = None
    """The model that actually answered (``gen_ai.response.model``)."""
    finish_reason: str | None = None
    """Why the provider stopped generating, e.g. ``stop``, ``tool_calls``, ``end_turn``."""
    response_id: str | None = None
    """The provider's id for this response (``gen_ai.response.id``)."""
    provider_data: dict[str, Any] | None = None
    """Parts of the turn only its provider understands and needs back verbatim when the
    conversation is replayed (Anthropic's thinking blocks), keyed by provider name. They
    travel in the assistant message, so a history passed to a later run keeps them."""

    @property
    def wants_tools(self) -> bool:
        """The loop's only success check: a turn without tool calls is the answer."""
        return bool(self.tool_calls)

    def as_message(self) -> Message:
        message: Message = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [tc.as_dict() for tc in self.tool_calls]
        if self.provider_data:
            message["provider_data"] = self.provider_data
        return message


class ToolOutcome(str, enum.Enum):
    """The closed set of things that can happen to a requested tool call."""

    OK = "ok"
    """The tool ran and returned."""
    ERROR = "error"
    """The tool raised (``ToolError`` or anything else); the model sees the error."""
    DENIED = "denied"
    """The registry's policy refused the call; the tool never ran."""
    INVALID_ARGUMENTS = "invalid_arguments"
    """Arguments were not JSON, not an object, or did not match the tool's schema."""
    UNKNOWN_TOOL = "unknown_tool"
    """No tool of that name is registered."""
    FATAL = "fatal"
    """The tool raised ``FatalToolError``: the run ends."""
    TIMEOUT = "timeout"
    """The tool ran past its own ``timeout`` (``arun``, or an async tool in ``run``) and was
    cancelled; the model sees that, as it sees an error."""
    PENDING = "pending"
    """The tool's work waits for a person (a sub-agent whose run paused for approval): the
    run pauses with it, and the model sees nothing of it until the run is resumed."""


@dataclass(frozen=True)
class ToolResult:
    """What dispatching one ``ToolCall`` produced."""

    call_id: str
    """The id of the call this answers."""
    name: str
    """The requested tool name."""
    content: str
    """What the model is shown: the tool's return value, or a clear reason it did not run."""
    outcome: ToolOutcome = ToolOutcome.OK
    """Which of the closed set of outcomes this was."""
    error_type: str | None = None
    """Class name of the exception a failed tool raised (``error.type`` on its span)."""
    deadline_cut: bool = False
    """The run's deadline cut the call off while it ran (outcome ``timeout``); a tool's own
    ``timeout`` is not this."""
    pending: Any = None
    """With outcome ``pending``: what the tool's own run waits for (a sub-agent's ``Run``)."""

    @property
    def ok(self) -> bool:
        return self.outcome is ToolOutcome.OK

    def as_message(self) -> Message:
        return {"role": "tool", "tool_call_id": self.call_id, "name": self.name,
                "content": self.content}


def check_completion(completion: Any) -> Completion:
    """A model's answer, checked at the call: a ``Completion`` whose fields have the types the
    loop relies on, or the model's failure (``Stop.MODEL_ERROR``, with a ``TypeError`` naming
    the field), never a crash later in the loop. Token counts the provider did not report
    are zero (adapters map a missing ``usage`` to ``Usage()``); a count that is not a
    non-negative integer is the model's error, not a guess."""
    if not isinstance(completion, Completion):
        raise TypeError(f"the model returned {type(completion).__name__}, not a Completion")
    usage = completion.usage
    if not isinstance(usage, Usage):
        raise TypeError(f"the model's Completion has usage={type(usage).__name__}, not a Usage")
    counts = (usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens,
              usage.reasoning_output_tokens)
    if set(map(type, counts)) != {int} or min(counts) < 0 or max(counts) > MAX_TOKEN_COUNT:  # nor is a bool
        name, value = next((f.name, v) for f, v in zip(dataclasses.fields(Usage), counts)
                           if type(v) is not int or not 0 <= v <= MAX_TOKEN_COUNT)
        raise TypeError(f"the model's Usage has {name}={_preview(value, 40)}, not a token count (an int from 0 "
                        f"to {MAX_TOKEN_COUNT:,})")
    if type(completion.text) is not str:
        raise TypeError(f"the model's Completion has text of type {type(completion.text).__name__}, not str")
    for name in ("model", "finish_reason", "response_id"):
        value = getattr(completion, name)
        if value is not None and type(value) is not str:
            raise TypeError(f"the model's Completion has {name} of type {type(value).__name__}, not str")
    if completion.provider_data is not None and not isinstance(completion.provider_data, dict):
        raise TypeError("the model's Completion has provider_data that is not a dict")
    if not isinstance(completion.tool_calls, (list, tuple)):
        raise TypeError(f"the model's Completion has tool_calls of type {type(completion.tool_calls).__name__}, "
                        "not a list")
    for call in completion.tool_calls:
        if not (isinstance(call, ToolCall) and isinstance(call.id, str) and isinstance(call.name, str)
                and isinstance(call.arguments, (dict, str))):
            raise TypeError(f"the model's tool call {_preview(call)} is not a ToolCall with a string id and "
                            "name and dict or string arguments")
    return completion


MAX_TOKEN_COUNT = 2**40
"""The most tokens one count of a model call may report: a million times any model's context,
so a larger count is garbage - and a sum of such counts would not fit the int64 that OTLP
carries, nor a float a cost is computed in."""


def _preview(value: Any, width: int = 80) -> str:
    try:
        return repr(value)[:width]
    except Exception:  # a repr that recurses forever or raises, an int too long to print
        return f"<{type(value).__name__}>"
