"""The demo's evals: ``tracedagent eval demo`` plays the dataset shipped in ``eval_demo/``
(the support scenarios of ``tracedagent demo``, graded) against ``demo_agent``, the demo's
scripted agents.

The dataset is an ordinary dataset file (package data, so a pip install has it): its graders
are named ``module:attr`` and its cases name the scenario they play (``metadata.scenario``).
``demo_agent`` is the ``--agent`` factory that makes a fresh scripted agent for a case, flat out
(no simulated latency). ``eval demo [OPTIONS]`` is ``eval run <that file> --agent
tracedagent._cli._eval_demo:demo_agent [OPTIONS]``: every ``eval run`` option works.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .._agent._loop import Agent
from ._demo import build_agent
from ._eval_cmd import run_cmd
from ._scenarios import SCENARIOS

__all__ = ["DATASET", "AGENT", "demo_agent", "demo_cmd"]

DATASET = Path(__file__).with_name("eval_demo") / "support.json"
"""The shipped dataset: the demo's support scenarios, each a case."""

AGENT = f"{__name__}:demo_agent"
"""``demo_agent`` as ``eval run --agent`` names it."""


def demo_agent(case: Any) -> Agent:
    """A fresh scripted agent for ``case``: the demo scenario its ``metadata["scenario"]`` names
    (else its name), run flat out. A case naming no demo scenario is a ``LookupError``, which
    ``evaluate`` makes that case's failed trial."""
    wanted = (getattr(case, "metadata", None) or {}).get("scenario") or getattr(case, "name", None)
    for scenario in SCENARIOS:
        if scenario.name == wanted:
            return build_agent(scenario, pace=0.0)
    raise LookupError(f"the demo has no scenario {wanted!r}: one of {[s.name for s in SCENARIOS]}")


@click.command("demo", short_help="Evaluate the demo's agents on the shipped dataset (no server needed).",
               context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--path", "show_path", is_flag=True, help="Print the shipped dataset's path and the agent, and exit.")
@click.pass_context
def demo_cmd(ctx: click.Context, show_path: bool) -> None:
    """Play the shipped demo dataset against the demo's scripted agents: `eval run DATASET
    --agent tracedagent._cli._eval_demo:demo_agent`, which this takes every option of
    (--repeat, --json, --junit, --gate, ...: `tracedagent eval run --help` lists them). Copy the
    file (--path) to write your own."""
    if show_path:
        click.echo(f"{DATASET}\n--agent {AGENT}")
        return
    with run_cmd.make_context("run", [str(DATASET), "--agent", AGENT, *ctx.args], parent=ctx.parent) as run_ctx:
        run_cmd.invoke(run_ctx)
