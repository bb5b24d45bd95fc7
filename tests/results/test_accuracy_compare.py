"""Accuracy runs compared: a slower time to target or a lower final AP is a regression only beyond
the baseline's seed spread; one seed gives at most a possible regression."""
from harness.measure.accuracy import AccuracyPoint
from harness.results.compare import (IMPROVEMENT, MISSING_CANDIDATE, POSSIBLE, REGRESSION, UNCHANGED,
                                     compare_accuracy)


def run(*seeds):
    """seeds: (seconds per 100 iterations, final AP50) -> curves crossing 0.5 halfway to the final point."""
    return [[AccuracyPoint(100, step, 0.1, 0.25), AccuracyPoint(200, 2 * step, 0.3, final)] for step, final in seeds]


def judge(base, cand):
    return compare_accuracy({"c": base}, {"c": cand}, "bbox_AP50", 0.5)[0]


def test_same_curves_are_unchanged():
    assert judge(run((10, 0.8), (11, 0.8), (12, 0.8)), run((10, 0.8), (11, 0.8), (12, 0.8))).verdict == UNCHANGED


def test_much_slower_to_target_is_a_regression():
    v = judge(run((10, 0.8), (11, 0.8), (12, 0.8)), run((20, 0.8), (21, 0.8), (22, 0.8)))
    assert v.verdict == REGRESSION and "time to target" in v.why and "interpolated" in v.why


def test_slower_within_the_seed_spread_is_not_a_regression():
    v = judge(run((10, 0.8), (20, 0.8), (30, 0.8)), run((22, 0.8), (22, 0.8), (22, 0.8)))
    assert v.verdict == POSSIBLE


def test_lower_final_ap_beyond_one_sd_is_a_regression():
    v = judge(run((10, 0.80), (10, 0.81), (10, 0.79)), run((10, 0.70), (10, 0.71), (10, 0.69)))
    assert v.verdict == REGRESSION and "final bbox_AP50" in v.why


def test_missing_a_target_the_baseline_reached_is_a_regression():
    v = judge(run((10, 0.8), (10, 0.8)), run((10, 0.8), (10, 0.4)))
    assert v.verdict == REGRESSION and "miss the target" in v.why


def test_one_seed_gives_at_most_a_possible_regression_and_faster_is_an_improvement():
    assert judge(run((10, 0.8)), run((20, 0.7))).verdict == POSSIBLE
    assert judge(run((20, 0.8)), run((10, 0.8))).verdict == IMPROVEMENT
    assert compare_accuracy({"c": run((10, 0.8))}, {}, "bbox_AP50", 0.5)[0].verdict == MISSING_CANDIDATE
