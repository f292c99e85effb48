"""The real-model tier's parts: the server (``tracedagent local serve``: SmolLM2-135M on llama.cpp's
server), adapters pointed at it, and the tool and primer the runs use (the demo's own,
``tracedagent._cli._local_cmd``)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tracedagent import Agent
from tracedagent._cli import _local_model as local
from tracedagent._cli._local_cmd import PRIMER, get_weather, model

__all__ = ["REQUIRED", "ADAPTERS", "PRIMER", "get_weather", "model", "missing_or_fail", "agent"]

REQUIRED = "TRACEDAGENT_REQUIRE_LOCAL_MODEL"
"""Set by `make test` (and so CI): a missing server or model fails the tier instead of skipping it."""
ADAPTERS = ("openai", "anthropic")


def missing_or_fail() -> None:
    """Skip (by hand) or fail (under `make test`) when the server or the weights are not installed."""
    problem = local.missing()
    if problem:
        if os.environ.get(REQUIRED):
            pytest.fail(f"{problem} (or: scripts/local_model.sh install)")
        pytest.skip(problem)


def agent(adapter: str, server: local.LocalServer, tools: list[Any] | None = None, *, forced: bool = True,
          model_options: dict[str, Any] | None = None, **agent_options: Any) -> Agent:
    """An agent on the local model at temperature 0 with short answers; ``forced``: it calls a
    tool when it answers the user (``ToolOnFirstTurn``)."""
    chosen = model(adapter, server, tool_first=forced, **(model_options or {}))
    agent_options.setdefault("max_output_tokens", 48)
    return Agent(chosen, [get_weather] if tools is None else tools, temperature=0.0, **agent_options)
