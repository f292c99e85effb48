"""Shared by the Temporal tests: the dev server's health, a client, span trees to compare."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from typing import Any

import pytest

from tracedagent._core import _names as N

TEMPORAL = os.environ.get(N.ENV_TEMPORAL_ADDRESS, N.DEFAULT_TEMPORAL_ADDRESS)
TEMPORAL_HEALTH = os.environ.get("TRACEDAGENT_TEST_TEMPORAL_HEALTH",
                                 "http://127.0.0.1:7243/api/v1/namespaces/default")
DROPPED = {N.TEMPORAL_WORKFLOW_ID, N.TEMPORAL_TASK_QUEUE, N.TEMPORAL_ATTEMPT, N.CHECKPOINT_ID}
"""Attributes only a run on Temporal has: where it ran; and a paused run's checkpoint id, which
every pause mints anew (two runs of one script pause with two ids)."""


def temporal_healthy() -> bool:
    try:
        with urllib.request.urlopen(TEMPORAL_HEALTH, timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def require_temporal() -> None:
    if not temporal_healthy():
        message = f"Temporal's dev server is not answering at {TEMPORAL_HEALTH}; start it with `make stack-up`"
        if os.environ.get("TRACEDAGENT_REQUIRE_STACK"):
            pytest.fail(message)
        pytest.skip(message)


def tree(spans: list[Any], root_name_prefix: str = "invoke_agent") -> list[tuple]:
    """The spans under the top run span, as (depth, name, attributes, status, events) in
    start order within their parent: what must be the same on Temporal as in ``arun``."""
    children: dict[int | None, list[Any]] = {}
    for span in spans:
        children.setdefault(span.parent.span_id if span.parent else None, []).append(span)
    tools = {s.context.span_id for s in spans if s.name.startswith("execute_tool")}
    # The top run: a sub-agent's run is under its caller's tool span (and may end first).
    root = next(s for s in spans if s.name.startswith(root_name_prefix)
                and (s.parent is None or s.parent.span_id not in tools))
    out: list[tuple] = []

    def walk(span: Any, depth: int) -> None:
        attributes = {k: (tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in span.attributes.items()
                      if k not in DROPPED}
        out.append((depth, span.name, attributes, span.status.status_code.name,
                    [(e.name, dict(e.attributes)) for e in span.events]))
        kids = sorted(children.get(span.context.span_id, []), key=lambda s: (s.name, s.attributes.get(
            N.STEP_INDEX, -1), s.attributes.get(N.GEN_AI_TOOL_CALL_ID, "")))
        for kid in kids:
            walk(kid, depth + 1)

    walk(root, 0)
    return out


def run_facts(run: Any) -> dict[str, Any]:
    """Everything a caller reads off a ``Run``."""
    return {"output": run.output, "stop": run.stop, "step_count": run.step_count, "messages": run.messages,
            "input_tokens": run.input_tokens, "output_tokens": run.output_tokens, "cost": run.cost,
            "requested": run.requested_tools(), "trajectory": run.trajectory(), "blocked": run.blocked_tools(),
            "not_dispatched": run.not_dispatched_tools(), "error": run.error and type(run.error).__name__,
            "steps": [(s.index, s.completion, s.tool_results) for s in run.steps]}
