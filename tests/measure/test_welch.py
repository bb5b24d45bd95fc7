"""Welch's intervals of a difference and of a ratio of geometric means, and the verdict read off
them: checked against scipy where scipy is installed, and on figures worked by hand."""
import math

import pytest

from harness.measure import welch

scipy_stats = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("df", [1, 1.5, 2.7, 3.28, 4, 10.3, 60, 400])
@pytest.mark.parametrize("p", [0.025, 0.3, 0.6, 0.95, 0.975, 0.995])
def test_the_t_quantile_matches_scipy_at_whole_and_fractional_degrees_of_freedom(df, p):
    assert welch.t_quantile(p, df) == pytest.approx(scipy_stats.t.ppf(p, df), rel=1e-9, abs=1e-10)


@pytest.mark.parametrize("t", [-40.0, -3.1, -0.2, 0.0, 0.7, 2.5, 12.0])
def test_the_t_cdf_matches_scipy(t):
    for df in (1, 2.4, 9, 250):
        assert welch.t_cdf(t, df) == pytest.approx(scipy_stats.t.cdf(t, df), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("a, b", [
    ([670.5, 414.8, 538.7], [863.6, 707.1, 935.9]),
    ([1.0, 2.0], [10.0, 11.0, 13.0, 12.5, 9.0]),
    ([0.80, 0.79, 0.81, 0.795], [0.74, 0.73, 0.75]),
])
def test_the_difference_interval_is_scipy_s_welch_interval(a, b):
    got = welch.difference(a, b)
    want = scipy_stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (got.low, got.high) == pytest.approx((want.low, want.high), rel=1e-9)
    assert got.estimate == pytest.approx(sum(a) / len(a) - sum(b) / len(b)) and got.n == (len(a), len(b))


def test_the_ratio_is_of_geometric_means_with_the_interval_taken_on_logarithms():
    # three seeds a side, worked by hand: exp(mean log a - mean log b) = 0.640, Welch df 3.28
    got = welch.ratio([670.5, 414.8, 538.7], [863.6, 707.1, 935.9])
    assert got.estimate == pytest.approx(0.6400, abs=5e-5)
    assert (got.low, got.high) == pytest.approx((0.3915, 1.0463), abs=5e-5)
    assert got.df == pytest.approx(3.276, abs=1e-3)
    geometric = math.exp(sum(map(math.log, [670.5, 414.8, 538.7])) / 3 - sum(map(math.log, [863.6, 707.1, 935.9])) / 3)
    assert got.estimate == pytest.approx(geometric)


def test_one_value_a_side_gives_no_interval_and_no_spread_gives_the_point():
    assert welch.difference([1.0], [2.0, 3.0]) is None and welch.ratio([2.0, 3.0], [4.0]) is None
    flat = welch.difference([2.0, 2.0], [1.0, 1.0, 1.0])
    assert (flat.estimate, flat.low, flat.high, flat.df) == (1.0, 1.0, 1.0, None)


def test_a_ratio_refuses_a_value_that_is_not_positive():
    with pytest.raises(ValueError):
        welch.ratio([1.0, 0.0], [1.0, 2.0])


def interval(low, high):
    return welch.Interval((low + high) / 2, low, high, 0.95, 4.0, (3, 3))


@pytest.mark.parametrize("low, high, says", [
    (0.30, 0.80, "PASS"),                             # wholly at or below the limit 1/1.2
    (0.39, 1.05, "parity"),                           # holds 1: no difference shown
    (0.50, 0.95, "lower, the limit not shown"),       # below 1, not wholly below the limit
    (1.02, 1.40, "higher"),
    (0.80, 1.00, "parity"),                           # 1 at its edge is still held
])
def test_the_verdict_says_parity_whenever_the_interval_holds_one(low, high, says):
    assert welch.verdict(interval(low, high), 1 / 1.2) == says


def test_the_verdict_reads_a_difference_against_zero():
    assert welch.verdict(interval(-0.004, 0.013), -0.01, none=0.0) == "parity"
