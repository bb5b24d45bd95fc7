"""The time-to-accuracy report: the seed-form table (means over seeds, interpolated time to target,
speedup against the reference), the stability table, scope on every table, HTML autoescaped."""
import json

import pytest

from harness.measure.accuracy import AccuracyPoint, LossPoint
from harness.report import accuracy as report
from harness.report import build as report_build
from harness.results.accuracy_store import trial_key
from harness.results.store import Store

SCENARIO = {"name": "tta", "input_size": [128, 128], "batch_per_gpu": 4, "env": {"OMP_NUM_THREADS": "1"},
            "matrix": {"precision": ["fp32"]},
            "accuracy": {"depth": 18, "iterations": 300, "data": "/somewhere/learnable", "seeds": [0, 1],
                         "reference": "torchvision",
                         "targets": {"retinanet": {"metric": "bbox_AP50", "value": 0.5}}}}
HOST = {"cpu": {"model": "AMD EPYC"}, "facts": {"cpu": {"isa": ["avx2"]}}}
# framework -> seed -> [(iteration, train seconds, bbox AP50)]
CURVES = {
    "detbench-trainer": {0: [(100, 10.0, 0.3), (200, 20.0, 0.7), (300, 30.0, 0.8)],
                         1: [(100, 10.0, 0.1), (200, 20.0, 0.5), (300, 30.0, 0.7)]},
    "torchvision": {0: [(100, 20.0, 0.2), (200, 40.0, 0.6), (300, 60.0, 0.7)],
                    1: [(100, 20.0, 0.2), (200, 40.0, 0.4), (300, 60.0, 0.6)]},
}


def fill(results, scenario_name="tta", host=HOST):
    store = Store(results)
    sc = dict(SCENARIO, name=scenario_name)
    store.create_run("r1", scenario_name, "s.yaml", json.dumps(sc), "local", host, [], [])
    tables = store.accuracy()
    trials = [dict(trial_key=trial_key("%s/retinanet/fp32/local/1/1" % fw, seed),
                   cell_key="%s/retinanet/fp32/local/1/1" % fw, seed=seed, folder="f", argv=[])
              for fw in CURVES for seed in CURVES[fw]]
    tables.add_trials("r1", trials)
    for fw, seeds in CURVES.items():
        for seed, points in seeds.items():
            key = trial_key("%s/retinanet/fp32/local/1/1" % fw, seed)
            tables.add_losses("r1", key, [LossPoint(i, 2.0 / i) for i in range(1, 301)])
            for it, seconds, ap50 in points:
                tables.add_checkpoint("r1", key, it, seconds, "ck")
                tables.add_score("r1", key, AccuracyPoint(it, seconds, ap50 / 2, ap50, eval_seconds=1.0))
            tables.set_status("r1", key, "done")
    return store


def test_a_model_with_masks_gets_its_segm_map_and_ap50_beside_the_boxes_whatever_the_target(tmp_path):
    store = Store(tmp_path)
    store.create_run("r1", "tta", "s.yaml", json.dumps(SCENARIO), "local", HOST, [], [])
    tables = store.accuracy()
    cell = "detbench-trainer/mask_rcnn/fp32/local/1/1"
    tables.add_trials("r1", [dict(trial_key=trial_key(cell, seed), cell_key=cell, seed=seed, folder="f", argv=[])
                             for seed in (0, 1)])
    for seed, (segm, segm50) in enumerate([(0.70, 0.95), (0.80, 0.97)]):
        key = trial_key(cell, seed)
        for it, seconds, scale in ((100, 10.0, 0.5), (200, 20.0, 1.0)):
            tables.add_checkpoint("r1", key, it, seconds, "ck")
            tables.add_score("r1", key, AccuracyPoint(it, seconds, 0.6 * scale, 0.9 * scale, segm * scale,
                                                      segm50 * scale, eval_seconds=1.0))
        tables.set_status("r1", key, "done")
    for target in ({"mask_rcnn": ("bbox_AP50", 0.5)}, {"mask_rcnn": ("segm_AP", 0.5)}):
        head, [row] = report.main_table(report_build.accuracy(str(tmp_path), "r1", target).models[0])
        assert head[3:5] == ["BBOX mAP (AP50)", "SEGM mAP (AP50)"]
        assert row[3:5] == ["0.600 +- 0.000 (0.900 +- 0.000)", "0.750 +- 0.071 (0.960 +- 0.014)"]


def test_main_table_gives_means_interpolated_times_and_speedup(tmp_path):
    fill(tmp_path)
    block = report_build.accuracy(str(tmp_path), "latest").models[0]
    head, body = report.main_table(block)
    assert head == ["Framework", "Precision", "Batch", "BBOX mAP (AP50)", "Time to train", "Time to target",
                    "Speedup"]
    rows = {r[0]: r for r in body}
    # trainer: seed 0 crosses 0.5 at 10 + 10 * (0.2/0.4) = 15 s, seed 1 exactly at 20 s -> 17.5 +- 3.5
    assert rows["detbench-trainer"][5] == "17.5 +- 3.5 s"
    # torchvision: seed 0 at 20 + 20 * 0.3/0.4 = 35 s, seed 1 at 40 + 20 * 0.1/0.2 = 50 s -> 42.5
    assert rows["torchvision"][5] == "42.5 +- 10.6 s"
    assert rows["detbench-trainer"][6] == "%.2fx" % (42.5 / 17.5)
    assert rows["torchvision"][6] == "1.00x"
    assert rows["detbench-trainer"][3] == "0.375 +- 0.035 (0.750 +- 0.071)"
    assert rows["detbench-trainer"][4] == "30.0 +- 0.0 s"


def test_stability_table_lists_every_seed(tmp_path):
    fill(tmp_path)
    block = report_build.accuracy(str(tmp_path), "r1").models[0]
    head, body = report.stability_table(block)
    assert head == ["Framework", "Precision", "Seed 1", "Seed 2", "Mean", "Standard deviation"]
    assert body[0] == ["detbench-trainer", "fp32", "0.800", "0.700", "0.750", "0.071"]


def test_a_target_not_reached_by_every_seed_has_no_time_but_a_bound(tmp_path):
    store = fill(tmp_path)
    key = trial_key("torchvision/retinanet/fp32/local/1/1", 1)
    store.db.execute("UPDATE accuracy_points SET bbox_ap50 = 0.3 WHERE trial_key = ?", (key,))
    block = report_build.accuracy(str(tmp_path), "r1").models[0]
    rows = {r[0]: r for r in report.main_table(block)[1]}
    # seed 0 crosses at 35 s; seed 1 never does, and counts at its whole 60 s: the mean is at least 47.5 s
    assert rows["torchvision"][5] == "not reached in 1 of 2 seeds (best bbox AP50 0.300), mean >= 47.5 s"
    assert rows["torchvision"][6] == "-"
    # so the trainer's speedup over it (17.5 s) is at least 47.5 / 17.5
    assert rows["detbench-trainer"][6] == ">=%.2fx" % (47.5 / 17.5)


def test_a_row_that_misses_the_target_has_at_most_the_bound_s_speedup(tmp_path):
    store = fill(tmp_path)
    for seed in (0, 1):
        store.db.execute("UPDATE accuracy_points SET bbox_ap50 = 0.2 WHERE trial_key = ?",
                         (trial_key("detbench-trainer/retinanet/fp32/local/1/1", seed),))
    block = report_build.accuracy(str(tmp_path), "r1").models[0]
    rows = {r[0]: r for r in report.main_table(block)[1]}
    assert rows["detbench-trainer"][5] == "not reached (best bbox AP50 0.200), mean >= 30.0 s"
    assert rows["detbench-trainer"][6] == "<=%.2fx" % (42.5 / 30.0)


def test_a_target_reached_by_the_first_checkpoint_is_named_as_read_off_the_start_line(tmp_path):
    store = fill(tmp_path)
    # the trainer's seed 0 already at 0.6 by its first checkpoint (100 iterations, 10 s)
    store.db.execute("UPDATE accuracy_points SET bbox_ap50 = 0.6 WHERE trial_key = ? AND iteration = 100",
                     (trial_key("detbench-trainer/retinanet/fp32/local/1/1", 0),))
    block = report_build.accuracy(str(tmp_path), "r1").models[0]
    rows = {r[0]: r for r in report.main_table(block)[1]}
    # 0.5 / 0.6 of the way from (0 s, AP 0) to 10 s: 8.3 s, with seed 1's 20 s
    assert rows["detbench-trainer"][5] == "14.2 +- 8.2 s (1 of 2 seeds by the first checkpoint)"
    assert rows["torchvision"][5] == "42.5 +- 10.6 s"
    [note] = [n for n in report.notes(block) if n.startswith("Reached by the first checkpoint")]
    assert "(detbench-trainer fp32 in 1 of 2 seeds)" in note and "accuracy.eval_every" in note


def test_a_seed_not_finished_yet_is_left_out_of_every_figure_and_named(tmp_path):
    store = fill(tmp_path)
    # an interrupted run: torchvision's seed 1 was running, its scores not written yet
    key = trial_key("torchvision/retinanet/fp32/local/1/1", 1)
    store.db.execute("DELETE FROM accuracy_points WHERE trial_key = ?", (key,))
    store.accuracy().set_status("r1", key, "running")
    block = report_build.accuracy(str(tmp_path), "r1").models[0]
    rows = {r[0]: r for r in report.main_table(block)[1]}
    # seed 0 alone (35 s), not "not reached in 1 of 2 seeds"
    assert rows["torchvision"][5] == "35.0 s"
    assert rows["detbench-trainer"][6] == "%.2fx" % (35.0 / 17.5)
    assert report.stability_table(block)[1][1] == ["torchvision", "fp32", "0.700", "-", "0.700", "-"]
    assert "Not finished: torchvision fp32 seed 1. Every figure is over the finished seeds; " \
           "`detbench accuracy run --resume` goes on with the rest." in report.notes(block)


def test_a_target_given_at_report_time_reads_the_same_curves_and_names_the_run_s_own(tmp_path):
    fill(tmp_path)
    block = report_build.accuracy(str(tmp_path), "r1", {"retinanet": ("bbox_AP", 0.3)}).models[0]
    assert (block.metric, block.target) == ("bbox_AP", 0.3)
    rows = {r[0]: r for r in report.main_table(block)[1]}
    # bbox AP is half of AP50 in these curves: seed 0 crosses 0.3 at 17.5 s, seed 1 at 25 s
    assert rows["detbench-trainer"][5] == "21.2 +- 5.3 s"
    assert "The target was given at report time; the run's scenario set bbox_AP50 >= 0.5." in report.notes(block)
    assert report.stability_table(block)[1][0][2:4] == ["0.400", "0.350"]
    same = report_build.accuracy(str(tmp_path), "r1", {"retinanet": ("bbox_AP50", 0.5)}).models[0]
    assert not any("given at report time" in n for n in report.notes(same))


def test_a_report_time_target_for_a_model_the_run_lacks_is_refused_naming_it(tmp_path):
    fill(tmp_path)
    from harness.errors import UserError
    with pytest.raises(UserError, match="--target mask_rcnn: accuracy run r1 has no such model .its models: retinanet"):
        report_build.accuracy(str(tmp_path), "r1", {"mask_rcnn": ("segm_AP", 0.3)})


@pytest.mark.parametrize("text, says", [
    ("faster_rcnn", "expected MODEL=METRIC:VALUE"),
    ("faster_rcnn=bbox_AP", "expected MODEL=METRIC:VALUE"),
    ("faster_rcnn=mAP:0.5", "unknown metric 'mAP'"),
    ("faster_rcnn=bbox_AP:1.5", "an AP in .0, 1.*'1.5'"),
    ("faster_rcnn=bbox_AP:half", "an AP in .0, 1.*'half'"),
])
def test_a_malformed_report_time_target_is_refused_saying_what_is_wrong(text, says):
    with pytest.raises(ValueError, match=says):
        report.parse_target(text)
    assert report.parse_target("faster_rcnn=bbox_AP:0.5") == ("faster_rcnn", ("bbox_AP", 0.5))


def test_markdown_carries_scope_and_says_interpolated(tmp_path):
    fill(tmp_path)
    text = report.render_markdown(report_build.accuracy(str(tmp_path), "r1"))
    assert "Scope: AMD EPYC (avx2), input 128x128, precision fp32, batch 4, threads 1, ResNet-18 FPN" in text
    assert "interpolated" in text
    assert "| Framework | Precision | Seed 1 | Seed 2 | Mean | Standard deviation |" in text


def test_html_is_autoescaped_and_has_both_curves(tmp_path):
    fill(tmp_path, scenario_name="<script>alert(1)</script>")
    page = report.render_html(report_build.accuracy(str(tmp_path), "r1"))
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("data:image/png;base64,") == 2
    assert page.count("precision fp32, batch 4, threads 1") >= 3     # every table carries the scope


def test_the_ap_curve_leaves_out_an_unscored_checkpoint_and_dots_the_assumed_start(tmp_path):
    store = Store(tmp_path)
    store.create_run("r1", "tta", "s.yaml", json.dumps(SCENARIO), "local", HOST, [], [])
    tables = store.accuracy()
    cell = "detbench-trainer/mask_rcnn/fp32/local/1/1"
    key = trial_key(cell, 0)
    tables.add_trials("r1", [dict(trial_key=key, cell_key=cell, seed=0, folder="f", argv=[])])
    for it, seconds, segm in ((100, 10.0, 0.5), (200, 20.0, None), (300, 30.0, 0.7)):
        tables.add_checkpoint("r1", key, it, seconds, "ck")
        tables.add_score("r1", key, AccuracyPoint(it, seconds, 0.4, 0.8, segm, None, eval_seconds=1.0))
    tables.set_status("r1", key, "done")
    block = report_build.accuracy(str(tmp_path), "r1", {"mask_rcnn": ("segm_AP", 0.6)}).models[0]
    lines = report.ap_time_figure(block, "scope").axes[0].lines
    marked = [ln.get_xydata().tolist() for ln in lines if ln.get_marker() == "o"]
    start = [ln for ln in lines if ln.get_linestyle() == ":"]
    assert marked == [[[10.0, 0.5], [30.0, 0.7]]]          # the checkpoint without segm is not drawn at 0
    assert [ln.get_xydata().tolist() for ln in start] == [[[0.0, 0.0], [10.0, 0.5]]]
    assert start[0].get_marker() in (None, "None", "")


def test_a_store_without_accuracy_runs_says_so(tmp_path):
    Store(tmp_path)
    from harness.errors import UserError
    with pytest.raises(UserError, match="no accuracy run"):
        report_build.accuracy(str(tmp_path), "latest")


def test_a_diverged_loss_is_left_out_of_the_loss_curve(tmp_path):
    store = fill(tmp_path)
    key = trial_key("torchvision/retinanet/fp32/local/1/1", 0)
    store.accuracy().add_losses("r1", key, [(301, float("nan")), (302, 1.5)])
    losses = store.accuracy().losses("r1", key)
    assert [p.iteration for p in losses][-2:] == [300, 302]


def logged(fw, **changes):
    """A DETBENCH_SETTINGS pair as a framework's training program would log it."""
    settings = {"images_per_device": 4, "input_size": [128, 128], "lr": 0.005, "clip_grad_norm": 35.0,
                "norm": "frozen_bn"}
    settings.update(changes)
    return settings, {"batch_norm": "%s's frozen BN" % fw, "optimizer": "SGD (foreach)"}


def test_settings_the_frameworks_logged_differently_are_named_and_implementations_listed(tmp_path):
    store = fill(tmp_path)
    tables = store.accuracy()
    for fw, seeds in CURVES.items():
        for seed in seeds:
            # torchvision's second seed ran without the clip; the norms differ across frameworks
            changes = {"norm": "bn"} if fw == "torchvision" else {}
            if fw == "torchvision" and seed == 1:
                changes["clip_grad_norm"] = 0.0
            tables.add_settings("r1", trial_key("%s/retinanet/fp32/local/1/1" % fw, seed), *logged(fw, **changes))
    notes = report.notes(report_build.accuracy(str(tmp_path), "r1").models[0])
    differ = [n for n in notes if n.startswith("Not like for like")]
    assert differ == [
        'Not like for like, RetinaNet fp32: clip_grad_norm differs (detbench-trainer 35.0, torchvision 35.0 / 0.0 '
        'across repeats).',
        'Not like for like, RetinaNet fp32: norm differs (detbench-trainer "frozen_bn", torchvision "bn").']
    assert "Implementation, torchvision fp32: BN: torchvision's frozen BN; optimizer: SGD (foreach)." in notes


def test_an_implementation_part_is_read_from_every_seed_and_a_seed_that_differs_is_named(tmp_path):
    store = fill(tmp_path)
    tables = store.accuracy()
    for seed in CURVES["torchvision"]:
        settings, impl = logged("torchvision")
        if seed > 0:        # a later seed's program also names its mask paste, and another optimizer
            impl.update(mask_paste="widened box", optimizer="SGD (for loop)")
        tables.add_settings("r1", trial_key("torchvision/retinanet/fp32/local/1/1", seed), settings, impl)
    notes = report.notes(report_build.accuracy(str(tmp_path), "r1").models[0])
    assert ("Implementation, torchvision fp32: BN: torchvision's frozen BN; optimizer: SGD (foreach) (seed 1: SGD "
            "(for loop)); mask paste: widened box." in notes)


def test_a_key_one_framework_did_not_log_is_named_and_not_taken_for_equal(tmp_path):
    store = fill(tmp_path)
    tables = store.accuracy()
    for fw, seeds in CURVES.items():
        for seed in seeds:     # a program of an older version: its line has no lr_decay
            changes = {} if fw == "torchvision" else {"lr_decay": "x0.1 at 800"}
            tables.add_settings("r1", trial_key("%s/retinanet/fp32/local/1/1" % fw, seed), *logged(fw, **changes))
    notes = report.notes(report_build.accuracy(str(tmp_path), "r1").models[0])
    assert "Not compared, RetinaNet fp32: lr_decay, logged by detbench-trainer only." in notes
    assert not [n for n in notes if n.startswith("Not like for like")]


def test_a_framework_that_logged_no_settings_is_said_to_be_uncompared(tmp_path):
    store = fill(tmp_path)
    tables = store.accuracy()
    for seed in CURVES["detbench-trainer"]:
        tables.add_settings("r1", trial_key("detbench-trainer/retinanet/fp32/local/1/1", seed),
                            *logged("detbench-trainer"))
    notes = report.notes(report_build.accuracy(str(tmp_path), "r1").models[0])
    assert "RetinaNet fp32: no settings line from torchvision: its settings are not compared." in notes
    assert not [n for n in notes if n.startswith("Not like for like")]


def test_the_first_settings_line_of_a_trial_is_kept_over_a_resumes(tmp_path):
    tables = fill(tmp_path).accuracy()
    key = trial_key("torchvision/retinanet/fp32/local/1/1", 0)
    tables.add_settings("r1", key, *logged("torchvision"))
    tables.add_settings("r1", key, *logged("torchvision", lr=1.0))
    assert tables.settings("r1")[key][0]["lr"] == 0.005


def test_the_report_command_takes_a_target_and_refuses_a_bad_one_in_one_line(tmp_path):
    from click.testing import CliRunner

    from harness.cli import main
    fill(tmp_path)
    ok = CliRunner().invoke(main, ["accuracy", "report", "--results", str(tmp_path),
                                   "--target", "retinanet=bbox_AP:0.3"])
    assert ok.exit_code == 0, ok.output
    assert "## RetinaNet: time to bbox_AP 0.3" in ok.output and "given at report time" in ok.output
    bad = CliRunner().invoke(main, ["accuracy", "report", "--results", str(tmp_path), "--target", "retinanet=AP:0.3"])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines() == [
        "detbench: error: --target 'retinanet=AP:0.3': unknown metric 'AP' (known: bbox_AP, bbox_AP50, segm_AP, "
        "segm_AP50)"]


def test_published_accuracy_tables_sit_beside_the_runs_and_none_leaves_them_out(tmp_path):
    from click.testing import CliRunner

    from harness.cli import main
    fill(tmp_path)
    text = CliRunner().invoke(main, ["accuracy", "report", "--results", str(tmp_path)]).output
    mine, published = text.split("## Published: NVIDIA DeepLearningExamples")
    assert "| detbench-trainer | fp32 | 4 |" in mine and "34.53" not in mine
    assert "not compared with them" in published
    assert "| 8 | 512 x 512 | TF32 | 104 | 34.53 | 8.5 hrs | - |" in published
    assert "| 8 GPUs, final AP BBox | 34.38 | 34.56 | 34.3 | 34.34 | 34.4 | 34.39 | 0.1 |" in published
    assert "| 1 | 162 | 397 | 2.45 | 1 | 1 |" not in published      # a throughput table is not one of them
    page = CliRunner().invoke(main, ["accuracy", "report", "--results", str(tmp_path), "--format", "html"]).output
    assert "<td>8 GPUs, final AP BBox</td>" in page and "<td>16.9 hrs</td>" in page
    bare = CliRunner().invoke(main, ["accuracy", "report", "--results", str(tmp_path), "--published", "none"])
    assert bare.exit_code == 0 and "Published" not in bare.output and "| detbench-trainer | fp32 | 4 |" in bare.output
    wrong = CliRunner().invoke(main, ["accuracy", "report", "--results", str(tmp_path), "--published", "nvidia"])
    assert wrong.exit_code == 2 and len(wrong.output.strip().splitlines()) == 1
    assert "no published figures named 'nvidia'" in wrong.output


def test_a_seed_resumed_after_an_interruption_is_named_with_its_second_start_up(tmp_path):
    tables = fill(tmp_path).accuracy()
    key = trial_key("torchvision/retinanet/fp32/local/1/1", 1)
    tables.add_resume("r1", key, 200, 201, 31.25)
    tables.add_resume("r1", key, 200, 203, 12.5)       # resumed again from the same checkpoint: the later one stands
    assert tables.resumes("r1") == {key: [(200, 203, 12.5)]}
    block = report_build.accuracy(str(tmp_path), "latest").models[0]
    [note] = [n for n in report.notes(block) if n.startswith("Resumed from a checkpoint")]
    assert note.startswith("Resumed from a checkpoint: torchvision fp32 seed 1 after iteration 200 (12.5 s from the "
                           "resumed program's start to its first logged iteration, 203). ")
    assert "one more start-up" in note and "not counted" in note


def test_a_run_without_resumes_has_no_such_note(tmp_path):
    fill(tmp_path)
    block = report_build.accuracy(str(tmp_path), "latest").models[0]
    assert not [n for n in report.notes(block) if n.startswith("Resumed")]


def test_checkpoint_intervals_on_a_shared_machine_are_named_and_quiet_ones_are_not(tmp_path):
    from harness.plan.machine_load import Load

    tables = fill(tmp_path).accuracy()
    key = trial_key("torchvision/retinanet/fp32/local/1/1", 0)
    tables.add_load("r1", key, 0, 100, Load(20.0, 0.9, 0.0))          # 4.5% of a core: below the share named
    tables.add_load("r1", key, 100, 200, Load(20.0, 5.0, 0.0))
    tables.add_load("r1", key, 200, 300, Load(20.0, 0.0, 1.5))        # the hypervisor's steal counts too
    assert [row[:2] for row in tables.loads("r1")[key]] == [(0, 100), (100, 200), (200, 300)]
    block = report_build.accuracy(str(tmp_path), "latest").models[0]
    [note] = [n for n in report.notes(block) if n.startswith("Trained on a shared machine")]
    assert ("torchvision fp32 seed 0, iterations 100 to 200: other processes used 5.0 s of CPU in 20.0 s "
            "(25% of a core)") in note
    assert "iterations 200 to 300: other processes used 0.0 s of CPU in 20.0 s (0% of a core), the hypervisor " \
           "took 1.5 s (steal)" in note
    assert "iterations 0 to 100" not in note


REV_A = {"version": "0.1.0", "commit": "a" * 40, "dirty": False}
REV_B = {"version": "0.1.0", "commit": "b" * 40, "dirty": False}


def test_trainings_that_ran_different_code_are_named_each_with_its_revision(tmp_path):
    tables = fill(tmp_path).accuracy()
    for fw in CURVES:
        for seed in CURVES[fw]:
            tables.add_code("r1", trial_key("%s/retinanet/fp32/local/1/1" % fw, seed), 0, REV_A)
    resumed = trial_key("torchvision/retinanet/fp32/local/1/1", 1)
    tables.add_code("r1", resumed, 200, dict(REV_A, dirty=True))   # resumed from a checkout with edits
    assert tables.codes("r1")[resumed] == [(0, REV_A), (200, dict(REV_A, dirty=True))]
    block = report_build.accuracy(str(tmp_path), "latest").models[0]
    [note] = [n for n in report.notes(block) if n.startswith("Trained with")]
    assert note.startswith("Trained with 2 revisions of detbench's code")
    assert "torchvision fp32 seed 1 from iteration 200 detbench 0.1.0 at aaaaaaaaaaaa with uncommitted changes" in note
    assert "detbench-trainer fp32 seed 0 from the start detbench 0.1.0 at aaaaaaaaaaaa;" in note

    tables.add_code("r1", resumed, 200, REV_B)   # the same checkpoint gone on from again: the later program stands
    [note] = [n for n in report.notes(report_build.accuracy(str(tmp_path), "latest").models[0])
              if n.startswith("Trained with")]
    assert "seed 1 from iteration 200 detbench 0.1.0 at bbbbbbbbbbbb" in note and "uncommitted" not in note


def test_a_run_whose_trainings_all_ran_one_revision_has_no_code_note(tmp_path):
    tables = fill(tmp_path).accuracy()
    for fw in CURVES:
        for seed in CURVES[fw]:
            tables.add_code("r1", trial_key("%s/retinanet/fp32/local/1/1" % fw, seed), 0, REV_A)
    block = report_build.accuracy(str(tmp_path), "latest").models[0]
    assert not [n for n in report.notes(block) if "revision" in n]


def test_a_trial_redone_twice_within_a_second_keeps_both_redo_rows_and_prints_them_to_the_second(tmp_path):
    from harness.launch import accuracy as launch_accuracy

    tables = fill(tmp_path).accuracy()
    key = trial_key("torchvision/retinanet/fp32/local/1/1", 0)
    for _ in range(2):
        launch_accuracy.redo_trials(tables, "r1", [key], open(tmp_path / "out.txt", "a"))
    whens = [when for when, _, _ in tables.redos("r1")[key]]
    assert len(whens) == 2 and whens[0] < whens[1]
    block = report_build.accuracy(str(tmp_path), "latest").models[0]
    [note] = [n for n in report.notes(block) if n.startswith("Trained again")]
    for when in whens:
        assert report._to_second(when) in note and when not in note
    assert report._to_second("2026-11-27T22:50:01.123456+0000") == "2026-11-27T22:50:01+0000"


def test_the_speedup_gets_its_welch_bound_in_a_note_and_parity_where_the_bound_holds_one(tmp_path):
    store = fill(tmp_path)
    [block] = report_build.accuracy(str(tmp_path), "r1").models
    # torchvision (the reference) crosses at 35 and 50 s, the trainer at 15 and 20 s: sqrt(1750 / 300) = 2.42
    [note] = [n for n in report.notes(block) if n.startswith("Speedup with its bound")]
    assert note.endswith("on the logarithms (\"parity\" where it holds 1x): detbench-trainer fp32 2.42x [0.86, "
                         "6.76], parity.")
    # a third seed each, the trainer's at 15 s and torchvision's at 30 s: (52500 / 4500) ** (1 / 3) = 2.27, and
    # the interval (scipy's Welch interval on the logarithms: 1.33 to 3.87) leaves 1 behind
    for fw, seconds in (("detbench-trainer", 10.0), ("torchvision", 20.0)):
        cell = "%s/retinanet/fp32/local/1/1" % fw
        key = trial_key(cell, 2)
        store.accuracy().add_trials("r1", [dict(trial_key=key, cell_key=cell, seed=2, folder="f", argv=[])])
        for it, ap50 in ((100, 0.25), (200, 0.75)):
            store.accuracy().add_checkpoint("r1", key, it, seconds * it / 100, "ck")
            store.accuracy().add_score("r1", key, AccuracyPoint(it, seconds * it / 100, ap50 / 2, ap50))
        store.accuracy().set_status("r1", key, "done")
    [block] = report_build.accuracy(str(tmp_path), "r1").models
    assert [r.time_to_target.values for r in report.rows(block)] == [(15.0, 20.0, 15.0), (35.0, 50.0, 30.0)]
    assert report.speedup_bounds(block) == ["detbench-trainer fp32 2.27x [1.33, 3.87]"]
