"""Faults on the nodes' side of a two-node trial, on the real `twonode` partition.

The partition's nodes (.ci/slurm-nodes.sh) are slurmd daemons in their own network, UTS and
mount namespaces, so one node can fail alone:

- a node dies mid-trial: its slurmd and every process in its namespace are killed (kill -9),
  as when a machine loses power; it is restarted for the tests after this one;
- a node's view of the trial folder is a full filesystem: a small tmpfs, filled, mounted over
  the results folder in that node's mount namespace only (the other node and the host
  write to the real folder);
- a node never joins the rendezvous: in its mount namespace the first host's name resolves to
  an address nobody holds, so its torchrun never reaches the one on node 0.

Each must give a failed trial with the reason, leave no job in squeue, and let
`detbench run --resume` complete the rest. They change the nodes of this machine's cluster,
so they run only with DETBENCH_DISRUPTIVE_TESTS=1 (as root) and skip with that reason
otherwise.
"""
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.services import need_service
from tests.support.slurmjobs import our_jobs, run_id_of, stopped_on_a_lost_node
from tests.support.cliproc import detbench, error_lines, finish
from tests.support.storerows import rows, statuses
from tests.support.waiting import wait_for
from harness.launch import slurm
from tests.launch.test_slurm_twonode import PARTITION, need_twonode

ROOT = Path(__file__).resolve().parents[2]
NODES_SH = ROOT / ".ci" / "slurm-nodes.sh"
pytestmark = [pytest.mark.faults, pytest.mark.e2e]

CALIBRATE = """\
name: node-fault
backend: slurm
matrix: {framework: [calibrate], model: [retinanet], precision: [fp32], platform: [local], gpus: [1], nodes: [2]}
batch_per_gpu: 2
warmup: 1
measure: %(measure)d
repeats: %(repeats)d
timeout_s: 300
calibrate: {iteration_ms: %(ms)d, data_ms: 0}
slurm: {partition: twonode, gpus_per_node: 0, cpus_per_task: 1, time_limit: "10", node_down_wait_s: 5}
"""


def nodes_sh(*args):
    return subprocess.run(["bash", str(NODES_SH)] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=120, check=True).stdout


def node_addresses():
    return dict(line.split() for line in nodes_sh("list").splitlines() if line.strip())


def slurmd_pid(node):
    proc = subprocess.run(["bash", str(NODES_SH), "pid", node], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, universal_newlines=True, timeout=30)
    return int(proc.stdout) if proc.returncode == 0 else None


def in_node(node, argv):
    """Run argv in the node's mount namespace (that of its slurmd, which its job steps inherit)."""
    pid = slurmd_pid(node)
    assert pid, "slurmd of %s is not running" % node
    return subprocess.run(["nsenter", "--mount=/proc/%d/ns/mnt" % pid, "--"] + list(argv),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=60)


def node_up(node):
    return slurm.usable(slurm.node_states(PARTITION).get(node, "missing"))


def restart(node):
    nodes_sh("start", node)
    wait_for(lambda: node_up(node), 120, "node %s to come back up" % node, poll_s=0.5)


@pytest.fixture
def nodes():
    """The two nodes (first, second); both running again afterwards."""
    if os.environ.get("DETBENCH_DISRUPTIVE_TESTS") != "1":
        pytest.skip("kills and changes the nodes of this host's Slurm cluster; "
                    "set DETBENCH_DISRUPTIVE_TESTS=1 to allow it")
    need_twonode()
    need_service(os.geteuid() == 0 and shutil.which("nsenter") is not None and NODES_SH.exists(),
                 "the nodes cannot be killed, restarted or entered here (needs root, nsenter "
                 "and .ci/slurm-nodes.sh)")
    names = sorted(node_addresses())
    need_service(all(slurmd_pid(n) for n in names),
                 "the slurmd of nodes %s are not the ones .ci/slurm-nodes.sh started" % names)
    try:
        yield names[0], names[1]
    finally:
        for n in names:   # never leave a node down for the tests after this one
            restart(n)


def interrupt_after_first_trial(proc, results, timeout_s):
    """Wait until trial 1 has ended, then SIGINT the run: trial 2 stays pending for --resume."""
    wait_for(lambda: statuses(results)[:1] in (["done"], ["failed"]), timeout_s, "trial 1 to end", poll_s=0.05)
    os.kill(proc.pid, signal.SIGINT)
    code, out = finish(proc, timeout=120)
    assert code == 130, out
    return out


def resume_completes_the_rest(results, run_id):
    code, out = finish(detbench("run", "--resume", run_id, "--results", results), timeout=300)
    assert code == 0, out
    assert statuses(results) == ["failed", "done"], out
    assert rows(results, "PRAGMA integrity_check") == [("ok",)]
    assert our_jobs(run_id) == []


def test_a_node_that_dies_mid_trial_fails_it_and_resume_completes_the_rest(nodes, tmp_path):
    first, second = nodes
    scenario = tmp_path / "s.yaml"
    scenario.write_text(CALIBRATE % {"measure": 20, "repeats": 3, "ms": 100})
    results = tmp_path / "results"
    proc = detbench("run", "--scenario", scenario, "--results", results)
    run_id = None
    try:
        wait_for(lambda: statuses(results)[:1] == ["done"], 180, "trial 1 to finish")
        run_id = run_id_of(results)
        trial2 = results / "trials" / ("%s-0002" % run_id)
        wait_for(lambda: (trial2 / "trial.pid").exists() and (trial2 / "node-1" / "trial.pid").exists(),
                 120, "trial 2 to start on both nodes", poll_s=0.05)
        nodes_sh("kill", second)    # slurmd and everything in the node: its step, runner.py, the workload
        # node 0 ends its part, but the job waits for the dead node until slurmctld declares it
        # down (SlurmdTimeout, 30-45 s); Slurm requeues it; detbench cancels it and stops the run
        code, out = finish(proc, timeout=300)
        done_before = stopped_on_a_lost_node(code, out, results, run_id)

        # resumed while the node is still down: the 2-node job cannot start, so the run stops
        # after node_down_wait_s, fails nothing and queues nothing
        assert not node_up(second)
        code, out = finish(detbench("run", "--resume", run_id, "--results", results), timeout=120)
        assert code == 2, out
        assert len(error_lines(out)) == 1, out
        assert "fewer than 2 nodes of slurm partition %s are up" % PARTITION in error_lines(out)[0], out
        assert statuses(results) == ["done", "failed", "pending"]
        assert our_jobs(run_id) == []

        restart(second)
        code, out = finish(detbench("run", "--resume", run_id, "--results", results), timeout=300)
        assert code == 0, out
        assert "3 trials, 1 failed" in out
        assert statuses(results) == ["done", "failed", "done"]
        assert rows(results, "SELECT * FROM trials WHERE seq = 1") == done_before
        assert rows(results, "PRAGMA integrity_check") == [("ok",)]
        assert our_jobs(run_id) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if run_id is not None:
            slurm.cancel([j for j, _, _ in our_jobs(run_id)])


def test_a_node_whose_trial_folder_is_on_a_full_filesystem_fails_the_trial(nodes, tmp_path):
    first, second = nodes
    scenario = tmp_path / "s.yaml"
    scenario.write_text(CALIBRATE % {"measure": 10, "repeats": 2, "ms": 50})
    results = tmp_path / "results"
    results.mkdir()
    mounted = False
    run_id = None
    proc = None
    try:
        # only the second node sees a full filesystem where the results folder is
        done = in_node(second, ["mount", "-t", "tmpfs", "-o", "size=64k", "detbench-full", str(results)])
        assert done.returncode == 0, done.stdout
        mounted = True
        in_node(second, ["dd", "if=/dev/zero", "of=%s" % (results / "fill"), "bs=4096"])   # until ENOSPC
        assert "100%" in in_node(second, ["df", str(results)]).stdout
        assert not (results / "fill").exists(), "the full filesystem is not the node's own"

        proc = detbench("run", "--scenario", scenario, "--results", results)
        interrupt_after_first_trial(proc, results, 180)
        run_id = run_id_of(results)
        assert statuses(results) == ["failed", "pending"]
        (reason,), = rows(results, "SELECT reason FROM trials WHERE seq = 1")
        # Slurm's verdict, then the node whose task failed and what its runner.py said
        assert reason.startswith("slurm job ended FAILED"), reason
        assert "%s (task 1): Exited with exit code" % second in reason, reason
        assert "No space left on device" in reason, reason
        assert our_jobs(run_id) == [], "the run left a job in squeue"

        assert in_node(second, ["umount", str(results)]).returncode == 0
        mounted = False
        resume_completes_the_rest(results, run_id)
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if mounted:
            in_node(second, ["umount", str(results)])
        if run_id is not None:
            slurm.cancel([j for j, _, _ in our_jobs(run_id)])


def test_a_node_that_never_joins_the_rendezvous_fails_the_trial(nodes, tmp_path):
    pytest.importorskip("torch")
    first, second = nodes
    text = (ROOT / "scenarios" / "scaling-2node-cpu.yaml").read_text()
    text = text.replace("nodes: [1, 2]", "nodes: [2]").replace("measure: 12", "measure: 4") \
        .replace("warmup: 3", "warmup: 1")
    # torchrun's static rendezvous waits 600 s for the other node by default: 15 s here
    text = text.replace('OMP_NUM_THREADS: "1"\n', 'OMP_NUM_THREADS: "1"\n  PET_RDZV_CONF: "timeout=15"\n')
    assert "PET_RDZV_CONF" in text and "repeats: 2" in text
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text)
    results = tmp_path / "results"
    # in the second node only, the first node's name points at an address nobody holds
    hosts = tmp_path / "hosts"
    nowhere = node_addresses()[first].rsplit(".", 1)[0] + ".254"
    hosts.write_text("".join(("%s %s\n" % (nowhere, first)) if first in line.split()[1:] else line + "\n"
                             for line in Path("/etc/hosts").read_text().splitlines()))
    done = in_node(second, ["mount", "--bind", str(hosts), "/etc/hosts"])
    assert done.returncode == 0, done.stdout
    mounted = True
    run_id = None
    proc = None
    try:
        assert in_node(second, ["getent", "hosts", first]).stdout.split()[0] == nowhere
        proc = detbench("run", "--scenario", scenario, "--results", results)
        started = time.monotonic()
        interrupt_after_first_trial(proc, results, 240)
        assert time.monotonic() - started < 200
        run_id = run_id_of(results)
        assert statuses(results) == ["failed", "pending"]
        (reason,), = rows(results, "SELECT reason FROM trials WHERE seq = 1")
        # node 0's torchrun gives up waiting, and says how many nodes joined
        assert reason.startswith("exit code 1"), reason
        assert "waiting for clients. 1/2 clients joined" in reason, reason
        assert our_jobs(run_id) == [], "the run left a job in squeue"

        assert in_node(second, ["umount", "/etc/hosts"]).returncode == 0
        mounted = False
        resume_completes_the_rest(results, run_id)
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if mounted:
            in_node(second, ["umount", "/etc/hosts"])
        if run_id is not None:
            slurm.cancel([j for j, _, _ in our_jobs(run_id)])
