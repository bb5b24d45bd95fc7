"""How a bisect step is judged, from per-trial figures alone; and the whole search's answers over
simulated revisions (harness/bisect/simulate.py: the search's own code, with each trial's
figure drawn from a seeded distribution around a known true speed)."""
import math

import pytest

from harness.bisect import decide, search, simulate
from harness.results import compare

JUDGE = decide.Judge()
GOOD = [100.0, 100.4, 99.7, 100.2, 99.9, 100.1, 100.3]
BAD = [90.1, 89.8, 90.3, 90.0, 89.9, 90.2, 90.4]
LEVEL = 0.005


def test_endpoints_ten_percent_apart_are_a_regression():
    verdict, r = decide.pair(JUDGE, GOOD, BAD, LEVEL)
    assert verdict == decide.REGRESSION
    assert 0.89 < r.low <= r.ratio <= r.high < 0.91


def test_endpoints_alike_show_no_regression_with_a_ratio_that_spans_one():
    verdict, r = decide.pair(JUDGE, GOOD, [v * 1.001 for v in GOOD[::-1]], LEVEL)
    assert verdict == decide.NONE and r.parity


def test_a_small_drop_with_a_wide_interval_stays_undecided():
    noisy = [100.0, 80.0, 115.0, 90.0, 110.0]
    slower = [v * 0.97 for v in noisy[1:] + noisy[:1]]
    assert decide.pair(JUDGE, noisy, slower, LEVEL)[0] == decide.UNDECIDED


def test_a_level_smaller_than_the_exact_tests_smallest_p_decides_nothing():
    # 5 against 5 reach at best p = 1/252 = 0.004: at a level of 0.001 even a clear drop waits
    assert decide.pair(JUDGE, GOOD[:5], BAD[:5], 0.001)[0] == decide.UNDECIDED
    assert decide.pair(JUDGE, GOOD[:5], BAD[:5], 0.005)[0] == decide.REGRESSION


def test_a_candidate_like_the_bad_end_is_bad_and_like_the_good_end_is_good():
    assert decide.candidate(JUDGE, GOOD, [v * 0.999 for v in BAD], BAD, LEVEL)[0] == decide.BAD
    assert decide.candidate(JUDGE, GOOD, [v * 1.001 for v in GOOD], BAD, LEVEL)[0] == decide.GOOD


def test_a_noisy_candidate_is_undecided():
    between = [85.0, 101.0, 93.0, 99.0, 88.0]
    assert decide.candidate(JUDGE, GOOD, between, BAD, LEVEL)[0] == decide.UNDECIDED


def test_a_candidate_faster_than_the_good_end_is_good_and_named_non_monotone():
    verdict, r, odd = decide.candidate(JUDGE, GOOD, [v * 1.2 for v in GOOD], BAD, LEVEL)
    assert (verdict, odd) == (decide.GOOD, "faster than the good end") and r.ratio > 1.15
    verdict, _, odd = decide.candidate(JUDGE, GOOD, [v * 0.8 for v in BAD], BAD, LEVEL)
    assert (verdict, odd) == (decide.BAD, "slower than the bad end")


def test_a_latency_metric_counts_a_rise_as_the_regression():
    judge = decide.Judge(rule=compare.Rule(metric="p95"))
    assert decide.pair(judge, BAD, GOOD, LEVEL)[0] == decide.REGRESSION     # 90 ms -> 100 ms
    assert decide.pair(judge, GOOD, BAD, LEVEL)[0] == decide.IMPROVEMENT    # faster is no regression
    assert decide.candidate(judge, BAD, GOOD, GOOD, LEVEL)[0] == decide.BAD


def test_the_levels_handed_out_never_sum_past_alpha():
    ledger = decide.Ledger(0.05, decide.planned_tests(17))
    levels = []
    for _ in range(40):                      # far more tests than planned
        test = decide.Test(ledger.take(), JUDGE.looks)
        levels += [test.next(final=False) for _ in range(JUDGE.looks - 1)] + [test.next(final=True)]
    assert sum(levels) <= 0.05 + 1e-12
    assert levels[0] == pytest.approx(0.05 / (decide.planned_tests(17) + 1) / JUDGE.looks)
    test = decide.Test(0.01, 4)                  # more looks than planned get nothing past the level
    assert sum(test.next(final=False) for _ in range(9)) == pytest.approx(0.01)


# ------------------------------------------------------------ whole searches, simulated

def answer(outcome, arms, sim):
    return search.answer(outcome, arms, sim.opts)


def test_a_simulated_ten_percent_slowdown_is_named_with_its_effect_against_its_parent():
    outcome, arms, sim = simulate.simulate([100.0] * 7 + [90.9] * 10, cv=0.02, seed=1)
    assert outcome.culprit.label == "r07" and outcome.found[0].parent.label == "r06"
    assert abs(outcome.effect.ratio - 1 / 1.1) < 0.03 and outcome.effect.high < 0.97
    assert answer(outcome, arms, sim)[-1] == "first bad commit: r07 revision 7"
    assert outcome.exit_status == 0


def test_two_half_size_steps_are_both_named_each_with_its_share():
    speeds = [100.0] * 4 + [80.0] * 7 + [64.0] * 6        # two steps of x1.25, half the slowdown each
    outcome, arms, sim = simulate.simulate(speeds, cv=0.02, seed=3)
    assert [(f.arm.label, f.parent.label) for f in outcome.found] == [("r04", "r03"), ("r11", "r10")]
    for f in outcome.found:
        assert abs(f.share - 0.5) < 0.1 and abs(f.effect.ratio - 0.8) < 0.04
    last = answer(outcome, arms, sim)
    assert last[-1].startswith("first bad commits (a slowdown in 2 steps): r04 (")
    assert any(line.startswith("step 1 of 2: r04") for line in last) and any(
        line.startswith("step 2 of 2: r11") for line in last)


def test_a_broken_revision_is_skipped_and_where_it_hides_the_culprit_a_range_is_named():
    speeds = [100.0] * 5 + [80.0] * 12
    outcome, arms, sim = simulate.simulate(speeds, cv=0.02, seed=4, broken={4: "No module named x"})
    assert [a.label for a in outcome.skipped] == ["r04"]
    assert outcome.found[0].arm.label == "r05" and [a.label for a in outcome.found[0].between] == ["r04"]
    assert answer(outcome, arms, sim)[-1] == "first bad commit: one of r04..r05 (2 commits; 1 could not be measured)"
    # broken elsewhere, the culprit is still isolated
    outcome, arms, sim = simulate.simulate(speeds, cv=0.02, seed=4, broken={8: "No module named x"})
    assert outcome.skipped[0].label == "r08" and outcome.culprit.label == "r05" and outcome.found[0].isolated


def test_noise_too_large_to_settle_ends_undecided_at_the_cap_with_its_own_exit_status():
    outcome, arms, sim = simulate.simulate([100.0] * 8 + [95.0] * 9, cv=0.25, seed=5)
    assert outcome.culprit is None and outcome.undecided == JUDGE.max_trials
    assert outcome.exit_status == search.UNDECIDED_EXIT != 0
    assert answer(outcome, arms, sim)[-1].startswith("undecided at %d trials" % JUDGE.max_trials)


def test_a_revision_faster_than_the_good_end_is_named_as_non_monotone():
    speeds = [100.0] * 4 + [130.0] * 4 + [80.0] * 9
    outcome, arms, sim = simulate.simulate(speeds, cv=0.02, seed=6)
    assert [n.split(" (")[0] for n in outcome.notes] == [
        "non-monotone: r04 revision 4 is faster than the good end", "non-monotone: r07 is faster than r00"]
    assert outcome.culprit.label == "r08"


def test_without_a_slowdown_no_culprit_is_named_in_nineteen_of_twenty():
    named = 0
    for seed in range(20):
        outcome, _, _ = simulate.simulate([100.0] * 17, cv=0.03, seed=seed)
        named += bool(outcome.found)
    assert named <= 1


def test_a_ten_percent_slowdown_in_one_of_sixteen_commits_is_named_twenty_of_twenty():
    for seed in range(20):
        at = 1 + seed % 16
        outcome, _, _ = simulate.simulate([100.0] * at + [100.0 / 1.1] * (17 - at), cv=0.03, seed=100 + seed)
        assert outcome.culprit is not None and outcome.culprit.label == "r%02d" % at, (seed, at)
        assert len(outcome.found) == 1 and math.isclose(outcome.found[0].share, 1.0, abs_tol=0.5)


def test_a_gradual_slowdown_names_no_single_commit():
    speeds = [100.0 * 0.98 ** i for i in range(9)]       # 2% slower at every commit: each below the threshold
    outcome, arms, sim = simulate.simulate(speeds, cv=0.01, seed=2)
    assert outcome.culprit is None and not outcome.found[0].confirmed
    assert answer(outcome, arms, sim)[-1].startswith(
        "no single first bad commit: the slowdown is gradual or in steps below the 5% threshold")
