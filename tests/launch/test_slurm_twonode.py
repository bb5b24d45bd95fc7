"""Multi-node trials on a real two-node Slurm partition (`twonode` of .ci/provision-slurm.sh).

The partition's two nodes are slurmd daemons on this machine, each in its own network, UTS
and mount namespace with its own address on a private bridge (.ci/slurm-nodes.sh), so a
2-node job really runs one launcher per node: torchrun on each, meeting over the bridge at
the allocation's first host. The bundled trainer (tiny Faster R-CNN, gloo on the CPU) goes
through `detbench run --backend slurm` on 1 and 2 nodes into the store and the scaling
report; the calibration workload on 1 and 2 nodes gives its exactly known figures. Those
skip when no such partition answers (fail instead with DETBENCH_REQUIRE_SERVICES=1); the
last tests, of what these runs changed in the launcher, need no cluster.
"""
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.services import need_service
from tests.support.storerows import rows
from harness.launch import slurm
from tests.support.reportcells import throughput_cell

ROOT = Path(__file__).resolve().parents[2]
PARTITION = "twonode"
pytestmark = pytest.mark.e2e


SETTLE_S = 60   # a node restarted by the test before, or still finishing its job, is back within this


def twonode_nodes():
    """The names of the two-node partition's nodes when at least two are up, else None. A partition
    that has two nodes, not both usable yet, is given SETTLE_S to settle."""
    if not slurm.available() or not shutil.which("sinfo"):
        return None
    deadline = time.monotonic() + SETTLE_S
    while True:
        states = slurm.node_states(PARTITION)
        up = sorted(n for n, s in states.items() if slurm.usable(s))
        if len(up) >= 2:
            return up
        if len(states) < 2 or time.monotonic() > deadline:
            return None
        time.sleep(1)


def need_twonode():
    need_service(twonode_nodes() is not None,
                 "no Slurm partition %r with two nodes up within %d s (sbatch/sinfo missing, or the cluster "
                 "has one node; sinfo: %s): run .ci/provision-slurm.sh as root"
                 % (PARTITION, SETTLE_S, slurm.node_states(PARTITION) if shutil.which("sinfo") else "none"))


@pytest.fixture
def twonode():
    need_twonode()
    return twonode_nodes()


def detbench(*args, timeout=600):
    proc = subprocess.run([sys.executable, "-m", "harness.cli"] + [str(a) for a in args], cwd=str(ROOT),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout


def nodes_of(cell_key):
    return int(cell_key.split("/")[5])


def telemetry_samples(folder):
    lines = [l for l in (folder / "telemetry.jsonl").read_text().splitlines() if l.strip()]
    return [json.loads(l) for l in lines]


def scaling_rows(report):
    """{devices: (layout, images/s, efficiency %)} of the scaling table in a markdown report."""
    found = {}
    for m in re.finditer(r"^\|(\d+)\|(\d+x\d+)\|([\d.]+)\|[\d.]+x\|(\d+)%\|$", report, re.M):
        found[int(m.group(1))] = (m.group(2), float(m.group(3)), int(m.group(4)))
    return found


def test_trainer_on_one_and_two_nodes_runs_into_the_store_and_the_scaling_report(twonode, tmp_path):
    text = (ROOT / "scenarios" / "scaling-2node-cpu.yaml").read_text()
    assert "partition: %s" % PARTITION in text and "nodes: [1, 2]" in text
    scenario = tmp_path / "scaling-2node-cpu.yaml"
    scenario.write_text(text.replace("measure: 12", "measure: 6").replace("repeats: 2", "repeats: 1"))
    results = tmp_path / "results"
    code, out = detbench("run", "--scenario", scenario, "--results", results)
    assert code == 0, out
    assert "on backend slurm" in out and "2 trials, 0 failed" in out, out
    trials = rows(results, "SELECT id, cell_key, status, throughput, telemetry_json FROM trials ORDER BY seq")
    trials = sorted(trials, key=lambda t: nodes_of(t[1]))     # the round's order is shuffled
    assert [(nodes_of(t[1]), t[2]) for t in trials] == [(1, "done"), (2, "done")]
    assert all(t[3] > 0 for t in trials)
    assert all(json.loads(t[4])["samples"] > 0 for t in trials)

    one, two = (results / "trials" / t[0] for t in trials)
    assert not (one / "node-1").exists()
    assert '"state": "COMPLETED"' in (two / "slurm.json").read_text()
    assert "#SBATCH --nodes=2\n" in (two / "job.sbatch").read_text()
    # rank 0's log is the trial's log: one DDP job of 2 ranks, one on each node
    assert re.search(r'"world_size": ?2\b', (two / "log.txt").read_text()), "not one DDP job of 2 ranks"
    node0, node1 = two, two / "node-1"
    records = [json.loads((d / "trial.json").read_text()) for d in (node0, node1)]
    assert [r["exit_code"] for r in records] == [0, 0], (node1 / "log.txt").read_text()[-2000:]
    # the two launchers ran on the two nodes (each its own hostname), and each sampled its telemetry
    assert [r["hostname"] for r in records] == twonode[:2]
    for d, r in zip((node0, node1), records):
        assert len(telemetry_samples(d)) > 0 and r["telemetry"]["samples"] > 0, d

    code, report = detbench("report", "--platform", "local", "--results", results, "--details")
    assert code == 0, report
    assert "### Scaling efficiency" in report, report
    scaling = scaling_rows(report)
    assert sorted(scaling) == [1, 2] and scaling[1][0] == "1x1" and scaling[2][0] == "2x1", report
    assert scaling[1][2] == 100 and scaling[2][2] > 0, report
    assert "2 nodes x 1 device" in report


CALIBRATE = """\
name: slurm-calibrate-2node
backend: slurm
matrix:
  framework: [calibrate]
  model: [retinanet]
  precision: [fp32]
  platform: [local]
  gpus: [1]
  nodes: [1, 2]
batch_per_gpu: 2
warmup: 2
measure: 20
repeats: 1
timeout_s: 120
calibrate: {iteration_ms: 50, data_ms: 5}
slurm: {partition: twonode, gpus_per_node: 0, cpus_per_task: 1, time_limit: "5"}
"""


@pytest.mark.timing
def test_calibration_on_one_and_two_nodes_gives_its_exact_figures(twonode, tmp_path):
    scenario = tmp_path / "calibrate-2node.yaml"
    scenario.write_text(CALIBRATE)
    results = tmp_path / "results"
    code, out = detbench("run", "--scenario", scenario, "--results", results)
    assert code == 0, out
    assert "2 trials, 0 failed" in out, out
    trials = rows(results, "SELECT id, cell_key, status, throughput, observed, data_time_s FROM trials "
                           "ORDER BY seq")
    trials = sorted(trials, key=lambda t: nodes_of(t[1]))     # the round's order is shuffled
    assert [(nodes_of(t[1]), t[2]) for t in trials] == [(1, "done"), (2, "done")]
    # 2 images per device per 50 ms iteration: 40 images/s on one node, 80 on two
    for (_, key, _, thr, obs, data), expected, rel in zip(trials, (40.0, 80.0), (0.01, 0.02)):
        # one node: 1%, as the other calibration tests (a loaded 2-core machine can delay the last
        # deadline); two nodes: 2%, since the two nodes' processes and launchers share the same two
        # cores, and the window's end waits for both (seen: 79.1 under a load average of 8)
        assert thr == pytest.approx(expected, rel=rel) and obs == pytest.approx(expected, rel=rel), key
        # the data wait ends on a 5 ms sleep: never shorter, and a 2-core machine under a
        # heavy load (seen: 8.1 ms) stretches it, though never into the rest of the iteration
        assert 0.00495 <= data < 0.0125, (key, data)
    two = results / "trials" / trials[1][0]
    hosts = [json.loads((d / "trial.json").read_text())["hostname"] for d in (two, two / "node-1")]
    assert hosts == twonode[:2]
    assert len(telemetry_samples(two / "node-1")) > 0

    code, report = detbench("report", "--platform", "local", "--results", results, "--details")
    assert code == 0, report
    row = throughput_cell(report, "RetinaNet")
    assert row and row[0] == pytest.approx(80.0, rel=0.02) and row[1] == pytest.approx(50.0, abs=0.5), report
    scaling = scaling_rows(report)
    assert sorted(scaling) == [1, 2], report
    assert scaling[1][1] == pytest.approx(40.0, rel=0.01) and scaling[2][1] == pytest.approx(80.0, rel=0.02)
    assert scaling[2][0] == "2x1" and 97 <= scaling[2][2] <= 101, report


# --- what the real two-node runs changed in the launcher (no cluster needed) ----------------

def test_a_two_node_job_waits_for_two_usable_nodes(monkeypatch):
    states = {"dbnode1": "idle", "dbnode2": "down*"}
    monkeypatch.setattr(slurm, "node_states", lambda partition: dict(states))
    assert slurm.down_nodes(PARTITION) is None             # a one-node job can start
    assert slurm.down_nodes(PARTITION, need=2) == "dbnode1 idle, dbnode2 down*"
    states["dbnode2"] = "mixed"
    assert slurm.down_nodes(PARTITION, need=2) is None
    assert slurm.nodes_needed({"NumNodes": "2"}) == 2
    assert slurm.nodes_needed({"NumNodes": "2-2"}) == 2
    assert slurm.nodes_needed({}) == 1


def test_a_failed_multi_node_job_names_the_node_and_what_its_runner_said(tmp_path):
    (tmp_path / "trial.json").write_text(json.dumps({"schema": 1, "exit_code": None, "signal": 15,
                                                     "interrupted_by": 15}))
    (tmp_path / slurm.OUTPUT).write_text(
        "runner.py: cannot write trial.json: [Errno 28] No space left on device\n"
        "srun: error: dbnode2: task 1: Exited with exit code 3\n"
        "srun: launch/slurm: _step_signal: Terminating StepId=149.0\n"
        "srun: error: dbnode1: task 0: Exited with exit code 1\n")
    assert slurm.record_end(tmp_path, "149", "FAILED", "3:0", "NonZeroExitCode") is False
    assert json.loads((tmp_path / "trial.json").read_text())["error"] == (
        "slurm job ended FAILED (exit 3:0, NonZeroExitCode); dbnode2 (task 1): Exited with exit code 3; "
        "runner.py: cannot write trial.json: [Errno 28] No space left on device")
