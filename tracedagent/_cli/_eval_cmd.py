"""``tracedagent eval run``: a dataset played against an agent, graded, shown as a table, written
as JSON and JUnit XML, compared with a baseline report, and a gate on the pass rate.
``eval grade``: recorded runs (an OTLP/JSON file, or a Jaeger search) graded without re-running
them. ``eval dataset``: recorded runs made a dataset, their tool results served again.

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
from .._core import _names as N
from .._core._budget import Stop
from ..evals import (Dataset, DatasetError, RecordedRunsError, Report, answered, grade_recorded, no_denied_calls,
                     no_failed_calls, no_repeated_calls)
from ..evals._dataset import import_ref, resolve_grader
from . import _options
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


# --- recorded runs: grade them, make a dataset of them -----------------------------------

def _recorded_options(f):  # type: ignore[no-untyped-def]
    """Where the recorded runs are (FILE, else a Jaeger search) and which of them."""
    for option in reversed([
        click.argument("file", required=False, type=click.Path(exists=True, dir_okay=False)),
        _options.jaeger_option, _options.service_option("service.name to search in Jaeger (without FILE)"),
        click.option("--trace", "trace_id", metavar="ID", callback=lambda c, p, v: v and _options.trace_id(v),
                     help="Only this trace."),
        click.option("--agent", metavar="NAME", help="Runs of this agent (gen_ai.agent.name), a sub-agent's too."),
        click.option("--stop-reason", metavar="REASON", type=click.Choice([s.value for s in Stop]),
                     help="Only runs that ended this way."),
        click.option("--conversation", metavar="ID", help="Only this conversation's runs (gen_ai.conversation.id)."),
        click.option("--since", "since_seconds", default="1h", show_default=True, metavar="SPAN",
                     callback=lambda c, p, v: _options.since(v), help="Jaeger: how far back to look."),
        click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True, help="Jaeger: traces at most."),
    ]):
        f = option(f)
    return f


def _where(file: str | None, jaeger_url: str, service: str | None, **found: object) -> dict[str, object]:
    if file is not None:
        return {"source": file, "trace_id": found["trace_id"], "agent": found["agent"],
                "stop_reason": found["stop_reason"], "conversation": found["conversation"]}
    return {"source": None, "jaeger": jaeger_url, "service": _options.service_name(service), **found}


DEFAULT_GRADERS = ("answered", "no_denied_calls", "no_failed_calls", "no_repeated_calls")
"""What ``eval grade`` grades by when no ``--grader`` is given."""


@eval_group.command("grade", short_help="Grade recorded runs (a trace file or Jaeger) without re-running them.")
@_recorded_options
@click.option("--grader", "graders", multiple=True, metavar="MODULE:ATTR",
              help="A grader, or a function making one (repeatable); default: " + ", ".join(DEFAULT_GRADERS) + ".")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report as JSON.")
@click.option("--gate", type=click.FloatRange(0, 1), default=None, help="Exit 1 when the pass rate is under this.")
def grade_cmd(file: str | None, jaeger_url: str, service: str | None, graders: tuple[str, ...], json_out: str | None,
              gate: float | None, **found: object) -> None:
    """Grade the runs recorded in FILE (OTLP/JSON: `tracedagent demo --out`, a collector's file
    exporter), or found in Jaeger without FILE, by each --grader. Each grade is also a new
    `evaluate {grader}` span in the recorded run's trace, wherever this process sends spans."""
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        checks = [resolve_grader(g) for g in graders] or [answered(), no_denied_calls(), no_failed_calls(),
                                                           no_repeated_calls()]
        report = grade_recorded(name=file or "jaeger", graders=checks, **_where(file, jaeger_url, service, **found))
    except (DatasetError, RecordedRunsError) as exc:
        raise click.BadParameter(str(exc)) from None
    console = Console()
    if not report.cases:
        console.print("No recorded runs matched.")
    else:
        console.print(report_table(report))
    if json_out:
        Path(json_out).write_text(report.to_json() + "\n")
    if gate is not None and report.cases and report.pass_rate < gate:
        console.print(f"[red]gate failed: pass rate {_percent(report.pass_rate)} is under {_percent(gate)}[/]")
        raise SystemExit(1)


@eval_group.command("dataset", short_help="Make a dataset of recorded runs (each a case, its tool results served).")
@_recorded_options
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False, writable=True),
              help="The dataset file to write (JSON, or YAML by its suffix).")
@click.option("--name", default=None, help="The dataset's name.")
def dataset_cmd(file: str | None, jaeger_url: str, service: str | None, out: str, name: str | None,
                **found: object) -> None:
    """Make each run recorded in FILE (or found in Jaeger without FILE) a case: its task, and its
    tool results served for the recorded arguments. `eval run OUT --agent ...` plays your agent on
    them; `Dataset.load(OUT).evaluate()` plays the recorded runs again. The runs need their content
    (recorded with content capture on)."""
    where = _where(file, jaeger_url, service, **found)
    try:
        dataset = Dataset.from_traces(where.pop("source"), name=name, **where)  # type: ignore[arg-type]
        dataset.save(out)
    except (DatasetError, RecordedRunsError) as exc:
        raise click.BadParameter(str(exc)) from None
    Console().print(f"{len(dataset.cases)} case(s) written to {text(out)}")
