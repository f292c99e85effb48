"""A picture of two reports compared: per case, the two pass rates side by side with the range
their trials allow (Wilson intervals, the bars a reader should look at before the bars' ends),
the significant moves marked; below, the distributions of steps, tokens, cost and latency.

matplotlib is the ``evals`` extra's: imported here, when a picture is asked for, never with the
package. It draws with its Agg canvas on a ``Figure`` of its own (no pyplot), so a notebook's or
an application's backend and open figures are left as they were.

Case and dataset names come from files and traces: drawn as plain text (``parse_math=False``: a
``$`` is not TeX to matplotlib) with control characters escaped, long ones cut.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._traces._printable import printable
from ._report import CaseChange, Comparison, Report
from ._stats import ALPHA, wilson_interval

__all__ = ["PlotUnavailable", "plot_comparison", "require_matplotlib", "MAX_CASES_DRAWN"]

MAX_CASES_DRAWN = 40
"""Cases drawn at most (the changed ones first); the title says how many more were left out."""

_BASELINE, _CURRENT = "#9e9e9e", "#1f77b4"
_REGRESSED, _IMPROVED = "#d62728", "#2ca02c"
_METRICS = (("steps", "steps"), ("tokens", "tokens"), ("cost", "cost (USD)"), ("latency", "latency (s)"))


class PlotUnavailable(ImportError):
    """matplotlib is not installed: ``pip install 'tracedagent[evals]'``."""


def require_matplotlib() -> None:
    """``PlotUnavailable`` now, rather than after an experiment's runs, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotUnavailable("the comparison picture needs matplotlib: pip install 'tracedagent[evals]'") from None


def _figure(width: float, height: float) -> Any:
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def plot_comparison(baseline: Report, current: Report, path: str | Path, *, alpha: float = ALPHA,
                    comparison: Comparison | None = None) -> Path:
    """Write a PNG comparing ``current`` with ``baseline`` to ``path`` (and return it).
    ``PlotUnavailable`` without matplotlib."""
    comparison = comparison or current.compare(baseline, alpha=alpha)
    names = _drawn(baseline, current, comparison)
    figure = _figure(11, 3.2 + 0.32 * max(len(names), 3))
    grid = figure.add_gridspec(2, len(_METRICS), height_ratios=[max(len(names), 3) * 0.32 + 0.6, 2.2])
    _pass_rates(figure.add_subplot(grid[0, :]), baseline, current, comparison, names, alpha)
    for column, (what, label) in enumerate(_METRICS):
        _distribution(figure.add_subplot(grid[1, column]), baseline, current, what, label)
    left_out = len({c.name for c in baseline.cases} | {c.name for c in current.cases}) - len(names)
    low, high = comparison.difference_interval
    figure.suptitle(f"{printable(current.dataset or 'dataset', limit=60)}: pass rate {comparison.pass_rate[0]:.0%} -> "
                    f"{comparison.pass_rate[1]:.0%} ({comparison.difference:+.0%}, interval {low:+.0%} to {high:+.0%}); "
                    f"{len(comparison.significant_regressions)} significant regression(s) at alpha {alpha:g}"
                    + (f"; {left_out} unchanged case(s) not drawn" if left_out > 0 else ""), fontsize=10, parse_math=False)
    out = Path(path)
    figure.savefig(out, format="png")
    return out


def _drawn(baseline: Report, current: Report, comparison: Comparison) -> list[str]:
    """The cases to draw, the changed first (regressed, improved), then the rest in report order."""
    order = [c.name for c in comparison.regressed] + [c.name for c in comparison.improved]
    rest = [c.name for c in current.cases] + [c.name for c in baseline.cases]
    return list(dict.fromkeys(order + rest))[:MAX_CASES_DRAWN]


def _pass_rates(axes: Any, baseline: Report, current: Report, comparison: Comparison, names: list[str],
                alpha: float) -> None:
    """Horizontal bars, two per case (baseline above, now below), each with its Wilson interval."""
    changes: dict[str, CaseChange] = {c.name: c for c in comparison.regressed + comparison.improved}
    regressed = {c.name for c in comparison.regressed}
    for offset, report, colour, label in ((-0.2, baseline, _BASELINE, "baseline"), (0.2, current, _CURRENT, "now")):
        cases = {c.name: c for c in report.cases}
        rows = [(i, cases[n]) for i, n in enumerate(names) if n in cases]
        rates = [case.pass_rate for _, case in rows]
        intervals = [wilson_interval(case.pass_rate, len(case.trials), alpha) for _, case in rows]
        errors = [[max(0.0, rate - low) for rate, (low, _) in zip(rates, intervals)],  # 1 - 0.99999... is not -0
                  [max(0.0, high - rate) for rate, (_, high) in zip(rates, intervals)]]
        axes.barh([i + offset for i, _ in rows], rates, height=0.38, color=colour, xerr=errors, capsize=2,
                  error_kw={"elinewidth": 0.8, "ecolor": "#333333"}, label=f"{label} (k={report.repeat})")
    axes.set_yticks(range(len(names)), [_case_label(n, changes.get(n)) for n in names], fontsize=8, parse_math=False)
    for tick, name in zip(axes.get_yticklabels(), names):
        change = changes.get(name)
        if change is not None and change.significant:
            tick.set_color(_REGRESSED if name in regressed else _IMPROVED)
            tick.set_fontweight("bold")
    axes.invert_yaxis()
    axes.set_xlim(0, 1.02)
    axes.set_xlabel(f"pass rate per case, with its {1 - alpha:.0%} Wilson interval")
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)


def _case_label(name: str, change: CaseChange | None) -> str:
    shown = printable(name, limit=40)
    if change is None:
        return shown
    if change.significant:
        return f"{shown}  (p={change.p_value:.2g})"
    more = f">= {change.trials_to_tell}" if change.trials_to_tell else "many"
    return f"{shown}  (p={change.p_value:.2g}; k {more} to tell)"


def _distribution(axes: Any, baseline: Report, current: Report, what: str, label: str) -> None:
    """Box plots of one measure over every trial of each report; "no data" when none was known."""
    values = [[v for t in report.trials if (v := getattr(t, what)) is not None] for report in (baseline, current)]
    axes.set_title(label, fontsize=9)
    axes.tick_params(labelsize=8)
    if not any(values):
        axes.text(0.5, 0.5, "not known", ha="center", va="center", transform=axes.transAxes, color="#777777")
        axes.set_xticks([])
        axes.set_yticks([])
        return
    shown = [(v, name, colour) for v, name, colour in zip(values, ("baseline", "now"), (_BASELINE, _CURRENT)) if v]
    boxes = axes.boxplot([v for v, _, _ in shown], patch_artist=True, widths=0.5)
    axes.set_xticks(range(1, len(shown) + 1), [name for _, name, _ in shown])
    for box, (_, _, colour) in zip(boxes["boxes"], shown):
        box.set_facecolor(colour)
