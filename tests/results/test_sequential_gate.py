"""The sequential gate: a verdict as soon as the candidate's repeats make it clear, at the fixed gate's error
rates; `detbench compare --sequential`."""
import random

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.results import baseline, compare, sequential, significance
from tests.results.test_compare_rule import BASE, KEY, scaled, side

RULE = compare.Rule(threshold=0.05, alpha=0.01)


def quiet(level, n, rng, cv=0.003):
    return [level * (1 + rng.gauss(0, cv)) for _ in range(n)]


def test_the_looks_spend_alpha_and_start_where_the_exact_test_can_reach_it():
    levels = sequential.looks(7, 0.01, 10)
    assert list(levels) == [4, 5, 6, 7, 8, 9, 10]
    assert sum(levels.values()) == pytest.approx(0.01)
    assert levels[4] == pytest.approx(0.005) and levels[5] == pytest.approx(0.0025)
    # 3 candidate repeats against 7 can never give p below 1/120 > alpha/2: no look there
    assert significance.smallest_p(7, 3) > 0.005 > significance.smallest_p(7, 4)
    for k, level in levels.items():
        assert significance.smallest_p(7, k) < level, k
    assert sequential.looks(2, 0.01, 5) == {}      # two baseline repeats cannot reach it within 5


def test_an_identical_quiet_candidate_is_unchanged_after_four_repeats():
    rng = random.Random(1)
    base, cand = quiet(100, 7, rng), quiet(100, 10, rng)
    got = sequential.judge(base, cand, RULE)
    assert (got.verdict, got.used, got.done) == (compare.UNCHANGED, 4, True)
    assert got.p_within < got.level == pytest.approx(0.005)


def test_a_ten_percent_slowdown_is_a_regression_after_four_repeats():
    rng = random.Random(2)
    base, cand = quiet(100, 7, rng), quiet(100 / 1.10, 10, rng)
    got = sequential.judge(base, cand, RULE)
    assert (got.verdict, got.used, got.done) == (compare.REGRESSION, 4, True)
    assert got.ratio == pytest.approx(1 / 1.10, rel=0.01)


def test_a_ten_percent_speedup_is_an_improvement():
    rng = random.Random(3)
    got = sequential.judge(quiet(100, 7, rng), quiet(110, 10, rng), RULE)
    assert (got.verdict, got.used) == (compare.IMPROVEMENT, 4)


def test_a_slowdown_below_the_threshold_is_shown_unchanged_not_a_regression():
    rng = random.Random(4)
    got = sequential.judge(quiet(100, 7, rng), quiet(97, 10, rng), RULE)
    assert got.verdict == compare.UNCHANGED


def test_latency_is_judged_the_other_way_round():
    rng = random.Random(5)
    rule = compare.Rule(threshold=0.05, alpha=0.01, metric="p95")
    assert sequential.judge(quiet(20, 7, rng), quiet(22, 10, rng), rule).verdict == compare.REGRESSION
    assert sequential.judge(quiet(20, 7, rng), quiet(18, 10, rng), rule).verdict == compare.IMPROVEMENT
    assert sequential.judge(quiet(20, 7, rng), quiet(20, 10, rng), rule).verdict == compare.UNCHANGED


def test_too_few_repeats_are_undecided_and_not_done():
    rng = random.Random(6)
    got = sequential.judge(quiet(100, 7, rng), quiet(100 / 1.1, 3, rng), RULE)
    assert (got.verdict, got.used, got.done) == (sequential.UNDECIDED, 3, False)


def test_a_noisy_candidate_stays_undecided_until_the_last_look():
    rng = random.Random(7)
    base = quiet(100, 7, rng, cv=0.08)
    cand = quiet(95, 12, rng, cv=0.08)
    steps = sequential.judge_all(base, cand, RULE, max_trials=8)
    assert [s.used for s in steps] == list(range(1, 9))
    assert all(s.verdict == sequential.UNDECIDED for s in steps)
    assert steps[-1].done and not any(s.done for s in steps[:-1])     # no look left after 8: final
    assert steps[-1].p_within >= steps[-1].level and steps[-1].p_drop >= steps[-1].level


def test_repeats_after_the_deciding_look_do_not_change_the_answer():
    rng = random.Random(8)
    base, cand = quiet(100, 7, rng), quiet(100 / 1.1, 4, rng)
    first = sequential.judge(base, cand, RULE)
    later = sequential.judge(base, cand + [1000.0, 1000.0, 1000.0], RULE)
    assert first == later


def test_identical_runs_are_called_regressions_at_most_alpha_of_the_time_with_no_threshold():
    """The spending of alpha over the looks alone (the effect threshold all but off) keeps the
    false alarms of identical candidates at alpha or below."""
    rule = compare.Rule(threshold=1e-9, alpha=0.05)
    rng = random.Random(9)
    runs = 1500
    alarms = sum(sequential.judge(quiet(100, 7, rng, 0.02), quiet(100, 8, rng, 0.02), rule, 8).verdict
                 == compare.REGRESSION for _ in range(runs))
    assert alarms / runs <= 0.05 + 0.015      # alpha plus three binomial standard errors


def test_a_fixed_possible_regression_reads_as_unchanged_or_undecided():
    assert sequential.fixed_equivalent(compare.POSSIBLE, 0.98, RULE) == compare.UNCHANGED
    assert sequential.fixed_equivalent(compare.POSSIBLE, 0.90, RULE) == sequential.UNDECIDED
    assert sequential.fixed_equivalent(compare.REGRESSION, 0.90, RULE) == compare.REGRESSION


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        sequential.judge([], [1.0], RULE)
    with pytest.raises(ValueError):
        sequential.judge([1.0], [1.0], RULE, max_trials=0)


def write_side(tmp_path, name, values, **kw):
    path = tmp_path / name
    baseline.save(side(values, run_id=name, **kw), path)
    return str(path)


def gate_cli(tmp_path, base, cand, *extra, **candidate):
    return CliRunner().invoke(main, ["compare", "--baseline", write_side(tmp_path, "a.json", base),
                                     "--candidate", write_side(tmp_path, "b.json", cand, **candidate), *extra])


def test_compare_sequential_stops_at_the_first_clear_look_and_exits_1_on_a_regression(tmp_path):
    out = gate_cli(tmp_path, BASE, scaled(BASE, 0.9), "--sequential", "10")
    assert out.exit_code == 1, out.output
    assert out.output.startswith("%s: regression after 4 of 7 candidate repeats (ratio 0.9" % KEY), out.output
    out = gate_cli(tmp_path, BASE, list(reversed(BASE)), "--sequential", "10")
    assert out.exit_code == 0, out.output
    assert out.output.startswith("%s: unchanged after 4 of 7 candidate repeats" % KEY), out.output


def test_compare_sequential_says_when_more_repeats_are_needed(tmp_path):
    out = gate_cli(tmp_path, BASE, BASE[:3], "--sequential", "10")
    assert out.exit_code == 0, out.output
    assert out.output == "%s: undecided: 3 candidate repeats, too few for any look (the first needs 4)\n" % KEY
    noisy = [100.0, 92.0, 104.0, 97.0, 108.0]
    out = gate_cli(tmp_path, BASE, noisy, "--sequential", "10")
    assert out.output.startswith("%s: undecided after 5 of 5 candidate repeats" % KEY), out.output
    assert out.output.rstrip().endswith("run more candidate repeats"), out.output


def test_compare_sequential_keeps_not_comparable_cells(tmp_path):
    out = gate_cli(tmp_path, BASE, BASE, "--sequential", "10", settings={"iteration_ms": 22.0, "warmup": 3})
    assert out.exit_code == 0 and out.output.startswith("%s: not comparable\n  settings differ" % KEY), out.output

