"""``tracedagent eval run``: a dataset played against an agent under a progress bar, graded,
shown as a table, written as JSON and JUnit XML, compared with a baseline report (what each
case's trials allow one to claim, and a PNG), and gated. ``eval compare``: two reports compared
the same way. ``eval grade``: recorded runs (an OTLP/JSON file, or a Jaeger search) graded
without re-running them. ``eval dataset``: recorded runs made a dataset, their tool results served again.

The agent is ``module:attr`` (an ``Agent``, or a factory called with each ``Case``), imported
from the current directory as pytest would. Its runs are recorded in memory (the global
providers, for the experiment's length); with a collector named (``--otlp`` or
``OTEL_EXPORTER_OTLP_ENDPOINT``, as for ``tracedagent demo``) ``tracedagent.configure()`` also
exports the runs' spans, the grades and the metrics there. Exit status: ``EXIT_CODES``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable

import click
from opentelemetry.sdk.environment_variables import OTEL_SDK_DISABLED
from rich.console import Console

from .._agent._loop import Agent
from .._core._budget import Stop
from .._export._configure import Telemetry, configure
from .._export._endpoints import export_target
from .._testing._recorder import Recorder
from ..evals import (Comparison, Dataset, DatasetError, RecordedRunsError, Report, answered, grade_recorded,
                     no_denied_calls, no_failed_calls, no_repeated_calls)
from ..evals._dataset import import_ref, resolve_grader
from ..evals._plot import PlotUnavailable, plot_comparison, require_matplotlib
from ..evals._stats import ALPHA
from . import _options
from ._eval_render import comparison_line, errors_lines, moved_table, percent, report_table
from ._progress import counting
from ._render import output_width, text

__all__ = ["eval_group", "EXIT_GATE_FAILED", "EXIT_NOT_EXPORTED"]

EXIT_GATE_FAILED = 1
"""The pass rate is under --min-pass-rate, or a case regressed as --fail-on-regression forbids."""
EXIT_NOT_EXPORTED = 3
"""The gates passed, but not every span reached the collector named (a run's result stands; its telemetry is missing)."""
EXIT_CODES = ("Exit status: 0 every gate passed; 1 a gate failed (the pass rate is under --min-pass-rate, or a "
              "case regressed against the baseline: by default a significant regression); 2 bad input (a dataset, "
              "an agent or a report that cannot be read, --png without --baseline or matplotlib, or "
              "OTEL_SDK_DISABLED=true); 3 the gates passed but not "
              "every span reached the collector.")
COMPARE_EXIT_CODES = ("Exit status: 0 no case regressed as --fail-on-regression forbids; 1 one did; 2 a report "
                      "that cannot be read, or --png without matplotlib.")
GRADE_EXIT_CODES = ("Exit status: 0 the pass rate is at least --min-pass-rate (or none was given); 1 it is under; "
                    "2 a file, a grader or Jaeger that cannot be read.")


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


def _read_report(path: str, hint: str) -> Report:
    try:
        return Report.from_json(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint=hint) from None


def _comparison_options(f: Callable[..., object]) -> Callable[..., object]:
    """What a comparison with a baseline is judged by and drawn to: shared by ``run`` and ``compare``."""
    for option in reversed([
        click.option("--fail-on-regression", type=click.Choice(["significant", "any", "never"]), default="significant",
                     is_flag=False, flag_value="any", show_default=True,
                     help="Which regressions fail the command: those the trials tell from chance (Fisher's exact "
                          "test at --alpha), any drop in a case's pass rate (the bare flag), or none."),
        click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=ALPHA,
                     show_default=True, help="The chance of calling a change significant when nothing changed."),
        click.option("--png", type=click.Path(dir_okay=False, writable=True), default=None,
                     help="Draw the comparison: per-case pass rates with their intervals, and the distributions "
                          "(needs the evals extra: matplotlib)."),
    ]):
        f = option(f)
    return f


def _can_draw(png: str | None) -> None:
    """A picture asked for without matplotlib is a usage error before any run, not after them."""
    try:
        if png:
            require_matplotlib()
    except PlotUnavailable as exc:
        raise click.UsageError(str(exc)) from None


def _compared(console: Console, report: Report, baseline: Report, alpha: float, png: str | None) -> Comparison:
    """Print the comparison (each moved case's claim), and draw it when asked."""
    comparison = report.compare(baseline, alpha=alpha)
    if (moved := moved_table(comparison)) is not None:
        console.print(moved)
    console.print(comparison_line(comparison), soft_wrap=True)  # one line, never cut: a CI log is grepped
    if png:
        try:
            plot_comparison(baseline, report, png, alpha=alpha, comparison=comparison)
        except OSError as exc:
            raise click.ClickException(f"cannot write {png}: {exc.strerror or exc}") from None
        console.print(text(f"comparison drawn in {png}", limit=None))
    return comparison


def _gates_failed(console: Console, report: Report, comparison: Comparison | None, min_pass_rate: float | None,
                  fail_on_regression: str) -> bool:
    failed = False
    if comparison is not None and fail_on_regression != "never":
        regressions = comparison.regressed if fail_on_regression == "any" else comparison.significant_regressions
        if regressions:
            console.print(text(f"gate failed: {len(regressions)} case(s) regressed"
                               f"{' significantly' if fail_on_regression == 'significant' else ''}: "
                               + ", ".join(c.name for c in regressions), "red", limit=None))
            failed = True
    if min_pass_rate is not None and report.pass_rate < min_pass_rate:
        console.print(text(f"gate failed: pass rate {percent(report.pass_rate)} is under {percent(min_pass_rate)}",
                           "red", limit=None))
        failed = True
    return failed


def _telemetry(otlp_endpoint: str | None, protocol: str | None, service: str | None, no_export: bool) -> Telemetry | None:
    """``configure()``'s global pipeline when a collector is named (by --otlp or the variables it
    reads), as ``tracedagent demo`` decides; ``None`` (nothing leaves the process) otherwise."""
    try:
        sends = not no_export and export_target("traces", endpoint=otlp_endpoint, protocol=protocol).endpoint_named
        if protocol and not sends:
            raise click.UsageError("--protocol needs a collector: give --otlp URL")
        return configure(service_name=_options.service_name(service), endpoint=otlp_endpoint,
                         protocol=protocol) if sends else None
    except ValueError as exc:  # a variable's endpoint that is not a URL (--otlp was checked already)
        raise click.UsageError(str(exc)) from None


def _exported(console: Console, telemetry: Telemetry | None, spans: int) -> bool:
    """Flush the pipeline; whether every span the runs and grades made reached the collector."""
    if telemetry is None:
        return True
    telemetry.force_flush(5.0)
    telemetry.shutdown()
    if telemetry.endpoint is None:  # OTEL_TRACES_EXPORTER=none: metrics only, by choice
        console.print("spans not exported: the traces exporter is off (OTEL_TRACES_EXPORTER=none)")
        return True
    console.print(text(f"{telemetry.spans_exported} of {spans} spans exported to {telemetry.endpoint}", limit=None))
    return telemetry.spans_exported >= spans


def _write(console: Console, report: Report, baseline: Report | None, json_out: str | None, junit: str | None) -> None:
    """The table, and the files asked for."""
    console.print(report_table(report, baseline))
    for line in errors_lines(report):
        console.print(line)
    if report.cost_exhausted:
        console.print(f"[yellow]--max-cost reached: {report.skipped} trial(s) not run[/]")
    if report.judge_tokens is not None:  # an LLM judge's spend: the experiment's, never the runs'
        cost = "" if report.judge_cost is None else f", ${report.judge_cost:.4f}"
        console.print(f"judges: {report.judge_tokens} tokens{cost} (apart from the runs' figures)")
    if json_out:
        Path(json_out).write_text(report.to_json() + "\n")
    if junit:
        Path(junit).write_text(report.to_junit() + "\n")


@eval_group.command("run", short_help="Play a dataset against an agent, grade every run, report.", epilog=EXIT_CODES)
@click.argument("dataset", type=click.Path(exists=True, dir_okay=False))
@click.option("--agent", "agent_ref", required=True, metavar="MODULE:ATTR",
              help="The Agent, or a function making one from a Case.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Trials per case (k): with k=1 no change against a baseline can be told from chance.")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True, help="Runs at a time.")
@click.option("--max-cost", type=click.FloatRange(min=0), default=None, help="USD for the whole experiment.")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A report (--json) to compare with: the cases that regressed and improved, and what k allows one to claim.")
@_comparison_options
@click.option("--json", "json_out", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report as JSON (a later --baseline).")
@click.option("--junit", type=click.Path(dir_okay=False, writable=True), default=None, help="Write JUnit XML.")
@click.option("--min-pass-rate", "--gate", "min_pass_rate", type=click.FloatRange(0, 1), default=None,
              help="Exit 1 when the pass rate is under this.")
@_options.otlp_options
@_options.service_option("service.name of the exported spans")
@click.option("--no-export", is_flag=True, help="Send nothing to a collector, whatever the OTEL_* variables say.")
def run_cmd(dataset: str, agent_ref: str, repeat: int, concurrency: int, max_cost: float | None, baseline: str | None,
            fail_on_regression: str, alpha: float, png: str | None, json_out: str | None, junit: str | None,
            min_pass_rate: float | None, otlp_endpoint: str | None, protocol: str | None, service: str | None,
            no_export: bool) -> None:
    """Play every case of DATASET (JSON, or YAML with the `evals` extra) --repeat times against
    --agent, grade each run by the dataset's graders, and print a table. Each grade is also an
    `evaluate {grader}` span in the graded run's trace; with a collector named (--otlp, or
    OTEL_EXPORTER_OTLP_ENDPOINT) the runs, grades and metrics are exported there."""
    if png and baseline is None:
        raise click.UsageError("--png draws a comparison: give --baseline REPORT (or use `eval compare`)")
    if os.environ.get(OTEL_SDK_DISABLED, "").strip().lower() == "true":  # else every trial fails RunNotRecorded
        raise click.UsageError(f"{OTEL_SDK_DISABLED}=true turns tracing off, and each run is graded from its spans: "
                               "unset it (--no-export keeps everything in the process)")
    _can_draw(png)
    loaded, agent = _load(dataset, agent_ref)
    before = _read_report(baseline, "--baseline") if baseline is not None else None
    console = Console(highlight=False, width=output_width())
    telemetry = _telemetry(otlp_endpoint, protocol, service, no_export)
    started = time.perf_counter()
    try:
        with Recorder() as recorder, counting(len(loaded.cases) * repeat, "trials", Console(stderr=True)) as tick:
            report = loaded.evaluate(agent, repeat=repeat, concurrency=concurrency, max_cost=max_cost,  # type: ignore[arg-type]
                                     recorder=recorder, on_trial=lambda trial: tick())
    except BaseException:  # Ctrl-C: what was exported so far still goes out
        if telemetry is not None:
            telemetry.shutdown()
        raise
    seconds = time.perf_counter() - started
    _write(console, report, before, json_out, junit)
    comparison = _compared(console, report, before, alpha, png) if before is not None else None
    console.print(f"{len(report.trials)} trial(s) in {seconds:.1f} s")
    all_sent = _exported(console, telemetry, len(recorder.spans()))
    if _gates_failed(console, report, comparison, min_pass_rate, fail_on_regression):
        raise SystemExit(EXIT_GATE_FAILED)
    if not all_sent:
        raise SystemExit(EXIT_NOT_EXPORTED)


@eval_group.command("compare", short_help="Compare two reports: what moved, what k allows one to claim, a PNG.",
                    epilog=COMPARE_EXIT_CODES)
@click.argument("baseline", type=click.Path(exists=True, dir_okay=False))
@click.argument("current", type=click.Path(exists=True, dir_okay=False))
@_comparison_options
def compare_cmd(baseline: str, current: str, fail_on_regression: str, alpha: float, png: str | None) -> None:
    """Compare CURRENT with BASELINE (reports `eval run --json` wrote): the table of cases, each
    moved case's claim (Fisher's exact test on its pass counts, or the --repeat that could tell),
    the overall change with its interval, and with --png the picture."""
    _can_draw(png)
    before, report = _read_report(baseline, "BASELINE"), _read_report(current, "CURRENT")
    console = Console(highlight=False, width=output_width())
    console.print(report_table(report, before))
    comparison = _compared(console, report, before, alpha, png)
    if _gates_failed(console, report, comparison, None, fail_on_regression):
        raise SystemExit(EXIT_GATE_FAILED)


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


@eval_group.command("grade", short_help="Grade recorded runs (a trace file or Jaeger) without re-running them.",
                    epilog=GRADE_EXIT_CODES)
@_recorded_options
@click.option("--grader", "graders", multiple=True, metavar="MODULE:ATTR",
              help="A grader, or a function making one (repeatable); default: " + ", ".join(DEFAULT_GRADERS) + ".")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report as JSON.")
@click.option("--min-pass-rate", "--gate", "gate", type=click.FloatRange(0, 1), default=None,
              help="Exit 1 when the pass rate is under this.")
@_options.otlp_options
@click.option("--no-export", is_flag=True, help="Send nothing to a collector, whatever the OTEL_* variables say.")
def grade_cmd(file: str | None, jaeger_url: str, service: str | None, graders: tuple[str, ...], json_out: str | None,
              gate: float | None, otlp_endpoint: str | None, protocol: str | None, no_export: bool,
              **found: object) -> None:
    """Grade the runs recorded in FILE (OTLP/JSON: `tracedagent demo --out`, a collector's file
    exporter), or found in Jaeger without FILE, by each --grader. With a collector named (--otlp,
    or OTEL_EXPORTER_OTLP_ENDPOINT) each grade goes into its recorded run's trace as a new
    `evaluate {grader}` span, beside any earlier grading's, with the evaluation metrics: Jaeger
    shows it under the run. Without one nothing leaves the process."""
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    where = _where(file, jaeger_url, service, **found)
    telemetry = _telemetry(otlp_endpoint, protocol, None, no_export)  # the grader's own service.name
    try:
        checks = [resolve_grader(g) for g in graders] or [answered(), no_denied_calls(), no_failed_calls(),
                                                           no_repeated_calls()]
        report = grade_recorded(name=file or "jaeger", graders=checks,
                                **({} if telemetry is None else telemetry.providers), **where)
    except (DatasetError, RecordedRunsError) as exc:
        if telemetry is not None:
            telemetry.shutdown()
        raise click.BadParameter(str(exc)) from None
    console = Console(highlight=False, width=output_width())
    if not report.cases:
        console.print("No recorded runs matched.")
    else:
        console.print(report_table(report))
        for line in errors_lines(report):
            console.print(line)
    if json_out:
        Path(json_out).write_text(report.to_json() + "\n")
    all_sent = _exported(console, telemetry, sum(len(t.grades) for t in report.trials))
    if gate is not None and report.cases and report.pass_rate < gate:
        console.print(f"[red]gate failed: pass rate {percent(report.pass_rate)} is under {percent(gate)}[/]")
        raise SystemExit(EXIT_GATE_FAILED)
    if not all_sent:
        raise SystemExit(EXIT_NOT_EXPORTED)


@eval_group.command("dataset", short_help="Make a dataset of recorded runs (each a case, its tool results served).")
@_recorded_options
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False, writable=True),
              help="The dataset file to write (JSON, or YAML by its suffix).")
@click.option("--name", default=None, help="The dataset's name.")
@click.option("--skip-unplayable", is_flag=True,
              help="Leave out the runs that cannot be cases (no content, cancelled), each named, instead of stopping.")
def dataset_cmd(file: str | None, jaeger_url: str, service: str | None, out: str, name: str | None,
                skip_unplayable: bool, **found: object) -> None:
    """Make each run recorded in FILE (or found in Jaeger without FILE) a case: its task, and its
    tool results served for the recorded arguments. `eval run OUT --agent ...` plays your agent on
    them; `Dataset.load(OUT).evaluate()` plays the recorded runs again. The runs need their content
    (recorded with content capture on)."""
    where = _where(file, jaeger_url, service, **found)
    skipped: list[RecordedRunsError] | None = [] if skip_unplayable else None
    try:
        dataset = Dataset.from_traces(where.pop("source"), name=name, skipped=skipped, **where)  # type: ignore[arg-type]
        dataset.save(out)
    except (DatasetError, RecordedRunsError) as exc:
        raise click.BadParameter(str(exc)) from None
    console = Console(highlight=False, width=output_width())
    for error in skipped or ():
        console.print(text(f"skipped: {error}"))
    console.print(f"{len(dataset.cases)} case(s) written to {text(out)}")
