"""Against a real Slurm cluster (.ci/provision-slurm.sh brings up a one-node one).

Trials go through sbatch into the store, Slurm's end states become failed trials, and an
interrupted or killed run leaves no job behind in squeue. Skips when no cluster answers
(fails instead with DETBENCH_REQUIRE_SERVICES=1).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.services import need_service
from tests.support.slurmjobs import our_jobs, run_id_of
from tests.support.storerows import rows
from tests.support.waiting import wait_for
from harness.launch import slurm

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def cluster_state():
    if not slurm.available() or not shutil.which("sinfo"):
        return None
    try:
        out = subprocess.run(["sinfo", "--noheader", "--format=%T"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, universal_newlines=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    states = set(out.split())
    return states if states & {"idle", "mixed", "allocated"} else None


@pytest.fixture
def cluster():
    need_service(cluster_state() is not None,
                 "no Slurm cluster answers (sbatch/sinfo missing or no idle node): run .ci/provision-slurm.sh")


def detbench(*args, wait=True, timeout=600):
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli"] + list(args), cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                            start_new_session=True)
    if not wait:
        return proc
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def test_ddp_trials_run_through_sbatch_into_the_store_and_the_scaling_report(cluster, tmp_path):
    text = (ROOT / "scenarios" / "scaling-cpu.yaml").read_text()
    text = text.replace("measure: 12", "measure: 6").replace("repeats: 2", "repeats: 1")
    scenario = tmp_path / "scaling-cpu.yaml"
    scenario.write_text(text)
    results = tmp_path / "results"
    code, out = detbench("run", "--scenario", str(scenario), "--results", str(results))
    assert code == 0, out
    assert "on backend slurm" in out and "2 trials, 0 failed" in out
    trials = rows(results, "SELECT id, cell_key, status, throughput FROM trials ORDER BY seq")
    assert sorted((t[1].split("/")[4], t[2]) for t in trials) == [("1", "done"), ("2", "done")]
    assert all(t[3] > 0 for t in trials)
    two = results / "trials" / next(t[0] for t in trials if t[1].split("/")[4] == "2")
    assert (two / "job.sbatch").read_text().startswith("#!/bin/bash\n#SBATCH --job-name=detbench-")
    assert '"state": "COMPLETED"' in (two / "slurm.json").read_text()
    log = (two / "log.txt").read_text()
    assert re.search(r'"world_size": ?2\b', log), "the 2-process trial did not run as one DDP job of 2 ranks"
    assert '"SLURM_JOB_ID"' in (two / "trial.json").read_text()
    code, report = detbench("report", "--platform", "local", "--results", str(results))
    assert code == 0, report
    assert "### Scaling efficiency" in report
    assert "|1|1x1|" in report and "|2|1x2|" in report


CALIBRATE = """\
name: slurm-calibrate
backend: slurm
matrix: {framework: [calibrate], model: [retinanet], precision: [fp32], platform: [local], gpus: [1]}
batch_per_gpu: 2
warmup: 1
measure: %(measure)d
repeats: 1
timeout_s: 120
calibrate: {iteration_ms: %(ms)d, data_ms: 0}
slurm: {gpus_per_node: 0, time_limit: "5"}
%(extra)s"""


def calibrate_scenario(tmp_path, measure=5, ms=10, extra=""):
    path = tmp_path / "calibrate.yaml"
    path.write_text(CALIBRATE % {"measure": measure, "ms": ms, "extra": extra})
    return path


def test_a_failing_trial_is_failed_with_the_runners_reason(cluster, tmp_path):
    scenario = calibrate_scenario(tmp_path, extra="extra_args: {calibrate: [--iterations, no-such-count]}\n")
    results = tmp_path / "results"
    code, out = detbench("run", "--scenario", str(scenario), "--results", str(results))
    assert code == 0, out
    (status, reason), = rows(results, "SELECT status, reason FROM trials")
    assert status == "failed" and reason.startswith("exit code 2") and "no-such-count" in reason
    trial_dir = next((results / "trials").iterdir())
    assert '"state": "FAILED"' in (trial_dir / "slurm.json").read_text()


def test_a_job_cancelled_by_someone_else_is_a_failed_trial(cluster, tmp_path):
    scenario = calibrate_scenario(tmp_path, measure=600, ms=100)
    results = tmp_path / "results"
    run_id = None
    proc = detbench("run", "--scenario", str(scenario), "--results", str(results), wait=False)
    try:
        run_id = wait_for(lambda: run_id_of(results) if (results / "detbench.sqlite").exists() else None,
                          60, "the run to start")
        (job_id, _, _), = wait_for(lambda: [j for j in our_jobs(run_id) if j[2] == "RUNNING"], 180,
                                    "the job to run")
        subprocess.run(["scancel", job_id], check=True)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out
    (status, reason), = rows(results, "SELECT status, reason FROM trials")
    assert status == "failed" and reason.startswith("slurm job was cancelled"), reason


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_run_cancels_its_job_and_leaves_the_trial_pending(cluster, tmp_path, signum):
    scenario = calibrate_scenario(tmp_path, measure=600, ms=100)
    results = tmp_path / "results"
    run_id = None
    proc = detbench("run", "--scenario", str(scenario), "--results", str(results), wait=False)
    try:
        run_id = wait_for(lambda: run_id_of(results) if (results / "detbench.sqlite").exists() else None,
                          60, "the run to start")
        wait_for(lambda: [j for j in our_jobs(run_id) if j[2] == "RUNNING"], 180, "the job to run")
        os.kill(proc.pid, signum)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out
    assert "interrupted; finished trials are kept" in out
    assert our_jobs(run_id) == [], "an interrupted run left its job in squeue"
    assert rows(results, "SELECT status FROM trials") == [("pending",)]


def test_a_killed_runs_orphan_job_is_found_by_name_and_cancelled_on_resume(cluster, tmp_path):
    scenario = calibrate_scenario(tmp_path, measure=30, ms=100)
    results = tmp_path / "results"
    run_id = None
    proc = detbench("run", "--scenario", str(scenario), "--results", str(results), wait=False)
    try:
        run_id = wait_for(lambda: run_id_of(results) if (results / "detbench.sqlite").exists() else None,
                          60, "the run to start")
        (orphan, _, _), = wait_for(lambda: [j for j in our_jobs(run_id) if j[2] == "RUNNING"], 180,
                                    "the job to run")
        os.killpg(proc.pid, signal.SIGKILL)      # no chance to clean up
        proc.wait(timeout=30)
        assert [j[0] for j in our_jobs(run_id)] == [orphan], "the orphan should still be queued"
        code, out = detbench("run", "--resume", run_id, "--results", str(results))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if run_id:
            slurm.cancel([j[0] for j in our_jobs(run_id)])
    assert code == 0, out
    assert "still in squeue" in out        # the resumed run says what it found ...
    assert rows(results, "SELECT status FROM trials") == [("done",)]
    assert slurm.queue_state(orphan) is None    # ... and the orphan was cancelled, not left running
    assert our_jobs(run_id) == []


def test_a_job_sbatch_refuses_is_a_failed_trial_with_sbatchs_reason(cluster, tmp_path):
    # the test cluster has no GPUs: asking for one per node is refused at submission
    scenario = calibrate_scenario(tmp_path).read_text().replace("gpus_per_node: 0", "gpus_per_node: 1")
    path = tmp_path / "gpu.yaml"
    path.write_text(scenario)
    results = tmp_path / "results"
    code, out = detbench("run", "--scenario", str(path), "--results", str(results))
    assert code == 0, out
    (status, reason), = rows(results, "SELECT status, reason FROM trials")
    assert status == "failed" and reason.startswith("slurm job was refused by sbatch (sbatch --parsable failed:")
    assert "#SBATCH --gpus-per-node=1" in next((results / "trials").iterdir()).joinpath("job.sbatch").read_text()
