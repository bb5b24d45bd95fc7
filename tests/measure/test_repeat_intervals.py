"""The interval of a cell's median that adaptive repeats stop on, and the bimodal flag."""
import math
import random

import pytest

from harness.measure import flags, stats


def coverage(n, k):
    """Chance that [x(k), x(n+1-k)] holds the median: 1 - 2 P(Binomial(n, 1/2) <= k - 1)."""
    return 1 - 2 * sum(math.comb(n, j) for j in range(k)) / 2 ** n


@pytest.mark.parametrize("n", range(1, 31))
def test_the_interval_is_the_narrowest_pair_of_order_statistics_with_95_percent(n):
    values = [float(v) for v in range(100, 100 + n)]
    random.Random(n).shuffle(values)
    got = stats.median_interval(values)
    ks = [k for k in range(1, n // 2 + 1) if coverage(n, k) >= 0.95]
    if not ks:
        assert got is None
        return
    k = max(ks)
    assert got == (100.0 + k - 1, 100.0 + n - k)


def test_six_repeats_are_the_fewest_with_an_interval_and_match_the_scenario_minimum():
    from harness.plan.scenario import ADAPTIVE_MIN

    assert stats.median_interval([1.0, 2, 3, 4, 5]) is None
    assert stats.median_interval([6.0, 1, 5, 2, 4, 3]) == (1.0, 6.0)
    assert ADAPTIVE_MIN == 6
    assert stats.median_interval([float(v) for v in range(15)]) == (3.0, 11.0)   # k = 4


def test_the_interval_holds_the_true_median_at_least_95_percent_of_the_time():
    rng = random.Random(0)
    for n in (6, 9, 15):
        hits = 0
        for _ in range(4000):
            lo, hi = stats.median_interval([rng.expovariate(1.0) for _ in range(n)])
            hits += lo <= math.log(2) <= hi
        assert hits / 4000 >= 0.95 - 0.01, n


def test_relative_half_width_is_half_the_interval_over_the_median():
    values = [98.0, 99.0, 100.0, 100.0, 101.0, 102.0]
    assert stats.relative_half_width(values) == pytest.approx((102 - 98) / 2 / 100)
    assert stats.relative_half_width(values[:5]) is None


def test_two_groups_farther_apart_than_their_own_ranges_are_bimodal():
    values = [100.0, 100.4, 99.8, 90.1, 90.0, 90.3, 100.1]
    low, high = flags.bimodal_groups(values)
    assert low == [90.0, 90.1, 90.3] and high == [99.8, 100.0, 100.1, 100.4]
    assert flags.bimodal(values)
    summary = stats.summarize(values, 2, with_ci=False)
    assert flags.BIMODAL in summary.flags


@pytest.mark.parametrize("values, why", [
    ([100.0, 100.1, 99.9, 100.2, 99.8, 100.05], "one group"),
    ([100.0, 100.1, 100.2, 100.3, 100.4, 90.0], "one slow outlier is not a group"),
    ([100.0, 100.05, 100.5, 100.55], "the gap is within what the harness resolves (1%)"),
    ([90.0, 95.0, 100.0, 105.0, 110.0], "evenly spread: no gap wider than a side's range"),
    ([90.0, 90.0, 100.0], "too few values for two groups of two"),
])
def test_not_bimodal(values, why):
    assert flags.bimodal_groups(values) is None, why


def test_a_gap_only_as_wide_as_one_side_is_not_enough():
    # low side spans 6 (84..90), the gap is 6 (90..96): not wider than that range
    assert flags.bimodal_groups([84.0, 90.0, 96.0, 96.5]) is None
    assert flags.bimodal_groups([85.0, 90.0, 96.0, 96.5]) == ([85.0, 90.0], [96.0, 96.5])
