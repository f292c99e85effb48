"""``tracedagent eval run``: a dataset played against an agent, graded, shown as a table, written
as JSON and JUnit XML, compared with a baseline report, and a gate on the pass rate.

The agent is ``module:attr`` (an ``Agent``, or a factory called with each ``Case``), imported
from the current directory as pytest would. Its runs are recorded in memory (the global
providers, for the experiment's length); grades go where its spans go. Exit status: 0, or 1 when
the pass rate is under ``--gate`` (or a case regressed against ``--baseline`` with
``--fail-on-regression``); 2 for bad input (a dataset, an agent, a report that cannot be read).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from .._agent._loop import Agent
from ..evals import Dataset, DatasetError, Report
from ..evals._dataset import import_ref
from ._render import text

__all__ = ["eval_group"]


@click.group("eval", short_help="Evaluate an agent on a dataset of cases (docs/evals.md).")
def eval_group() -> None:
    """Evaluate agents: play a dataset's cases, grade each run, report and gate."""


def _load(dataset: str, agent: str) -> tuple[Dataset, object]:
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # the user's package, as pytest's rootdir would be
    try:
        loaded = Dataset.load(dataset)
        target = import_ref(agent)
    except DatasetError as exc:
        raise click.BadParameter(str(exc)) from None
    if not isinstance(target, Agent) and not callable(target):
        raise click.BadParameter(f"--agent {agent} is a {type(target).__name__}, not an Agent or a factory of one")
    return loaded, target


def _percent(value: float) -> str:
    return f"{value:.0%}"


def report_table(report: Report, baseline: Report | None = None) -> Table:
    """One row per case: its pass rate, pass@k and pass^k, the graders that failed, and the
    change against the baseline."""
    k = report.repeat
    table = Table(title=text(f"{report.dataset or 'dataset'}: pass rate {_percent(report.pass_rate)} "
                             f"({len(report.cases)} cases x {k})"), title_justify="left")
    for column in ("case", "pass rate", f"pass@{k}", f"pass^{k}", "failed graders", *(("vs baseline",) if baseline else ())):
        table.add_column(column)
    before = {c.name: c.pass_rate for c in baseline.cases} if baseline else {}
    for case in report.cases:
        failed = sorted({g.grader for t in case.trials for g in t.grades if not g.passed}
                        | {"(run raised)" for t in case.trials if t.error})
        row = [text(case.name), _percent(case.pass_rate)]
        row += [_percent(case.pass_at(k)), _percent(case.pass_hat(k))] if len(case.trials) >= k else ["-", "-"]
        row.append(text(", ".join(failed) or "-", "red" if failed else ""))
        if baseline:
            old = before.get(case.name)
            row.append("new" if old is None else "[red]regressed[/]" if case.pass_rate < old
                       else "[green]improved[/]" if case.pass_rate > old else "=")
        table.add_row(*row, style="" if case.passed else "yellow")
    return table


@eval_group.command("run", short_help="Play a dataset against an agent, grade every run, report.")
@click.argument("dataset", type=click.Path(exists=True, dir_okay=False))
@click.option("--agent", "agent_ref", required=True, metavar="MODULE:ATTR",
              help="The Agent, or a function making one from a Case.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True, help="Trials per case.")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True, help="Runs at a time.")
@click.option("--max-cost", type=click.FloatRange(min=0), default=None, help="USD for the whole experiment.")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A report (--json) to compare with: the cases that regressed and improved.")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when a case regressed against --baseline.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report as JSON (a later --baseline).")
@click.option("--junit", type=click.Path(dir_okay=False, writable=True), default=None, help="Write JUnit XML.")
@click.option("--gate", type=click.FloatRange(0, 1), default=None, help="Exit 1 when the pass rate is under this.")
def run_cmd(dataset: str, agent_ref: str, repeat: int, concurrency: int, max_cost: float | None, baseline: str | None,
            fail_on_regression: bool, json_out: str | None, junit: str | None, gate: float | None) -> None:
    """Play every case of DATASET (JSON, or YAML with the `evals` extra) --repeat times against
    --agent, grade each run by the dataset's graders, and print a table. Each grade is also an
    `evaluate {grader}` span in the graded run's trace."""
    loaded, agent = _load(dataset, agent_ref)
    before = None
    if baseline is not None:
        try:
            before = Report.from_json(Path(baseline).read_text())
        except ValueError as exc:
            raise click.BadParameter(f"{baseline}: {exc}", param_hint="--baseline") from None
    report = loaded.evaluate(agent, repeat=repeat, concurrency=concurrency, max_cost=max_cost)  # type: ignore[arg-type]
    console = Console()
    console.print(report_table(report, before))
    if report.cost_exhausted:
        console.print(f"[yellow]--max-cost reached: {report.skipped} trial(s) not run[/]")
    if json_out:
        Path(json_out).write_text(report.to_json() + "\n")
    if junit:
        Path(junit).write_text(report.to_junit() + "\n")
    failed = False
    if before is not None:
        comparison = report.compare(before)
        console.print(f"vs baseline: pass rate {_percent(comparison.pass_rate[0])} -> {_percent(comparison.pass_rate[1])}; "
                      f"{len(comparison.regressed)} regressed, {len(comparison.improved)} improved")
        failed = fail_on_regression and bool(comparison.regressed)
    if gate is not None and report.pass_rate < gate:
        console.print(f"[red]gate failed: pass rate {_percent(report.pass_rate)} is under {_percent(gate)}[/]")
        failed = True
    if failed:
        raise SystemExit(1)
