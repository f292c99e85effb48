"""``OpenAIResponsesModel``: the loop's ``Model`` over OpenAI's Responses API.

The Responses API is OpenAI's newer interface (the default of its Agents SDK, and where
reasoning models report their reasoning). Its conversation is a list of *items*, not chat
messages, which this module bridges:

* system messages become the request's ``instructions`` (several are joined with a blank line);
* a user text is a message item ``{"type": "message", "role": "user", "content"}``, an assistant's
  text one whose content is an ``output_text`` part, the shape the API answers with (llama.cpp's
  server refuses an assistant message without the ``type`` and the part);
* an assistant's tool calls are ``function_call`` items (``call_id``, ``name``, ``arguments``
  as JSON text), each tool result a ``function_call_output`` item with the same ``call_id``;
* tools are flat: ``{"type": "function", "name", "description", "parameters"}``.

A response's ``output`` is a list of items too: ``message`` items (whose ``output_text`` parts
are the turn's text), ``function_call`` items, and ``reasoning`` items. There is no finish
reason: the turn's is the response's ``status`` (``completed``), or, for an ``incomplete``
response, why (``incomplete_details.reason``: ``max_output_tokens``, ``content_filter``).

``stream`` / ``astream`` read the API's semantic events: ``response.output_text.delta``,
``response.output_item.added`` (a function call's id and name), ``response.function_call_arguments.delta``
and ``.done``, and ``response.completed`` / ``response.incomplete`` (id, model, usage).

The clients, errors, timeouts and retries are ``OpenAIChatModel``'s (``OpenAIClients``).
"""

from __future__ import annotations

from typing import Any

from .._core._output import instruction
from .._core._records import Completion, Message, ToolCall, Usage
from .._core._request import ModelRequest
from .._core._streaming import ModelChunk, ToolCallDelta, TurnEnd
from ._common import MalformedResponseError, StreamReader, decode_arguments, encode_arguments
from .openai import OpenAIClients, json_schema_format, openai

__all__ = ["OpenAIResponsesModel", "ResponseFailedError"]


class ResponseFailedError(RuntimeError):
    """The Responses API reported the response ``failed`` (or sent an ``error`` event mid-stream)
    with a 200 status: the call failed although no HTTP error said so. ``code`` is the API's
    error code, when it gave one."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class OpenAIResponsesModel(OpenAIClients):
    """A ``Model`` backed by ``client.responses.create``, sync and async, streamed or not.

    Built like ``OpenAIChatModel`` (``model``, a ready ``client`` and/or ``async_client``, or
    ``base_url``, ``api_key``, ``max_retries``, ``timeout``); the ``Agent``'s
    ``max_output_tokens`` goes in ``max_output_tokens``. Any other keyword
    (``reasoning={"effort": "low"}``, ``store=False``, ``tool_choice="required"``,
    ``include=[...]``, ``extra_body={...}``) is sent with every request.
    """

    reserved = frozenset({"model", "input", "instructions", "tools", "stream"})

    def __init__(self, model: str, client: openai.OpenAI | None = None, *,
                 async_client: openai.AsyncOpenAI | None = None,
                 base_url: str | None = None, api_key: str | None = None,
                 max_retries: int | None = None, timeout: float | None = None,
                 **request_options: Any) -> None:
        self._setup(model, client, async_client, dict(base_url=base_url, api_key=api_key, max_retries=max_retries,
                                                      timeout=timeout), request_options)

    def _create(self, client: Any) -> Any:
        return client.responses.create

    def _request(self, asked: ModelRequest) -> dict[str, Any]:
        instructions, items = _to_items(asked.messages)
        request: dict[str, Any] = {**self.request_options, "model": self.model_name, "input": items}
        if instructions:
            request["instructions"] = instructions
        if asked.tools:
            request["tools"] = [{"type": "function", "name": t["name"], "description": t.get("description", ""),
                                 "parameters": t["parameters"]} for t in asked.tools]
        if asked.output is not None and asked.output.mode == "native":
            if (fmt := json_schema_format(asked.output)) is not None:
                request["text"] = {**(request.get("text") or {}), "format": {"type": "json_schema", **fmt}}
            else:  # not an object: the schema in the instructions
                request["instructions"] = "\n\n".join(filter(None, (instructions, instruction(asked.output))))
        return self._settings(request, asked, "max_output_tokens")

    def _completion(self, response: Any) -> Completion:
        return _to_completion(response)

    def _reader(self) -> StreamReader:
        return _EventReader()


class _EventReader(StreamReader):
    """The Responses API's stream events. A tool call is named by the ``function_call`` item that
    ``response.output_item.added`` opens; its arguments come in ``.delta`` fragments for the same
    item (or only whole, in ``.done`` or ``output_item.done``, from servers that send no deltas).
    The final ``response.completed`` / ``response.incomplete`` carries the whole response: id,
    model, status and usage.

    A call's fragments are matched to it by the item's id (``item.id``, the events' ``item_id``):
    llama.cpp's server sends no ``output_index`` and no ``item.id``, only the ``call_id``, which
    its events use as ``item_id``. Calls are numbered in the order they open."""

    def __init__(self) -> None:
        self.indices: dict[Any, int] = {}
        """Each function call's index, by its item id."""
        self.streamed: dict[int, bool] = {}
        """Whether any of a call's arguments has come, by index."""
        self.response: Any = None

    def _index(self, key: Any) -> int:
        return self.indices.setdefault(key, len(self.indices))

    def read(self, event: Any) -> list[ModelChunk]:
        kind = getattr(event, "type", None)
        if kind in ("response.output_text.delta", "response.refusal.delta"):  # a refusal: the text when no other
            return [event.delta] if event.delta else []
        if kind == "response.function_call_arguments.delta":
            index = self._index(_key(event.item_id, event))
            self.streamed[index] = True
            return [ToolCallDelta(index=index, arguments=event.delta or "")]
        item = getattr(event, "item", None)
        if kind == "response.output_item.added" and getattr(item, "type", None) == "function_call":
            index = self._index(_key(getattr(item, "id", None) or item.call_id, event))
            self.streamed[index] = bool(item.arguments)
            return [ToolCallDelta(index=index, id=item.call_id, name=item.name, arguments=item.arguments or "")]
        if kind == "response.function_call_arguments.done" or (
                kind == "response.output_item.done" and getattr(item, "type", None) == "function_call"):
            key = _key(event.item_id if item is None else getattr(item, "id", None) or item.call_id, event)
            arguments = event.arguments if item is None else item.arguments
            index = self.indices.get(key)
            if index is not None and not self.streamed[index] and arguments:  # nothing streamed: the whole at once
                self.streamed[index] = True
                return [ToolCallDelta(index=index, arguments=arguments)]
            return []
        if kind in ("response.created", "response.completed", "response.incomplete"):
            self.response = event.response
        elif kind == "response.failed":
            _raise_failed(event.response)
        elif kind == "error":
            raise ResponseFailedError(getattr(event, "message", None) or "the response stream reported an error",
                                      getattr(event, "code", None))
        return []

    def end(self) -> ModelChunk:
        response = self.response
        if response is None:
            return TurnEnd()
        return TurnEnd(usage=_usage(getattr(response, "usage", None)), model=getattr(response, "model", None), finish_reason=_finish_reason(response),
                       response_id=response.id)


def _key(item_id: Any, event: Any) -> Any:
    """A function call's item id, or its ``output_index`` from a server that names no item."""
    return item_id if item_id else ("output", getattr(event, "output_index", None))


def _to_items(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """The loop's messages as ``(instructions, input items)``."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if role == "system":
            instructions.append(content)
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"], "output": content})
        else:
            if role == "assistant" and content:  # what the model said, as the API's output shape
                items.append({"type": "message", "role": role, "content": [{"type": "output_text", "text": content}]})
            elif role != "assistant":
                items.append({"type": "message", "role": role, "content": content})
            items.extend({"type": "function_call", "call_id": call["id"], "name": call["name"],
                          "arguments": encode_arguments(call["arguments"])}
                         for call in message.get("tool_calls") or ())
    return "\n\n".join(s for s in instructions if s), items


def _to_completion(response: Any) -> Completion:
    output = getattr(response, "output", None)
    if not isinstance(output, list) or not getattr(response, "id", None):
        raise MalformedResponseError("the response has no id or no output list")
    if getattr(response, "status", None) == "failed":
        _raise_failed(response)
    text, refusal, calls = [], [], []
    for item in output:
        kind = getattr(item, "type", None)
        if kind == "message":
            for part in item.content or ():
                if getattr(part, "type", None) == "output_text":
                    text.append(part.text)
                elif getattr(part, "type", None) == "refusal":
                    refusal.append(part.refusal)
        elif kind == "function_call":
            calls.append(ToolCall(id=item.call_id, name=item.name, arguments=decode_arguments(item.arguments)))
    return Completion(text="".join(text) or "".join(refusal), tool_calls=calls or (),
                      usage=_usage(getattr(response, "usage", None)), model=getattr(response, "model", None), finish_reason=_finish_reason(response), response_id=response.id)


def _finish_reason(response: Any) -> str | None:
    """``completed``; for an ``incomplete`` response, why (``max_output_tokens``, ``content_filter``)."""
    status = getattr(response, "status", None)
    reason = getattr(getattr(response, "incomplete_details", None), "reason", None)
    return reason if status == "incomplete" and reason else status


def _raise_failed(response: Any) -> None:
    error = getattr(response, "error", None)
    raise ResponseFailedError(getattr(error, "message", None) or "the response failed", getattr(error, "code", None))


def _usage(usage: Any) -> Usage:
    """``input_tokens`` already includes the cached ones, as ``gen_ai.usage.input_tokens`` wants;
    ``output_tokens`` includes the reasoning ones."""
    if usage is None:  # some compatible servers omit it (and the parts below)
        return Usage()
    cached = getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", None)
    reasoning = getattr(getattr(usage, "output_tokens_details", None), "reasoning_tokens", None)
    return Usage(input_tokens=getattr(usage, "input_tokens", None) or 0,
                 output_tokens=getattr(usage, "output_tokens", None) or 0,
                 cache_read_input_tokens=cached or 0, reasoning_output_tokens=reasoning or 0)
