"""Injected faults on real processes, with the local backend and the calibration workload.

Each test starts `detbench run` as its own process, breaks something for real (kill -9 of
a trial, of runner.py, of detbench itself; a trial that hangs; a results disk that fills
up; four runs writing one store; a damaged store) and then checks what the issue asks:
the reason is recorded, finished trials stay intact, `--resume` completes the rest, no
trial is counted twice and nothing is left running.
"""
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.scenarios import GOOD_SCENARIO
from tests.support.services import need_service
from tests.support.cliproc import detbench, finish
from tests.support.storerows import rows, statuses
from tests.support.waiting import wait_for
from harness.measure import ingest
from harness.cli import main
from harness.launch.local import LocalLauncher
from tests.support.reportcells import throughput_cell

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.faults, pytest.mark.e2e]

SCENARIO = """\
name: faults
matrix: {framework: [calibrate], model: [%(models)s]}
batch_per_gpu: 2
warmup: %(warmup)d
measure: %(measure)d
repeats: %(repeats)d
timeout_s: %(timeout)s
calibrate: {iteration_ms: %(ms)d, data_ms: 1, lines_per_iteration: %(chatter)d}
"""


def scenario(tmp_path, models="retinanet, faster_rcnn", warmup=2, measure=30, repeats=2, timeout=60, ms=20,
             chatter=0, name="scenario.yaml"):
    path = tmp_path / name
    path.write_text(SCENARIO % dict(models=models, warmup=warmup, measure=measure, repeats=repeats,
                                    timeout=timeout, ms=ms, chatter=chatter))
    return path


def integrity(results):
    return rows(results, "PRAGMA integrity_check") == [("ok",)]


def processes():
    """{pid: (parent pid, argv)} of every process now."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path("/proc/%s/cmdline" % name).read_bytes().decode(errors="replace").split("\0")
            stat = Path("/proc/%s/stat" % name).read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            out[int(name)] = (int(fields[1]), argv)
    return out


def runner_and_trial(trial_dir):
    """(runner.py pid, pid of the trial's process it started) for a trial folder, found in the process tree."""
    procs = processes()
    runner = next((pid for pid, (_, argv) in procs.items()
                   if any(a.endswith("runner.py") for a in argv) and str(trial_dir) in argv), None)
    child = next((pid for pid, (ppid, _) in procs.items() if ppid == runner), None) if runner else None
    return runner, child


def left_behind(results):
    """Processes that still work for this results folder (runner.py and the trials it started)."""
    procs = processes()
    runners = {pid for pid, (_, argv) in procs.items() if any(str(results) in a for a in argv)
               and any(a.endswith("runner.py") for a in argv)}
    return sorted(runners | {pid for pid, (ppid, _) in procs.items() if ppid in runners})


def alive(pid):
    try:
        state = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def trial_dirs(results):
    return sorted((Path(results) / "trials").iterdir()) if (Path(results) / "trials").exists() else []


def log_lines(trial_dir):
    try:
        return (Path(trial_dir) / "log.txt").read_text().count("\n")
    except OSError:
        return 0


# ------------------------------------------------------------------------------ kill -9

def test_kill_9_of_a_trials_process_fails_that_trial_and_the_run_goes_on(tmp_path):
    results = tmp_path / "results"
    proc = detbench("run", "--scenario", scenario(tmp_path, measure=40, ms=25), "--results", results)
    try:
        second = wait_for(lambda: [d for d in trial_dirs(results) if d.name.endswith("-0002")
                                   and log_lines(d) >= 5], 60, "trial 2 to print")[0]
        runner, child = runner_and_trial(second)
        assert child and int((second / "trial.pid").read_text()) == child
        os.kill(child, signal.SIGKILL)
    finally:
        code, out = finish(proc)
    assert code == 0, out
    assert "4 trials, 1 failed" in out
    assert statuses(results) == ["done", "failed", "done", "done"]
    (reason, records), = rows(results, "SELECT reason, records FROM trials WHERE seq = 2")
    assert reason == "killed by signal 9"
    assert 0 < records < 42                      # what it printed before it died is kept
    assert not left_behind(results)
    report = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results)])
    # the window's mean is exact up to one boundary iteration's overshoot over 40 iterations,
    # which a loaded machine makes a few hundredths of a millisecond: allow 1%
    cell = throughput_cell(report.output, "Faster R-CNN w/ FPN")
    assert report.exit_code == 0 and cell and abs(cell[0] - 80.0) <= 0.8, report.output
    assert cell[1] == pytest.approx(25.0, abs=0.5), report.output


def test_kill_9_of_runner_py_ends_its_silent_trial_and_records_why(tmp_path):
    # one iteration of 30 s: after its first line the trial prints nothing, so it would not
    # die of a broken pipe; the launcher must end it when runner.py is killed
    results = tmp_path / "results"
    proc = detbench("run", "--scenario", scenario(tmp_path, models="retinanet", warmup=0, measure=1,
                                                   repeats=1, ms=30000), "--results", results)
    try:
        first = wait_for(lambda: [d for d in trial_dirs(results) if log_lines(d) >= 1], 60, "the trial")[0]
        runner, child = wait_for(lambda: all(runner_and_trial(first)) and runner_and_trial(first), 30, "pids")
        os.kill(runner, signal.SIGKILL)
        code, out = finish(proc, timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 0, out
    assert not alive(child), "the trial outlived its runner.py"
    (status, reason), = rows(results, "SELECT status, reason FROM trials")
    assert status == "failed"
    assert reason == "runner wrote no trial.json: runner.py ended without writing trial.json (killed by signal 9)"


def test_kill_9_of_detbench_again_and_again_loses_and_repeats_no_trial(tmp_path):
    """Kill the engine at several points, resume each time: every trial ends done exactly once."""
    results = tmp_path / "results"
    path = scenario(tmp_path, measure=25, ms=20, repeats=3)
    finished = {}     # trial id -> its row when first seen done (must never change after)
    run_id = None
    for done_before_kill, extra_delay in ((1, 0.0), (3, 0.35), (4, 0.8)):
        args = ("run", "--resume", run_id) if run_id else ("run", "--scenario", path)
        proc = detbench(*args, "--results", results)
        try:
            wait_for(lambda n=done_before_kill: statuses(results).count("done") >= n, 120, "trials to finish")
            time.sleep(extra_delay)
            os.kill(proc.pid, signal.SIGKILL)     # the engine only; runner.py notices its parent died
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        run_id = run_id or rows(results, "SELECT id FROM runs")[0][0]
        assert integrity(results)
        wait_for(lambda: not left_behind(results), 20, "trial processes to end after the kill")
        for row in rows(results, "SELECT * FROM trials WHERE status = 'done'"):
            assert finished.setdefault(row[0], row) == row, "a finished trial changed after a kill"
    code, out = finish(detbench("run", "--resume", run_id, "--results", results))
    assert code == 0, out
    assert statuses(results) == ["done"] * 6
    for row in rows(results, "SELECT * FROM trials"):
        assert finished.setdefault(row[0], row) == row
    assert rows(results, "SELECT count(*) FROM runs") == [(1,)]
    per_trial = rows(results, "SELECT trial_id, count(*), min(iteration), max(iteration) FROM iterations "
                              "GROUP BY trial_id")
    assert len(per_trial) == 6 and all(r[1:] == (27, 1, 27) for r in per_trial), per_trial
    assert len(trial_dirs(results)) == 6 and all((d / "trial.json").exists() for d in trial_dirs(results))
    assert integrity(results)
    report = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results), "--details"])
    assert "median of 3 repeats" in report.output, report.output


# ------------------------------------------------------------------------------ hangs

def test_a_trial_that_hangs_is_killed_at_its_timeout_and_the_run_goes_on(tmp_path):
    # 60 s iterations: after its first line the workload is silent until long past the timeout
    results = tmp_path / "results"
    started = time.monotonic()
    code, out = finish(detbench("run", "--scenario", scenario(tmp_path, models="retinanet", warmup=0, measure=2,
                                                                ms=60000, timeout=1.5), "--results", results))
    assert code == 0, out
    assert time.monotonic() - started < 60
    assert "2 trials, 2 failed" in out
    reasons = [r for r, in rows(results, "SELECT reason FROM trials ORDER BY seq")]
    assert all(re.fullmatch(r"timed out after [1-9]\d* s", r) for r in reasons), reasons
    assert not left_behind(results)


def test_a_silent_trial_that_ignores_sigterm_is_killed(tmp_path):
    trial_dir = tmp_path / "trial"
    stubborn = ("import signal, sys, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "time.sleep(600)\n")
    started = time.monotonic()
    LocalLauncher().run(trial_dir, [sys.executable, "-c", stubborn], {}, 1.0)
    assert time.monotonic() - started < 60
    record = ingest.read_trial_json(str(trial_dir))
    assert record["timed_out"] is True and record["signal"] == signal.SIGKILL
    assert record["lines"] == 0 and (trial_dir / "log.txt").read_bytes() == b""
    assert not alive(int((trial_dir / "trial.pid").read_text()))
    assert ingest.failure_reason(record, str(trial_dir)).startswith("timed out after")


# ------------------------------------------------------------------------------ disk full

@pytest.fixture
def small_disk(tmp_path):
    """A 512 KiB tmpfs, remountable bigger; skips (or fails in CI) where mounting is not allowed."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    mounted = False
    if os.geteuid() == 0 and shutil.which("mount"):
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "detbench-faults", str(mnt)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    need_service(mounted, "cannot mount a small tmpfs for the disk-full test (needs root and mount rights); "
                          "test_file_size_limit_while_writing_results covers EFBIG instead")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def test_disk_full_stops_the_run_with_a_clear_error_and_resume_completes(tmp_path, small_disk):
    results = small_disk / "results"
    path = scenario(tmp_path, measure=40, ms=10, repeats=3, chatter=40)   # ~130 KB of log per trial
    code, out = finish(detbench("run", "--scenario", path, "--results", results))
    assert code == 2, out
    assert "Traceback" not in out
    errors = [l for l in out.splitlines() if l.startswith("detbench: error:")]
    assert len(errors) == 1, out
    assert re.search(r"(results folder is full|cannot write the results store)", errors[0]), errors[0]
    run_id = re.search(r"detbench run --resume (\S+) --results", errors[0]).group(1)
    assert integrity(results)
    before = rows(results, "SELECT * FROM trials WHERE status = 'done'")
    assert 1 <= len(before) < 6
    assert "failed" not in statuses(results), "a trial that failed for want of room counts as failed"
    report = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results)])
    assert report.exit_code == 0, report.output   # the store stays readable
    subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)
    code, out = finish(detbench("run", "--resume", run_id, "--results", results))
    assert code == 0, out
    assert statuses(results) == ["done"] * 6 and integrity(results)
    assert set(before) <= set(rows(results, "SELECT * FROM trials")), "a trial finished before the disk filled changed"


def test_file_size_limit_while_writing_results(tmp_path):
    """RLIMIT_FSIZE: every write past 60 kB fails with EFBIG (not ENOSPC), no privileges needed."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (60000, 60000))

    results = tmp_path / "results"
    path = scenario(tmp_path, measure=40, ms=10, repeats=2, chatter=40)
    code, out = finish(detbench("run", "--scenario", path, "--results", results, preexec_fn=limit))
    assert "Traceback" not in out
    assert code in (0, 2), out
    if code == 2:
        assert re.search(r"^detbench: error: .*cannot write the results store.*--resume", out, re.M), out
    failed = rows(results, "SELECT reason FROM trials WHERE status = 'failed'")
    assert failed and all("File too large" in r for r, in failed), failed
    assert integrity(results)


# ------------------------------------------------------------------------------ one store, four writers

def test_four_runs_write_one_store_at_once(tmp_path):
    results = tmp_path / "results"       # does not exist yet: the four race to create it
    paths = [scenario(tmp_path, measure=10, ms=10, name="s%d.yaml" % i) for i in range(4)]
    gate = threading.Barrier(4)
    outputs = [None] * 4

    def one(i):
        gate.wait()
        outputs[i] = finish(detbench("run", "--scenario", paths[i], "--results", results), timeout=240)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for code, out in outputs:
        assert code == 0, out
        assert "4 trials, 0 failed" in out
    assert rows(results, "SELECT count(*) FROM runs") == [(4,)]
    assert rows(results, "SELECT status, count(*) FROM trials GROUP BY status") == [("done", 16)]
    assert rows(results, "SELECT count(*) FROM iterations") == [(16 * 12,)]
    assert rows(results, "SELECT count(DISTINCT id) FROM trials") == [(16,)]
    assert integrity(results)


# ------------------------------------------------------------------------------ damaged or foreign stores

@pytest.fixture(scope="module")
def finished_store(tmp_path_factory):
    """A real store of one finished run (WAL checkpointed into the main file)."""
    root = tmp_path_factory.mktemp("store")
    (root / "s.yaml").write_text(GOOD_SCENARIO)
    code, out = finish(detbench("run", "--scenario", root / "s.yaml", "--results", root / "r"))
    assert code == 0, out
    db = sqlite3.connect(str(root / "r" / "detbench.sqlite"))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("PRAGMA journal_mode = DELETE")
    run_id = db.execute("SELECT id FROM runs").fetchone()[0]
    db.close()
    return (root / "r" / "detbench.sqlite").read_bytes(), run_id


def damage(data, how):
    data = bytearray(data)
    page = 4096
    if how == "middle-page":
        start = page * (len(data) // page // 2)
        data[start:start + 8] = b"\xff" * 8          # the b-tree page header
    elif how == "last-page-content":
        start = len(data) - page
        data[start + 8:start + 300] = b"\x00\xff" * 146
    elif how == "truncated":
        data = data[:len(data) // 2]
    elif how == "header":
        data[16:24] = b"\xff" * 8
    return bytes(data)


COMMANDS = [("run", "--scenario", "SCENARIO"), ("run", "--resume", "RUN"), ("report", "--platform", "local"),
            ("baseline", "save", "RUN", "--out", "OUT")]


@pytest.mark.parametrize("how", ["middle-page", "last-page-content", "truncated", "header", "newer-schema"])
def test_a_damaged_store_is_refused_by_every_command_and_never_written(tmp_path, finished_store, how):
    data, run_id = finished_store
    results = tmp_path / "results"
    results.mkdir()
    store = results / "detbench.sqlite"
    if how == "newer-schema":
        store.write_bytes(data)
        db = sqlite3.connect(str(store))
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        db.commit()
        db.close()
    else:
        store.write_bytes(damage(data, how))
    before = store.read_bytes()
    (tmp_path / "s.yaml").write_text(GOOD_SCENARIO)
    for command in COMMANDS:
        args = [{"SCENARIO": str(tmp_path / "s.yaml"), "RUN": run_id, "OUT": str(tmp_path / "b.json")}.get(a, a)
                for a in command] + ["--results", str(results)]
        out = CliRunner().invoke(main, args)
        assert out.exit_code == 2, (command, out.output)
        lines = out.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("detbench: error: %s: " % store), (command, out.output)
        expected = "schema 99, this detbench reads" if how == "newer-schema" else "refusing to touch it"
        assert expected in lines[0], (command, lines[0])
        assert store.read_bytes() == before, "%s wrote into a store it refused" % (command,)
    assert not (results / "trials").exists() and not (tmp_path / "b.json").exists()


def test_a_results_path_that_cannot_be_a_folder(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "s.yaml").write_text(GOOD_SCENARIO)
    out = CliRunner().invoke(main, ["run", "--scenario", str(tmp_path / "s.yaml"),
                                    "--results", str(tmp_path / "file" / "results")])
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1, out.output
    assert "cannot create the results folder" in out.output
