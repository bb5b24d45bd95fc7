"""benchmarks/time_to_accuracy.py's verdicts: time to target against each rival (against a lower
bound where the rival missed the target in a seed), the final AP within one seed sd, with the
side named when it is not. The runs are written into a store by the tests (test_accuracy_report's
curves: the trainer crosses AP50 0.5 at 17.5 s on average, torchvision at 42.5 s)."""
import io

from benchmarks import time_to_accuracy as tta
from harness.report import build as report_build
from harness.results.accuracy_store import trial_key
from tests.report.test_accuracy_report import fill

TV = "torchvision/retinanet/fp32/local/1/1"


def verdict(results):
    out = io.StringIO()
    ok = tta.verdicts(report_build.accuracy(str(results), "r1").models[0], out)
    return ok, out.getvalue()


def test_time_to_target_passes_when_the_trainer_needs_at_most_1_over_1_2_of_the_time(tmp_path):
    fill(tmp_path)
    ok, text = verdict(tmp_path)
    assert "retinanet vs torchvision: time to target 17.5 s vs 42.5 s (limit 35.4 s, interpolated): PASS" in text
    # finals 0.75 +- 0.07 against 0.65 +- 0.07: more than one sd apart, and the side is named
    assert "final bbox_AP50 0.750 vs 0.650 +- 0.071 (one seed sd): FAIL (the trainer's is higher by 1.4 sd)" in text
    assert not ok


def test_a_rival_that_missed_a_seed_is_judged_by_its_lower_bound(tmp_path):
    store = fill(tmp_path)
    store.db.execute("UPDATE accuracy_points SET bbox_ap50 = 0.3 WHERE trial_key = ?", (trial_key(TV, 1),))
    _, text = verdict(tmp_path)
    # seed 0 at 35 s, seed 1 counted at its 60 s: >= 47.5 s, limit 47.5 / 1.2
    assert ("retinanet vs torchvision: time to target 17.5 s vs >= 47.5 s (torchvision missed it in 1 of 2 "
            "seeds, counted at their training time; limit 39.6 s, interpolated): PASS") in text


def test_a_bound_the_trainer_does_not_clear_fails(tmp_path):
    store = fill(tmp_path)
    # torchvision's seed 1 misses, and every checkpoint of it came after 5 s: bound (35 + 15) / 2 = 25 s
    store.db.execute("UPDATE accuracy_points SET bbox_ap50 = 0.3, train_seconds = train_seconds / 4 "
                     "WHERE trial_key = ?", (trial_key(TV, 1),))
    _, text = verdict(tmp_path)
    assert "time to target 17.5 s vs >= 25.0 s" in text and "limit 20.8 s, interpolated): PASS" in text
    store.db.execute("UPDATE accuracy_points SET train_seconds = train_seconds / 2 WHERE trial_key = ?",
                     (trial_key(TV, 1),))
    ok, text = verdict(tmp_path)
    assert "time to target 17.5 s vs >= 21.2 s" in text and "limit 17.7 s, interpolated): PASS" in text
    store.db.execute("UPDATE accuracy_points SET train_seconds = train_seconds / 2 WHERE trial_key = ?",
                     (trial_key(TV, 1),))
    ok, text = verdict(tmp_path)
    assert "time to target 17.5 s vs >= 19.4 s" in text and "limit 16.1 s, interpolated): FAIL" in text
    assert not ok


def test_the_trainer_missing_the_target_fails_whatever_the_rival_did(tmp_path):
    store = fill(tmp_path)
    store.db.execute("UPDATE accuracy_points SET bbox_ap50 = 0.3 WHERE trial_key = ?",
                     (trial_key("detbench-trainer/retinanet/fp32/local/1/1", 1),))
    ok, text = verdict(tmp_path)
    assert "retinanet vs torchvision: time to target: FAIL (the trainer missed it in 1 of 2 seeds)" in text
    assert not ok


def test_a_time_read_off_the_start_line_is_not_judged(tmp_path):
    store = fill(tmp_path)
    # the trainer's seed 0 past 0.5 by its first checkpoint: its time there is an assumption
    store.db.execute("UPDATE accuracy_points SET bbox_ap50 = 0.6 WHERE trial_key = ? AND iteration = 100",
                     (trial_key("detbench-trainer/retinanet/fp32/local/1/1", 0),))
    _, text = verdict(tmp_path)
    assert ("retinanet vs torchvision: time to target: not judged (reached by the first checkpoint: "
            "detbench-trainer in 1 of 2 seeds; that time is read off the line from the start, not measured)") in text
    assert "limit" not in text


def test_from_judges_a_finished_run_against_the_benchmark_s_targets(tmp_path, monkeypatch):
    fill(tmp_path)
    out = io.StringIO()
    assert tta.judge_finished(str(tmp_path), "r1", out) == 1
    text = out.getvalue()
    assert "retinanet vs torchvision: time to target 17.5 s vs 42.5 s (limit 35.4 s, interpolated): PASS" in text
    assert "given at report time" not in text          # the benchmark's target is the run's own
    monkeypatch.setitem(tta.TARGETS, "retinanet", ("bbox_AP", 0.3))
    out = io.StringIO()
    tta.judge_finished(str(tmp_path), "r1", out)
    text = out.getvalue()
    assert "The target was given at report time; the run's scenario set bbox_AP50 >= 0.5." in text
    assert "retinanet vs torchvision: time to target 21.2 s vs" in text


def test_a_seed_that_trained_on_a_shared_machine_is_not_judged_on_time(tmp_path):
    from harness.launch.machine_load import Load

    store = fill(tmp_path)
    tables = store.accuracy()
    tables.add_load("r1", trial_key(TV, 1), 100, 200, Load(20.0, 0.5, 0.0))      # 2.5% of a core: quiet
    _, text = verdict(tmp_path)
    assert "time to target 17.5 s vs 42.5 s" in text
    tables.add_load("r1", trial_key(TV, 1), 200, 300, Load(20.0, 4.0, 0.0))      # 20% of a core
    _, text = verdict(tmp_path)
    assert ("retinanet vs torchvision: time to target: not judged (trained on a shared machine: torchvision "
            "seed 1; see the report's note)") in text
    assert "limit" not in text


def test_an_interrupted_benchmark_keeps_its_run_and_says_how_to_go_on(tmp_path, monkeypatch, capsys):
    import tempfile

    seen = []

    def interrupted(args, work, *rest):
        seen.append(work)
        raise KeyboardInterrupt

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tta, "train_and_judge", interrupted)
    assert tta.main(["--quick", "--frameworks", "detbench-trainer"]) == 130
    [work] = seen
    assert work.startswith(str(tmp_path)) and __import__("os").path.isdir(work)     # not removed
    said = capsys.readouterr().out
    assert "interrupted; the run's trials so far stay in %s" % work in said
    assert "--from %s/results" % work in said


def test_a_finished_benchmark_without_a_work_folder_removes_its_temporary_one(tmp_path, monkeypatch):
    import os
    import tempfile

    seen = []
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tta, "train_and_judge", lambda args, work, *rest: seen.append(work) or 0)
    assert tta.main(["--quick", "--frameworks", "detbench-trainer"]) == 0
    assert seen and not os.path.exists(seen[0])
    kept = tmp_path / "kept"
    assert tta.main(["--quick", "--frameworks", "detbench-trainer", "--work", str(kept)]) == 0
    assert seen[1] == str(kept)
