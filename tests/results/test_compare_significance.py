"""Mann-Whitney U and the ratio bootstrap, checked against scipy."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.results import significance as sig

scipy_stats = pytest.importorskip("scipy.stats")

ALTERNATIVES = (sig.GREATER, sig.LESS, sig.TWO_SIDED)


def scipy_p(x, y, alternative, method):
    return scipy_stats.mannwhitneyu(x, y, alternative=alternative, method=method)


@pytest.mark.parametrize("n,m", [(1, 1), (2, 5), (5, 5), (7, 7), (3, 12), (20, 20)])
def test_exact_counts_cover_every_ordering(n, m):
    counts = sig.u_counts(n, m)
    assert len(counts) == n * m + 1
    assert sum(counts) == math.comb(n + m, n)
    assert counts == counts[::-1]          # U is symmetric about n*m/2 under the null


def test_smallest_p_is_one_over_the_orderings():
    assert sig.smallest_p(7, 7) == pytest.approx(1 / 3432)
    assert sig.smallest_p(4, 4) > 0.01 > sig.smallest_p(5, 5)
    separated = sig.mann_whitney_u([10, 11, 12, 13, 14], [1, 2, 3, 4, 5])
    assert separated.method == sig.EXACT and separated.p == pytest.approx(sig.smallest_p(5, 5))


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_exact_matches_scipy_on_samples_without_ties(alternative):
    rng = np.random.default_rng(7)
    for _ in range(60):
        n, m = rng.integers(1, 11, size=2)
        x, y = rng.normal(0, 1, n), rng.normal(0.7, 1, m)
        ours = sig.mann_whitney_u(x, y, alternative, sig.EXACT)
        ref = scipy_p(x, y, alternative, "exact")
        assert ours.u == pytest.approx(ref.statistic)
        assert ours.p == pytest.approx(ref.pvalue, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_normal_approximation_with_ties_matches_scipy(alternative):
    rng = np.random.default_rng(11)
    for _ in range(60):
        n, m = rng.integers(3, 25, size=2)
        x = np.round(rng.normal(100, 2, n))       # rounded: many ties
        y = np.round(rng.normal(98, 2, m))
        ours = sig.mann_whitney_u(x, y, alternative)
        assert ours.method == sig.ASYMPTOTIC
        ref = scipy_p(x, y, alternative, "asymptotic")
        assert ours.p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(50, 150, allow_nan=False), min_size=1, max_size=9),
       st.lists(st.floats(50, 150, allow_nan=False), min_size=1, max_size=9))
def test_auto_agrees_with_scipy_auto_on_small_samples(x, y):
    if len(set(x + y)) == len(x + y) and (len(x) > 8 or len(y) > 8):
        return                      # scipy's auto switches to the approximation past 8; ours stays exact
    ref = scipy_stats.mannwhitneyu(x, y, alternative="greater", method="auto")
    if math.isnan(ref.pvalue):      # every value equal: scipy has no answer, we say "no evidence"
        assert sig.mann_whitney_u(x, y).p == 1.0
        return
    assert sig.mann_whitney_u(x, y).p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)


def test_direction_of_the_one_sided_test():
    fast, slow = [100, 101, 102, 103, 104, 105, 106], [90, 91, 92, 93, 94, 95, 96]
    assert sig.mann_whitney_u(fast, slow, sig.GREATER).p < 0.001
    assert sig.mann_whitney_u(fast, slow, sig.LESS).p > 0.999


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        sig.mann_whitney_u([], [1.0])
    with pytest.raises(ValueError):
        sig.mann_whitney_u([1.0], [2.0], alternative="bigger")


def test_ratio_ci_brackets_the_true_ratio_and_is_deterministic():
    rng = np.random.default_rng(3)
    base = list(rng.normal(100, 1, 7))
    cand = list(rng.normal(90, 1, 7))
    low, high = sig.bootstrap_ratio_ci(base, cand)
    assert low < 0.9 < high and high - low < 0.05
    assert sig.bootstrap_ratio_ci(base, cand) == (low, high)
