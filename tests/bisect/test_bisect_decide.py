"""How one bisect step is judged, from per-trial figures alone."""
from harness.bisect import decide
from harness.results import compare

JUDGE = decide.Judge()
GOOD = [100.0, 100.4, 99.7, 100.2, 99.9, 100.1]
BAD = [90.1, 89.8, 90.3, 90.0, 89.9, 90.2]


def test_endpoints_ten_percent_apart_are_a_regression():
    verdict, r = decide.endpoints(JUDGE, GOOD, BAD)
    assert verdict == decide.REGRESSION
    assert 0.89 < r.low <= r.ratio <= r.high < 0.91


def test_endpoints_alike_show_no_regression_with_a_ratio_that_spans_one():
    verdict, r = decide.endpoints(JUDGE, GOOD, [v * 1.001 for v in GOOD[::-1]])
    assert verdict == decide.NONE and r.parity


def test_too_few_trials_decide_nothing():
    assert decide.endpoints(JUDGE, GOOD[:4], BAD[:4]) == (decide.UNDECIDED, None)
    assert decide.candidate(JUDGE, GOOD, BAD[:4], BAD)[0] == decide.UNDECIDED


def test_a_small_drop_with_a_wide_interval_waits_for_more_trials_then_reads_as_none_at_the_cap():
    noisy = [100.0, 80.0, 115.0, 90.0, 110.0]
    slower = [v * 0.97 for v in noisy[1:] + noisy[:1]]
    assert decide.endpoints(JUDGE, noisy, slower)[0] == decide.UNDECIDED
    assert decide.endpoints(JUDGE, noisy, slower, final=True)[0] == decide.NONE


def test_a_candidate_like_the_bad_end_is_bad_and_like_the_good_end_is_good():
    assert decide.candidate(JUDGE, GOOD, [v * 0.999 for v in BAD], BAD)[0] == decide.BAD
    assert decide.candidate(JUDGE, GOOD, [v * 1.001 for v in GOOD], BAD)[0] == decide.GOOD


def test_a_noisy_candidate_is_undecided_until_the_cap_names_the_nearer_end():
    between = [85.0, 101.0, 93.0, 99.0, 88.0]    # median 93: nearer 90 than 100 on a log scale
    assert decide.candidate(JUDGE, GOOD, between, BAD)[0] == decide.UNDECIDED
    verdict, r, forced = decide.candidate(JUDGE, GOOD, between, BAD, final=True)
    assert (verdict, forced) == (decide.BAD, True)
    assert abs(r.ratio - 0.93) < 0.01


def test_a_candidate_worse_than_good_and_nearer_bad_is_bad_even_short_of_the_whole_drop():
    assert decide.candidate(JUDGE, GOOD, [94.0, 94.2, 93.9, 94.1, 94.3], BAD)[0] == decide.BAD


def test_a_latency_metric_counts_a_rise_as_the_regression():
    judge = decide.Judge(rule=compare.Rule(metric="p95"))
    assert decide.endpoints(judge, BAD, GOOD)[0] == decide.REGRESSION     # 90 ms -> 100 ms
    assert decide.endpoints(judge, GOOD, BAD)[0] == decide.NONE           # faster is no regression
    assert decide.candidate(judge, BAD, GOOD, GOOD)[0] == decide.BAD
