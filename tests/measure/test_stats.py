"""Statistics are pure functions; check them against numpy and scipy."""
import math

import numpy as np
import pytest

from harness.measure import flags, stats
from harness.measure.records import (CUMULATIVE_MEAN, EXACT, EXACT_CUMULATIVE, GLOBAL_MEAN, GLOBAL_MEAN_FIGURE,
                             THROUGHPUT, THROUGHPUT_FIGURE, WINDOW_MEAN, WINDOW_MEANS_FIGURE, WINDOW_MEDIAN,
                             WINDOW_MEDIAN_FIGURE, IterationRecord)

SAMPLES = [
    [40.0],
    [40.0, 41.0],
    [39.2, 40.1, 40.0, 38.7, 41.3, 40.4, 39.9],
    [12.5, 12.9, 11.8, 13.4, 12.2, 12.0],
    list(np.random.default_rng(3).normal(50, 4, 25)),
]


@pytest.mark.parametrize("values", SAMPLES)
def test_median_quantiles_iqr_cv_match_numpy(values):
    assert stats.median(values) == pytest.approx(np.median(values))
    for q in (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0):
        assert stats.quantile(values, q) == pytest.approx(np.quantile(values, q))
    assert stats.iqr(values) == pytest.approx(np.subtract(*np.percentile(values, [75, 25])))
    expected_cv = np.std(values, ddof=1) / np.mean(values) if len(values) > 1 else 0.0
    assert stats.cv(values) == pytest.approx(expected_cv)


def test_bootstrap_ci_matches_scipy_percentile_method():
    scipy_stats = pytest.importorskip("scipy.stats")
    values = SAMPLES[2]
    low, high = stats.bootstrap_median_ci(values, resamples=20000, seed=1)
    ref = scipy_stats.bootstrap((values,), np.median, confidence_level=0.95, n_resamples=20000,
                                method="percentile", random_state=7).confidence_interval
    # two independent resamplings of a 7-point median: the bounds land on the same order statistics
    assert low == pytest.approx(ref.low, abs=0.35)
    assert high == pytest.approx(ref.high, abs=0.35)
    assert low <= stats.median(values) <= high


def test_bootstrap_is_deterministic_and_degenerate_for_one_value():
    assert stats.bootstrap_median_ci(SAMPLES[3]) == stats.bootstrap_median_ci(SAMPLES[3])
    assert stats.bootstrap_median_ci([7.0]) == (7.0, 7.0)


def test_outliers_by_modified_z_score():
    values = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 14.0]
    assert stats.outliers(values) == [6]
    assert stats.outliers([1.0, 1.0, 1.0]) == []


def per_iteration(times, data=None, images=None):
    return [IterationRecord(iteration=i + 1, line=i, time_s=t, data_time_s=(data[i] if data else None),
                            images=images) for i, t in enumerate(times)]


def test_reported_throughput_is_images_over_window_time_not_mean_of_rates():
    # warmup 2 slow iterations, then 0.1 s and 0.3 s alternating
    times = [1.0, 1.0] + [0.1, 0.3] * 5
    est = stats.reported(per_iteration(times), warmup=2, measure=10, images_per_iteration=2)
    assert est.throughput == pytest.approx(20 / 2.0)          # 20 images in 2.0 s
    assert est.throughput != pytest.approx(np.mean([2 / t for t in times[2:]]))
    assert est.iteration_time_s == pytest.approx(0.2)
    assert est.exact and est.iterations == 10
    assert est.window == (3, 12) and est.kind == EXACT


def test_reported_prefers_printed_images_per_iteration():
    est = stats.reported(per_iteration([0.5] * 4, images=4), 0, 4, images_per_iteration=2)
    assert est.throughput == pytest.approx(8.0)


def test_reported_data_time_is_mean_over_window():
    est = stats.reported(per_iteration([0.1] * 6, data=[0.5, 0.5, 0.01, 0.02, 0.03, 0.02]), 2, 4, 1)
    assert est.data_time_s == pytest.approx(0.02)


def test_window_mean_records_add_up_exactly():
    # a log every 5 iterations with the mean of the last 5
    recs = [IterationRecord(iteration=i, line=i, time_s=t, span=5, kind=WINDOW_MEAN)
            for i, t in [(5, 9.0), (10, 0.2), (15, 0.4), (20, 0.3)]]
    est = stats.reported(recs, warmup=5, measure=15, images_per_iteration=2)
    assert est.throughput == pytest.approx(30 / (5 * 0.9))
    assert est.exact and est.window == (6, 20) and est.kind == WINDOW_MEANS_FIGURE


def test_two_running_means_give_the_exact_mean_between_them():
    # detectron2's shape: means since iteration 3, so 18 and 38 iterations at 20 and 40
    recs = [IterationRecord(iteration=i, line=k, time_s=t, span=i - 2, kind=CUMULATIVE_MEAN)
            for k, (i, t) in enumerate([(20, 0.5), (40, 0.45), (60, 0.44)])]
    est = stats.reported(recs, warmup=20, measure=20, images_per_iteration=2)
    assert est.iteration_time_s == pytest.approx((38 * 0.45 - 18 * 0.5) / 20)
    assert est.throughput == pytest.approx(2 * 20 / (38 * 0.45 - 18 * 0.5))
    assert est.exact and est.kind == EXACT_CUMULATIVE and est.window == (21, 40) and est.iterations == 20
    assert est.data_time_s is None


def test_throughput_only_records_are_bounded_by_their_printed_digits_when_the_images_are_known():
    # rates printed to 2 decimals: each is off by at most 0.005 images/s
    recs = [IterationRecord(iteration=i, line=i, span=10, kind=THROUGHPUT, images_per_s=r, rounding=0.005)
            for i, r in [(10, 5.0), (20, 40.0), (30, 20.0)]]
    est = stats.reported(recs, warmup=10, measure=20, images_per_iteration=4)
    assert est.throughput == pytest.approx(80 / (40 / 40.0 + 40 / 20.0))
    assert est.kind == THROUGHPUT_FIGURE and est.window == (11, 30)
    # a rate v within h gives a time per iteration within images * h / (v (v - h))
    per_record = [4 * 0.005 / (v * (v - 0.005)) for v in (40.0, 20.0)]
    assert est.error_bound_s == pytest.approx(sum(per_record) / 2, rel=1e-6)
    assert est.exact    # 2.1e-4 of the figure
    unknown = stats.reported(recs, warmup=10, measure=20, images_per_iteration=None)
    assert unknown.error_bound_s is None and not unknown.exact


def test_window_medians_are_approximate():
    recs = [IterationRecord(iteration=i, line=i, time_s=t, span=20, kind=WINDOW_MEDIAN)
            for i, t in [(20, 0.9), (40, 0.5), (60, 0.4)]]
    est = stats.reported(recs, warmup=20, measure=40, images_per_iteration=2)
    assert est.iteration_time_s == pytest.approx(0.45)
    assert not est.exact and est.kind == WINDOW_MEDIAN_FIGURE and est.window == (21, 60)


def test_running_means_of_unknown_start_are_approximate():
    # GLOBAL_MEAN: the log does not tell where the mean began (span 1 by convention)
    recs = [IterationRecord(iteration=i, line=i, time_s=t, kind=GLOBAL_MEAN) for i, t in [(20, 0.5), (40, 0.4)]]
    est = stats.reported(recs, warmup=19, measure=21, images_per_iteration=2)
    assert est.iteration_time_s == pytest.approx(0.45)
    assert not est.exact and est.kind == GLOBAL_MEAN_FIGURE


def test_short_log_is_a_window_error():
    with pytest.raises(stats.WindowError, match="never reaches the window: it reaches iteration 3"):
        stats.reported(per_iteration([0.1] * 3), warmup=5, measure=10, images_per_iteration=1)


def test_no_figure_from_part_of_the_window():
    with pytest.raises(stats.WindowError,
                       match=r"^the window 3\.\.14 is larger than the log: it reaches iteration 12$"):
        stats.reported(per_iteration([0.1] * 12), warmup=2, measure=12, images_per_iteration=1)


def test_observed_uses_line_arrival_times():
    recs = per_iteration([0.1] * 12)
    arrival = [0.25 * (i + 1) for i in range(12)]          # lines really arrived 0.25 s apart
    est = stats.observed(recs, arrival, warmup=2, measure=10, images_per_iteration=2)
    assert est.throughput == pytest.approx(2 / 0.25)
    assert est.iterations == 10


def test_observed_with_sparse_lines():
    recs = [IterationRecord(iteration=i, line=k, time_s=0.1, span=20, kind=WINDOW_MEAN)
            for k, i in enumerate([20, 40, 60, 80, 100, 120])]
    arrival = [2.0 * k for k in range(6)]
    est = stats.observed(recs, arrival, warmup=20, measure=100, images_per_iteration=1)
    assert est.throughput == pytest.approx(100 / 10.0)


def test_duplicate_records_of_several_ranks_count_once():
    recs = per_iteration([0.1] * 4) + per_iteration([0.1] * 4)
    assert len(stats.dedupe(recs)) == 4


def test_summary_flags():
    s = stats.summarize([40.0, 40.1, 39.9], 2, [0.005] * 3, [40.0, 40.05, 39.95], [0.05] * 3)
    assert s.flags == [] and s.iteration_ms == pytest.approx(50.0) and s.data_ms == pytest.approx(5.0)
    s = stats.summarize([40.0, 44.0, 39.0], 2, [0.02] * 3, [30.0] * 3, [0.05] * 3)
    assert s.flags == [flags.UNSTABLE, flags.DATA_BOUND, flags.ESTIMATORS_DISAGREE]
    assert s.minimum == 39.0 and s.maximum == 44.0 and s.n == 3
    assert math.isclose(s.throughput, 40.0)
