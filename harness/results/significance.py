"""Significance of a difference between two samples, as pure functions.

Mann-Whitney U (rank-sum) test, written out so the gate depends on nothing but the
standard library: the exact null distribution when both samples are small and hold no
ties, the normal approximation with tie correction and continuity correction otherwise.
Checked against scipy.stats.mannwhitneyu in tests/results/test_compare_significance.py.

Plus a bootstrap confidence interval of the ratio of two medians (numpy).
"""

import math
from dataclasses import dataclass
from typing import Dict, Hashable, Iterable, List, Sequence, Tuple

GREATER, LESS, TWO_SIDED = "greater", "less", "two-sided"
AUTO, EXACT, ASYMPTOTIC = "auto", "exact", "asymptotic"
EXACT_MAX_TOTAL = 50  # auto: exact distribution up to this many values in all (no ties)


@dataclass(frozen=True)
class MannWhitney:
    u: float  # U of the first sample: pairs (x > y) plus half the ties
    p: float
    method: str  # "exact" or "asymptotic"


def u_statistic(x: Iterable[float], y: Sequence[float]) -> float:
    """Pairs in which the value from x beats the value from y; ties count one half."""
    u = 0.0
    for a in x:
        for b in y:
            if a > b:
                u += 1.0
            elif a == b:
                u += 0.5
    return u


def u_counts(n: int, m: int) -> List[int]:
    """How many of the C(n+m, n) orderings give U = 0, 1, ..., n*m (no ties).

    These are the coefficients of the Gaussian binomial [n+m choose n] in q, built as
    prod_{i=1..k} (1 - q^(N-k+i)) / (1 - q^i) in exact integer arithmetic.
    """
    total, k = n + m, min(n, m)
    poly = [1]
    for i in range(1, k + 1):
        shift = total - k + i
        grown = poly + [0] * shift
        for degree, coef in enumerate(poly):
            grown[degree + shift] -= coef
        for degree in range(i, len(grown)):  # divide by (1 - q^i)
            grown[degree] += grown[degree - i]
        poly = grown
    return poly[: n * m + 1]


def smallest_p(n: int, m: int) -> float:
    """The smallest one-sided p-value any pair of samples of these sizes can reach."""
    if n == 0 or m == 0:
        return 1.0
    return 1.0 / math.comb(n + m, n)


def _exact(u: float, n: int, m: int, alternative: str) -> float:
    counts = u_counts(n, m)
    total = math.comb(n + m, n)
    k = int(round(u))
    upper = sum(counts[k:]) / total  # P(U >= u)
    lower = sum(counts[: k + 1]) / total  # P(U <= u)
    if alternative == GREATER:
        return upper
    if alternative == LESS:
        return lower
    return min(1.0, 2.0 * min(upper, lower))


def _tie_sizes(values: Iterable[Hashable]) -> List[int]:
    sizes: Dict[Hashable, int] = {}
    for v in values:
        sizes[v] = sizes.get(v, 0) + 1
    return [t for t in sizes.values() if t > 1]


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _asymptotic(u: float, x: Sequence[float], y: Sequence[float], alternative: str) -> float:
    n, m = len(x), len(y)
    total = n + m
    ties = sum(t**3 - t for t in _tie_sizes(list(x) + list(y)))
    var = n * m / 12.0 * ((total + 1) - ties / (total * (total - 1)))
    if var <= 0:  # every value equal: no evidence either way
        return 1.0
    mean = n * m / 2.0
    if alternative == GREATER:
        stat = u
    elif alternative == LESS:
        stat = n * m - u
    else:
        stat = max(u, n * m - u)
    z = (stat - mean - 0.5) / math.sqrt(var)
    p = _normal_sf(z)
    return min(1.0, 2.0 * p) if alternative == TWO_SIDED else p


def mann_whitney_u(
    x: Iterable[float], y: Iterable[float], alternative: str = GREATER, method: str = AUTO
) -> MannWhitney:
    """Mann-Whitney U test of x against y.

    alternative "greater": x tends to be larger than y; "less": smaller; "two-sided".
    method "auto" takes the exact distribution when there are no ties and at most
    EXACT_MAX_TOTAL values in all, the normal approximation otherwise.
    """
    x, y = [float(v) for v in x], [float(v) for v in y]
    if not x or not y:
        raise ValueError("Mann-Whitney U needs at least one value on each side")
    if alternative not in (GREATER, LESS, TWO_SIDED):
        raise ValueError("alternative is greater, less or two-sided, not %r" % alternative)
    if method not in (AUTO, EXACT, ASYMPTOTIC):
        raise ValueError("method is auto, exact or asymptotic, not %r" % method)
    u = u_statistic(x, y)
    if method == AUTO:
        tied = bool(_tie_sizes(x + y))
        method = EXACT if not tied and len(x) + len(y) <= EXACT_MAX_TOTAL else ASYMPTOTIC
    if method == EXACT:
        p = _exact(u, len(x), len(y), alternative)
    else:
        p = _asymptotic(u, x, y, alternative)
    return MannWhitney(u, p, method)


def bootstrap_ratio_ci(
    baseline: Sequence[float],
    candidate: Sequence[float],
    confidence: float = 0.95,
    resamples: int = 4000,
    seed: int = 0,
) -> Tuple[float, float]:
    """Percentile bootstrap CI of median(candidate) / median(baseline).

    Each side is resampled on its own (the repeats of two runs are independent);
    deterministic for a given seed.
    """
    import numpy as np

    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    rng = np.random.default_rng(seed)
    mb = np.median(b[rng.integers(0, len(b), size=(resamples, len(b)))], axis=1)
    mc = np.median(c[rng.integers(0, len(c), size=(resamples, len(c)))], axis=1)
    ratios = mc / mb
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return float(low), float(high)
