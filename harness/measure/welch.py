"""Welch's t interval of a difference of two means, and of a ratio of two geometric means, as plain
functions on the standard library alone (checked against scipy.stats in tests/measure/test_welch.py).

A few seeds per side give wide intervals; saying so is the point. `difference` bounds
mean(a) - mean(b) with the Welch-Satterthwaite degrees of freedom (the two sides' spreads are
not assumed equal). `ratio` does the same on the logarithms and gives back exp of it: the ratio
of the geometric means of two samples of positive times, the scale on which "1.2x faster" is
read. `verdict` names where an interval lies against 1 (or 0) and a limit: it says "parity"
whenever the interval holds the point of no difference.
"""

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

LEVEL = 0.95
PARITY = "parity"


@dataclass(frozen=True)
class Interval:
    """`estimate` and its two-sided `level` interval [low, high]; `df` the Welch degrees of freedom
    (None where both samples are without spread, when the interval is the estimate itself)."""

    estimate: float
    low: float
    high: float
    level: float
    df: Optional[float]
    n: Tuple[int, int]  # (size of a, size of b)

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0 and x in [0, 1]."""
    if not 0.0 <= x <= 1.0:
        raise ValueError("x lies in [0, 1], got %r" % x)
    if x in (0.0, 1.0):
        return x
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` (> 0, not necessarily whole) degrees of freedom."""
    if df <= 0:
        raise ValueError("degrees of freedom are > 0, got %r" % df)
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p, by bisection to 1e-12."""
    if not 0.0 < p < 1.0:
        raise ValueError("p lies in (0, 1), got %r" % p)
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def difference(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Optional[Interval]:
    """Welch's `level` interval of mean(a) - mean(b); None unless each side has two values or more."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    if len(a) < 2 or len(b) < 2:
        return None
    if not 0 < level < 1:
        raise ValueError("level lies in (0, 1), got %r" % level)
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    qa = sum((v - ma) ** 2 for v in a) / (len(a) - 1) / len(a)
    qb = sum((v - mb) ** 2 for v in b) / (len(b) - 1) / len(b)
    se = math.sqrt(qa + qb)
    if se == 0:
        return Interval(ma - mb, ma - mb, ma - mb, level, None, (len(a), len(b)))
    df = (qa + qb) ** 2 / (qa * qa / (len(a) - 1) + qb * qb / (len(b) - 1))
    half = t_quantile(0.5 + level / 2.0, df) * se
    return Interval(ma - mb, ma - mb - half, ma - mb + half, level, df, (len(a), len(b)))


def ratio(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Optional[Interval]:
    """The ratio of the geometric means of a and b (positive values, e.g. seconds) with Welch's
    `level` interval, taken on their logarithms; None unless each side has two values or more."""
    if any(v <= 0 for v in list(a) + list(b)):
        raise ValueError("a ratio of geometric means needs positive values")
    d = difference([math.log(v) for v in a], [math.log(v) for v in b], level)
    if d is None:
        return None
    return Interval(math.exp(d.estimate), math.exp(d.low), math.exp(d.high), level, d.df, d.n)


def verdict(interval: Interval, limit: float, none: float = 1.0) -> str:
    """Where `interval` lies, for a claim that the estimate is at most `limit` (< `none`, the point of
    no difference: 1 for a ratio, 0 for a difference): "PASS" when the whole interval is at or below
    the limit, "parity" when it holds `none`, otherwise "lower, the limit not shown" (below `none`,
    not wholly below the limit) or "higher" (wholly above `none`)."""
    if interval.high <= limit:
        return "PASS"
    if interval.holds(none):
        return PARITY
    return "lower, the limit not shown" if interval.high < none else "higher"
