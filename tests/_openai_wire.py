"""The OpenAI Chat Completions wire format, as a ``FakeServer`` speaks it to the real ``openai`` SDK."""

from __future__ import annotations

import json

import openai
import pytest

from _fake_servers import FakeServer, Reply, json_reply, sse_reply
from tracedagent.models import OpenAIChatModel

__all__ = ["FAKE_KEY", "MODEL", "RESPONSE_MODEL", "use_key", "model_for", "clients_for", "answer", "calls", "error",
           "chunk", "usage_chunk", "sse", "streamed_answer"]

FAKE_KEY = "sk-test-DO-NOT-LEAK-7f3a9c1e5b"
"""A fake API key; the tests check it never reaches spans, output or logs."""
MODEL = "gpt-test"
"""The model the adapter asks for."""
RESPONSE_MODEL = "gpt-test-2025-01-01"
"""The model the server says answered."""


def use_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key comes from the SDK's usual environment variable, as it would for a user."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def model_for(server: FakeServer, **options: object) -> OpenAIChatModel:
    return OpenAIChatModel(MODEL, base_url=f"{server.url}/v1", **options)


def clients_for(server: FakeServer) -> tuple[openai.OpenAI, openai.AsyncOpenAI]:
    """Ready sync and async SDK clients for ``server``, as a user configures them."""
    return (openai.OpenAI(base_url=f"{server.url}/v1", api_key=FAKE_KEY),
            openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=FAKE_KEY))


def answer(text: str = "The answer is 5.", *, finish: str = "stop", input_tokens: int = 20, output_tokens: int = 7,
           cached: int | None = None, model: str = RESPONSE_MODEL, id: str = "chatcmpl-answer") -> Reply:
    usage: dict = {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                   "total_tokens": input_tokens + output_tokens}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return json_reply({"id": id, "object": "chat.completion", "created": 1700000000, "model": model,
                       "choices": [{"index": 0, "finish_reason": finish,
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": usage})


def calls(*tool_calls: tuple[str, str, str | dict], input_tokens: int = 30, output_tokens: int = 12,
          id: str = "chatcmpl-calls") -> Reply:
    """A turn requesting ``(id, name, arguments)`` calls, in that order; string arguments are sent raw."""
    return json_reply({"id": id, "object": "chat.completion", "created": 1700000000, "model": RESPONSE_MODEL,
                       "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                           "role": "assistant", "content": None,
                           "tool_calls": [{"id": cid, "type": "function", "function": {
                               "name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                                          for cid, name, args in tool_calls]}}],
                       "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                                 "total_tokens": input_tokens + output_tokens}})


def error(status: int, message: str, **headers: str) -> Reply:
    return json_reply({"error": {"message": message, "type": "error", "code": None}}, status, **headers)


# --- streamed replies (``stream=True``): server-sent events of ``chat.completion.chunk`` -------------

def chunk(*, content: str | None = None, calls: list[dict] | None = None, finish: str | None = None,
          usage: dict | None = None, choices: bool = True, id: str = "chatcmpl-stream",
          model: str = RESPONSE_MODEL) -> dict:
    """One ``chat.completion.chunk``: a delta of content and/or tool-call fragments
    (``{"index", "id"?, "function": {"name"?, "arguments"?}}``), a finish reason, or (with
    ``choices=False``) the usage-only last chunk that ``include_usage`` asks for."""
    delta: dict = {}
    if content is not None:
        delta["content"] = content
    if calls is not None:
        delta["tool_calls"] = [{"type": "function", **c} if "id" in c else c for c in calls]
    body: dict = {"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
                  "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else [],
                  "usage": usage}
    return body


def usage_chunk(input_tokens: int = 20, output_tokens: int = 7) -> dict:
    return chunk(choices=False, usage={"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                                       "total_tokens": input_tokens + output_tokens})


def sse(*chunks: dict | float, done: bool = True, break_after: int | None = None) -> Reply:
    """The chunks (and pauses, in seconds) as a streamed reply, ended by ``data: [DONE]``."""
    events: list[bytes | float] = [c if isinstance(c, float) else b"data: " + json.dumps(c).encode() + b"\n\n"
                                   for c in chunks]
    if done:
        events.append(b"data: [DONE]\n\n")
    return sse_reply(*events, break_after=break_after)


def streamed_answer(*pieces: str, input_tokens: int = 20, output_tokens: int = 7, id: str = "chatcmpl-stream",
                    **options: object) -> Reply:
    """An answer streamed in these pieces of text, then its finish and usage chunks."""
    return sse(chunk(content="", id=id), *(chunk(content=p, id=id) for p in pieces), chunk(finish="stop", id=id),
               {**usage_chunk(input_tokens, output_tokens), "id": id}, **options)  # type: ignore[arg-type]
