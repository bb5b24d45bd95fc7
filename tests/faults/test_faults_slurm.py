"""slurmd stopped mid-run, against the real one-node cluster of .ci/provision-slurm.sh.

The test kills slurmd (kill -9, as a crash would) while a trial's job runs. The trial's
own processes are stopped (SIGSTOP) at that moment so that its job is still running when
slurmctld declares the node down (SlurmdTimeout, about 30-45 s here); without that the
calibration trial would finish on the orphaned step first. Slurm then requeues the job;
detbench must fail that trial with the reason, cancel the job, stop the run, and finish
the rest on --resume once slurmd is back. A resume attempted while the node is still down
must stop again without failing or queueing anything.
"""
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.services import need_service
from tests.support.cliproc import detbench, error_lines, finish
from tests.support.slurmjobs import our_jobs, stopped_on_a_lost_node
from tests.support.storerows import rows, statuses
from tests.support.waiting import wait_for
from harness.launch import slurm
from tests.launch.test_slurm_cluster import cluster_state

ROOT = Path(__file__).resolve().parents[2]
SLURMD_PID = Path("/run/slurmd.pid")
pytestmark = [pytest.mark.faults, pytest.mark.e2e]

SCENARIO = """\
name: slurmd-fault
backend: slurm
matrix: {framework: [calibrate], model: [retinanet], precision: [fp32], platform: [local], gpus: [1]}
batch_per_gpu: 2
warmup: 1
measure: 30
repeats: 3
timeout_s: 600
calibrate: {iteration_ms: 100, data_ms: 0}
slurm: {gpus_per_node: 0, time_limit: "15", node_down_wait_s: 5}
"""


def slurmd_pid():
    try:
        pid = int(SLURMD_PID.read_text().split()[0])
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError, IndexError):
        return None


def node_state():
    out = subprocess.run(["sinfo", "--noheader", "--format=%T"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, universal_newlines=True, timeout=20).stdout.split()
    return out[0] if out else ""


def start_slurmd():
    if slurmd_pid() is None:
        subprocess.run(["/usr/sbin/slurmd"], check=True, timeout=60)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if node_state() in ("idle", "mixed", "allocated"):
            return
        time.sleep(0.5)
    raise AssertionError("the node did not come back after slurmd restarted: %s" % node_state())


@pytest.fixture
def restartable_slurmd():
    if os.environ.get("DETBENCH_DISRUPTIVE_TESTS") != "1":
        pytest.skip("stops and restarts this host's slurmd; set DETBENCH_DISRUPTIVE_TESTS=1 to allow it")
    need_service(cluster_state() is not None,
                 "no Slurm cluster answers (sbatch/sinfo missing or no idle node): run .ci/provision-slurm.sh")
    need_service(os.geteuid() == 0 and slurmd_pid() is not None and os.path.exists("/usr/sbin/slurmd"),
                 "slurmd cannot be stopped and restarted here (needs root and .ci/provision-slurm.sh's slurmd)")
    try:
        yield
    finally:
        start_slurmd()   # never leave the cluster down for the tests after this one


def trial_processes(trial_dir):
    """pids of runner.py for this trial folder and of the process it started."""
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                argv = Path("/proc/%s/cmdline" % name).read_bytes().decode(errors="replace").split("\0")
                ppid = int(Path("/proc/%s/stat" % name).read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            procs[int(name)] = (ppid, argv)
    runners = {p for p, (_, argv) in procs.items() if str(trial_dir) in argv and any(a.endswith("runner.py")
                                                                                        for a in argv)}
    return sorted(runners | {p for p, (ppid, _) in procs.items() if ppid in runners})


def test_slurmd_stopped_mid_run_fails_the_trial_in_flight_and_resume_completes(restartable_slurmd, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    results = tmp_path / "results"
    proc = detbench("run", "--scenario", scenario, "--results", results)
    stopped = run_id = None
    try:
        wait_for(lambda: statuses(results)[:1] == ["done"], 180, "trial 1 to finish")
        run_id = rows(results, "SELECT id FROM runs")[0][0]
        second = results / "trials" / ("%s-0002" % run_id)
        stopped = int(wait_for(lambda: (second / "trial.pid").exists() and (second / "trial.pid").read_text(),
                               120, "trial 2 to start"))
        os.kill(slurmd_pid(), signal.SIGKILL)
        os.kill(stopped, signal.SIGSTOP)     # keeps trial 2's job running until slurmctld gives up the node
        code, out = finish(proc, timeout=300)
        # the engine has returned: the trial in flight is failed, the rest waits, no job is left
        done_before = stopped_on_a_lost_node(code, out, results, run_id)

        # resumed while the node is still down: stops again, fails nothing, queues nothing
        assert "*" in node_state() or node_state().startswith("down"), node_state()
        code, out = finish(detbench("run", "--resume", run_id, "--results", results), timeout=120)
        assert code == 2, out
        assert len(error_lines(out)) == 1 and "no node of slurm partition" in error_lines(out)[0], out
        assert statuses(results) == ["done", "failed", "pending"]
        assert our_jobs(run_id) == []

        # slurmd back: its restart ends the orphaned step, and resume completes the run
        start_slurmd()
        wait_for(lambda: not trial_processes(second), 120, "the orphaned step of trial 2 to end")
        code, out = finish(detbench("run", "--resume", run_id, "--results", results), timeout=300)
        assert code == 0, out
        assert "3 trials, 1 failed" in out
        assert statuses(results) == ["done", "failed", "done"]
        assert rows(results, "SELECT * FROM trials WHERE seq = 1") == done_before
        assert rows(results, "PRAGMA integrity_check") == [("ok",)]
        assert our_jobs(run_id) == []
        record = (second / "trial.json").read_text()
        assert re.search(r'"error": "slurm job lost a node', record), "the orphaned runner overwrote the verdict"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if stopped is not None:
            try:
                os.kill(stopped, signal.SIGKILL)
            except OSError:
                pass
        if run_id is not None:
            slurm.cancel([j for j, _, _ in our_jobs(run_id)])
