"""`detbench accuracy run` end to end with the bundled trainer on a tiny learnable set: two
checkpoints, each scored on the val split by the shared COCOeval, stored with its training time;
an interrupted run goes on from its last checkpoint with `--resume`; the report reads the store."""
import json
import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from harness.measure import mllog
from harness.plan import coderev
from tests.support.cliproc import ROOT, detbench, finish
from tests.support.waiting import wait_for

pytest.importorskip("torchvision")
pytest.importorskip("pycocotools")


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    work = tmp_path_factory.mktemp("accuracy")
    run = lambda *a: subprocess.run([sys.executable, "-m", "harness.cli"] + list(a), cwd=str(ROOT),  # noqa: E731
                                    capture_output=True, text=True, timeout=300, check=True)
    run("dataset", "make-coco", str(work / "data"), "--learnable", "--images", "8", "--val-images", "2",
        "--size", "64x64")
    run("weights", "make", "retinanet", "--out", str(work / "r18.pt"), "--depth", "18", "--seed", "0")
    path = work / "scenario.yaml"
    path.write_text("""name: tiny-accuracy
mode: accuracy
matrix:
  framework: [detbench-trainer]
  model: [retinanet]
batch_per_gpu: 1
input_size: [64, 64]
env: {OMP_NUM_THREADS: "1"}
weights: {retinanet: %s}
accuracy:
  data: %s
  iterations: 8
  eval_every: 4
  lr_per_image: 0.0025
  workers: 0
  targets: {retinanet: {metric: bbox_AP50, value: 0.5}}
""" % (work / "r18.pt", work / "data"), encoding="utf-8")
    return path


def rows(results, sql):
    if not (results / "detbench.sqlite").exists():
        return []
    db = sqlite3.connect(str(results / "detbench.sqlite"))
    try:
        return db.execute(sql).fetchall()
    except sqlite3.OperationalError:        # the accuracy tables are not made yet
        return []
    finally:
        db.close()


def test_interrupted_run_resumes_from_its_last_checkpoint(scenario, tmp_path):
    results = tmp_path / "results"
    proc = detbench("accuracy", "run", "--scenario", scenario, "--results", results)
    try:
        wait_for(lambda: rows(results, "SELECT iteration FROM accuracy_points WHERE iteration = 4"), 240,
                 "the checkpoint of iteration 4")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    finish(proc)
    (run_id, status), = rows(results, "SELECT run_id, status FROM accuracy_trials")
    assert status == "running"
    assert rows(results, "SELECT count(*) FROM accuracy_points WHERE iteration = 8") == [(0,)], \
        "the run was killed after its last checkpoint: nothing left to resume"

    # the run's inputs, by content: the weights file and each split's annotations and images
    inputs = dict(rows(results, "SELECT path, sha256 FROM accuracy_inputs"))
    assert str(scenario.parent / "r18.pt") in inputs and len(inputs) == 5
    # saved as it stands, to go on elsewhere: the unfinished trial is pending there, with nothing of its training
    saved, elsewhere = tmp_path / "run.json", tmp_path / "elsewhere"
    code, out = finish(detbench("accuracy", "save", run_id, "--results", results, "--out", saved))
    assert code == 0 and "0 finished trials, 1 pending" in out, out
    code, out = finish(detbench("accuracy", "load", saved, "--results", elsewhere))
    assert code == 0, out
    assert rows(elsewhere, "SELECT status FROM accuracy_trials") == [("pending",)]
    assert rows(elsewhere, "SELECT count(*) FROM accuracy_points") == [(0,)]

    code, out = finish(detbench("accuracy", "run", "--resume", run_id, "--results", results), timeout=400)
    assert code == 0, out
    assert "resuming after iteration 4" in out
    points = rows(results, "SELECT iteration, train_seconds, bbox_ap, bbox_ap50, eval_seconds FROM accuracy_points "
                           "ORDER BY iteration")
    assert [p[0] for p in points] == [4, 8]
    assert all(p[2] is not None and 0 <= p[3] <= 1 and p[4] > 0 for p in points)
    assert 0 < points[0][1] < points[1][1], "training time runs on across the resume"
    assert rows(results, "SELECT status FROM accuracy_trials") == [("done",)]
    # its MLLOG beside its files: the round's format rules pass, with the stored curve's times
    logged = mllog.read_result(os.path.join(rows(results, "SELECT folder FROM accuracy_trials")[0][0], "mllog.txt"),
                               "2.1.0")
    assert logged.compliance is None and logged.benchmark == "ssd"
    assert [(p.seconds, p.accuracy[""]) for p in logged.curve] == pytest.approx([(p[1], p[2]) for p in points],
                                                                                abs=1e-3)
    losses = rows(results, "SELECT iteration FROM accuracy_losses ORDER BY iteration")
    assert [r[0] for r in losses] == list(range(1, 9))
    trial_dir = results / "accuracy" / run_id
    log = next(trial_dir.glob("*/log.txt")).read_text(encoding="utf-8")
    assert "resuming" in log and "after iteration 4" in log
    # what else used the machine, per checkpoint interval: from the start to 4 (the killed program), 4 to 8
    loads = rows(results, "SELECT start_iteration, iteration, wall_seconds FROM accuracy_load ORDER BY iteration")
    assert [row[:2] for row in loads] == [(0, 4), (4, 8)] and all(row[2] > 0 for row in loads)
    # the resumed program's start-up is kept: its later times hold it, and the report says so
    (resumed,) = rows(results, "SELECT iteration, first_iteration, startup_seconds FROM accuracy_resumes")
    assert resumed[:2] == (4, 5) and resumed[2] > 0
    # each training program stored the detbench code it ran: the start and the resume from 4
    codes = rows(results, "SELECT iteration, code_json FROM accuracy_code ORDER BY iteration")
    assert [c[0] for c in codes] == [0, 4] and all(json.loads(c[1]) == coderev.revision() for c in codes)

    out = subprocess.run([sys.executable, "-m", "harness.cli", "accuracy", "report", "--results", str(results)],
                         cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    # the trainer alone, no rival: no time to target can be judged, said in one line after the report (exit 2)
    assert out.returncode == 2 and out.stderr.startswith("detbench: error: nothing could be judged: "), out.stderr
    assert len(out.stderr.splitlines()) == 1
    assert "| detbench-trainer | fp32 | 1 |" in out.stdout and "interpolated" in out.stdout
    # the settings the trainer logged, read from its objects, kept once (the resume's line is not stored over it)
    (settings,), = rows(results, "SELECT settings_json FROM accuracy_settings")
    assert json.loads(settings)["lr"] == pytest.approx(0.0025)
    assert "Implementation, detbench-trainer fp32: " in out.stdout
    assert "Resumed from a checkpoint: detbench-trainer fp32 seed 0 after iteration 4 (" in out.stdout

    # a done trial trained again from the start (--redo): a key the run lacks is one line and
    # changes nothing; the earlier training's files are kept beside, its figures in one redo row
    (key,), = rows(results, "SELECT trial_key FROM accuracy_trials")
    code, out = finish(detbench("accuracy", "run", "--resume", run_id, "--results", results, "--redo", key + "x"))
    assert code == 2 and len(out.strip().splitlines()) == 1 and "--redo %sx: run %s has no such trial" % (key, run_id) \
        in out
    assert rows(results, "SELECT count(*) FROM accuracy_points") == [(2,)]
    code, out = finish(detbench("accuracy", "run", "--resume", run_id, "--results", results, "--redo", key),
                       timeout=400)
    assert code == 0, out
    assert "%s: trained again from the start; its earlier files are in " % key in out and "resuming" not in out
    assert rows(results, "SELECT status FROM accuracy_trials") == [("done",)]
    assert [r[0] for r in rows(results, "SELECT iteration FROM accuracy_points ORDER BY iteration")] == [4, 8]
    assert rows(results, "SELECT count(*) FROM accuracy_resumes") == [(0,)], "the new training was not resumed"
    assert rows(results, "SELECT iteration FROM accuracy_code") == [(0,)], "the redo's one program, from the start"
    [kept] = [p for p in trial_dir.iterdir() if ".replaced-" in p.name]
    assert "after iteration 4" in (kept / "log.txt").read_text(encoding="utf-8")
    (previous,), = rows(results, "SELECT previous_json FROM accuracy_redos")
    previous = json.loads(previous)
    assert previous["iteration"] == 8 and previous["bbox_AP50"] == points[-1][3]
    out = subprocess.run([sys.executable, "-m", "harness.cli", "accuracy", "report", "--results", str(results)],
                         cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr          # still no rival: nothing judged
    assert "Trained again from the start: detbench-trainer fp32 seed 0 at " in out.stdout
    assert "files kept as %s" % kept.name in out.stdout and "Resumed from a checkpoint" not in out.stdout

    # the loaded run goes on in its new store, from the start: its checkpoints were not carried
    code, said = finish(detbench("accuracy", "run", "--resume", run_id, "--results", elsewhere), timeout=400)
    assert code == 0, said
    assert "resuming" not in said
    assert rows(elsewhere, "SELECT status FROM accuracy_trials") == [("done",)]
    assert [r[0] for r in rows(elsewhere, "SELECT iteration FROM accuracy_points ORDER BY iteration")] == [4, 8]
    assert list((elsewhere / "accuracy" / run_id).glob("*/log.txt"))


def test_redo_names_a_trial_of_a_stored_run(tmp_path):
    code, out = finish(detbench("accuracy", "run", "--scenario", tmp_path / "s.yaml", "--redo", "a/s0"))
    assert code == 2 and "--redo names a trial of a stored run: give it with --resume RUN_ID" in out


def test_speed_scenario_is_refused_by_accuracy_run(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nmatrix:\n  framework: [calibrate]\n  model: [retinanet]\n", encoding="utf-8")
    code, out = finish(detbench("accuracy", "run", "--scenario", path, "--results", tmp_path / "r"))
    assert code == 2 and "mode is train" in out and len(out.strip().splitlines()) == 1


def training_processes(results):
    """Processes whose command line names the run's folder: the training program of a trial."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as fh:
                if str(results).encode() in fh.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint-ignored-at-start", "sigterm"])
def test_an_interrupt_stops_the_training_program_too_and_says_how_to_resume(scenario, tmp_path, signum):
    results = tmp_path / "results"
    # as a script's background job starts it: SIGINT ignored (Python then never raises KeyboardInterrupt)
    proc = detbench("accuracy", "run", "--scenario", scenario, "--results", results,
                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        wait_for(lambda: rows(results, "SELECT iteration FROM accuracy_points WHERE iteration = 4"), 240,
                 "the checkpoint of iteration 4")
        assert training_processes(results), "a program of the trial is running"
        proc.send_signal(signum)            # to the run only, not to its process group
        code, out = finish(proc, timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 130, out
    (run_id, status), = rows(results, "SELECT run_id, status FROM accuracy_trials")
    assert "interrupted; go on with `detbench accuracy run --resume %s --results %s`" % (run_id, results) in out
    assert status != "done"
    wait_for(lambda: not training_processes(results), 15, "the training program to be gone")
