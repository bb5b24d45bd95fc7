"""The two-node sbatch script really forms one DDP job: one torchrun per node, static ranks, host 0 is rank 0.

This one needs no cluster: it runs the rendered script under bash with an srun stand-in
that starts the node command once per node (SLURM_NODEID 0 and 1) on this host, the way
Slurm would on two hosts; scontrol names this host as the first of the allocation.
Real trainer (tiny Faster R-CNN, gloo on the CPU), real runner.py, real ingest.
tests/launch/test_slurm_twonode.py runs the same through real Slurm on the test cluster's two
nodes (partition `twonode` of .ci/provision-slurm.sh).
"""
import json
import os
import random
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.measure import ingest
from harness import launch
from harness import run as run_mod
from harness.plan import scenario as scenario_mod
from harness.launch import slurm

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e

FAKE_SRUN = """#!%(python)s
import os, subprocess, sys
args = sys.argv[1:]
nodes = 1
while args[0].startswith("--"):
    opt = args.pop(0)
    if opt.startswith("--nodes="):
        nodes = int(opt.split("=", 1)[1])
procs = [subprocess.Popen(args, env=dict(os.environ, SLURM_NODEID=str(k), SLURM_PROCID=str(k)))
         for k in range(nodes)]
sys.exit(max(p.wait() for p in procs))
"""


def test_two_node_script_runs_one_ddp_job_across_both_node_launchers(tmp_path):
    pytest.importorskip("torch")
    text = (ROOT / "scenarios" / "scaling-cpu.yaml").read_text()
    text = text.replace("gpus: [1, 2]", "gpus: [1]").replace("nodes: [1]", "nodes: [2]") \
        .replace("measure: 12", "measure: 4").replace("repeats: 2", "repeats: 1").replace("warmup: 3", "warmup: 2")
    sc = launch.loads_scenario_text(text)
    trial = run_mod.schedule(sc, scenario_mod.plan(sc), "slurm")[0]
    assert "--rdzv-backend" in trial.argv and "--standalone" not in trial.argv
    trial_dir = tmp_path / "results" / "trials" / "run-0001"
    trial_dir.mkdir(parents=True)
    script = trial_dir / "job.sbatch"
    script.write_text(slurm.script_for(sc, trial.cell, trial_dir, trial.argv))
    assert "#SBATCH --nodes=2\n" in script.read_text()

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "srun").write_text(FAKE_SRUN % {"python": sys.executable})
    (bindir / "scontrol").write_text("#!/bin/sh\necho 127.0.0.1\necho 127.0.0.2\n")
    for f in bindir.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, PATH="%s%s%s" % (bindir, os.pathsep, os.environ["PATH"]),
               SLURM_JOB_NODELIST="n[1-2]", SLURM_JOB_ID=str(random.randint(1, 9999)))
    done = subprocess.run(["bash", str(script)], env=env, cwd=str(tmp_path), timeout=240,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    assert done.returncode == 0, done.stdout[-3000:]

    node0, node1 = trial_dir, trial_dir / "node-1"
    for d in (node0, node1):
        record = json.loads((d / "trial.json").read_text())
        assert record["exit_code"] == 0, (d / "log.txt").read_text()[-2000:]
    assert '"world_size":2' in (node0 / "log.txt").read_text().replace(" ", "")
    result = ingest.analyse(str(node0), "detbench-jsonl", sc.warmup, sc.measure,
                            scenario_mod.images_per_iteration(sc, trial.cell))
    assert result.status == "done" and result.throughput > 0, result
