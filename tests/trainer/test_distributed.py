"""Two CPU processes under torchrun (gloo) match one process with the same global batch."""
import socket
import sys

import pytest

pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

import subprocess  # noqa: E402

from conftest import ROOT, config_path, env_for_subprocess, parse_lines, run_module  # noqa: E402


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_two_processes_match_one():
    common = ["--set", "train.max_iter=3", "--set", "train.seed=3", "--set", "train.threads=1"]
    single = run_module([config_path("retina_tiny"), "--set", "data.images_per_device=4"] + common)
    assert single.returncode == 0, single.stderr
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
           "-m", "harness.trainer.train", config_path("retina_tiny"),
           "--set", "data.images_per_device=2"] + common
    multi = subprocess.run(cmd, cwd=ROOT, env=env_for_subprocess(), capture_output=True, text=True,
                           timeout=300)
    assert multi.returncode == 0, multi.stderr[-3000:]
    one, _ = parse_lines(single.stdout)
    two, metas = parse_lines(multi.stdout)
    assert len(metas) == 1 and metas[0]["world_size"] == 2  # only rank 0 logs
    assert len(two) == 3
    for a, b in zip(one, two):
        assert b["images"] == a["images"] == 4
        assert b["lr"] == pytest.approx(a["lr"])
        for name in a["losses"]:
            assert b["losses"][name] == pytest.approx(a["losses"][name], rel=2e-3, abs=1e-4), (name, a, b)
