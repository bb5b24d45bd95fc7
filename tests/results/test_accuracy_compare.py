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


# --- through `detbench compare`: two accuracy runs of a store -----------------------------------

def store_run(results, run_id, seconds_per_100, speed_run=False):
    """An accuracy run of the bundled trainer's RetinaNet (3 seeds) whose curve crosses AP50 0.5
    at 1.5 x seconds_per_100; with speed_run, a speed run with no accuracy trials instead."""
    import json

    from harness.results.accuracy_store import trial_key
    from harness.results.store import Store

    store = Store(results)
    scenario = {"name": "tta", "input_size": [128, 128], "batch_per_gpu": 4, "matrix": {"precision": ["fp32"]},
                "accuracy": {"depth": 18, "iterations": 200, "data": "/learnable", "seeds": [0, 1, 2],
                             "targets": {"retinanet": {"metric": "bbox_AP50", "value": 0.5}}}}
    store.create_run(run_id, "tta", "s.yaml", json.dumps(scenario), "local", {"cpu": {"model": "x"}}, [], [])
    if speed_run:
        return
    cell = "detbench-trainer/retinanet/fp32/local/1/1"
    tables = store.accuracy()
    tables.add_trials(run_id, [dict(trial_key=trial_key(cell, s), cell_key=cell, seed=s, folder="f", argv=[])
                               for s in (0, 1, 2)])
    for s in (0, 1, 2):
        key = trial_key(cell, s)
        for point in run((seconds_per_100 + s, 0.8))[0]:
            tables.add_checkpoint(run_id, key, point.iteration, point.train_seconds, "ck")
            tables.add_score(run_id, key, point)
        tables.set_status(run_id, key, "done")


def test_detbench_compare_judges_two_accuracy_runs_and_refuses_a_speed_run_beside_one(tmp_path):
    from click.testing import CliRunner

    from harness.cli import main

    store_run(tmp_path, "fast", 10)
    store_run(tmp_path, "slow", 20)
    store_run(tmp_path, "speed", 0, speed_run=True)
    cli = CliRunner()
    same = cli.invoke(main, ["compare", "--baseline", "fast", "--candidate", "fast", "--results", str(tmp_path)])
    assert same.exit_code == 0 and UNCHANGED in same.output, same.output
    worse = cli.invoke(main, ["compare", "--baseline", "fast", "--candidate", "slow", "--results", str(tmp_path)])
    assert worse.exit_code == 1, worse.output
    assert REGRESSION in worse.output and "time to target" in worse.output
    mixed = cli.invoke(main, ["compare", "--baseline", "speed", "--candidate", "slow", "--results", str(tmp_path)])
    assert mixed.exit_code == 2
    assert "slow is an accuracy run and speed is not" in mixed.output
