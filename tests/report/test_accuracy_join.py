"""Joining accuracy runs: a precision (or framework), or more seeds of a cell, trained later as its
own run with the first run's recipe on the same machine and inputs, joins that run's report
(`detbench accuracy report --with`), read against its targets and named; a run of another recipe,
machine or inputs, or one that trained a seed of the first again, is refused in one line naming why."""
import json

import pytest

from harness.errors import UserError
from harness.measure.accuracy import AccuracyPoint
from harness.plan import accuracy as plan_accuracy
from harness.report import accuracy as report
from harness.report import build as report_build
from harness.results.accuracy_store import trial_key
from tests.report.test_accuracy_report import HOST, SCENARIO, fill

FACTS = {"cpu": {"model": "Xeon", "cores": 2, "isa": ["avx2", "avx512f", "avx512_bf16"]}, "memory_mb": 24000}
BF16 = {0: [(100, 8.0, 0.2), (200, 16.0, 0.6), (300, 24.0, 0.75)],
        1: [(100, 8.0, 0.2), (200, 16.0, 0.5), (300, 24.0, 0.7)]}


def add_run(store, run_id="r2", cell="detbench-trainer/retinanet/bf16/local/1/1", curves=None, host=HOST, **changes):
    """A second accuracy run of the store: `cell`'s seeds with `curves` (BF16's by default), its
    scenario the first's with `changes` (accuracy.KEY for a key of the accuracy section)."""
    sc = json.loads(json.dumps(SCENARIO))
    sc.update(name="tta-bf16", matrix={"precision": [cell.split("/")[2]]})
    for key, value in changes.items():
        if key.startswith("accuracy_"):
            sc["accuracy"][key[len("accuracy_"):]] = value
        else:
            sc[key] = value
    store.create_run(run_id, sc["name"], "s.yaml", json.dumps(sc), "local", host, [], [])
    tables = store.accuracy()
    curves = BF16 if curves is None else curves
    tables.add_trials(run_id, [dict(trial_key=trial_key(cell, seed), cell_key=cell, seed=seed, folder="f", argv=[])
                               for seed in curves])
    for seed, points in curves.items():
        key = trial_key(cell, seed)
        for it, seconds, ap50 in points:
            tables.add_checkpoint(run_id, key, it, seconds, "ck")
            tables.add_score(run_id, key, AccuracyPoint(it, seconds, ap50 / 2, ap50, eval_seconds=1.0))
        tables.set_status(run_id, key, "done")


def test_a_run_of_the_same_recipe_joins_with_its_cells_named_and_both_precisions_in_the_scope(tmp_path):
    add_run(fill(tmp_path))
    rep = report_build.accuracy(str(tmp_path), "r1", joined=["r2"])
    [block] = rep.models
    assert [(s.framework, s.precision) for s in block.series] == [
        ("detbench-trainer", "fp32"), ("torchvision", "fp32"), ("detbench-trainer", "bf16")]
    assert rep.title() == "tta (run r1, with run r2)" and "precision fp32, bf16," in rep.scope
    [note] = [n for n in report.notes(block) if n.startswith("From accuracy run")]
    assert note.startswith("From accuracy run r2, trained with this run's recipe") and \
        note.endswith("report: detbench-trainer bf16. Its seeds trained at other hours than this run's, as this "
                      "run's seeds did one after another.")
    # read against r1's target (bbox AP50 0.5): seed 0 crosses at 14 s, seed 1 at 16 s; speedup against
    # torchvision fp32, r1's reference (42.5 s)
    bf16 = next(r for r in report.rows(block) if r.precision == "bf16")
    assert bf16.time_to_target.mean == pytest.approx(15.0) and bf16.speedup == pytest.approx(42.5 / 15.0)
    text = report.render_markdown(rep)
    assert text.startswith("# Time to accuracy: tta (run r1, with run r2)\n")
    assert "| detbench-trainer | bf16 | 0.750 | 0.700 | 0.725 | 0.035 |" in text
    assert "run r2" in report.render_html(rep, figures=False)


def test_without_with_the_report_is_the_run_s_own(tmp_path):
    add_run(fill(tmp_path))
    rep = report_build.accuracy(str(tmp_path), "r1")
    assert [s.precision for s in rep.models[0].series] == ["fp32", "fp32"] and rep.title() == "tta (run r1)"
    assert "precision fp32," in rep.scope and not [n for n in report.notes(rep.models[0]) if "From accuracy" in n]


def test_seeds_and_targets_are_each_run_s_own_and_the_stability_table_takes_every_seed(tmp_path):
    curves = {**BF16, 2: [(100, 8.0, 0.1), (200, 16.0, 0.4), (300, 24.0, 0.6)]}
    add_run(fill(tmp_path), curves=curves, accuracy_seeds=[0, 1, 2], accuracy_reference="detbench-trainer",
            accuracy_targets={"retinanet": {"metric": "bbox_AP", "value": 0.2}})
    [block] = report_build.accuracy(str(tmp_path), "r1", joined=["r2"]).models
    assert (block.metric, block.target, block.reference, block.seeds) == ("bbox_AP50", 0.5, "torchvision", [0, 1, 2])
    head, body = report.stability_table(block)
    assert head[2:5] == ["Seed 1", "Seed 2", "Seed 3"]
    assert body[0][:5] == ["detbench-trainer", "fp32", "0.800", "0.700", "-"]
    assert body[2][:5] == ["detbench-trainer", "bf16", "0.750", "0.700", "0.600"]


@pytest.mark.parametrize("changes, says", [
    (dict(accuracy_iterations=400), "accuracy.iterations 300 -> 400"),
    (dict(input_size=[256, 256]), "input_size [128, 128] -> [256, 256]"),
    (dict(env={"OMP_NUM_THREADS": "2"}), "env {'OMP_NUM_THREADS': '1'} -> {'OMP_NUM_THREADS': '2'}"),
    (dict(accuracy_data="/elsewhere/learnable"), "accuracy.data '/somewhere/learnable' -> '/elsewhere/learnable'"),
])
def test_a_run_of_another_recipe_is_refused_in_one_line_naming_the_difference(tmp_path, changes, says):
    add_run(fill(tmp_path), **changes)
    with pytest.raises(UserError) as exc:
        report_build.accuracy(str(tmp_path), "r1", joined=["r2"])
    assert str(exc.value) == "--with r2: its cells cannot join run r1's report: %s" % says


def test_a_run_started_on_another_machine_is_refused(tmp_path):
    store = fill(tmp_path, host=dict(HOST, facts=FACTS))
    add_run(store, host=dict(HOST, facts=dict(FACTS, cpu=dict(FACTS["cpu"], isa=["avx2", "avx512f"]))))
    with pytest.raises(UserError) as exc:
        report_build.accuracy(str(tmp_path), "r1", joined=["r2"])
    assert str(exc.value).startswith("--with r2: its cells cannot join run r1's report: ")
    assert "avx512_bf16: run r1 yes, run r2 no" in str(exc.value) and "\n" not in str(exc.value)


def test_a_seed_both_runs_trained_is_refused(tmp_path):
    add_run(fill(tmp_path), cell="torchvision/retinanet/fp32/local/1/1", matrix={"precision": ["fp32"]})
    with pytest.raises(UserError) as exc:
        report_build.accuracy(str(tmp_path), "r1", joined=["r2"])
    assert str(exc.value) == ("--with r2: torchvision retinanet fp32 seed 0, 1 was trained in both run r1 and run "
                              "r2: a seed's curve comes from one run")


def test_more_seeds_of_a_cell_join_its_series_and_every_figure_is_over_all_of_them(tmp_path):
    # seeds 2 and 3 of the trainer's fp32 cell, trained later as run r2 with r1's recipe
    more = {2: [(100, 10.0, 0.2), (200, 20.0, 0.6), (300, 30.0, 0.75)],
            3: [(100, 10.0, 0.2), (200, 20.0, 0.5), (300, 30.0, 0.65)]}
    add_run(fill(tmp_path), cell="detbench-trainer/retinanet/fp32/local/1/1", curves=more,
            matrix={"precision": ["fp32"]}, accuracy_seeds=[2, 3])
    rep = report_build.accuracy(str(tmp_path), "r1", joined=["r2"])
    [block] = rep.models
    assert [(s.framework, s.precision) for s in block.series] == [("detbench-trainer", "fp32"), ("torchvision", "fp32")]
    assert block.seeds == [0, 1, 2, 3] and sorted(block.series[0].curves) == [0, 1, 2, 3]
    # crossings of AP50 0.5: 15 s and 20 s (r1), 17.5 s and 20 s (r2)
    trainer = report.rows(block)[0]
    assert trainer.seeds == 4 and trainer.time_to_target.mean == pytest.approx((15 + 20 + 17.5 + 20) / 4)
    head, body = report.stability_table(block)
    assert head[2:6] == ["Seed 1", "Seed 2", "Seed 3", "Seed 4"]
    assert body[0][2:6] == ["0.800", "0.700", "0.750", "0.650"] and body[1][2:6] == ["0.700", "0.600", "-", "-"]
    [note] = [n for n in report.notes(block) if n.startswith("From accuracy run r2")]
    assert "joined to this report: detbench-trainer fp32 seed 2, 3 (more seeds of this run's cells)." in note
    assert "precision fp32," in rep.scope


def test_a_run_whose_inputs_had_other_content_is_refused(tmp_path):
    store = fill(tmp_path)
    store.accuracy().add_inputs("r1", {"/somewhere/learnable/annotations/instances_train.json": "a" * 64})
    add_run(store, cell="detbench-trainer/retinanet/fp32/local/1/1", curves={2: BF16[0]},
            matrix={"precision": ["fp32"]}, accuracy_seeds=[2])
    store.accuracy().add_inputs("r2", {"/somewhere/learnable/annotations/instances_train.json": "b" * 64})
    with pytest.raises(UserError) as exc:
        report_build.accuracy(str(tmp_path), "r1", joined=["r2"])
    assert str(exc.value) == ("--with r2: its cells cannot join run r1's report: /somewhere/learnable/annotations/"
                              "instances_train.json had other content when run r2 started than when run r1 did")


def test_a_run_is_not_joined_to_itself_and_a_run_without_accuracy_trials_is_refused(tmp_path):
    store = fill(tmp_path)
    with pytest.raises(UserError, match="--with r1: its cells cannot join run r1's report: it is the run being"):
        report_build.accuracy(str(tmp_path), "r1", joined=["r1"])
    store.create_run("speed", "speed", "s.yaml", json.dumps(SCENARIO), "local", HOST, [], [])
    with pytest.raises(UserError, match="--with speed: .*: it is not an accuracy run$"):
        report_build.accuracy(str(tmp_path), "r1", joined=["speed"])


def test_recipe_differences_leave_out_seeds_targets_reference_and_a_model_the_second_run_lacks():
    base = dict(SCENARIO, matrix={"model": ["retinanet", "faster_rcnn"]},
                weights={"retinanet": "/w/r.pt", "faster_rcnn": "/w/f.pt"})
    other = json.loads(json.dumps(base))
    other["matrix"]["model"] = ["retinanet"]
    other["weights"] = {"retinanet": "/w/r.pt"}
    other["accuracy"].update(seeds=[5], targets={}, reference=None)
    assert plan_accuracy.recipe_differences(base, other) == []
    other["weights"]["retinanet"] = "/w/other.pt"
    other["accuracy"]["lr_per_image"] = 0.01
    assert plan_accuracy.recipe_differences(base, other) == [
        "accuracy.lr_per_image none -> 0.01", "weights.retinanet '/w/r.pt' -> '/w/other.pt'"]


def test_the_report_command_joins_a_run_and_refuses_a_bad_one_in_one_line(tmp_path):
    from click.testing import CliRunner

    from harness.cli import main
    store = fill(tmp_path)
    add_run(store)
    add_run(store, "r3", accuracy_iterations=500)
    ok = CliRunner().invoke(main, ["accuracy", "report", "--results", str(tmp_path), "--run", "r1", "--with", "r2"])
    assert ok.exit_code == 0, ok.output
    assert "| detbench-trainer | bf16 | 4 |" in ok.output and "From accuracy run r2" in ok.output
    bad = CliRunner().invoke(main, ["accuracy", "report", "--results", str(tmp_path), "--run", "r1", "--with", "r3"])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines() == [
        "detbench: error: --with r3: its cells cannot join run r1's report: accuracy.iterations 300 -> 500"]
