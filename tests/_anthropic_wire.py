"""The Anthropic Messages wire format, as a ``FakeServer`` speaks it to the real ``anthropic`` SDK."""

from __future__ import annotations

import anthropic
import pytest

from _fake_servers import FakeServer, Reply, json_reply
from tracedagent.models import AnthropicModel

__all__ = ["FAKE_KEY", "MODEL", "RESPONSE_MODEL", "use_key", "model_for", "clients_for", "message", "text", "tool_use", "answer",
           "calls", "error"]

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
