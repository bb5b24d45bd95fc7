"""`detbench import`: logs of runs made elsewhere become one run, shown like measured ones."""
import csv
import io
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.measure import ingest
from harness.cli import main
from harness.results.store import Store
from tests.support import logtext

ROOT = Path(__file__).resolve().parents[2]
CELL = ["--scenario-name", "cluster", "--model", "faster_rcnn", "--precision", "fp32", "--platform", "local"]
FLAGS = {"--scenario-name": "cluster", "--model": "faster_rcnn", "--precision": "fp32", "--platform": "local",
         "--batch-per-gpu": "2", "--gpus": "1", "--warmup": "5", "--measure": "30"}


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def write(tmp_path, text, name="train.log"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def jsonl_log(tmp_path, name, seed, images=4, n=40):
    pairs = logtext.times(n, seed=seed)
    return write(tmp_path, logtext.detbench_jsonl(pairs, images=images), name), pairs


def import_(results, *args):
    return invoke("import", *args, "--results", results)


def store_rows(results):
    """Every row of every table: to show that a refused import wrote nothing."""
    if not (results / "detbench.sqlite").exists():
        return None
    db = sqlite3.connect(str(results / "detbench.sqlite"))
    try:
        return {t: db.execute("SELECT * FROM %s" % t).fetchall() for t in ("runs", "cells", "trials", "iterations")}
    finally:
        db.close()


def test_two_logs_become_one_imported_run_with_the_rows_a_measured_trial_gets(tmp_path):
    results = tmp_path / "results"
    (a, pairs_a), (b, _) = jsonl_log(tmp_path, "a.log", 1), jsonl_log(tmp_path, "b.log", 2)
    out = import_(results, "--framework", "detbench-trainer", a, b, *CELL, "--batch-per-gpu", 2, "--gpus", 2,
                  "--warmup", 10, "--measure", 20)
    assert out.exit_code == 0, out.output
    assert "imported 2 logs as detbench-trainer/faster_rcnn/fp32/local/2/1" in out.stdout
    store = Store(results, create=False)
    run = store.runs()[-1]
    assert (run["origin"], run["backend"], run["scenario"]) == ("imported", "imported", "cluster")
    [cell] = store.cells(run_id=run["id"])
    assert (cell["images_per_iteration"], cell["batch_per_gpu"], cell["gpus"]) == (4, 2, 2)
    trials = store.trials(run["id"])
    assert [t["status"] for t in trials] == ["done", "done"]
    first = trials[0]
    folder = store.trial_dir(first["id"])
    assert (folder / "log.txt").read_text() == a.read_text()
    assert json.loads((folder / "trial.json").read_text())["imported"] is True
    assert not (folder / "log.times").exists()
    assert first["observed"] is None and first["settings_json"] is None
    assert first["iteration_time_s"] == pytest.approx(logtext.truth(pairs_a, 11, 30)[0], rel=1e-12)
    # exactly the row ingest gives that folder, as it gives a measured trial's
    row = ingest.analyse(str(folder), "detbench-jsonl", 10, 20, 4).columns()
    for column in ("throughput", "iteration_time_s", "data_time_s", "exact", "records"):
        assert first[column] == row[column], column
    assert len(store.iterations(first["id"])) == 40


def test_an_imported_cell_is_reported_marked_and_can_be_compared(tmp_path):
    results = tmp_path / "results"
    log, _ = jsonl_log(tmp_path, "a.log", 3, images=2)
    out = import_(results, "--framework", "detbench-trainer", log, log, *CELL, "--batch-per-gpu", 2, "--gpus", 1,
                  "--warmup", 5, "--measure", 30)
    assert out.exit_code == 0, out.output
    report = invoke("report", "--platform", "local", "--results", results)
    assert report.exit_code == 0, report.output
    assert "|Faster R-CNN w/ FPN|" in report.stdout
    assert "Imported from logs made elsewhere (not run by detbench; their settings are not known and not " \
           "compared): detbench-trainer Faster R-CNN w/ FPN." in report.stdout
    baseline = tmp_path / "baseline.json"
    saved = invoke("baseline", "save", "latest", "--results", results, "--out", baseline)
    assert saved.exit_code == 0, saved.output
    compared = invoke("compare", "--baseline", baseline, "--candidate", "latest", "--results", results)
    assert "detbench-trainer/faster_rcnn/fp32/local/1/1" in compared.stdout and "unchanged" in compared.stdout


def test_the_window_defaults_to_the_one_a_stored_run_of_the_scenario_used(tmp_path):
    results = tmp_path / "results"
    log, pairs = jsonl_log(tmp_path, "a.log", 4, images=2)
    first = import_(results, "--framework", "detbench-trainer", log, *CELL, "--batch-per-gpu", 2, "--gpus", 1,
                    "--warmup", 7, "--measure", 25)
    assert first.exit_code == 0, first.output
    again = import_(results, "--framework", "detbench-trainer", log, *CELL, "--batch-per-gpu", 2, "--gpus", 1)
    assert again.exit_code == 0, again.output
    assert "window after 7 warmup iterations, 25 measured (as scenario cluster)" in again.stderr
    store = Store(results, create=False)
    trial = store.trials(store.runs()[-1]["id"])[0]
    assert trial["iteration_time_s"] == pytest.approx(logtext.truth(pairs, 8, 32)[0], rel=1e-12)


def test_the_format_is_detected_and_names_the_framework_when_only_one_writes_it(tmp_path):
    results = tmp_path / "results"
    pairs = logtext.times(100, seed=5)
    log = write(tmp_path, logtext.mmengine_iter(pairs))
    out = import_(results, log, *CELL, "--batch-per-gpu", 2, "--gpus", 1, "--warmup", 10, "--measure", 80)
    assert out.exit_code == 0, out.output
    assert "reading %s as mmdet-v3 (detected)" % log in out.stderr
    assert "as mmdetection/faster_rcnn/fp32/local/1/1" in out.stdout


def test_an_mmdetection_2_log_goes_into_the_mmdetection_column_by_format(tmp_path):
    results = tmp_path / "results"
    pairs = logtext.times(300, seed=6)
    log = write(tmp_path, logtext.mmcv_epoch(pairs, iters_per_epoch=150))
    out = import_(results, "--framework", "mmdetection", "--format", "mmdet-v2", log, *CELL,
                  "--batch-per-gpu", 2, "--gpus", 1, "--warmup", 50, "--measure", 200)
    assert out.exit_code == 0, out.output
    store = Store(results, create=False)
    [trial] = store.trials(store.runs()[-1]["id"])
    # 50-iteration means printed to 3 decimals: every iteration counted, within 0.0005 s, which is
    # more than 0.1% of a 0.35 s iteration: not exact
    assert trial["status"] == "done" and trial["figure_kind"] == "window-means" and trial["exact"] == 0
    assert trial["iteration_time_s"] == pytest.approx(logtext.truth(pairs, 51, 250)[0], abs=0.0005)


def test_an_imported_run_cannot_be_resumed(tmp_path):
    results = tmp_path / "results"
    log, _ = jsonl_log(tmp_path, "a.log", 7, images=2)
    assert import_(results, "--framework", "detbench-trainer", log, *CELL, "--batch-per-gpu", 2, "--gpus", 1,
                   "--warmup", 5, "--measure", 30).exit_code == 0
    run_id = Store(results, create=False).runs()[-1]["id"]
    out = invoke("run", "--resume", run_id, "--results", results)
    assert out.exit_code == 2 and "was imported from logs (detbench import): there is nothing to run" in out.output


# case: (arguments, flags that differ from FLAGS (None: left out), the error)
CASES = {
    "unknown framework": (["--framework", "nope", "{good}"], {}, "unknown framework 'nope'"),
    "unknown format": (["--framework", "torchvision", "--format", "nope", "{good}"], {}, "unknown format 'nope'"),
    "unknown model": (["--framework", "detbench-trainer", "{good}"], {"--model": "yolo"},
                      "--model: unknown model 'yolo'"),
    "unsupported precision": (["--framework", "mmdetection", "--format", "detbench-jsonl", "{good}"],
                              {"--precision": "bf16"}, "mmdetection does not train faster_rcnn in bf16"),
    "unknown platform": (["--framework", "detbench-trainer", "{good}"], {"--platform": "P9"},
                         "--platform: unknown platform 'P9'"),
    "no column for the format": (["{good}"], {}, "give --framework: the table column these logs belong to "
                                                 "(detbench-jsonl logs are written by calibrate, "
                                                 "detbench-trainer)"),
    "never reaches the window": (["--framework", "detbench-trainer", "{good}"], {"--warmup": "60"},
                                 "{good}: the log ends at iteration 40; the window needs iterations 61..90"),
    "window larger than the log": (["--framework", "detbench-trainer", "{good}"], {"--measure": "50"},
                                   "{good}: the log ends at iteration 40; the window needs iterations 6..55"),
    "batch contradicts the log": (["--framework", "detbench-trainer", "{good}"], {"--gpus": "2"},
                                  "{good}:11: iteration 6 has 2 images; --batch-per-gpu 2 x --gpus 2 gives 4"),
    "run shorter than the window": (["--framework", "mmdetection", "{short}"], {"--measure": "90"},
                                    "{short}: the log trains 60 iterations, fewer than --warmup 5 + --measure 90"),
    "the second log is bad": (["--framework", "detbench-trainer", "{good}", "{plain}"], {},
                              "{plain}: no detbench-jsonl training record in the log"),
    "a log of stock scripts read as detbench runs it": (
        ["--framework", "torchvision", "{stock}"], {"--warmup": "0", "--measure": "60"},
        "{stock}: its records of iterations 1 and 21 (log lines 2 and 3) lie 20 iterations apart, but each "
        "stands for 1: it was written with another logging interval or window than it is read with"),
    "no window and no stored scenario": (["--framework", "detbench-trainer", "{good}"],
                                         {"--warmup": None, "--measure": None, "--scenario-name": "new"},
                                         "give --warmup and --measure: the results store holds no run of "
                                         "scenario 'new'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("store_first", [False, True])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, case, store_first):
    results = tmp_path / "results"
    paths = {"good": jsonl_log(tmp_path, "good.log", 8, images=2)[0],
             "plain": write(tmp_path, "hello\n", "plain.log"),
             "short": write(tmp_path, logtext.mmengine_iter(logtext.times(60)), "short.log"),
             "stock": write(tmp_path, logtext.torchvision_ref(logtext.times(80)), "stock.log")}
    if store_first:   # a store that holds a run already: it stays exactly as it was
        other = write(tmp_path, paths["good"].read_text(), "other.log")
        assert import_(results, "--framework", "detbench-trainer", other, *CELL,
                       "--batch-per-gpu", 2, "--gpus", 1, "--warmup", 5, "--measure", 30).exit_code == 0
    before = store_rows(results)
    args, changed, message = CASES[case]
    flags = [x for k, v in dict(FLAGS, **changed).items() if v is not None for x in (k, v)]
    out = import_(results, *[a.format(**paths) for a in args], *flags)
    assert out.exit_code == 2, out.output
    errors = [line for line in out.stderr.splitlines() if line.startswith("detbench: error: ")]
    assert len(errors) == 1 and message.format(**paths) in errors[0], out.stderr
    assert store_rows(results) == before
    if not store_first:
        assert not results.exists()


def test_import_runs_as_a_command(tmp_path):
    results = tmp_path / "results"
    log, pairs = jsonl_log(tmp_path, "a.log", 9, images=2)
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "import", "--framework", "detbench-trainer",
                           str(log), *CELL, "--batch-per-gpu", "2", "--gpus", "1", "--warmup", "5",
                           "--measure", "30", "--results", str(results)],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    store = Store(results, create=False)
    [trial] = store.trials(store.runs()[-1]["id"])
    assert trial["iteration_time_s"] == pytest.approx(logtext.truth(pairs, 6, 35)[0], rel=1e-12)


def test_a_log_of_two_runs_imports_the_run_that_covers_the_window_or_the_one_named(tmp_path):
    results = tmp_path / "results"
    first, second = logtext.times(1000, seed=11, base=0.30), logtext.times(1500, seed=12, base=0.24)
    log = write(tmp_path, logtext.mmcv_epoch(first, 500) + logtext.mmcv_epoch(second, 500, first=501))
    flags = ["--framework", "mmdetection", "--format", "mmdet-v2", log, *CELL, "--batch-per-gpu", 2, "--gpus", 1,
             "--warmup", 600, "--measure", 400]
    out = import_(results, *flags)
    assert out.exit_code == 0, out.output
    assert "the log holds 2 runs (a restarted process begins each); the figure is from run 2" in out.stderr
    out = import_(results, *flags, "--run", 1)
    assert out.exit_code == 0, out.output
    store = Store(results, create=False)
    run2, run1 = (store.trials(r["id"])[0] for r in store.runs()[-2:])
    assert abs(run2["iteration_time_s"] - logtext.truth(second, 101, 500)[0]) <= 0.0005
    assert abs(run1["iteration_time_s"] - logtext.truth(first, 601, 1000)[0]) <= 0.0005
    assert json.loads(run1["window_json"]) == json.loads(run2["window_json"]) == [601, 1000]


def test_iters_per_epoch_and_max_error_reach_the_stored_trial(tmp_path):
    results = tmp_path / "results"
    pairs = logtext.times(2000, seed=13)
    log = write(tmp_path, logtext.mmcv_log_json(pairs, 1000), "run.log.json")
    flags = ["--framework", "mmdetection", "--format", "mmdet-v2", log, *CELL, "--batch-per-gpu", 2, "--gpus", 1,
             "--warmup", 500, "--measure", 1000]
    out = import_(results, *flags)
    assert out.exit_code == 2 and "give --iters-per-epoch N" in out.stderr and not results.exists()
    out = import_(results, *flags, "--iters-per-epoch", 1000, "--max-error", 0.0001)
    assert out.exit_code == 0, out.output
    [trial] = Store(results, create=False).trials(Store(results, create=False).runs()[-1]["id"])
    assert trial["exact"] == 1 and json.loads(trial["window_json"]) == [501, 1500]
    assert trial["iteration_time_s"] == pytest.approx(logtext.truth(pairs, 501, 1500)[0], abs=0.5e-5)
    refused = import_(results, *flags, "--iters-per-epoch", 1000, "--max-error", 0.00001)
    assert refused.exit_code == 2 and "cannot meet --max-error 1e-05" in refused.stderr


def test_notes_come_once_every_log_passed_and_an_error_is_one_line(tmp_path):
    results = tmp_path / "results"
    good = write(tmp_path, logtext.mmengine_iter(logtext.times(100, seed=14)), "good.log")
    bad = write(tmp_path, "hello\n", "bad.log")
    out = import_(results, good, bad, *CELL, "--batch-per-gpu", 2, "--gpus", 1, "--warmup", 10, "--measure", 80)
    assert out.exit_code == 2
    assert out.stderr.splitlines() == ["detbench: error: %s: matches no known log format; name it with --format NAME "
                                       "(detbench scrape --list-formats lists them)" % bad]


def test_an_imported_column_says_it_was_imported_and_its_figure_kind(tmp_path):
    results = tmp_path / "results"
    log = write(tmp_path, logtext.mmengine_iter(logtext.times(200, seed=15), interval=50, window=50))
    out = import_(results, log, *CELL, "--batch-per-gpu", 2, "--gpus", 1, "--warmup", 50, "--measure", 100)
    assert out.exit_code == 0, out.output
    md = invoke("report", "--platform", "local", "--results", results)
    assert "mmdetection: sum of the logged window means (within their printed rounding)" in md.stdout
    assert "exact: every iteration's own time" not in md.stdout
    rows = list(csv.DictReader(io.StringIO(invoke("report", "--platform", "local", "--results", results,
                                                  "--format", "csv").stdout)))
    [row] = [r for r in rows if r["framework"] == "mmdetection" and r["model"] == "faster_rcnn"]
    assert (row["imported"], row["figure_kinds"]) == ("True", "window-means")
    # a log of every iteration's own time keeps that kind
    trainer = tmp_path / "trainer"
    jsonl, _ = jsonl_log(tmp_path, "m.log", 16, images=2)
    assert import_(trainer, "--framework", "detbench-trainer", jsonl, *CELL, "--batch-per-gpu", 2, "--gpus", 1,
                   "--warmup", 5, "--measure", 30).exit_code == 0
    [row] = list(csv.DictReader(io.StringIO(invoke("report", "--platform", "local", "--results", trainer,
                                                   "--format", "csv").stdout)))
    assert row["figure_kinds"] == "exact" and row["imported"] == "True"


# ---------------------------------------------------------------- logs written from known times (benchmarks/loggen)

def generated(tmp_path, fmt, values, name="train.log", make=None):
    from benchmarks import loggen
    chooser = loggen.FixedChooser(dict({"runs": 1, "fault": None}, **values))
    log = make(chooser) if make else loggen.generate(fmt, chooser)
    return log, log.write(str(tmp_path / name))


def tf2_log(chooser):
    from benchmarks.loggen import dllogger
    return dllogger._tf2(chooser, 200000, None)


@pytest.mark.parametrize("fmt, values, make, column, window, batch, gpus, right, off", [
    # a DLLogger TF2 time_log of 240 images a step (fps = steps x 240 / seconds), imported as 16
    ("dllogger", dict(log_steps=100, steps_per_epoch=2000, epochs=2, global_batch=240, base_ms=300), tf2_log,
     ["--framework", "nvidia-efficientdet-tf2", "--model", "efficientdet_d0"], (200, 1000), 16, 1, 240, "15"),
    # tensorpack on 8 GPUs, one image each, imported with twice its batch
    ("tensorpack", dict(steps_per_epoch=500, epochs=6, gpus=8), None,
     ["--framework", "tensorpack", "--format", "tensorpack"], (500, 1500), 2, 8, 1, "2"),
])
def test_a_batch_the_logs_own_figures_contradict_is_refused_with_both_numbers(tmp_path, fmt, values, make, column,
                                                                            window, batch, gpus, right, off):
    _, path = generated(tmp_path, fmt, values, make=make)
    results = tmp_path / "results"
    cell = ["--scenario-name", "cluster", "--precision", "fp32", "--platform", "local", "--warmup", window[0],
            "--measure", window[1]] + (["--model", "faster_rcnn"] if "--model" not in column else []) + column
    out = import_(results, path, *cell, "--batch-per-gpu", batch, "--gpus", gpus)
    assert out.exit_code == 2 and store_rows(results) is None
    [line] = out.stderr.splitlines()
    m = re.search(r"imply ([0-9.]+) images per iteration \(.*\), not the (\d+) of --batch-per-gpu %d x --gpus %d: "
                  r"every figure would be %sx off$" % (batch, gpus, off), line)
    assert m and float(m.group(1)) == pytest.approx(right * gpus, rel=0.01) and int(m.group(2)) == batch * gpus, line
    out = import_(results, path, *cell, "--batch-per-gpu", right, "--gpus", gpus)
    assert out.exit_code == 0, out.output


def test_a_current_detectron2_log_is_not_filed_under_a_device_it_does_not_name(tmp_path):
    log, path = generated(tmp_path, "detectron2", dict(era="current", period=20, iters=2000, ckpt=5000, batch=2,
                                                       crash_exception=0, stdout=0))
    results = tmp_path / "results"
    out = import_(results, path, *[a for k, v in FLAGS.items() for a in (k, v)])
    assert out.exit_code == 2 and store_rows(results) is None
    assert out.stderr.splitlines()[-1] == (
        "detbench: error: give --framework: the table column these logs belong to (detectron2 logs are written by "
        "detectron2 on any device (detbench's detectron2 on a CPU, detectron2-cuda on a GPU); the log does not tell "
        "which)")
    for framework in ("detectron2", "detectron2-cuda"):   # the column named, read as the log is written
        out = import_(results, path, "--framework", framework, "--format", "detectron2",
                      *[a for k, v in FLAGS.items() for a in (k, v)])
        assert out.exit_code == 0, out.output
        assert "imported 1 log as %s/faster_rcnn/fp32/local/1/1" % framework in out.stdout
