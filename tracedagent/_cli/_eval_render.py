"""An evals ``Report`` and a ``Comparison`` as a person reads them: the table of cases, the
changed cases with what their trials allow one to claim, the overall change with its interval.

The comparison's facts are fields (``CaseChange.significant``, ``p_value``, ``trials_to_tell``);
the sentences are made here, and only here. Case names come from a dataset file or a trace: drawn
through ``text()`` like anything else a model or a file chose.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from ..evals import CaseChange, Comparison, Report
from ._render import text

__all__ = ["report_table", "errors_lines", "moved_table", "comparison_line", "claim", "percent"]


def percent(value: float) -> str:
    return f"{value:.0%}"


def report_table(report: Report, baseline: Report | None = None) -> Table:
    """One row per case: its pass rate, pass@k and pass^k, the graders that failed, and the
    change against the baseline."""
    k = report.repeat
    table = Table(title=text(f"{report.dataset or 'dataset'}: pass rate {percent(report.pass_rate)} "
                             f"({len(report.cases)} cases x {k})"), title_justify="left")
    for column in ("case", "pass rate", f"pass@{k}", f"pass^{k}", "failed graders", *(("vs baseline",) if baseline else ())):
        table.add_column(column)
    before = {c.name: c.pass_rate for c in baseline.cases} if baseline else {}
    for case in report.cases:
        failed = sorted({g.grader for t in case.trials for g in t.grades if not g.passed}
                        | {"(run raised)" for t in case.trials if t.error})
        row = [text(case.name), percent(case.pass_rate)]
        row += [percent(case.pass_at(k)), percent(case.pass_hat(k))] if len(case.trials) >= k else ["-", "-"]
        row.append(text(", ".join(failed) or "-", "red" if failed else ""))
        if baseline:
            old = before.get(case.name)
            row.append(Text("new") if old is None else Text("regressed", "red") if case.pass_rate < old
                       else Text("improved", "green") if case.pass_rate > old else Text("="))
        table.add_row(*row, style="" if case.passed else "yellow")
    return table


def errors_lines(report: Report, limit: int = 5) -> list[Text]:
    """Why a run or a grader raised (an agent that cannot be built, a grader needing content the
    trace lacks): the table says only that it did, and an evaluation that is broken is not an
    agent that is bad. One line per distinct error, with the cases it hit; at most ``limit``."""
    seen: dict[tuple[str, str], list[str]] = {}
    for case in report.cases:
        for trial in case.trials:
            found = [("the run", trial.error)] if trial.error else []
            found += [(f"grader {g.grader}", g.explanation or g.error) for g in trial.grades if g.error]
            for who, error in found:
                names = seen.setdefault((who, str(error)), [])
                if case.name not in names:
                    names.append(case.name)
    lines = [text(f"{who} raised {error} ({f'{len(names)} cases, e.g. ' if len(names) > 1 else 'case '}{names[0]})",
                  "red", limit=None)
             for (who, error), names in list(seen.items())[:limit]]
    if len(seen) > limit:
        lines.append(text(f"... and {len(seen) - limit} more error(s): --json has each", "red", limit=None))
    return lines


def _trials(change: CaseChange) -> str:
    before, after = change.trials
    return f"k={before}" if before == after else f"k={before} vs {after}"


def claim(change: CaseChange, regressed: bool) -> str:
    """What the move allows one to say: ``regressed: 5/5 -> 0/5, p=0.008``, or why it is not
    a claim yet and the ``--repeat`` that could make it one."""
    counts = f"{change.passes[0]}/{change.trials[0]} -> {change.passes[1]}/{change.trials[1]}"
    if change.significant:
        return f"{'regressed' if regressed else 'improved'}: {counts}, p={change.p_value:.2g}"
    if not all(change.trials):
        return f"inconclusive: {counts}, a side with no trials"
    needed = (f"re-run both with --repeat >= {change.trials_to_tell} to tell" if change.trials_to_tell
              else "a change this small needs over 1000 trials per case to tell")
    return f"inconclusive at {_trials(change)}: {counts}, p={change.p_value:.2g}; {needed}"


def moved_table(comparison: Comparison) -> Table | None:
    """The changed cases, each with its claim; ``None`` when none moved."""
    if not (comparison.regressed or comparison.improved):
        return None
    table = Table(title="vs baseline: the cases that moved", title_justify="left")
    for column in ("case", "baseline", "now", "claim"):
        table.add_column(column)
    for changes, regressed in ((comparison.regressed, True), (comparison.improved, False)):
        for change in changes:
            style = ("red" if regressed else "green") if change.significant else "yellow"
            table.add_row(text(change.name), percent(change.before), percent(change.after),
                          Text(claim(change, regressed), style))
    return table


def comparison_line(comparison: Comparison) -> Text:
    """One line for the whole: the pass rates, the difference with its interval, the counts."""
    low, high = comparison.difference_interval
    significant = len(comparison.significant_regressions)
    return text(f"vs baseline: pass rate {percent(comparison.pass_rate[0])} -> {percent(comparison.pass_rate[1])} "
                f"({comparison.difference:+.0%}, {1 - comparison.alpha:.0%} interval {low:+.0%} to {high:+.0%}); "
                f"{len(comparison.regressed)} regressed ({significant} significant at alpha {comparison.alpha:g}), "
                f"{len(comparison.improved)} improved, {len(comparison.added)} new, {len(comparison.removed)} gone",
                limit=None)
