"""An accuracy run saved to one JSON file and loaded into another store: the same report, the
unfinished trials pending from the start, and a bad file refused in one line with the store untouched."""
import json

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.errors import UserError
from harness.measure.accuracy import AccuracyPoint, LossPoint
from harness.report import accuracy as report
from harness.report import build as report_build
from harness.results import accuracy_file
from harness.results.accuracy_store import trial_key
from harness.results.store import Store

SCENARIO = {"name": "tta", "input_size": [128, 128], "batch_per_gpu": 4, "env": {"OMP_NUM_THREADS": "2"},
            "matrix": {"precision": ["fp32"]},
            "accuracy": {"depth": 18, "iterations": 300, "data": "/somewhere/learnable", "seeds": [0, 1],
                         "reference": "torchvision",
                         "targets": {"mask_rcnn": {"metric": "segm_AP", "value": 0.5}}}}
HOST = {"cpu": {"model": "Intel Xeon"}, "facts": {"cpu": {"isa": ["avx512_bf16"]}}}
CELLS = {fw: "%s/mask_rcnn/fp32/local/1/1" % fw for fw in ("detbench-trainer", "torchvision")}


def fill(results, unfinished=()):
    """Run r1: both frameworks x seeds 0 and 1 trained to 300 iterations, but the trials of
    `unfinished` ((framework, seed)), left running after their checkpoint at 100."""
    store = Store(results)
    store.create_run("r1", "tta", "s.yaml", json.dumps(SCENARIO), "local", HOST,
                     [dict(cell_key=c, framework=fw, model="mask_rcnn", precision="fp32", platform="local", gpus=1,
                           nodes=1, batch_per_gpu=4, images_per_iteration=4, excluded=None)
                      for fw, c in CELLS.items()], [])
    tables = store.accuracy()
    tables.add_inputs("r1", {str(results.parent / "data" / "images"): "1a2b", str(results.parent / "r18.pt"): "3c4d"})
    tables.add_trials("r1", [dict(trial_key=trial_key(c, s), cell_key=c, seed=s, folder=str(results / "f"),
                                  argv=["python", "train.py"]) for c in CELLS.values() for s in (0, 1)])
    for fw, cell in CELLS.items():
        slow = 2.0 if fw == "torchvision" else 1.0
        for seed in (0, 1):
            key = trial_key(cell, seed)
            last = 100 if (fw, seed) in unfinished else 300
            tables.add_losses("r1", key, [LossPoint(i, 3.0 / i) for i in range(1, last + 1)])
            tables.add_settings("r1", key, {"lr": 0.01}, {"sampler": fw})
            tables.add_code("r1", key, 0, {"revision": "abc"})
            for it in range(100, last + 1, 100):
                seconds = it * slow * (1.0 + 0.1 * seed)
                tables.add_checkpoint("r1", key, it, seconds, str(results / ("ck%d" % it)))
                tables.add_score("r1", key, AccuracyPoint(it, seconds, 0.2 + it / 1000, 0.9, it / 500 + 0.05 * seed,
                                                          0.95, eval_seconds=3.0))
            tables.set_status("r1", key, "running" if (fw, seed) in unfinished else "done")
    return store


def markdown(results):
    return report.render_markdown(report_build.accuracy(str(results), "r1", published=None))


def test_a_saved_run_loaded_elsewhere_reports_the_same_tables(tmp_path):
    fill(tmp_path / "a")
    saved = tmp_path / "run.json"
    assert accuracy_file.save(Store(tmp_path / "a", create=False), "latest", str(saved)) == \
        {"finished": 4, "pending": 0}
    assert accuracy_file.load(Store(tmp_path / "b"), str(saved)) == "r1"
    assert markdown(tmp_path / "b") == markdown(tmp_path / "a")
    a, b = Store(tmp_path / "a").accuracy(), Store(tmp_path / "b").accuracy()
    key = trial_key(CELLS["torchvision"], 1)
    assert b.losses("r1", key) == a.losses("r1", key)
    assert b.settings("r1") == a.settings("r1") and b.codes("r1") == a.codes("r1")


def test_paths_are_kept_relative_to_the_run_s_folder_and_land_in_the_new_one(tmp_path):
    fill(tmp_path / "a")
    saved = tmp_path / "run.json"
    accuracy_file.save(Store(tmp_path / "a", create=False), "r1", str(saved))
    text = saved.read_text()
    assert str(tmp_path) not in text and '"{run}/r18.pt"' in text
    assert "train.py" not in text                      # the commands name this machine's interpreters
    elsewhere = tmp_path / "elsewhere" / "results"
    accuracy_file.load(Store(elsewhere), str(saved))
    tables = Store(elsewhere).accuracy()
    assert tables.inputs("r1") == {str(tmp_path / "elsewhere" / "data" / "images"): "1a2b",
                                   str(tmp_path / "elsewhere" / "r18.pt"): "3c4d"}
    key = trial_key(CELLS["torchvision"], 0)
    assert tables.checkpoints("r1", key)[-1]["checkpoint"] == str(tmp_path / "elsewhere" / "a" / "ck300")


def test_a_trial_unfinished_when_saved_comes_back_pending_with_nothing_of_its_partial_training(tmp_path):
    fill(tmp_path / "a", unfinished={("torchvision", 1)})
    saved = tmp_path / "run.json"
    assert accuracy_file.save(Store(tmp_path / "a", create=False), "r1", str(saved)) == \
        {"finished": 3, "pending": 1}
    accuracy_file.load(Store(tmp_path / "b"), str(saved))
    tables = Store(tmp_path / "b").accuracy()
    trials = {t["trial_key"]: t for t in tables.trials("r1")}
    key = trial_key(CELLS["torchvision"], 1)
    assert trials[key]["status"] == "pending"
    assert tables.checkpoints("r1", key) == [] and tables.losses("r1", key) == []
    # trained from here on, it keeps its files in the store it was loaded into
    assert trials[key]["folder"] == tables.folder("r1", key)
    assert str(tmp_path / "b") in trials[key]["folder"]
    done = trial_key(CELLS["torchvision"], 0)
    assert trials[done]["status"] == "done" and len(tables.curve("r1", done)) == 3


def test_a_run_the_store_holds_already_is_refused_and_nothing_changes(tmp_path):
    fill(tmp_path / "a")
    saved = tmp_path / "run.json"
    accuracy_file.save(Store(tmp_path / "a", create=False), "r1", str(saved))
    before = markdown(tmp_path / "a")
    with pytest.raises(UserError, match="run r1 is already in"):
        accuracy_file.load(Store(tmp_path / "a"), str(saved))
    assert markdown(tmp_path / "a") == before


@pytest.mark.parametrize("change, says", [
    (lambda d: d.update(format="something else"), "not a saved accuracy run"),
    (lambda d: d.update(version=99), "version 99"),
    (lambda d: d["tables"]["accuracy_points"].append(dict(d["tables"]["accuracy_points"][0], trial_key="x/s9")),
     "rows of trials the run does not have: x/s9"),
    (lambda d: d["tables"].update(other=[]), "'other' is not an accuracy table"),
    (lambda d: d["tables"]["accuracy_losses"][-1].update(colour="red"), "columns this store does not have: colour"),
])
def test_a_bad_file_is_refused_in_one_line_naming_it_and_loads_nothing(tmp_path, change, says):
    fill(tmp_path / "a")
    saved = tmp_path / "run.json"
    accuracy_file.save(Store(tmp_path / "a", create=False), "r1", str(saved))
    data = json.loads(saved.read_text())
    change(data)
    saved.write_text(json.dumps(data))
    with pytest.raises(UserError) as err:
        accuracy_file.load(Store(tmp_path / "b"), str(saved))
    assert says in str(err.value) and str(saved) in str(err.value) and "\n" not in str(err.value)
    # the failed load left no part of the run behind: the same file loads once it is right
    store = Store(tmp_path / "b")
    assert store.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    assert store.accuracy().trials("r1") == []


def test_save_and_load_on_the_command_line(tmp_path):
    fill(tmp_path / "a")
    runner = CliRunner()
    out = tmp_path / "run.json"
    saved = runner.invoke(main, ["accuracy", "save", "latest", "--results", str(tmp_path / "a"), "--out", str(out)])
    assert saved.exit_code == 0, saved.output
    assert "4 finished trials, 0 pending" in saved.output
    loaded = runner.invoke(main, ["accuracy", "load", str(out), "--results", str(tmp_path / "b")])
    assert loaded.exit_code == 0, loaded.output
    reported = runner.invoke(main, ["accuracy", "report", "--results", str(tmp_path / "b"), "--published", "none"])
    assert reported.exit_code == 0 and "torchvision" in reported.output
    (tmp_path / "bad.json").write_text("{not json")
    bad = runner.invoke(main, ["accuracy", "load", str(tmp_path / "bad.json"), "--results", str(tmp_path / "c")])
    assert bad.exit_code != 0
    assert "bad.json: not JSON" in bad.output
    assert not (tmp_path / "c").exists()


def test_a_run_saved_under_its_protocol_loads_with_its_order_and_noise_floor(tmp_path):
    from tests.report.test_accuracy_protocol_report import protocol_run

    store = protocol_run(tmp_path / "a" / "results")
    store.accuracy().add_floor("r1", "retinanet", {"bbox_AP": 0.0, "bbox_AP50": 0.02})
    accuracy_file.save(store, "r1", str(tmp_path / "r1.json"))
    accuracy_file.load(Store(tmp_path / "b" / "results"), str(tmp_path / "r1.json"))
    rep = report_build.accuracy(str(tmp_path / "b" / "results"), "r1")
    assert rep.floors == {"retinanet": {"bbox_AP": 0.0, "bbox_AP50": 0.02}}
    assert (rep.protocol.order_seed, rep.protocol.look) == (5, 1) and rep.verdict.headline() == "PASS"
