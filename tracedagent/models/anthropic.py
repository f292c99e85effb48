"""``AnthropicModel``: the loop's ``Model`` over Anthropic's Messages API.

The Messages API differs from the loop's message shape in four ways this module bridges:
the system prompt is a request field, not a message; tool calls are ``tool_use`` content
blocks; tool results are ``tool_result`` blocks inside a *user* turn (consecutive results
share one turn); and ``max_tokens`` is required. Two more come from the current API
version (``2026-10-21``, which the SDK 2.x sends):

* Sampling parameters are gone: ``temperature`` is rejected with a 400 even at its default,
  and the SDK no longer has the argument. A temperature the loop passes is therefore not
  sent; the adapter logs that once.
* Recent models think by default, and a ``tool_use`` turn sent back must keep its
  ``thinking`` blocks, unmodified. They travel in the assistant message as
  ``provider_data["anthropic"]["thinking"]`` (see ``Completion.provider_data``) and are put
  back in front of the turn's other blocks when it is replayed.

``stream`` / ``astream`` send the same request with ``stream=True`` and translate the
stream's events into the loop's chunks; a streamed turn adds up to the ``Completion`` that
``complete`` returns, thinking blocks included.

Token counts follow the GenAI conventions: Anthropic's ``input_tokens`` excludes cached
tokens, while ``gen_ai.usage.input_tokens`` SHOULD include them, so ``Usage.input_tokens``
is ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``, with the two
cache counts also reported on their own.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

from .._core._output import OUTPUT_TOOL_NAME, OutputRequest, instruction
from .._core._records import Completion, Message, ToolCall, Usage
from .._core._request import ModelRequest
from .._core._streaming import ModelChunk, ToolCallDelta, TurnEnd
from ._common import MalformedResponseError, SdkModel, StreamReader, decode_arguments, missing_sdk

try:
    import anthropic
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(missing_sdk("anthropic", "anthropic")) from exc

__all__ = ["AnthropicModel", "DEFAULT_MAX_TOKENS"]

_log = logging.getLogger("tracedagent")

DEFAULT_MAX_TOKENS = 8192
"""``max_tokens`` when the loop sets no ``max_output_tokens``. The API requires the field; it
bounds thinking and answer together, and is a ceiling, not a spend. Every current Claude model
can emit this many tokens, and it stays below the ~21,333 above which the SDK refuses a
non-streaming request (it expects such calls to outlast its 10-minute timeout)."""
_RESERVED = frozenset({"model", "messages", "tools", "system", "max_tokens", "stream"})
_THINKING_TYPES = ("thinking", "redacted_thinking")


class AnthropicModel(SdkModel):
    """A ``Model`` backed by ``client.messages.create``, sync and async.

    ``model`` is a Claude model id. Pass a ready ``anthropic.Anthropic`` ``client`` (or a
    Bedrock/Vertex one) and/or an ``anthropic.AsyncAnthropic`` ``async_client``, or let the
    adapter build them from ``base_url``, ``api_key``, ``max_retries`` and ``timeout``
    (``None`` means the SDK's default: ``ANTHROPIC_API_KEY`` and its other credential sources,
    2 retries, 10 minutes); it builds the async one on the first ``acomplete``, one per event
    loop. With only a sync ``client``, ``acomplete`` runs ``complete`` in a worker thread; with
    only an ``async_client``, ``complete`` is refused. Clients the adapter builds have the SDK's
    own OpenTelemetry spans turned off, because the ``Agent``'s ``chat`` span already is the
    GenAI span of that call; pass your own clients to keep them.

    ``max_tokens`` is used when the loop passes no ``max_output_tokens``. Other keywords
    (``thinking={...}``, ``tool_choice={...}``, ``metadata={...}``, ``extra_body={...}``) are sent
    with every request.
    """

    provider_name = "anthropic"
    sdk_error = anthropic.AnthropicError
    output_modes = ("tool", "prompted")
    """A typed answer is asked for as a forced output tool (``OUTPUT_TOOL_NAME``) by default: its
    call comes back as the turn's text, never as a tool call; a server that answers with text
    instead loses nothing (the text is validated)."""

    def __init__(self, model: str, client: anthropic.Anthropic | None = None, *,
                 async_client: anthropic.AsyncAnthropic | None = None,
                 max_tokens: int = DEFAULT_MAX_TOKENS, base_url: str | None = None,
                 api_key: str | None = None, max_retries: int | None = None,
                 timeout: float | None = None, **request_options: Any) -> None:
        if reserved := _RESERVED & request_options.keys():
            raise TypeError(f"{', '.join(sorted(reserved))} cannot be request options: the loop sets "
                            "model, messages, system and tools, max_tokens has its own argument, "
                            "and stream() streams")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        self._connect(client, async_client, dict(base_url=base_url, api_key=api_key,
                                                 max_retries=max_retries, timeout=timeout))
        self.model_name = model
        self.max_tokens = max_tokens
        self.request_options = request_options
        self._warned_temperature = False

    def __repr__(self) -> str:  # never the client: it holds the credentials
        return f"AnthropicModel(model={self.model_name!r}, server={self.server_address}:{self.server_port})"

    def _new_client(self, *, asynchronous: bool,
                    options: dict[str, Any]) -> anthropic.Anthropic | anthropic.AsyncAnthropic:
        return (anthropic.AsyncAnthropic if asynchronous else anthropic.Anthropic)(open_telemetry=False, **options)

    def _create(self, client: Any) -> Any:
        return client.messages.create

    def _request(self, asked: ModelRequest) -> dict[str, Any]:
        system, wire = _to_wire(asked.messages)
        request: dict[str, Any] = {**self.request_options, "model": self.model_name, "messages": wire,
                                   "max_tokens": asked.settings.max_output_tokens or self.max_tokens}
        if system:
            request["system"] = system
        if asked.tools:
            request["tools"] = [{"name": t["name"], "description": t.get("description", ""),
                                 "input_schema": t["parameters"]} for t in asked.tools]
        if asked.output is not None and asked.output.mode == "tool":
            self._output_tool(request, asked.output, bool(asked.tools))
        if asked.settings.temperature is not None and not self._warned_temperature:
            self._warned_temperature = True
            _log.warning("tracedagent: the Anthropic Messages API no longer accepts temperature; "
                         "AnthropicModel does not send it")
        return request

    def _output_tool(self, request: dict[str, Any], output: OutputRequest, tools: bool) -> None:
        """The typed answer as a forced tool call: the output tool, and a ``tool_choice`` that makes
        the model call a tool (the output tool alone, when the agent has no tools), unless the
        request options choose. A schema that is not an object (a tool's input must be one) is
        asked for by an instruction in the system prompt instead."""
        if output.schema.get("type") != "object":
            request["system"] = "\n\n".join(filter(None, (request.get("system"), instruction(output))))
            return
        request["tools"] = [*request.get("tools", ()), {
            "name": OUTPUT_TOOL_NAME, "description": f"Give the final answer, a {output.name}, as this tool's input.",
            "input_schema": output.schema}]
        if "tool_choice" not in self.request_options:
            request["tool_choice"] = {"type": "any"} if tools else {"type": "tool", "name": OUTPUT_TOOL_NAME}

    def _completion(self, response: Any) -> Completion:
        return _to_completion(response)

    def _noted(self, request: dict[str, Any], completion: Completion) -> Completion:
        """As every adapter notes it; then, when the output tool was offered, its call is the answer's text."""
        completion = super()._noted(request, completion)
        return _output_as_text(completion) if _offers_output_tool(request) else completion

    def _reader_for(self, request: dict[str, Any]) -> StreamReader:
        return _EventReader(output_tool=_offers_output_tool(request))

    def _tool_choice(self, request: dict[str, Any]) -> tuple[str, str | None] | None:
        """``{"type": "auto" | "any" | "none"}``, or ``{"type": "tool", "name"}``."""
        choice = request.get("tool_choice")
        if not isinstance(choice, dict) or not request.get("tools"):
            return None
        kind = {"auto": "auto", "any": "required", "none": "none", "tool": "function"}.get(choice.get("type"))
        if kind is None:
            return None
        return kind, (str(choice.get("name")) if kind == "function" else None)

    def _reader(self) -> StreamReader:
        return _EventReader()


_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


class _EventReader(StreamReader):
    """The Messages API's stream events: ``message_start`` (id, model, input usage), content
    blocks by index (text deltas; ``tool_use`` blocks named at their start, their input in
    ``input_json_delta`` fragments; thinking blocks kept whole for ``provider_data``), and
    ``message_delta`` (the stop reason, and usage counts so far, which replace earlier ones)."""

    def __init__(self, *, output_tool: bool = False) -> None:
        self.output_tool = output_tool
        """Whether the output tool was offered: its input's fragments are read as the turn's text."""
        self.output_index: int | None = None
        self.id: str | None = None
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.usage: dict[str, int | None] = dict.fromkeys(_USAGE_FIELDS)
        self.thinking: dict[int, dict[str, Any]] = {}

    def read(self, event: Any) -> list[ModelChunk]:
        kind = getattr(event, "type", None)
        if kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                return [delta.text] if delta.text else []
            if delta.type == "input_json_delta":
                if event.index == self.output_index:  # the typed answer, as text
                    return [delta.partial_json] if delta.partial_json else []
                return [ToolCallDelta(index=event.index, arguments=delta.partial_json or "")]
            block = self.thinking.get(event.index)
            if block is not None and delta.type == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.thinking
            elif block is not None and delta.type == "signature_delta":
                block["signature"] = delta.signature
            return []
        if kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                if self.output_tool and block.name == OUTPUT_TOOL_NAME:
                    self.output_index = event.index
                    return []
                return [ToolCallDelta(index=event.index, id=block.id, name=block.name)]
            if block.type == "text":
                return [block.text] if block.text else []
            if block.type in _THINKING_TYPES:
                self.thinking[event.index] = block.model_dump(mode="json", exclude_none=True)
            return []
        if kind == "message_start":
            message = event.message
            self.id, self.model = message.id, message.model
            self._count(message.usage)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self._count(event.usage)
        return []

    def _count(self, usage: Any) -> None:
        for name in _USAGE_FIELDS:
            value = getattr(usage, name, None)
            if value is not None:
                self.usage[name] = value

    def end(self) -> ModelChunk:
        thinking = [block for _, block in sorted(self.thinking.items())]
        return TurnEnd(usage=_usage(_Counts(**self.usage)), model=self.model, finish_reason=self.stop_reason,
                       response_id=self.id, provider_data={"anthropic": {"thinking": thinking}} if thinking else None)


class _Counts:
    """A streamed message's usage counts, read by ``_usage`` as it reads a response's."""

    def __init__(self, **counts: int | None) -> None:
        self.__dict__.update(counts)


def _to_wire(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """The loop's messages as ``(system, messages)``. Every system message goes into
    ``system``; a turn continuing the same role (tool results, then a user's text) merges
    into the previous one, as the API wants one turn per role change."""
    system: list[str] = []
    wire: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})

    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if role == "system":
            system.append(content)
        elif role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": content}])
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            provider_data = message.get("provider_data") or {}
            blocks = [dict(b) for b in provider_data.get("anthropic", {}).get("thinking", ())]
            if content:
                blocks.append({"type": "text", "text": content})
            blocks.extend({"type": "tool_use", "id": c["id"], "name": c["name"],
                           "input": _as_input(c["arguments"])} for c in calls)
            add("assistant", blocks)
        else:
            add("user", [{"type": "text", "text": content}] if content else [])
    return "\n\n".join(s for s in system if s), wire


def _as_input(arguments: dict[str, Any] | str) -> dict[str, Any]:
    """``tool_use.input`` must be an object; a call whose arguments were not one is replayed
    with ``{}`` (its tool result already told the model what was wrong)."""
    decoded = decode_arguments(arguments)
    return decoded if isinstance(decoded, dict) else {}


def _offers_output_tool(request: dict[str, Any]) -> bool:
    return any(tool.get("name") == OUTPUT_TOOL_NAME for tool in request.get("tools", ()))


def _output_as_text(completion: Completion) -> Completion:
    """A turn that called the output tool: its input (JSON) is the turn's text, in place of any
    text around it, and the call is not a tool call; other calls stay (the turn is then theirs)."""
    answers = [call for call in completion.tool_calls if call.name == OUTPUT_TOOL_NAME]
    if not answers:
        return completion
    arguments = answers[-1].arguments
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    others = [call for call in completion.tool_calls if call.name != OUTPUT_TOOL_NAME]
    return dataclasses.replace(completion, text=text, tool_calls=others)


def _to_completion(response: Any) -> Completion:
    content = getattr(response, "content", None)
    if not isinstance(content, list) or getattr(response, "usage", None) is None:
        raise MalformedResponseError("the message response has no content list or no usage")
    text = "".join(block.text for block in content if getattr(block, "type", None) == "text")
    calls = [ToolCall(id=block.id, name=block.name, arguments=decode_arguments(block.input))
             for block in content if getattr(block, "type", None) == "tool_use"]
    thinking = [block.model_dump(mode="json", exclude_none=True) for block in content
                if getattr(block, "type", None) in _THINKING_TYPES]
    return Completion(text=text, tool_calls=calls or (), usage=_usage(response.usage), model=response.model,
                      finish_reason=response.stop_reason, response_id=response.id,
                      provider_data={"anthropic": {"thinking": thinking}} if thinking else None)


def _usage(usage: Any) -> Usage:
    cache_read = usage.cache_read_input_tokens or 0
    cache_creation = usage.cache_creation_input_tokens or 0
    return Usage(input_tokens=(usage.input_tokens or 0) + cache_read + cache_creation,
                 output_tokens=usage.output_tokens or 0,
                 cache_read_input_tokens=cache_read, cache_creation_input_tokens=cache_creation)
