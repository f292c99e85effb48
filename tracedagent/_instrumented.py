"""The model and the registry as the loop sees them: each call inside its span scope.

The loop calls ``complete`` and ``dispatch`` exactly as it would on the bare objects; the
wrappers open a ``ChatScope`` or ``ToolScope`` around the call and end it with the call's
outcome, so that the loop's code says nothing about telemetry beyond the run and step spans.
"""

from __future__ import annotations

from typing import Any

from ._records import Completion, Message, Model, ToolCall, ToolResult, check_completion, error_type
from ._spans import ChatScope, ToolScope
from ._telemetry import AgentTelemetry
from ._tools import Registry

__all__ = ["InstrumentedModel", "InstrumentedRegistry"]


class InstrumentedModel:
    """A ``Model`` whose every call is a ``chat`` span, with the GenAI client metrics."""

    def __init__(self, model: Model, telemetry: AgentTelemetry) -> None:
        self.wrapped = model
        self._t = telemetry

    def complete(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                 max_output_tokens: int | None = None, temperature: float | None = None) -> Completion:
        scope = ChatScope(self._t, messages, max_output_tokens, temperature)
        try:
            completion = check_completion(self.wrapped.complete(
                messages, tools=tools, max_output_tokens=max_output_tokens, temperature=temperature))
        except BaseException as exc:  # the model failed, or an interrupt arrived during the call
            scope.fail(error_type(exc))
            raise
        scope.end(completion)
        return completion


class InstrumentedRegistry:
    """A ``Registry`` whose every dispatch is an ``execute_tool`` span, with the tool-call counter."""

    def __init__(self, registry: Registry, telemetry: AgentTelemetry) -> None:
        self.wrapped = registry
        self._t = telemetry

    def dispatch(self, call: ToolCall) -> ToolResult:
        scope = ToolScope(self._t, call, known=call.name in self.wrapped)
        try:
            result = self.wrapped.dispatch(call)
        except BaseException as exc:  # a custom registry that raises, or an interrupt
            scope.fail(error_type(exc))
            raise
        scope.end(result)
        return result
