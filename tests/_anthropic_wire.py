"""The Anthropic Messages wire format, as a ``FakeServer`` speaks it to the real ``anthropic`` SDK."""

from __future__ import annotations

import json

import anthropic
import pytest

from _fake_servers import FakeServer, Reply, json_reply, sse_reply
from tracedagent.models import AnthropicModel

__all__ = ["FAKE_KEY", "MODEL", "RESPONSE_MODEL", "use_key", "model_for", "clients_for", "message", "text", "tool_use", "answer",
           "calls", "error", "event", "streamed", "stream_events"]

FAKE_KEY = "sk-ant-test-DO-NOT-LEAK-0c4e2a9d71"
"""A fake API key; the tests check it never reaches spans, output or logs."""
MODEL = "claude-test"
"""The model the adapter asks for."""
RESPONSE_MODEL = "claude-test-20250101"
"""The model the server says answered."""

# The error type the API names in the body for a status (the SDK picks its exception by the status).
_ERROR_TYPES = {401: "authentication_error", 429: "rate_limit_error", 529: "overloaded_error"}


def use_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key comes from the SDK's usual environment variable, as it would for a user."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def model_for(server: FakeServer, **options: object) -> AnthropicModel:
    return AnthropicModel(MODEL, base_url=server.url, **options)


def clients_for(server: FakeServer) -> tuple[anthropic.Anthropic, anthropic.AsyncAnthropic]:
    """Ready sync and async SDK clients for ``server``, as a user configures them."""
    return (anthropic.Anthropic(base_url=server.url, api_key=FAKE_KEY),
            anthropic.AsyncAnthropic(base_url=server.url, api_key=FAKE_KEY))


def message(*content: dict, stop: str = "end_turn", input_tokens: int = 20, output_tokens: int = 7,
            cache_read: int | None = None, cache_creation: int | None = None,
            model: str = RESPONSE_MODEL, id: str = "msg_answer") -> Reply:
    usage: dict = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_creation is not None:
        usage["cache_creation_input_tokens"] = cache_creation
    return json_reply({"id": id, "type": "message", "role": "assistant", "model": model,
                       "content": list(content), "stop_reason": stop, "stop_sequence": None, "usage": usage})


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def tool_use(id: str, name: str, input: object) -> dict:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def answer(value: str, *, input_tokens: int = 20, output_tokens: int = 7) -> Reply:
    """A message of one text block."""
    return message(text(value), input_tokens=input_tokens, output_tokens=output_tokens)


def calls(*tool_calls: tuple[str, str, object], input_tokens: int = 30, output_tokens: int = 12,
          id: str = "msg_calls") -> Reply:
    """A message of ``(id, name, input)`` tool uses, in that order."""
    return message(*(tool_use(*call) for call in tool_calls), stop="tool_use", input_tokens=input_tokens,
                   output_tokens=output_tokens, id=id)


def error(status: int, text: str, **headers: str) -> Reply:
    kind = _ERROR_TYPES.get(status, "api_error")
    return json_reply({"type": "error", "error": {"type": kind, "message": text}}, status, **headers)


# --- streamed replies (``stream=True``): the Messages API's server-sent events ----------------------

def event(kind: str, **fields: object) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


def streamed(*blocks: tuple[str, object], break_after: int | None = None, **options: object) -> Reply:
    """A message streamed block by block (see ``stream_events``)."""
    return sse_reply(*stream_events(*blocks, **options), break_after=break_after)  # type: ignore[arg-type]


def stream_events(*blocks: tuple[str, object], stop: str = "end_turn", input_tokens: int = 20,
                  output_tokens: int = 7, cache_read: int | None = None, model: str = RESPONSE_MODEL,
                  id: str = "msg_stream") -> list[bytes]:
    """A message's stream events, block by block. Each block is ``("text", [pieces])``,
    ``("tool_use", (id, name, [json fragments]))`` or ``("thinking", ([pieces], signature))``."""
    start_usage: dict = {"input_tokens": input_tokens, "output_tokens": 1}
    if cache_read is not None:
        start_usage["cache_read_input_tokens"] = cache_read
    events = [event("message_start", message={"id": id, "type": "message", "role": "assistant", "model": model,
                                               "content": [], "stop_reason": None, "stop_sequence": None,
                                               "usage": start_usage})]
    for index, (kind, value) in enumerate(blocks):
        if kind == "text":
            events.append(event("content_block_start", index=index, content_block={"type": "text", "text": ""}))
            events += [event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
                       for piece in value]  # type: ignore[union-attr]
        elif kind == "tool_use":
            call_id, name, fragments = value  # type: ignore[misc]
            events.append(event("content_block_start", index=index,
                                content_block={"type": "tool_use", "id": call_id, "name": name, "input": {}}))
            events += [event("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": f})
                       for f in fragments]
        else:
            pieces, signature = value  # type: ignore[misc]
            events.append(event("content_block_start", index=index,
                                content_block={"type": "thinking", "thinking": "", "signature": ""}))
            events += [event("content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": p})
                       for p in pieces]
            events.append(event("content_block_delta", index=index,
                                delta={"type": "signature_delta", "signature": signature}))
        events.append(event("content_block_stop", index=index))
    events.append(event("message_delta", delta={"stop_reason": stop, "stop_sequence": None},
                        usage={"output_tokens": output_tokens}))
    events.append(event("message_stop"))
    return events
