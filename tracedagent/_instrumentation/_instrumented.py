"""The model and the registry as the loop sees them: each call inside its span scope.

``complete`` and ``dispatch`` are the bare objects' calls, each inside a ``ChatScope`` or
``ToolScope`` that ends with the call's outcome, so that a synchronous driver says nothing
about telemetry beyond the run and step spans. An async driver awaits the calls its own way
(the run's deadline, cancellation: ``_agent/_acalls.py``), so it opens the same scopes itself
(``chat``, ``span``) around ``acall`` and the registry's ``adispatch``. Nothing here decides
anything about the run.
"""

from __future__ import annotations

import inspect
from typing import Any, Awaitable

from .._core._records import Completion, Message, Model, ToolCall, ToolResult, check_completion, in_thread
from .._core._tools import Registry
from ._spans import ChatScope, ToolScope
from ._telemetry import AgentTelemetry

__all__ = ["InstrumentedModel", "InstrumentedRegistry"]


def _takes_timeout(method: Any) -> bool:
    try:
        return "timeout" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read (a builtin, a C extension)
        return False


class InstrumentedModel:
    """A ``Model`` whose every call is a ``chat`` span, with the GenAI client metrics."""

    def __init__(self, model: Model, telemetry: AgentTelemetry) -> None:
        self.wrapped = model
        self._t = telemetry
        self._acomplete = getattr(model, "acomplete", None)
        self._sync_takes_timeout = _takes_timeout(model.complete)
        self._async_takes_timeout = self._acomplete is not None and _takes_timeout(self._acomplete)

    def chat(self, messages: list[Message], max_output_tokens: int | None,
             temperature: float | None) -> ChatScope:
        """The ``chat`` span of one call, open until the scope ends (a context manager that
        fails it on an exception)."""
        return ChatScope(self._t, messages, max_output_tokens, temperature)

    def complete(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                 max_output_tokens: int | None = None, temperature: float | None = None, *,
                 timeout: float | None = None) -> Completion:
        """``timeout`` is the time the run has left, passed on if the model takes one."""
        with ChatScope(self._t, messages, max_output_tokens, temperature) as chat:
            if timeout is not None and self._sync_takes_timeout:
                answer = self.wrapped.complete(messages, tools=tools, max_output_tokens=max_output_tokens,
                                               temperature=temperature, timeout=timeout)
            else:
                answer = self.wrapped.complete(messages, tools=tools, max_output_tokens=max_output_tokens,
                                               temperature=temperature)
            completion = check_completion(answer)
            chat.end(completion)
        return completion

    def acall(self, messages: list[Message], tools: list[dict[str, Any]] | None, max_output_tokens: int | None,
              temperature: float | None, timeout: float | None) -> Awaitable[Any]:
        """The model's ``acomplete``, or its ``complete`` in a worker thread (the thread carries
        the context, so the chat span stays the parent of anything the model traces itself);
        unchecked, and outside any span: the caller awaits it inside ``chat``."""
        if self._acomplete is not None:
            return self._acomplete(messages, **self._options(tools, max_output_tokens, temperature, timeout,
                                                             self._async_takes_timeout))
        return in_thread(self.wrapped.complete, messages,
                         **self._options(tools, max_output_tokens, temperature, timeout, self._sync_takes_timeout))

    @staticmethod
    def _options(tools: Any, max_output_tokens: int | None, temperature: float | None,
                 timeout: float | None, takes_timeout: bool) -> dict[str, Any]:
        options = {"tools": tools, "max_output_tokens": max_output_tokens, "temperature": temperature}
        if timeout is not None and takes_timeout:
            options["timeout"] = timeout
        return options


class InstrumentedRegistry:
    """A ``Registry`` whose every dispatch is an ``execute_tool`` span, with the tool-call counter."""

    def __init__(self, registry: Registry, telemetry: AgentTelemetry) -> None:
        self.wrapped = registry
        self._t = telemetry

    def span(self, call: ToolCall) -> ToolScope:
        """The ``execute_tool`` span of one call, open until the scope ends (a context manager
        that fails it on an exception)."""
        return ToolScope(self._t, call, known=call.name in self.wrapped)

    def dispatch(self, call: ToolCall) -> ToolResult:
        with ToolScope(self._t, call, known=call.name in self.wrapped) as scope:
            result = self.wrapped.dispatch(call)
            scope.end(result)
        return result
