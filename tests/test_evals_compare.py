"""`Report.compare`: what k trials per case allow one to claim. Fisher's exact test, the Wilson and
Newcombe intervals against published values, and comparisons of constructed reports: at k=1
nothing is significant, 0/10 against 10/10 is."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracedagent.evals import CaseResult, GradeResult, Report, TrialResult
from tracedagent.evals._stats import MAX_TRIALS, fisher_exact, newcombe_interval, trials_to_tell, wilson_interval


def report(**passes: tuple[int, int]) -> Report:
    """A report whose case ``name`` passed ``passed`` of ``n`` trials: ``report(a=(3, 5))``."""
    def trial(ok: bool) -> TrialResult:
        return TrialResult(trace_id=None, stop_reason="answered", grades=[GradeResult(grader="g", passed=ok)])
    cases = [CaseResult(name=name, task=name, trials=[trial(i < passed) for i in range(n)])
             for name, (passed, n) in passes.items()]
    return Report(cases=cases, graders=["g"], repeat=max(n for _, n in passes.values()))


# --- the statistics, against known values ----------------------------------------------------

def test_fisher_exact_matches_the_published_values():
    assert fisher_exact(0, 5, 5, 5) == pytest.approx(2 / math.comb(10, 5))  # the two extreme tables
    assert fisher_exact(3, 4, 1, 4) == pytest.approx(17 / 35)  # Fisher's tea-tasting lady, two-sided
    assert fisher_exact(7, 12, 2, 10) == pytest.approx(0.09907, abs=1e-5)  # R: fisher.test(matrix(c(7,5,2,8),2))
    assert fisher_exact(2, 4, 2, 4) == pytest.approx(1.0) and fisher_exact(0, 0, 3, 3) == 1.0
    with pytest.raises(ValueError):
        fisher_exact(4, 3, 0, 3)


@given(st.integers(0, 12), st.integers(0, 12), st.integers(1, 12), st.integers(1, 12))
def test_fisher_exact_is_a_probability_and_symmetric(a, b, n, m):
    a, b = min(a, n), min(b, m)
    p = fisher_exact(a, n, b, m)
    assert 0 < p <= 1
    assert p == pytest.approx(fisher_exact(b, m, a, n)) == pytest.approx(fisher_exact(n - a, n, m - b, m))


def test_wilson_and_newcombe_intervals():
    assert wilson_interval(0.0, 5) == (0.0, pytest.approx(0.4345, abs=1e-4))
    low, high = wilson_interval(0.7, 10)
    assert (low, high) == (pytest.approx(0.3968, abs=1e-4), pytest.approx(0.8922, abs=1e-4))
    assert wilson_interval(0.5, 0) == (0.0, 1.0)
    # Newcombe (1998), table II, example (a): 56/70 vs 48/80 -> difference 0.2, 95% CI 0.0524 to 0.3339
    assert newcombe_interval(48 / 80, 80, 56 / 70, 70) == (pytest.approx(0.0524, abs=1e-4), pytest.approx(0.3339, abs=1e-4))


def test_trials_to_tell_is_the_first_k_whose_test_is_significant():
    assert trials_to_tell(1.0, 0.0) == 4  # 0/4 vs 4/4: p = 2/70; 0/3 vs 3/3: p = 2/20
    assert fisher_exact(0, 4, 4, 4) < 0.05 <= fisher_exact(0, 3, 3, 3)
    k = trials_to_tell(0.9, 0.6)
    assert k is not None and fisher_exact(round(0.9 * k), k, round(0.6 * k), k) < 0.05
    assert fisher_exact(round(0.9 * (k - 1)), k - 1, round(0.6 * (k - 1)), k - 1) >= 0.05
    assert trials_to_tell(0.5, 0.5) is None
    assert trials_to_tell(0.5, 0.499) is None, f"a change this small needs more than {MAX_TRIALS} trials"


# --- comparisons -----------------------------------------------------------------------------

def test_at_k_1_no_change_is_significant_and_each_says_what_k_would_tell():
    diff = report(a=(0, 1), b=(1, 1), c=(0, 1)).compare(report(a=(1, 1), b=(0, 1), c=(1, 1)))
    assert [c.name for c in diff.regressed] == ["a", "c"] and [c.name for c in diff.improved] == ["b"]
    for change in diff.regressed + diff.improved:
        assert not change.significant and change.p_value == pytest.approx(1.0)
        assert change.trials == (1, 1) and change.trials_to_tell == 4
    assert diff.significant_regressions == []
    low, high = diff.difference_interval
    assert diff.difference == pytest.approx(-1 / 3) and low < diff.difference < high and low < 0 < high


def test_0_of_10_against_10_of_10_is_a_significant_regression():
    diff = report(a=(0, 10), b=(9, 10)).compare(report(a=(10, 10), b=(10, 10)))
    a, b = diff.regressed
    assert a.name == "a" and a.significant and a.passes == (10, 0) and a.p_value == pytest.approx(2 / math.comb(20, 10))
    assert a.intervals[0][0] > a.intervals[1][1], "the two Wilson intervals do not overlap"
    assert a.trials_to_tell == 4
    assert b.name == "b" and not b.significant and b.p_value == 1.0, "one failure in ten is no claim"
    assert diff.significant_regressions == [a]
    assert diff.difference_interval[1] < 0, "the overall drop (100% to 45%) is told from chance too"


def test_unequal_trials_and_a_case_without_trials():
    diff = report(a=(0, 3), b=(0, 0)).compare(report(a=(8, 8), b=(2, 2)))
    a, b = diff.regressed
    assert a.trials == (8, 3) and a.p_value == pytest.approx(1 / math.comb(11, 3)) and a.significant
    assert b.trials == (2, 0) and b.p_value == 1.0 and not b.significant, "a case that never ran claims nothing"


def test_compare_takes_its_alpha():
    before, after = report(a=(5, 5)), report(a=(1, 5))
    change = after.compare(before).regressed[0]  # p = 12/252 = 0.048
    assert change.significant and change.p_value == pytest.approx(fisher_exact(5, 5, 1, 5))
    strict = after.compare(before, alpha=0.01)
    assert strict.alpha == 0.01 and not strict.regressed[0].significant
    assert strict.regressed[0].trials_to_tell > change.trials_to_tell


def test_the_picture_draws_names_a_file_or_a_trace_chose_as_plain_text(tmp_path):
    from tracedagent.evals import plot_comparison
    hostile = {"$\\undefined{$": (0, 3), "\x1b[31mred\x1b[0m" + "x" * 500: (3, 3)}
    path = plot_comparison(report(**{k: (3, 3) for k in hostile}), report(**hostile), tmp_path / "cmp.png")
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and path.stat().st_size > 10_000
