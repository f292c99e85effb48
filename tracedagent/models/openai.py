"""``OpenAIChatModel``: the loop's ``Model`` over OpenAI's Chat Completions API.

Chat Completions is the API that OpenAI and most self-hosted servers share (vLLM, Ollama,
LM Studio, llama.cpp, OpenRouter, Azure OpenAI), so one adapter with a ``base_url`` reaches
all of them. It speaks through the official ``openai`` SDK, which keeps its own retries and
reads ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` from the environment as usual.

``complete`` sends through ``openai.OpenAI``, ``acomplete`` through ``openai.AsyncOpenAI``;
the request, the reading of the response and the scrubbing of errors are the same code
(``SdkModel``), so the two cannot drift apart. ``stream`` / ``astream`` send the same request
with ``stream=True`` and ``stream_options.include_usage``, and yield the chunks as they come
(``Agent.stream``); tool-call fragments add up to the calls ``complete`` would return.

Telemetry is not done here: the ``Agent`` wraps each call in a ``chat`` span and reads
``provider_name``, ``model_name``, ``server_address`` and ``server_port`` off this object.
Following the GenAI conventions, ``gen_ai.provider.name`` is ``openai`` for every server
this client talks to; ``server.address`` tells them apart.
"""

from __future__ import annotations

import copy
import re
import uuid
from typing import Any, Literal

from .._core._output import OutputRequest, instruction
from .._core._records import Completion, Message, ToolCall, Usage
from .._core._request import ModelRequest
from .._core._streaming import ModelChunk, ToolCallDelta, TurnEnd
from ._common import MalformedResponseError, SdkModel, StreamReader, decode_arguments, encode_arguments, missing_sdk

try:
    import openai
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(missing_sdk("openai", "openai")) from exc

__all__ = ["OpenAIChatModel", "OpenAIClients", "json_schema_format"]

MaxTokensField = Literal["max_completion_tokens", "max_tokens"]


class OpenAIClients(SdkModel):
    """What both OpenAI adapters share: the SDK's clients (``openai.OpenAI`` and ``openai.AsyncOpenAI``,
    or the ready ones given), the provider name, the refused request options, and the repr."""

    provider_name = "openai"
    sdk_error = openai.OpenAIError
    output_modes = ("native", "prompted")
    """A typed answer is asked for as a JSON schema (``response_format`` / ``text.format``) by default."""
    reserved: frozenset[str]
    """The request fields the loop sets itself, refused as request options."""

    def _setup(self, model: str, client: Any, async_client: Any, options: dict[str, Any],
               request_options: dict[str, Any]) -> None:
        if reserved := self.reserved & request_options.keys():
            raise TypeError(f"{', '.join(sorted(reserved))} cannot be request options: the loop sets "
                            "the model, the conversation and the tools, and stream() streams")
        self._connect(client, async_client, options)
        self.model_name = model
        self.request_options = request_options

    def __repr__(self) -> str:  # never the client: its repr is not ours to vouch for
        return f"{type(self).__name__}(model={self.model_name!r}, server={self.server_address}:{self.server_port})"

    def _new_client(self, *, asynchronous: bool, options: dict[str, Any]) -> openai.OpenAI | openai.AsyncOpenAI:
        return (openai.AsyncOpenAI if asynchronous else openai.OpenAI)(**options)

    def _settings(self, request: dict[str, Any], asked: ModelRequest, max_tokens_field: str) -> dict[str, Any]:
        """``request`` with the loop's settings that were set: the output limit in ``max_tokens_field``."""
        if asked.settings.max_output_tokens is not None:
            request[max_tokens_field] = asked.settings.max_output_tokens
        if asked.settings.temperature is not None:
            request["temperature"] = asked.settings.temperature
        return request

    def _tool_choice(self, request: dict[str, Any]) -> tuple[str, str | None] | None:
        """``"auto"``/``"none"``/``"required"``, or a named function: ``{"type": "function", "function":
        {"name"}}`` on Chat Completions, ``{"type": "function", "name"}`` on the Responses API."""
        choice = request.get("tool_choice")
        if choice is None or not request.get("tools"):
            return None
        if isinstance(choice, str):
            return (choice, None) if choice in ("auto", "none", "required") else None
        if not isinstance(choice, dict) or choice.get("type") != "function":
            return None
        named = choice.get("function", choice)
        return ("function", str(named.get("name"))) if isinstance(named, dict) else None


def json_schema_format(output: OutputRequest) -> dict[str, Any] | None:
    """OpenAI's ``json_schema`` format of a typed answer (``name``, ``schema``, ``strict``), or
    ``None`` when its schema is not an object (the API takes only objects: the adapter then
    instructs the model instead). ``strict`` where the schema allows it (every object's
    properties all required: each then gets ``additionalProperties: false``); else the schema is
    sent as guidance, and the answer is validated all the same."""
    if output.schema.get("type") != "object":
        return None
    schema = copy.deepcopy(output.schema)
    strict = _strict(schema)
    return {"name": re.sub(r"[^A-Za-z0-9_-]", "_", output.name)[:64] or "answer",
            "schema": schema if strict else output.schema, "strict": strict}


def _strict(schema: Any) -> bool:
    """Whether ``schema`` can be strict, closing its objects on the way (it is a copy)."""
    if isinstance(schema, list):
        return all([_strict(item) for item in schema])
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object":
        properties = schema.get("properties")
        if not isinstance(properties, dict) or set(schema.get("required", ())) != set(properties) \
                or schema.get("additionalProperties") not in (None, False):
            return False
        schema["additionalProperties"] = False
    return all([_strict(value) for key, value in schema.items() if isinstance(value, (dict, list))])


class OpenAIChatModel(OpenAIClients):
    """A ``Model`` backed by ``client.chat.completions.create``, sync and async.

    ``model`` is the model name the server knows (``gpt-4.1-mini``, ``llama3.2``...).
    Pass a ready ``openai.OpenAI`` (or ``AzureOpenAI``) ``client`` and/or an ``openai.AsyncOpenAI``
    (or ``AsyncAzureOpenAI``) ``async_client``, or let the adapter build them from ``base_url``,
    ``api_key``, ``max_retries`` and ``timeout`` (each ``None`` means the SDK's default:
    environment variables, 2 retries, 10 minutes); it builds the async one on the first
    ``acomplete``, one per event loop. With only a sync ``client``, ``acomplete`` runs
    ``complete`` in a worker thread; with only an ``async_client``, ``complete`` is refused.

    ``max_tokens_field`` names the request field that carries the loop's
    ``max_output_tokens``: OpenAI's current ``max_completion_tokens`` (its reasoning models
    refuse the older name), or ``max_tokens`` for servers that know only that one (Ollama).

    Any other keyword (``seed=7``, ``reasoning_effort="low"``, ``tool_choice="required"``,
    ``extra_body={...}``) is sent with every request; the loop's own per-call values win.
    """

    reserved = frozenset({"model", "messages", "tools", "stream"})

    def __init__(self, model: str, client: openai.OpenAI | None = None, *,
                 async_client: openai.AsyncOpenAI | None = None,
                 base_url: str | None = None, api_key: str | None = None,
                 max_retries: int | None = None, timeout: float | None = None,
                 max_tokens_field: MaxTokensField = "max_completion_tokens",
                 **request_options: Any) -> None:
        if max_tokens_field not in ("max_completion_tokens", "max_tokens"):
            raise ValueError(f"max_tokens_field must be 'max_completion_tokens' or 'max_tokens', "
                             f"got {max_tokens_field!r}")
        self._setup(model, client, async_client, dict(base_url=base_url, api_key=api_key, max_retries=max_retries,
                                                      timeout=timeout), request_options)
        self.max_tokens_field = max_tokens_field

    def _create(self, client: Any) -> Any:
        return client.chat.completions.create

    def _request(self, asked: ModelRequest) -> dict[str, Any]:
        request: dict[str, Any] = {**self.request_options, "model": self.model_name,
                                   "messages": [_to_wire(m) for m in asked.messages]}
        if asked.tools:
            request["tools"] = [_tool_to_wire(t) for t in asked.tools]
        if asked.output is not None and asked.output.mode == "native":
            if (fmt := json_schema_format(asked.output)) is not None:
                request["response_format"] = {"type": "json_schema", "json_schema": fmt}
            else:  # not an object: the schema in a system message
                request["messages"] = [{"role": "system", "content": instruction(asked.output)}, *request["messages"]]
        return self._settings(request, asked, self.max_tokens_field)

    def _completion(self, response: Any) -> Completion:
        return _to_completion(response)

    def _stream_request(self) -> dict[str, Any]:
        """Usage comes in a last chunk of its own, and only when asked for (``include_usage``)."""
        options = self.request_options.get("stream_options") or {}
        return {"stream": True, "stream_options": {**options, "include_usage": True}}

    def _reader(self) -> StreamReader:
        return _ChunkReader()


class _ChunkReader(StreamReader):
    """``chat.completion.chunk`` events: the first choice's deltas (content, refusal, tool-call
    fragments by index) and, from the chunks that carry them, id, model, finish reason, usage."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.model: str | None = None
        self.finish_reason: str | None = None
        self.usage: Any = None

    def read(self, event: Any) -> list[ModelChunk]:
        self.id = event.id or self.id
        self.model = event.model or self.model
        if event.usage is not None:
            self.usage = event.usage
        if not event.choices:
            return []
        choice = event.choices[0]
        if choice.finish_reason:
            self.finish_reason = choice.finish_reason
        delta = choice.delta
        if delta is None:
            return []
        chunks: list[ModelChunk] = []
        if delta.content:
            chunks.append(delta.content)
        if delta.refusal:  # the non-streamed path's text when there is no content
            chunks.append(delta.refusal)
        for call in delta.tool_calls or ():
            function = call.function
            chunks.append(ToolCallDelta(index=call.index, id=call.id, name=function and function.name,
                                        arguments=(function and function.arguments) or ""))
        return chunks

    def end(self) -> ModelChunk:
        return TurnEnd(usage=_usage(self.usage), model=self.model, finish_reason=self.finish_reason,
                       response_id=self.id)


def _to_wire(message: Message) -> dict[str, Any]:
    """One loop message as a Chat Completions message (the shapes are nearly the same)."""
    role = message["role"]
    content = message.get("content") or ""
    if role == "tool":
        return {"role": "tool", "tool_call_id": message["tool_call_id"], "content": content}
    if role == "assistant" and message.get("tool_calls"):
        return {"role": "assistant", "content": content, "tool_calls": [
            {"id": call["id"], "type": "function",
             "function": {"name": call["name"], "arguments": encode_arguments(call["arguments"])}}
            for call in message["tool_calls"]]}
    return {"role": role, "content": content}


def _tool_to_wire(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": schema["name"],
                                             "description": schema.get("description", ""),
                                             "parameters": schema["parameters"]}}


def _to_completion(response: Any) -> Completion:
    """The first choice as a ``Completion``; token counts as the server reported them."""
    if not getattr(response, "choices", None) or getattr(response.choices[0], "message", None) is None:
        raise MalformedResponseError("the chat completion response has no choices[0].message")
    choice = response.choices[0]
    message = choice.message
    # Some compatible servers send no call ids; the loop needs one to match each tool result
    # to its call, so such a call gets a fresh one (the history then carries it consistently).
    calls = [ToolCall(id=call.id or f"call_{uuid.uuid4().hex[:24]}", name=call.function.name,
                      arguments=decode_arguments(call.function.arguments))
             for call in message.tool_calls or () if getattr(call, "function", None) is not None]
    return Completion(text=message.content or message.refusal or "", tool_calls=calls or (),
                      usage=_usage(response.usage), model=response.model,
                      finish_reason=choice.finish_reason, response_id=response.id)


def _usage(usage: Any) -> Usage:
    """``prompt_tokens`` already includes cached tokens, as ``gen_ai.usage.input_tokens`` wants."""
    if usage is None:  # some compatible servers omit it
        return Usage()
    details = usage.prompt_tokens_details
    output_details = getattr(usage, "completion_tokens_details", None)
    return Usage(input_tokens=usage.prompt_tokens or 0, output_tokens=usage.completion_tokens or 0,
                 cache_read_input_tokens=(details and details.cached_tokens) or 0,
                 cache_creation_input_tokens=(details and getattr(details, "cache_write_tokens", None)) or 0,
                 reasoning_output_tokens=(output_details and output_details.reasoning_tokens) or 0)
