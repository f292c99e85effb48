"""What a number of trials allows one to claim: the exact test and the intervals ``Report.compare``
uses, in the standard library's ``math`` alone.

A case played k times passes c of them: its pass rate is an estimate, and two estimates differ by
chance. ``fisher_exact`` says how likely a difference at least this large is when nothing changed
(the trials are the only randomness: no normal approximation, so it is right at k = 1 or 3, where
an approximation is not); ``wilson_interval`` is the range of pass rates the trials are consistent
with; ``newcombe_interval`` is that for a difference of two rates; ``trials_to_tell`` is how many
trials each side needs before a change of the observed size could be told from chance.
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["ALPHA", "MAX_TRIALS", "fisher_exact", "wilson_interval", "newcombe_interval", "trials_to_tell"]

ALPHA = 0.05
"""The chance of calling a change real when nothing changed that ``compare`` accepts by default."""

MAX_TRIALS = 1000
"""The most trials per case ``trials_to_tell`` looks for: past that a change is too small to
chase with repeats (``None``)."""

_SAME = 1 + 1e-7
"""Tables whose probability is within this factor of the observed one's count as "as extreme"
(floating point would otherwise split ties, as scipy's ``fisher_exact`` also guards against)."""


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_exact(passes_a: int, trials_a: int, passes_b: int, trials_b: int) -> float:
    """The two-sided p-value of Fisher's exact test on the 2x2 table (passed, failed) x (a, b):
    the chance, were both pass rates the same, of a split of the passes at most as likely as the
    one observed. 1.0 when either side has no trials. ``0/5`` vs ``5/5`` gives 2/252 = 0.008."""
    if not (0 <= passes_a <= trials_a and 0 <= passes_b <= trials_b):
        raise ValueError(f"passes must be within the trials: {passes_a}/{trials_a}, {passes_b}/{trials_b}")
    if trials_a == 0 or trials_b == 0:
        return 1.0
    total, passes = trials_a + trials_b, passes_a + passes_b

    def log_p(x: int) -> float:  # hypergeometric: x of the passes fall on side a
        return _log_comb(passes, x) + _log_comb(total - passes, trials_a - x) - _log_comb(total, trials_a)

    observed = log_p(passes_a)
    low, high = max(0, trials_a - (total - passes)), min(trials_a, passes)
    p = sum(math.exp(log_p(x)) for x in range(low, high + 1) if log_p(x) <= observed + math.log(_SAME))
    return min(1.0, p)


def _z(alpha: float) -> float:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha ({alpha}) is in (0, 1)")
    return NormalDist().inv_cdf(1 - alpha / 2)


def wilson_interval(rate: float, trials: int, alpha: float = ALPHA) -> tuple[float, float]:
    """Wilson's score interval for a pass rate seen over ``trials`` (at confidence 1 - alpha):
    never outside [0, 1], and not empty at 0/n or n/n as the textbook interval is. (0, 1) with
    no trials."""
    if trials <= 0:
        return (0.0, 1.0)
    z = _z(alpha)
    scale = 1 + z * z / trials
    centre = (rate + z * z / (2 * trials)) / scale
    half = z / scale * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials))
    return (max(0.0, centre - half), min(1.0, centre + half))


def newcombe_interval(rate_a: float, trials_a: int, rate_b: float, trials_b: int,
                      alpha: float = ALPHA) -> tuple[float, float]:
    """An interval for ``rate_b - rate_a`` from the two Wilson intervals (Newcombe 1998, method 10):
    it holds its coverage at small counts and rates near 0 or 1, where a plain normal one does not."""
    low_a, high_a = wilson_interval(rate_a, trials_a, alpha)
    low_b, high_b = wilson_interval(rate_b, trials_b, alpha)
    difference = rate_b - rate_a
    return (max(-1.0, difference - math.hypot(rate_b - low_b, high_a - rate_a)),
            min(1.0, difference + math.hypot(high_b - rate_b, rate_a - low_a)))


def trials_to_tell(rate_a: float, rate_b: float, alpha: float = ALPHA) -> int | None:
    """The fewest trials per side at which these two pass rates, seen again (rounded to whole
    passes), would make ``fisher_exact`` fall under ``alpha``; ``None`` for equal rates or when
    it needs more than ``MAX_TRIALS``. Doubling, then bisection: the p-value shrinks with k but
    for the rounding, so the answer is the smallest found that way (within a trial or two)."""
    if round(rate_a, 9) == round(rate_b, 9):
        return None

    def tells(k: int) -> bool:
        return fisher_exact(round(rate_a * k), k, round(rate_b * k), k) < alpha

    high = 1
    while not tells(high):
        if high >= MAX_TRIALS:
            return None
        high = min(2 * high, MAX_TRIALS)
    low = high // 2  # does not tell (or 0)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if tells(middle) else (middle, high)
    return high
