"""End to end on the calibration workload: exact figures, and runs that survive kills."""
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from tests.support.storerows import rows
from tests.support.reportcells import iteration_cell, throughput_cell

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.e2e, pytest.mark.timing]   # its figures hold on an otherwise idle CPU

TWO_CELLS = """\
name: two-cells
matrix:
  framework: [calibrate]
  model: [retinanet, faster_rcnn]
  precision: [fp32]
  platform: [local]
batch_per_gpu: 2
input_size: [320, 320]
warmup: 3
measure: 20
repeats: 3
timeout_s: 60
calibrate:
  iteration_ms: 20
  data_ms: 1
"""


def detbench(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def trial_states(results):
    return rows(results, "SELECT seq, status FROM trials ORDER BY seq")


def test_calibration_run_reports_the_truth(tmp_path):
    results = tmp_path / "results"
    runner = CliRunner()
    out = runner.invoke(main, ["run", "--scenario", str(ROOT / "scenarios" / "calibrate.yaml"),
                               "--results", str(results)])
    assert out.exit_code == 0, out.output
    assert "3 trials, 0 failed" in out.output
    report = runner.invoke(main, ["report", "--platform", "local", "--results", str(results)])
    assert report.exit_code == 0, report.output
    # footnote marks (flags) may follow a cell; the figures themselves must be right
    row = throughput_cell(report.output, "RetinaNet")
    assert row, report.output
    assert row[0] == pytest.approx(40.0, rel=0.01) and row[1] == pytest.approx(50.0, abs=0.5)
    single = iteration_cell(report.output, "RetinaNet")
    # the data wait ends on a sleep: a loaded machine may stretch it past 5.5 ms
    assert single and single[0] == pytest.approx(50.0, abs=0.5) and 4.5 <= single[1] < 6.5, report.output
    # both estimators, trial by trial, from the store
    db = sqlite3.connect(str(results / "detbench.sqlite"))
    rows = db.execute("SELECT throughput, observed, data_time_s, status FROM trials").fetchall()
    assert len(rows) == 3
    for thr, obs, data, status in rows:
        assert status == "done"
        # 1% per trial: a loaded 2-core CI machine can delay the last deadline by a few ms
        assert thr == pytest.approx(40.0, rel=0.01) and obs == pytest.approx(40.0, rel=0.01)
        # 15%: sleeps on a loaded 2-core VM overshoot by a fraction of a ms
        # (benchmarks/accuracy.py holds the 0.5% proof)
        assert data == pytest.approx(0.005, rel=0.15)
    trial_dirs = list((results / "trials").iterdir())
    assert len(trial_dirs) == 3 and all((d / "trial.json").exists() and (d / "log.txt").exists()
                                        for d in trial_dirs)


def wait_for(predicate, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def finish_report(results, run_id):
    out = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results), "--run", run_id,
                                    "--details"])
    assert out.exit_code == 0, out.output
    return out.output


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_killed_run_resumes_without_losing_or_repeating_trials(tmp_path, write_scenario, how):
    scenario = write_scenario(TWO_CELLS)
    results = tmp_path / "results"
    proc = detbench("run", "--scenario", str(scenario), "--results", str(results))
    assert wait_for(lambda: sum(s == "done" for _, s in trial_states(results)) >= 2), proc.communicate()
    proc.send_signal(how)
    output = proc.communicate(timeout=30)[0]
    run_id = re.search(r"^run (\S+):", output, re.M).group(1)
    states = trial_states(results)
    assert len(states) == 6
    done_before = {seq for seq, s in states if s == "done"}
    assert 2 <= len(done_before) < 6
    if how == signal.SIGINT:
        assert proc.returncode == 130
        assert "detbench run --resume %s" % run_id in output
        assert all(s in ("done", "pending") for _, s in states)
    # no trial process is left behind by the kill
    assert wait_for(lambda: not _calibrate_processes(results), timeout=15)
    resumed = detbench("run", "--resume", run_id, "--results", str(results))
    text = resumed.communicate(timeout=120)[0]
    assert resumed.returncode == 0, text
    assert "[1/%d]" % (6 - len(done_before)) in text
    states = trial_states(results)
    assert [seq for seq, _ in states] == [1, 2, 3, 4, 5, 6]
    assert all(s == "done" for _, s in states)
    assert len(list((results / "trials").iterdir())) == 6
    report = finish_report(results, run_id)
    assert "median of 3 repeats" in report
    # within one boundary iteration's overshoot of the truth (100 images/s at 20 ms)
    for model in ("RetinaNet", "Faster R-CNN w/ FPN"):
        row = throughput_cell(report, model)
        assert row and row[0] == pytest.approx(100.0, rel=0.01) and row[1] == pytest.approx(20.0, abs=0.5), report


def _calibrate_processes(results):
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path("/proc/%s/cmdline" % pid).read_bytes().split(b"\0")
            except OSError:
                continue
            try:
                cwd = os.readlink("/proc/%s/cwd" % pid)
            except OSError:
                cwd = ""
            # this run's processes only (others may run beside it): the trial's workload runs in
            # its trial folder, runner.py names that folder
            if cwd.startswith(str(results)) or any(str(results).encode() in c for c in cmd):
                found.append(pid)
    return found


def test_resume_of_a_finished_run_does_nothing(tmp_path, write_scenario):
    results = tmp_path / "results"
    out = CliRunner().invoke(main, ["run", "--scenario", str(write_scenario()), "--results", str(results)])
    run_id = re.search(r"^run (\S+):", out.output, re.M).group(1)
    again = CliRunner().invoke(main, ["run", "--resume", run_id, "--results", str(results)])
    assert again.exit_code == 0 and "nothing left to do" in again.output
    assert len(trial_states(results)) == 2


def test_failed_trial_is_recorded_and_the_run_goes_on(tmp_path, write_scenario):
    text = TWO_CELLS.replace("repeats: 3", "repeats: 1") + "extra_args:\n  calibrate: [--fail-at, '5']\n"
    results = tmp_path / "results"
    out = CliRunner().invoke(main, ["run", "--scenario", str(write_scenario(text)), "--results", str(results)])
    assert out.exit_code == 0, out.output
    assert out.output.count("FAILED: exit code 1: calibrate: failing at iteration 5 as asked") == 2
    report = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results)])
    assert "NA¹" in report.output and "all 1 trials failed" in report.output


def test_a_program_that_exits_without_a_figure_fails_its_trial_in_one_line(tmp_path, write_scenario):
    # --help: the workload prints its usage and exits 0 without one iteration line
    text = TWO_CELLS.replace("repeats: 3", "repeats: 1") + "extra_args:\n  calibrate: [--help]\n"
    results = tmp_path / "results"
    out = CliRunner().invoke(main, ["run", "--scenario", str(write_scenario(text)), "--results", str(results)])
    assert out.exit_code == 0, out.output
    failed = [line for line in out.output.splitlines() if "FAILED" in line]
    assert len(failed) == 2
    said = [re.match(r"\[\d/2\] calibrate/(\w+)/fp32/local/1/1 repeat 1 \.\.\. FAILED: no detbench-jsonl training "
                     r"record in log.txt: the program exited with code 0 without printing an iteration line; "
                     r"its last line: --tail-ms TAIL_MS  \[eta", line) for line in failed]
    assert all(said) and {m.group(1) for m in said} == {"retinanet", "faster_rcnn"}, failed
