"""An accuracy report under the protocol its run declared: the headline is the tool's overall
verdict on every declared check (failing ones named), the speedup profile over the target range
sits beside the time-per-iteration and time-to-train ratios, nothing learned is never PASS, a
level no framework reached is named with each one's best, `--with` of seeds outside a declared
sequential plan is exploratory, and runs made before the protocol are labelled as such."""
import glob
import json
import os

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.measure.accuracy import AccuracyPoint
from harness.report import accuracy as report
from harness.report import build as report_build
from harness.results.accuracy_store import trial_key
from harness.results.store import Store
from tests.report.test_accuracy_report import HOST

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = {"name": "tta", "mode": "accuracy", "input_size": [128, 128], "batch_per_gpu": 4,
       "env": {"OMP_NUM_THREADS": "1"},
       "matrix": {"framework": ["detbench-trainer", "torchvision"], "model": ["retinanet"], "precision": ["fp32"]},
       "accuracy": {"depth": 18, "iterations": 300, "data": "/somewhere/learnable", "seeds": [0, 1, 2],
                    "reference": "torchvision", "reached": "stays", "subject": "detbench-trainer", "speedup": 1.2,
                    "targets": {"retinanet": {"metric": "bbox_AP50", "range": [0.4, 0.6], "step": 0.1}}}}
# the trainer's seeds reach AP50 0.3, 0.6 and their final at s, 2s and 3s seconds; torchvision's the same
# at about 2.5 times the seconds: every level is crossed at 1.33s, 1.67s and 2s
TRAINER = {0: 10.0, 1: 10.1, 2: 10.2}
RIVAL = {0: 25.0, 1: 25.2, 2: 25.4}
FINALS = {0: 0.80, 1: 0.81, 2: 0.79}


def add(store, run_id, seconds, framework="detbench-trainer", precision="fp32", finals=FINALS, doc=None,
        look=1, order=True):
    """Run `run_id` (created on first use, with `doc` and an order stored unless `order` is False)
    gets one seed of `framework` per entry of `seconds`."""
    if not store.db.execute("SELECT 1 FROM runs WHERE id=?", (run_id,)).fetchone():
        store.create_run(run_id, "tta", "s.yaml", json.dumps(doc or DOC), "local", HOST, [], [],
                         order={"seed": 5, "drawn": False, "look": look} if order else None)
    cell = "%s/retinanet/%s/local/1/1" % (framework, precision)
    tables = store.accuracy()
    tables.add_trials(run_id, [dict(trial_key=trial_key(cell, s), cell_key=cell, seed=s, folder="f", argv=[])
                               for s in seconds])
    for seed, s in seconds.items():
        key = trial_key(cell, seed)
        for it, t, ap50 in ((100, s, 0.3), (200, 2 * s, 0.6), (300, 3 * s, finals[seed])):
            tables.add_checkpoint(run_id, key, it, t, "ck")
            tables.add_score(run_id, key, AccuracyPoint(it, t, ap50 / 2, ap50, eval_seconds=1.0))
        tables.set_status(run_id, key, "done")
    return store


def protocol_run(results, **kw):
    store = Store(results)
    add(store, "r1", TRAINER, **kw)
    return add(store, "r1", RIVAL, framework="torchvision", **kw)


def test_under_its_protocol_a_run_s_headline_is_the_verdict_on_every_declared_level(tmp_path):
    protocol_run(tmp_path)
    rep = report_build.accuracy(str(tmp_path), "r1")
    v = rep.verdict
    assert [c.name for c in v.checks] == [
        "retinanet fp32 vs torchvision fp32: time to bbox_AP50 0.4", "retinanet fp32 vs torchvision fp32: time to "
        "bbox_AP50 0.5", "retinanet fp32 vs torchvision fp32: time to bbox_AP50 0.6",
        "retinanet fp32 vs torchvision fp32: final bbox_AP50"]
    assert {c.status for c in v.checks} == {"PASS"} and v.headline() == "PASS"
    text = report.render_markdown(rep)
    assert text.splitlines()[2] == "**Time to accuracy: PASS**"
    assert ("Protocol declared before the run: subject detbench-trainer, claim 1.20x at every target level; a level "
            "counts as reached where the metric stays at or above it at every later checkpoint; look 1: seeds 0,1,2 "
            "(alpha 0.0500); each seed's round ran in the order drawn from seed 5.") in text
    assert "Place in the round, run r1 (order seed 5, 3 rounds of 2 trials)" in text


def test_the_speedup_profile_gives_each_level_beside_the_per_iteration_and_time_to_train_ratios(tmp_path):
    protocol_run(tmp_path)
    block = report_build.accuracy(str(tmp_path), "r1").models[0]
    head, body = report.profile_sections(report_build.accuracy(str(tmp_path), "r1"), block)[0][1]
    assert head == ["bbox_AP50", "detbench-trainer fp32 over torchvision fp32"]
    assert [r[0] for r in body] == ["0.4", "0.5", "0.6", "time per iteration", "time to train"]
    # every crossing, each iteration and the whole training are 2.5x faster: the same ratio everywhere
    assert all(r[1].startswith("2.50x [") for r in body), body


def test_a_failing_level_is_named_in_the_headline(tmp_path):
    # torchvision as fast at the highest level only: its last stretch crosses 0.6 as early as the trainer's
    store = protocol_run(tmp_path)
    for seed, s in TRAINER.items():
        store.db.execute("UPDATE accuracy_points SET train_seconds = ? WHERE trial_key = ? AND iteration = 200",
                         (2 * s, trial_key("torchvision/retinanet/fp32/local/1/1", seed)))
    v = report_build.accuracy(str(tmp_path), "r1").verdict
    assert v.status == "FAIL"
    assert v.headline() == "FAIL (retinanet fp32 vs torchvision fp32: time to bbox_AP50 0.6)"


def test_nothing_learned_is_never_pass_and_the_report_command_says_so_in_one_line(tmp_path):
    store = protocol_run(tmp_path)
    # the untrained weights scored as high as any final checkpoint
    store.accuracy().add_floor("r1", "retinanet", {"bbox_AP": 0.4, "bbox_AP50": 0.81})
    rep = report_build.accuracy(str(tmp_path), "r1")
    assert rep.verdict.status == "not judged: nothing learned"
    assert rep.verdict.headline() == ("not judged: nothing learned (retinanet (no framework's final bbox_AP50 "
                                      "above 0.810, the untrained weights' score))")
    result = CliRunner().invoke(main, ["accuracy", "report", "--results", str(tmp_path), "--published", "none"])
    assert result.exit_code == 2
    assert "**Time to accuracy: not judged: nothing learned" in result.output
    assert result.output.rstrip().splitlines()[-1] == (
        "detbench: error: nothing could be judged: nothing learned: retinanet (no framework's final bbox_AP50 "
        "above 0.810, the untrained weights' score)")


def test_a_declared_level_no_framework_reached_is_named_with_each_one_s_best(tmp_path):
    doc = json.loads(json.dumps(DOC))
    doc["accuracy"]["targets"]["retinanet"] = {"metric": "bbox_AP50", "values": [0.5, 0.9]}
    protocol_run(tmp_path, doc=doc)
    v = report_build.accuracy(str(tmp_path), "r1").verdict
    assert v.unreached == ["retinanet: bbox_AP50 0.9: no framework reached it (best: detbench-trainer fp32 0.810, "
                           "torchvision fp32 0.810)"]
    assert [(c.status, c.words) for c in v.checks if c.name.endswith("0.9")] == [
        ("not judged", "no framework reached it")]
    assert v.headline() == "not judged (retinanet fp32 vs torchvision fp32: time to bbox_AP50 0.9)"
    assert v.unjudgeable() is None        # 0.5 was judged


def test_where_no_declared_level_was_reached_the_report_says_so_in_one_line_with_exit_2(tmp_path):
    doc = json.loads(json.dumps(DOC))
    doc["accuracy"]["targets"]["retinanet"] = {"metric": "bbox_AP50", "range": [0.85, 0.95]}
    protocol_run(tmp_path, doc=doc)
    result = CliRunner().invoke(main, ["accuracy", "report", "--results", str(tmp_path), "--published", "none"])
    assert result.exit_code == 2
    assert "## Verdict" in result.output       # the report is printed first; nothing trained is touched
    assert result.output.rstrip().splitlines()[-1] == (
        "detbench: error: nothing could be judged: retinanet: bbox_AP50 0.85: no framework reached it (best: "
        "detbench-trainer fp32 0.810, torchvision fp32 0.810); retinanet: bbox_AP50 0.9: no framework reached it "
        "(best: detbench-trainer fp32 0.810, torchvision fp32 0.810); retinanet: bbox_AP50 0.95: no framework "
        "reached it (best: detbench-trainer fp32 0.810, torchvision fp32 0.810)")


def test_more_seeds_outside_a_declared_plan_are_shown_as_exploratory_and_never_make_a_pass(tmp_path):
    # two seeds a side: the interval is wide (one degree of freedom), so no PASS on them
    store = Store(tmp_path)
    add(store, "r1", {0: 10.0, 1: 14.0})
    add(store, "r1", {0: 18.0, 1: 25.0}, framework="torchvision")
    assert report_build.accuracy(str(tmp_path), "r1").verdict.status == "FAIL"
    # seeds 2-4 of both trained later: with them the interval would be narrow enough to pass
    add(store, "r2", {2: 10.1, 3: 10.2, 4: 10.3}, finals={2: 0.8, 3: 0.8, 4: 0.8})
    add(store, "r2", {2: 25.0, 3: 25.1, 4: 25.2}, framework="torchvision", finals={2: 0.8, 3: 0.8, 4: 0.8})
    rep = report_build.accuracy(str(tmp_path), "r1", joined=["r2"])
    assert [len(s.curves) for s in rep.models[0].series] == [5, 5]       # the tables show them
    assert rep.verdict.status == "FAIL"                                    # the verdict does not
    assert rep.verdict.headline().startswith("FAIL (retinanet fp32 vs torchvision fp32: time to bbox_AP50 0.4")
    said = "run r2 joined outside the declared plan (run r1 declared no sequential plan): its seeds are in the " \
           "tables, not in the verdict"
    assert said in rep.exploratory and said in report.render_markdown(rep)


def test_the_looks_of_a_declared_sequential_plan_join_the_verdict_each_at_its_share_of_alpha(tmp_path):
    doc = json.loads(json.dumps(DOC))
    doc["accuracy"].update(seeds=[0, 1], sequential={"looks": [[2, 3, 4]], "alpha": 0.05, "spending": "pocock"})
    store = Store(tmp_path)
    add(store, "r1", {0: 10.0, 1: 14.0}, doc=doc)
    add(store, "r1", {0: 18.0, 1: 25.0}, framework="torchvision", doc=doc)
    rep = report_build.accuracy(str(tmp_path), "r1")
    assert rep.verdict.status == "FAIL" and rep.protocol.alphas[0] < 0.05
    finals = {2: 0.8, 3: 0.8, 4: 0.8}
    add(store, "r2", {2: 10.1, 3: 10.2, 4: 10.3}, doc=doc, look=2, finals=finals)
    add(store, "r2", {2: 25.0, 3: 25.1, 4: 25.2}, framework="torchvision", doc=doc, look=2, finals=finals)
    rep = report_build.accuracy(str(tmp_path), "r1", joined=["r2"])
    assert rep.exploratory == []
    [first] = [c for c in rep.verdict.checks if c.name.endswith("time to bbox_AP50 0.4")]
    second_alpha = rep.protocol.alphas[1]
    assert first.status == "PASS" and "over 5 vs 5 seeds at %.1f%%" % (100 * (1 - second_alpha)) in first.words
    assert rep.protocol.alphas[0] + second_alpha == pytest.approx(0.05)
    # a run of another look than the next one, or of other seeds, is outside the plan
    add(store, "r3", {5: 10.0}, doc=doc, look=2, finals={5: 0.8})
    rep = report_build.accuracy(str(tmp_path), "r1", joined=["r3"])
    assert rep.exploratory == ["run r3 joined outside the declared plan (its seeds are not look 2's): its seeds "
                               "are in the tables, not in the verdict"]


def test_a_precision_is_compared_with_the_same_precision_of_a_rival_that_has_it(tmp_path):
    doc = json.loads(json.dumps(DOC))
    doc["matrix"]["precision"] = ["fp32", "bf16"]
    store = protocol_run(tmp_path, doc=doc)
    add(store, "r1", {0: 5.0, 1: 5.1, 2: 5.2}, precision="bf16", doc=doc)
    names = [c.name for c in report_build.accuracy(str(tmp_path), "r1").verdict.checks]
    assert "retinanet bf16 vs torchvision fp32: final bbox_AP50" in names          # torchvision has no bf16 here
    add(store, "r1", {0: 12.0, 1: 12.1, 2: 12.2}, framework="torchvision", precision="bf16", doc=doc)
    rep = report_build.accuracy(str(tmp_path), "r1")
    names = [c.name for c in rep.verdict.checks]
    assert "retinanet bf16 vs torchvision bf16: final bbox_AP50" in names
    assert "retinanet bf16 vs torchvision fp32: final bbox_AP50" not in names
    rows = {(r[0], r[1]): r[-1] for r in report.main_table(rep.models[0])[1]}
    assert rows[("detbench-trainer", "bf16")] == "%.2fx" % (12.1 * 2 / (5.1 * 2))   # over torchvision's bf16


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "benchmarks", "results", "*.json"))))
def test_the_committed_runs_from_before_the_protocol_still_report_labelled_exploratory(tmp_path, path):
    runner = CliRunner()
    assert runner.invoke(main, ["accuracy", "load", path, "--results", str(tmp_path)]).exit_code == 0
    result = runner.invoke(main, ["accuracy", "report", "--results", str(tmp_path), "--published", "none"])
    assert result.exit_code == 0, result.output
    assert "No declared protocol: exploratory." in result.output
    assert "**Time to accuracy: exploratory, no verdict (no declared protocol: the run predates it): the checks " \
           "read " in result.output


def test_more_seeds_joined_to_a_committed_run_after_its_data_stay_exploratory(tmp_path):
    """The issue's case: seeds 3 and 4 of two frameworks trained after a parity result and joined."""
    runner = CliRunner()
    ids = []
    for name in ("time-to-accuracy-mask_rcnn-2026", "time-to-accuracy-mask_rcnn-more-seeds-"):
        [path] = glob.glob(os.path.join(ROOT, "benchmarks", "results", name + "*.json"))
        assert runner.invoke(main, ["accuracy", "load", path, "--results", str(tmp_path)]).exit_code == 0
        ids.append(json.load(open(path, encoding="utf-8"))["run"]["id"])
    rep = report_build.accuracy(str(tmp_path), ids[0], joined=[ids[1]])
    assert "run %s joined outside the declared plan (run %s predates the protocol): its seeds are in the tables, " \
           "not in the verdict" % (ids[1], ids[0]) in rep.exploratory
    [check] = [c for c in rep.verdict.checks if c.name == "mask_rcnn fp32 vs mmdetection fp32: time to segm_AP 0.7"]
    assert check.status == "FAIL" and "0.64x [0.39, 1.05] over 3 vs 3 seeds" in check.words


def test_a_check_that_cannot_be_judged_keeps_the_verdict_from_pass_and_is_named(tmp_path):
    store = Store(tmp_path)
    add(store, "r1", {0: 10.0})                 # one seed a side: no seed spread for the final metric
    add(store, "r1", {0: 25.0}, framework="torchvision")
    v = report_build.accuracy(str(tmp_path), "r1").verdict
    assert [c.status for c in v.checks] == ["PASS", "PASS", "PASS", "not judged"]
    assert v.headline() == "not judged (retinanet fp32 vs torchvision fp32: final bbox_AP50)"
    assert v.unjudgeable() is None             # the times were judged
