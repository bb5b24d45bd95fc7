"""The short convergence run (benchmarks/convergence.py --quick): 200 iterations of
the tiny Faster R-CNN on the learnable set, scored on its held-out split, well above chance."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")
pytest.importorskip("pycocotools", reason="evaluation needs pycocotools (the trainer extra)")

from conftest import ROOT, env_for_subprocess  # noqa: E402

from benchmarks import convergence  # noqa: E402


@pytest.mark.slow
def test_a_short_run_learns_the_learnable_set(tmp_path):
    out = tmp_path / "figures.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.convergence", "--quick", "--models", "faster",
                           "--work", str(tmp_path / "work"), "--json", str(out)],
                          cwd=ROOT, env=env_for_subprocess(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = json.loads(out.read_text())
    (point,) = figures["models"]["faster"]["curve"]
    assert point["iteration"] == convergence.SETTINGS["faster"]["quick"]
    # random boxes score an AP50 of about 0 on this set; the target asks for far more
    assert point["bbox_AP50"] >= convergence.QUICK_TARGET >= 0.3
    assert "faster: PASS" in proc.stdout
