"""End to end: an oversubscribed calibration trial is flagged in the report, a normal one is not."""
import json
import os
import sqlite3

import pytest
from click.testing import CliRunner

from harness.cli import main

pytestmark = [pytest.mark.e2e, pytest.mark.timing]   # its figures hold on an otherwise idle CPU

SCENARIO = """\
name: contention
matrix:
  framework: [calibrate]
  model: [retinanet]
  precision: [fp32]
  platform: [local]
batch_per_gpu: 2
input_size: [320, 320]
warmup: 2
measure: 40
repeats: 1
timeout_s: 60
calibrate:
  iteration_ms: 60
  data_ms: 1
"""
FLAG = "CPU oversubscribed"


def run_and_report(tmp_path, write_scenario, extra=""):
    results = tmp_path / "results"
    path = write_scenario(SCENARIO + extra)
    runner = CliRunner()
    out = runner.invoke(main, ["run", "--scenario", str(path), "--results", str(results)])
    assert out.exit_code == 0 and "1 trials, 0 failed" in out.output, out.output
    report = runner.invoke(main, ["report", "--platform", "local", "--results", str(results)])
    assert report.exit_code == 0, report.output
    db = sqlite3.connect(str(results / "detbench.sqlite"))
    fp, tel = db.execute("SELECT fingerprint, telemetry_json FROM trials").fetchone()
    return report.output, fp, json.loads(tel)


def test_spinning_processes_flag_cpu_oversubscription(tmp_path, write_scenario):
    cores = len(os.sched_getaffinity(0))
    extra = 'extra_args:\n  calibrate: ["--busy-processes", "%d"]\n' % (2 * cores + 2)
    report, fp, tel = run_and_report(tmp_path, write_scenario, extra)
    assert tel["samples"] >= 1 and tel["tree_procs"]["max"] == 2 * cores + 3
    assert FLAG in report, (report, tel)
    assert fp and fp.startswith("fp2-")


def test_a_normal_calibration_trial_does_not_flag(tmp_path, write_scenario):
    report, fp, tel = run_and_report(tmp_path, write_scenario)
    assert tel["samples"] >= 1 and tel["tree_procs"]["max"] == 1
    assert FLAG not in report, (report, tel)

