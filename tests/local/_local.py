"""The real-model tier's parts: the server (``tracedagent local serve``, SmolLM2-135M on llama.cpp's
server), adapters pointed at it, and the tools and primer the runs use.

A 135M model does not decide to call a tool by itself, not even after a primer exchange (it
imitates the ``<tool_response>`` it saw instead). llama.cpp constrains generation to a tool call
when the request says ``tool_choice`` ``required`` (OpenAI) or ``any`` (Anthropic), so
``FirstTurnTool`` asks for that on a turn that answers the user and lets the model choose on a
turn that follows tool results: the tool call, its id, its arguments and the answer after the
results are all the real server's.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tracedagent import Agent
from tracedagent._cli import _local_model as local
from tracedagent.models import AnthropicModel, OpenAIChatModel

REQUIRED = "TRACEDAGENT_REQUIRE_LOCAL_MODEL"
"""Set by `make test` (and so CI): a missing server or model fails the tier instead of skipping it."""
ADAPTERS = ("openai", "anthropic")


def missing_or_fail() -> None:
    """Skip (by hand) or fail (under `make test`) when the server or the weights are not installed."""
    problem = local.missing()
    if problem:
        if os.environ.get(REQUIRED):
            pytest.fail(f"{problem} (scripts/local_model.sh install)")
        pytest.skip(problem)


def model(adapter: str, server: local.LocalServer, **options: Any) -> OpenAIChatModel | AnthropicModel:
    """An adapter on ``server``, as a user would point it at a local server: no retries (a
    failure shows at once), temperature 0 where the adapter cannot send it (Anthropic)."""
    if adapter == "openai":
        return OpenAIChatModel(options.pop("name", local.MODEL_NAME), base_url=server.openai_base_url,
                               api_key="local", max_retries=0, **options)
    extra = {"temperature": 0, **options.pop("extra_body", {})}  # the Messages API dropped temperature
    return AnthropicModel(options.pop("name", local.MODEL_NAME), base_url=server.url, api_key="local",
                          max_retries=0, extra_body=extra, **options)


def forcing(adapter: str) -> dict[str, Any]:
    """The request option that makes the server emit a tool call (constrained decoding)."""
    return {"tool_choice": "required"} if adapter == "openai" else {"tool_choice": {"type": "any"}}


class FirstTurnTool:
    """A model that calls a tool when it answers the user, and chooses freely after tool results:
    ``forced`` serves a call whose last message is the user's, ``free`` every other call. Every
    attribute the loop reads (provider, model name, server) is ``free``'s."""

    def __init__(self, adapter: str, server: local.LocalServer, **options: Any) -> None:
        self.forced = model(adapter, server, **{**options, **forcing(adapter)})
        self.free = model(adapter, server, **options)

    def _pick(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        first = args[0] if args else kwargs.get("messages", kwargs.get("request"))
        messages = getattr(first, "messages", first)  # a ModelRequest, or the messages themselves
        return self.forced if messages[-1]["role"] == "user" else self.free

    def complete(self, *args: Any, **kwargs: Any) -> Any:
        return self._pick(args, kwargs).complete(*args, **kwargs)

    async def acomplete(self, *args: Any, **kwargs: Any) -> Any:
        return await self._pick(args, kwargs).acomplete(*args, **kwargs)

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        return self._pick(args, kwargs).stream(*args, **kwargs)

    def astream(self, *args: Any, **kwargs: Any) -> Any:
        return self._pick(args, kwargs).astream(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.free, name)


WEATHER = {"paris": "sunny, 21 C", "tokyo": "rainy, 14 C", "oslo": "snowing, -3 C"}


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return WEATHER.get(city.strip().lower(), "cloudy, 10 C")


PRIMER = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_primer", "name": "get_weather",
                                                         "arguments": {"city": "Paris"}}]},
    {"role": "tool", "tool_call_id": "call_primer", "name": "get_weather", "content": "sunny, 21 C"},
    {"role": "assistant", "content": "It is sunny in Paris, 21 C."},
]
"""One exchange at the conversation's start: a question, the tool call that answers it, its
result and the answer; after it the model answers from a tool result rather than ignoring it."""


def agent(adapter: str, server: local.LocalServer, tools: list[Any] | None = None, *, forced: bool = True,
          model_options: dict[str, Any] | None = None, **agent_options: Any) -> Agent:
    """An agent on the local model: temperature 0, short answers."""
    options = model_options or {}
    chosen = FirstTurnTool(adapter, server, **options) if forced else model(adapter, server, **options)
    agent_options.setdefault("max_output_tokens", 48)
    return Agent(chosen, [get_weather] if tools is None else tools, temperature=0.0, **agent_options)
