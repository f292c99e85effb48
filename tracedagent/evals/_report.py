"""An experiment's ``Report``: each case's trials and grades, pass rates, pass^k and pass@k,
per grader scores, distributions, ``compare`` with a baseline, JSON and JUnit XML."""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence
from xml.etree import ElementTree as ET

from ._stats import ALPHA, fisher_exact, newcombe_interval, trials_to_tell, wilson_interval

__all__ = ["GradeResult", "TrialResult", "CaseResult", "Report", "CaseChange", "Comparison", "pass_at_k",
           "pass_hat_k", "distribution", "numbered"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` trials drawn from ``n`` (``c`` passing) passes:
    ``1 - C(n-c, k) / C(n, k)`` (the unbiased estimator of Chen et al. 2021)."""
    if k > n or k < 1:
        raise ValueError(f"k={k} needs 1 <= k <= n={n} trials")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: the chance that all of ``k`` trials drawn from ``n`` (``c`` passing) pass:
    ``C(c, k) / C(n, k)`` (tau-bench's reliability measure)."""
    if k > n or k < 1:
        raise ValueError(f"k={k} needs 1 <= k <= n={n} trials")
    return math.comb(c, k) / math.comb(n, k)


def numbered(names: Sequence[str]) -> list[str]:
    """``names`` each unique, a repeat numbered (``name #2``): a report's cases are compared by
    name, and two of one name would be one in a comparison (runs of a sub-agent called twice in
    one trace share ``{agent} {trace id}``)."""
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return unique


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    """``text`` as XML 1.0 can hold it: a control character or a lone surrogate (a judge's words,
    a grader's error, a case name from a file) would make the JUnit file one no CI can parse."""
    return _NOT_XML.sub("\ufffd", text)


def _change(name: str, old: CaseResult, new: CaseResult, alpha: float) -> CaseChange:
    """One case's move between two reports, with what its trials allow one to claim."""
    trials, passes = (len(old.trials), len(new.trials)), (old.passes, new.passes)
    p_value = fisher_exact(passes[0], trials[0], passes[1], trials[1])
    return CaseChange(name=name, before=old.pass_rate, after=new.pass_rate, trials=trials, passes=passes,
                      p_value=p_value, significant=p_value < alpha,
                      intervals=(wilson_interval(old.pass_rate, trials[0], alpha),
                                 wilson_interval(new.pass_rate, trials[1], alpha)),
                      trials_to_tell=trials_to_tell(old.pass_rate, new.pass_rate, alpha))


def distribution(values: Sequence[float | None]) -> dict[str, float] | None:
    """min, median, p90 (nearest rank) and max of the known values; ``None`` when none is known."""
    known = sorted(v for v in values if v is not None)
    if not known:
        return None
    p90 = known[max(0, math.ceil(0.9 * len(known)) - 1)]
    return {"min": known[0], "median": statistics.median(known), "p90": p90, "max": known[-1]}


@dataclass(frozen=True, kw_only=True)
class GradeResult:
    """One grader's grade of one trial."""

    grader: str
    """The grader's name."""
    passed: bool
    """At the grader's threshold."""
    score: float | None = None
    """In [0, 1], if the grade has one."""
    label: str | None = None
    """The grade's label."""
    explanation: str | None = None
    """Why (for a failed grade, what failed; a raising grader's error)."""
    error: str | None = None
    """The grader's exception type, when it raised (an LLM judge's named failure)."""
    input_tokens: int | None = None
    """The grade's own model calls' input tokens (an LLM judge's); ``None``: it made none."""
    output_tokens: int | None = None
    """The grade's own model calls' output tokens."""
    cost: float | None = None
    """The grade's own model calls' cost at the judge's prices; ``None``: unpriced or no calls."""


def _sum(values: Sequence[float | int | None]) -> Any:
    """The sum of the known values; ``None`` when none is known (unknown is not zero)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


@dataclass(frozen=True, kw_only=True)
class TrialResult:
    """One run of one case, and its grades."""

    trace_id: str | None
    """The run's trace (find it in Jaeger; its grades are in it)."""
    stop_reason: str | None
    """Why the run ended."""
    grades: list[GradeResult]
    """One per grader, in the dataset's order."""
    steps: int | None = None
    """Model calls."""
    tokens: int | None = None
    """Input and output tokens, sub-agents' included."""
    cost: float | None = None
    """Spend at the budget's prices (``None``: no prices)."""
    latency: float | None = None
    """Seconds the run took."""
    error: str | None = None
    """The exception's type when the agent (or its factory) raised instead of returning a run."""

    @property
    def passed(self) -> bool:
        """Every grader passed (and the run happened)."""
        return self.error is None and all(g.passed for g in self.grades)

    @property
    def judge_tokens(self) -> int | None:
        """The graders' own model tokens on this trial (an LLM judge's), apart from ``tokens``."""
        return _sum([(g.input_tokens or 0) + (g.output_tokens or 0) if g.input_tokens is not None
                     or g.output_tokens is not None else None for g in self.grades])

    @property
    def judge_cost(self) -> float | None:
        """The graders' own model cost on this trial, apart from ``cost`` (``None``: none priced)."""
        return _sum([g.cost for g in self.grades])


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    """One case over its trials."""

    name: str
    """The case's name (``case-N`` when it has none)."""
    task: str
    """What the agent was asked."""
    trials: list[TrialResult]
    """Each run of the case."""

    @property
    def passes(self) -> int:
        return sum(t.passed for t in self.trials)

    @property
    def pass_rate(self) -> float:
        """Share of trials that passed (0.0 with no trials)."""
        return self.passes / len(self.trials) if self.trials else 0.0

    def pass_at(self, k: int) -> float:
        """pass@k over this case's trials."""
        return pass_at_k(len(self.trials), self.passes, k)

    def pass_hat(self, k: int) -> float:
        """pass^k over this case's trials."""
        return pass_hat_k(len(self.trials), self.passes, k)

    @property
    def passed(self) -> bool:
        """Every trial passed."""
        return bool(self.trials) and self.passes == len(self.trials)


@dataclass(frozen=True, kw_only=True)
class CaseChange:
    """A case whose pass rate moved between two reports, and whether its trials can tell that
    move from chance (``_stats``: Fisher's exact test on the two pass counts)."""

    name: str
    """The case's name, as both reports name it."""
    before: float
    """Its pass rate in the baseline."""
    after: float
    """Its pass rate now."""
    trials: tuple[int, int]
    """The trials behind each rate (baseline, now): one trial each is one sample, not a trend."""
    passes: tuple[int, int] = (0, 0)
    """The trials that passed (baseline, now)."""
    p_value: float = 1.0
    """Fisher's exact test, two-sided: the chance of a move at least this large were the case as
    good as before. 1.0 when either side has no trials."""
    significant: bool = False
    """``p_value`` is under the comparison's ``alpha``: the move is a claim, not a sample."""
    intervals: tuple[tuple[float, float], tuple[float, float]] = ((0.0, 1.0), (0.0, 1.0))
    """Wilson intervals of the two pass rates (baseline, now) at confidence 1 - alpha."""
    trials_to_tell: int | None = None
    """The fewest trials per report at which a move of this size would be significant (the
    ``--repeat`` to re-run both with); ``None`` past ``MAX_TRIALS``."""


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """``report.compare(baseline)``."""

    regressed: list[CaseChange]
    """Cases passing less often than in the baseline (each says whether that is ``significant``)."""
    improved: list[CaseChange]
    """Cases passing more often."""
    unchanged: list[str]
    """Cases at the same pass rate."""
    added: list[str]
    """Cases only in this report."""
    removed: list[str]
    """Cases only in the baseline."""
    pass_rate: tuple[float, float]
    """The overall pass rates (baseline, now)."""
    alpha: float = ALPHA
    """The chance of calling a change significant when nothing changed that was accepted."""
    difference_interval: tuple[float, float] = (-1.0, 1.0)
    """Newcombe's interval for the change in the overall pass rate (now - baseline), each rate
    taken over all its report's trials as if they were independent (cases differ in difficulty,
    so it is a guide, not a test: the per-case tests are the claims)."""

    @property
    def difference(self) -> float:
        """The overall pass rate now minus the baseline's."""
        return self.pass_rate[1] - self.pass_rate[0]

    @property
    def significant_regressions(self) -> list[CaseChange]:
        """The regressions the trials can tell from chance: what ``eval run --baseline`` fails on."""
        return [change for change in self.regressed if change.significant]


@dataclass(frozen=True, kw_only=True)
class Report:
    """What an experiment found."""

    cases: list[CaseResult]
    """Per case, its trials and grades."""
    graders: list[str]
    """The graders' names, in order."""
    repeat: int
    """Trials per case asked for."""
    dataset: str | None = None
    """The dataset's name."""
    skipped: int = 0
    """Trials not run because the experiment's spend reached ``max_cost``."""
    cost_exhausted: bool = False
    """Whether ``max_cost`` stopped the experiment early."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Free-form (the agent's name, a version) kept in the JSON."""

    @property
    def trials(self) -> list[TrialResult]:
        return [t for c in self.cases for t in c.trials]

    @property
    def pass_rate(self) -> float:
        """The mean of the cases' pass rates (each case weighs the same however many trials ran)."""
        return statistics.fmean(c.pass_rate for c in self.cases) if self.cases else 0.0

    def pass_at(self, k: int | None = None) -> float | None:
        """The mean pass@k over the cases with at least k trials (default k: ``repeat``); ``None``
        when none has (``max_cost`` skipped trials: k of fewer trials is not defined)."""
        rates = [c.pass_at(k or self.repeat) for c in self.cases if len(c.trials) >= (k or self.repeat)]
        return statistics.fmean(rates) if rates else None

    def pass_hat(self, k: int | None = None) -> float | None:
        """The mean pass^k over the cases with at least k trials (default k: ``repeat``); ``None`` when none has."""
        rates = [c.pass_hat(k or self.repeat) for c in self.cases if len(c.trials) >= (k or self.repeat)]
        return statistics.fmean(rates) if rates else None

    @property
    def judge_tokens(self) -> int | None:
        """Tokens the graders' own model calls used (LLM judges), over every trial; never in
        ``distributions()['tokens']``, which are the graded runs'. ``None``: no judge called a model."""
        return _sum([t.judge_tokens for t in self.trials])

    @property
    def judge_cost(self) -> float | None:
        """What the graders' own model calls cost (at the judges' prices), over every trial;
        never in the runs' cost. ``None``: no judge call was priced."""
        return _sum([t.judge_cost for t in self.trials])

    def grader_scores(self) -> dict[str, dict[str, float | None]]:
        """Per grader: its pass rate and mean score over every trial."""
        out: dict[str, dict[str, float | None]] = {}
        for name in self.graders:
            grades = [g for t in self.trials for g in t.grades if g.grader == name]
            scores = [g.score for g in grades if g.score is not None]
            out[name] = {"pass_rate": sum(g.passed for g in grades) / len(grades) if grades else None,
                         "mean_score": statistics.fmean(scores) if scores else None}
        return out

    def distributions(self) -> dict[str, dict[str, float] | None]:
        """steps, tokens, cost and latency over every trial: min, median, p90, max."""
        trials = self.trials
        return {what: distribution([getattr(t, what) for t in trials]) for what in ("steps", "tokens", "cost", "latency")}

    def compare(self, baseline: Report, *, alpha: float = ALPHA) -> Comparison:
        """Which cases (by name) regressed and improved against ``baseline``, and which of those
        moves the trials can tell from chance at ``alpha`` (``CaseChange.significant``)."""
        before = {c.name: c for c in baseline.cases}
        now = {c.name: c for c in self.cases}
        regressed, improved, unchanged = [], [], []
        for name, case in now.items():
            if name not in before:
                continue
            change = _change(name, before[name], case, alpha)
            if change.after < change.before:
                regressed.append(change)
            elif change.after > change.before:
                improved.append(change)
            else:
                unchanged.append(name)
        return Comparison(regressed=regressed, improved=improved, unchanged=unchanged,
                          added=[n for n in now if n not in before], removed=[n for n in before if n not in now],
                          pass_rate=(baseline.pass_rate, self.pass_rate), alpha=alpha,
                          difference_interval=newcombe_interval(baseline.pass_rate, len(baseline.trials),
                                                                self.pass_rate, len(self.trials), alpha))

    # --- out -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "repeat": self.repeat, "graders": self.graders,
                "pass_rate": self.pass_rate, "pass_at_k": self.pass_at(), "pass_hat_k": self.pass_hat(),
                "skipped": self.skipped, "cost_exhausted": self.cost_exhausted, "metadata": self.metadata,
                "grader_scores": self.grader_scores(), "distributions": self.distributions(),
                "judge_tokens": self.judge_tokens, "judge_cost": self.judge_cost,
                "cases": [{"name": c.name, "task": c.task, "pass_rate": c.pass_rate,
                           "trials": [asdict(t) for t in c.trials]} for c in self.cases]}

    def to_json(self, indent: int | None = 2) -> str:
        """Readable UTF-8 JSON; all ASCII (``\\u`` escapes, read back the same) when a string holds
        a lone surrogate (a judge's words), which no UTF-8 file can."""
        data = self.to_dict()
        text = json.dumps(data, indent=indent, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(data, indent=indent)
        return text

    @classmethod
    def from_json(cls, text: str) -> Report:
        """A report ``to_json`` wrote (a baseline to ``compare`` with); ``ValueError`` if it is not one."""
        try:
            data = json.loads(text)
            cases = [CaseResult(name=c["name"], task=c["task"], trials=[
                TrialResult(**{**t, "grades": [GradeResult(**g) for g in t["grades"]]}) for t in c["trials"]])
                for c in data["cases"]]
            return cls(cases=cases, graders=list(data["graders"]), repeat=int(data["repeat"]),
                       dataset=data.get("dataset"), skipped=int(data.get("skipped", 0)),
                       cost_exhausted=bool(data.get("cost_exhausted")), metadata=dict(data.get("metadata") or {}))
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a tracedagent evals report: {exc!r}") from None

    def to_junit(self) -> str:
        """JUnit XML: one test case per case, failed when a trial failed (its failed grades listed)."""
        dataset = _xml(self.dataset or "tracedagent.evals")
        suite = ET.Element("testsuite", name=dataset, tests=str(len(self.cases)),
                           failures=str(sum(not c.passed for c in self.cases)), skipped=str(self.skipped))
        for case in self.cases:
            element = ET.SubElement(suite, "testcase", classname=dataset, name=_xml(case.name),
                                    time=f"{sum(t.latency or 0.0 for t in case.trials):.3f}")
            if not case.passed:
                lines = [f"trial {i} (trace {t.trace_id}): " + (f"the run raised {t.error}" if t.error else "; ".join(
                    f"{g.grader}: {g.explanation or g.label}" for g in t.grades if not g.passed))
                    for i, t in enumerate(case.trials) if not t.passed]
                failure = ET.SubElement(element, "failure", message=f"passed {case.passes} of {len(case.trials)} trials")
                failure.text = _xml("\n".join(lines))
        return ET.tostring(ET.ElementTree(suite).getroot(), encoding="unicode", xml_declaration=True)
