"""benchmarks/time_to_accuracy.py's verdicts: time to target against each rival as a ratio with its
Welch interval (against lower bounds where the rival missed the target in a seed), "parity" where
the interval holds 1; the final AP within one seed sd, with the side named when it is not and the
difference's interval beside. The runs are written into a store by the tests (test_accuracy_report's
curves: the trainer crosses AP50 0.5 at 15 and 20 s, torchvision at 35 and 50 s; `timed` writes
runs crossing at given seconds)."""
import io
import json

import pytest

from harness.measure.accuracy import AccuracyPoint
from harness.results.store import Store
from tests.report.test_accuracy_report import HOST, SCENARIO

from benchmarks import time_to_accuracy as tta
from harness.report import build as report_build
from harness.results.accuracy_store import trial_key
from tests.report.test_accuracy_report import fill

TV = "torchvision/retinanet/fp32/local/1/1"
# fill's curves: geometric means sqrt(15 * 20) / sqrt(35 * 50) = 0.41, but with two seeds a side (one
# degree of freedom) the interval is wide
PARITY = ("retinanet vs torchvision: time to target 17.5 s vs 42.5 s (interpolated): the trainer's / its 0.41x "
          "[0.15, 1.16] (ratio of geometric means, Welch 95% over 2 vs 2 seeds; limit 0.83x): FAIL: parity (the "
          "interval holds 1x)")


def verdict(results):
    out = io.StringIO()
    ok = tta.verdicts(report_build.accuracy(str(results), "r1").models[0], out)
    return ok, out.getvalue()


def timed(results, trainer, rival, missed=()):
    """Run r1 whose trainer and torchvision seeds cross AP50 0.5 at the seconds given per seed (each
    curve: AP50 0.25 at 2/3 of that time, 0.75 at 4/3 of it); a torchvision seed in `missed` stays
    at 0.3 and so counts at its whole training time, 4/3 of its figure."""
    store = Store(results)
    store.create_run("r1", "tta", "s.yaml", json.dumps(SCENARIO), "local", HOST, [], [])
    tables = store.accuracy()
    for fw, times in (("detbench-trainer", trainer), ("torchvision", rival)):
        cell = "%s/retinanet/fp32/local/1/1" % fw
        tables.add_trials("r1", [dict(trial_key=trial_key(cell, seed), cell_key=cell, seed=seed, folder="f",
                                      argv=[]) for seed in range(len(times))])
        for seed, seconds in enumerate(times):
            key = trial_key(cell, seed)
            low, high = (0.2, 0.3) if fw == "torchvision" and seed in missed else (0.25, 0.75)
            for it, t, ap50 in ((100, seconds * 2 / 3, low), (200, seconds * 4 / 3, high)):
                tables.add_checkpoint("r1", key, it, t, "ck")
                tables.add_score("r1", key, AccuracyPoint(it, t, ap50 / 2, ap50, eval_seconds=1.0))
            tables.set_status("r1", key, "done")
    return store


def test_two_seeds_a_side_apart_by_their_means_are_still_parity_on_the_interval(tmp_path):
    fill(tmp_path)
    ok, text = verdict(tmp_path)
    assert PARITY in text
    # finals 0.75 +- 0.07 against 0.65 +- 0.07: more than one sd apart, and the side is named
    assert ("final bbox_AP50 0.750 vs 0.650 +- 0.071 (one seed sd): FAIL (the trainer's is higher by 1.4 sd); the "
            "trainer's - its +0.100 [-0.204, +0.404] (Welch 95%): parity") in text
    assert not ok


@pytest.mark.parametrize("trainer, rival, says", [
    ([10, 11, 12], [20, 21, 22], "0.52x [0.43, 0.63] (ratio of geometric means, Welch 95% over 3 vs 3 seeds; "
                                 "limit 0.83x): PASS"),
    ([10, 20, 30], [15, 25, 35], "0.77x [0.24, 2.44] (ratio of geometric means, Welch 95% over 3 vs 3 seeds; "
                                 "limit 0.83x): FAIL: parity (the interval holds 1x)"),
    ([9.9, 10, 10.1], [11.0, 11.1, 11.2], "0.90x [0.88, 0.92] (ratio of geometric means, Welch 95% over 3 vs 3 "
                                        "seeds; limit 0.83x): FAIL: faster, but 1.2x is not shown"),
    ([20, 21, 22], [10, 11, 12], "1.91x [1.58, 2.31] (ratio of geometric means, Welch 95% over 3 vs 3 seeds; "
                                 "limit 0.83x): FAIL: slower"),
    ([10], [20], "0.50x on the means (one seed on a side: no interval; limit 0.83x): PASS"),
])
def test_time_to_target_passes_only_where_the_whole_interval_is_within_1_over_1_2(tmp_path, trainer, rival, says):
    timed(tmp_path, trainer, rival)
    _, text = verdict(tmp_path)
    [line] = [x for x in text.splitlines() if "time to target" in x]
    assert line.endswith("(interpolated): the trainer's / its " + says), line


def test_a_rival_that_missed_a_seed_is_judged_on_its_lower_bounds(tmp_path):
    # torchvision's seed 2 misses: counted at its whole training time, 22 * 4 / 3 = 29.3 s; the
    # interval's figures here and above are scipy's Welch interval on the logarithms
    timed(tmp_path, [10, 11, 12], [20, 21, 22], missed=[2])
    _, text = verdict(tmp_path)
    assert ("retinanet vs torchvision: time to target 11.0 s vs >= 23.4 s (torchvision missed it in 1 of 3 seeds, "
            "counted at their training time, so the ratio is at most this; interpolated): the trainer's / its 0.47x "
            "[0.31, 0.74] (ratio of geometric means, Welch 95% over 3 vs 3 seeds; limit 0.83x): PASS") in text


def test_the_trainer_missing_the_target_fails_whatever_the_rival_did(tmp_path):
    store = fill(tmp_path)
    store.db.execute("UPDATE accuracy_points SET bbox_ap50 = 0.3 WHERE trial_key = ?",
                     (trial_key("detbench-trainer/retinanet/fp32/local/1/1", 1),))
    ok, text = verdict(tmp_path)
    assert "retinanet vs torchvision: time to target: FAIL (the trainer missed it in 1 of 2 seeds)" in text
    assert not ok


def test_from_a_saved_file_judges_the_run_as_from_its_store(tmp_path, capsys):
    from harness.results import accuracy_file

    store = fill(tmp_path / "results")
    saved = tmp_path / "run.json"
    accuracy_file.save(store, "r1", str(saved))
    assert tta.main(["--from", str(tmp_path / "results"), "--run", "r1"]) == 1
    from_store = capsys.readouterr().out
    assert tta.main(["--from", str(saved)]) == 1
    assert capsys.readouterr().out == from_store
    assert "retinanet vs torchvision: time to target 17.5 s vs 42.5 s" in from_store
    assert tta.main(["--from", str(saved), "--with", "r2"]) == 2


def test_more_seeds_saved_as_a_second_run_are_judged_with_the_first_as_from_their_store(tmp_path, capsys):
    from harness.results import accuracy_file
    from tests.report.test_accuracy_join import add_run

    store = fill(tmp_path / "results")
    add_run(store, cell="detbench-trainer/retinanet/fp32/local/1/1", matrix={"precision": ["fp32"]},
            accuracy_seeds=[2], curves={2: [(100, 10.0, 0.2), (200, 20.0, 0.6), (300, 30.0, 0.75)]})
    for run in ("r1", "r2"):
        accuracy_file.save(store, run, str(tmp_path / ("%s.json" % run)))
    assert tta.main(["--from", str(tmp_path / "results"), "--run", "r1", "--with", "r2"]) == 1
    from_store = capsys.readouterr().out
    assert tta.main(["--from", str(tmp_path / "r1.json"), "--with", str(tmp_path / "r2.json")]) == 1
    assert capsys.readouterr().out == from_store
    # the trainer's three seeds (15, 20, 17.5 s: geometric mean 17.38) against torchvision's two (41.83)
    assert "time to target 17.5 s vs 42.5 s (interpolated): the trainer's / its 0.42x" in from_store
    assert "over 3 vs 2 seeds" in from_store and "detbench-trainer fp32 seed 2 (more seeds" in from_store
    assert tta.main(["--from", str(tmp_path / "r1.json"), "--with", "r2"]) == 2
    assert capsys.readouterr().err == ("time_to_accuracy: --with r2: with --from FILE, --with names a saved run's "
                                       "file too\n")


def test_a_time_read_off_the_start_line_is_not_judged(tmp_path):
    store = fill(tmp_path)
    # the trainer's seed 0 past 0.5 by its first checkpoint: its time there is an assumption
    store.db.execute("UPDATE accuracy_points SET bbox_ap50 = 0.6 WHERE trial_key = ? AND iteration = 100",
                     (trial_key("detbench-trainer/retinanet/fp32/local/1/1", 0),))
    _, text = verdict(tmp_path)
    assert ("retinanet vs torchvision: time to target: not judged (reached by the first checkpoint: "
            "detbench-trainer in 1 of 2 seeds; that time is read off the line from the start, not measured)") in text
    assert "limit" not in text


def test_from_judges_a_finished_run_against_its_own_declared_targets_as_exploratory_before_the_protocol(tmp_path):
    fill(tmp_path)     # a run stored without its order: it predates the protocol
    out = io.StringIO()
    assert tta.judge_finished(str(tmp_path), "r1", out) == 1
    text = out.getvalue()
    assert PARITY in text
    assert "given at report time" not in text          # the run's own target
    assert ("time to accuracy: exploratory, no verdict (no declared protocol: the run predates it): the checks "
            "read FAIL (retinanet fp32 vs torchvision fp32: time to bbox_AP50 0.5; ") in text


def test_a_seed_that_trained_on_a_shared_machine_is_not_judged_on_time(tmp_path):
    from harness.plan.machine_load import Load

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


def test_a_shared_interval_after_the_crossing_leaves_the_time_to_target_judged(tmp_path):
    from harness.plan.machine_load import Load

    store = fill(tmp_path)
    trainer = trial_key("detbench-trainer/retinanet/fp32/local/1/1", 0)
    # the trainer's seed 0 crosses between iterations 100 and 200: 200 to 300 only lengthens its time to train
    store.accuracy().add_load("r1", trainer, 200, 300, Load(20.0, 4.0, 0.0))
    _, text = verdict(tmp_path)
    assert PARITY in text
    store.accuracy().add_load("r1", trainer, 100, 200, Load(20.0, 4.0, 0.0))
    _, text = verdict(tmp_path)
    assert ("retinanet vs torchvision: time to target: not judged (trained on a shared machine: detbench-trainer "
            "seed 0; see the report's note)") in text
    # a seed that never reached the target is bounded by its whole training time: any shared interval counts
    store.db.execute("UPDATE accuracy_points SET bbox_ap50 = 0.3 WHERE trial_key = ?", (trial_key(TV, 1),))
    store.accuracy().add_load("r1", trial_key(TV, 1), 200, 300, Load(20.0, 4.0, 0.0))
    assert tta.shared_before_target(report_build.accuracy(str(tmp_path), "r1").models[0].series[1], "bbox_AP50",
                                    0.5) == [1]


def test_an_interrupted_benchmark_keeps_its_run_and_says_how_to_go_on(tmp_path, monkeypatch, capsys):
    import tempfile

    seen = []

    def interrupted(args, work, *rest):
        seen.append(work)
        raise KeyboardInterrupt

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tta, "train_and_judge", interrupted)
    assert tta.main(["--quick"]) == 130
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
    assert tta.main(["--quick"]) == 0
    assert seen and not os.path.exists(seen[0])
    kept = tmp_path / "kept"
    assert tta.main(["--quick", "--work", str(kept)]) == 0
    assert seen[1] == str(kept)


def test_from_with_a_joined_bf16_run_judges_the_trainer_s_bf16_curve_against_its_fp32_one(tmp_path):
    from tests.report.test_accuracy_join import add_run

    add_run(fill(tmp_path))
    out = io.StringIO()
    tta.judge_finished(str(tmp_path), "r1", out)
    assert ("bf16 vs fp32 curves of the trainer: not checked: the run has no bf16 cells (add them with "
            "--add-bf16)") in out.getvalue()
    out = io.StringIO()
    tta.judge_finished(str(tmp_path), "r1", out, ["r2"])
    text = out.getvalue()
    assert "# Time to accuracy: tta (run r1, with run r2)" in text
    assert ("retinanet: bf16 vs fp32 final bbox_AP50 0.725 vs 0.750 +- 0.071: PASS; bf16 - fp32 -0.025 [-0.371, "
            "+0.321] (Welch 95%): parity") in text
    assert ("retinanet: bf16 vs fp32 bbox_AP50 by iteration (bf16 vs fp32 +- fp32 sd): 100 0.200 vs 0.200 +- "
            "0.141, 200 0.550 vs 0.600 +- 0.141, 300 0.725 vs 0.750 +- 0.071: PASS") in text
    # the rivals' verdicts are the fp32 trainer's, as without the join
    assert PARITY in text


def test_a_join_that_is_refused_stops_the_judge_in_one_line(tmp_path, capsys):
    from tests.report.test_accuracy_join import add_run

    add_run(fill(tmp_path), accuracy_iterations=500)
    assert tta.judge_finished(str(tmp_path), "r1", io.StringIO(), ["r2"]) == 2
    assert capsys.readouterr().err == ("time_to_accuracy: --with r2: its cells cannot join run r1's report: "
                                       "accuracy.iterations 300 -> 500\n")


def stored_run(tmp_path, monkeypatch, frameworks="detbench-trainer,torchvision"):
    """A scenario as the benchmark writes it (a learnable folder's splits there, empty; a weights
    file whose layout is not checked: tests/plan check that), loaded and stored as `accuracy run`
    stores one: (the store, the stored scenario document)."""
    import json

    from harness import launch
    from harness.plan import weights
    from harness.results.store import Store

    monkeypatch.setattr(weights, "problem", lambda model, path: None)
    (tmp_path / "w.pt").write_bytes(b"")
    data = tmp_path / "data"
    for split in ("train", "val"):
        (data / "annotations").mkdir(parents=True, exist_ok=True)
        (data / "annotations" / ("instances_%s.json" % split)).write_text("{}")
    (data / "images").mkdir()
    (data / "images_val").mkdir()
    # the declared scenario as it is, but its frameworks and where its inputs lie
    text = open(tta.os.path.join(tta.SCENARIOS, "accuracy-mask_rcnn.yaml"), encoding="utf-8").read()
    text = text.replace("data/shapes128", str(data)).replace("data/weights/mask_rcnn-r18.pt", str(tmp_path / "w.pt"))
    text = text.replace("[detbench-trainer, torchvision, mmdetection, detectron2]", "[%s]" % frameworks)
    for name, line in (("torchvision", "  reference: torchvision\n"),
                       ("detbench-trainer", "  subject: detbench-trainer\n")):
        text = text if name in frameworks.split(",") else text.replace(line, "")
    text = "\n".join(x for x in text.splitlines() if not any(
        "framework: %s," % n in x for n in ("mmdetection", "detectron2") if n not in frameworks.split(","))) + "\n"
    text = text.replace("exclude:\norder", "exclude: []\norder")
    path = tmp_path / "scenario.yaml"
    path.write_text(text, encoding="utf-8")
    sc = launch.load_scenario(str(path))
    store = Store(tmp_path / "results")
    store.create_run("r1", sc.name, str(path), sc.model_dump_json(), "local", {}, [], [])
    return store, json.loads(sc.model_dump_json())


def test_the_bf16_scenario_of_a_stored_run_loads_with_only_the_trainer_s_bf16_cells_and_its_recipe(tmp_path,
                                                                                                   monkeypatch):
    import json

    from harness import launch
    from harness.plan import accuracy as plan_accuracy
    from harness.plan import scenario as scenario_mod

    store, first = stored_run(tmp_path, monkeypatch)
    path = tmp_path / "bf16.yaml"
    tta.bf16_scenario(store.read_run("r1"), str(path))
    sc = launch.load_scenario(str(path))
    assert sc.name == "time-to-accuracy-mask_rcnn-bf16-of-r1"
    assert [p.cell.key for p in scenario_mod.plan(sc) if p.excluded is None] == [
        "detbench-trainer/mask_rcnn/bf16/local/1/1"]
    second = json.loads(sc.model_dump_json())
    assert second["accuracy"]["seeds"] == [0, 1, 2, 3, 4] and second["accuracy"]["reference"] is None
    assert plan_accuracy.recipe_differences(first, second) == []


def test_add_bf16_is_refused_in_one_line_without_bf16_kernels_or_without_the_trainer(tmp_path, monkeypatch, capsys):
    store, _ = stored_run(tmp_path, monkeypatch, frameworks="torchvision")
    results = str(tmp_path / "results")
    monkeypatch.setattr(tta, "bf16_here", lambda: (False, "this CPU (Old) has no avx512_bf16: ..."))
    assert tta.main(["--from", results, "--add-bf16"]) == 2
    assert capsys.readouterr().err == "time_to_accuracy: --add-bf16: this CPU (Old) has no avx512_bf16: ...\n"
    monkeypatch.setattr(tta, "bf16_here", lambda: (True, ""))
    store.accuracy().add_trials("r1", [dict(trial_key="t", cell_key="torchvision/mask_rcnn/fp32/local/1/1", seed=0,
                                            folder="f", argv=[])])
    assert tta.main(["--from", results, "--run", "r1", "--add-bf16"]) == 2
    assert capsys.readouterr().err == ("time_to_accuracy: run r1 has no fp32 cell of the bundled trainer: a bf16 "
                                       "curve would have no fp32 one to meet\n")
    for precision in ("fp32", "bf16"):
        cell = "detbench-trainer/mask_rcnn/%s/local/1/1" % precision
        store.accuracy().add_trials("r1", [dict(trial_key=cell + "/s0", cell_key=cell, seed=0, folder="f", argv=[])])
    assert tta.main(["--from", results, "--run", "r1", "--add-bf16"]) == 2
    assert capsys.readouterr().err == ("time_to_accuracy: run r1 has the bundled trainer's bf16 cells already: "
                                       "judge it with --from alone\n")
    assert not (tmp_path / "scenario-bf16-of-r1.yaml").exists()
