"""One gradient clip for every framework of an accuracy cell: with `clip_grad_norm` in the
Schedule, each framework clips the total L2 norm of its gradients before each step through its
own clipping (the bundled trainer's and torchvision's loop: torch's clip_grad_norm_; mmdetection:
mmengine's optim_wrapper.clip_grad; detectron2: its optimizer-class factory with one clipper over
all parameters), and says so in its DETBENCH_SETTINGS line.

The behaviour is checked from the weights: with a bound of 1e-9, no weight decay and no warmup,
the second step moves no weight by more than lr x (1 + momentum) x 1e-9, where an unclipped step
moves some by orders of magnitude more (checked on the bundled trainer in the same test).

The rivals need their pinned envs (`detbench env build NAME`): skipped with a reason without one,
failed under DETBENCH_REQUIRE_SERVICES=1."""
import json
import subprocess
import sys

import pytest

from harness.frameworks import FRAMEWORKS
from harness.frameworks import accuracy as recipes
from harness.launch import envs
from tests.support.cliproc import ROOT
from tests.support.services import need_env
from tests.support.tinyaccuracy import learnable_with_weights

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

LR = 0.01
TINY = 1e-9
TRAINER = "detbench-trainer"


def schedule(clip):
    return recipes.Schedule(iterations=2, eval_every=1, batch=1, input_size=(64, 64), lr_per_image=LR,
                            warmup_iters=0, warmup_factor=1.0, lr_steps=(), gamma=0.1, weight_decay=0.0,
                            flip=False, depth=18, precision="fp32", seed=0, workers=0, clip_grad_norm=clip)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return learnable_with_weights(tmp_path_factory.mktemp("clip"), "retinanet")


def python_of(framework):
    if framework == TRAINER:
        return sys.executable
    need_env(framework)
    return envs.python_for(FRAMEWORKS[framework].env)


def train(framework, clip, data, folder):
    """(settings of the DETBENCH_SETTINGS line, largest weight change of the second step)."""
    split, weights = data
    argv = recipes.train_argv(framework, "retinanet", schedule(clip), split, weights, str(folder),
                              python=python_of(framework))
    proc = subprocess.run(argv, cwd=str(ROOT), capture_output=True, text=True, timeout=600,
                          env=dict(__import__("os").environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    lines = proc.stdout.splitlines()
    settings = [json.loads(line.split(" ", 1)[1])["settings"] for line in lines
                if line.startswith("DETBENCH_SETTINGS ")]
    paths = [c[1] for c in map(recipes.checkpoint_of_line, lines) if c]
    assert len(settings) == 1 and len(paths) == 2, "\n".join(lines[-30:])
    return settings[0], largest_change(argv[0], *paths)


# run in the framework's own env: mmengine's checkpoints unpickle only where mmengine is
CHANGE = """
import sys, torch
a, b = [(lambda o: o.get("model") or o.get("state_dict"))(torch.load(p, map_location="cpu", weights_only=False))
        for p in sys.argv[1:]]
print(max(float((b[k].float() - a[k].float()).abs().max()) for k in a
          if k in b and a[k].is_floating_point() and a[k].numel()))
"""


def largest_change(python, first, second):
    proc = subprocess.run([python, "-c", CHANGE, first, second], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return float(proc.stdout.split()[-1])


@pytest.mark.parametrize("framework", [TRAINER, "torchvision", "mmdetection", "detectron2"])
def test_a_clipped_step_moves_no_weight_further_than_the_bound_allows(framework, data, tmp_path):
    settings, change = train(framework, TINY, data, tmp_path / "clipped")
    assert settings.get("clip_grad_norm") == pytest.approx(TINY)
    assert change <= LR * 1.9 * TINY * 1.01
    if framework == TRAINER:     # the same step unclipped moves the weights: the bound above is the clip's
        settings, free = train(framework, 0.0, data, tmp_path / "free")
        assert "clip_grad_norm" not in settings
        assert free > 1e-6


def test_every_framework_is_told_the_clip_and_none_without_one():
    folder, data = "/ckpt", ("a.json", "img")
    for framework in [TRAINER] + list(recipes.RIVAL_DRIVERS):
        clipped = recipes.train_argv(framework, "retinanet", schedule(35.0), data, "w.pt", folder)
        free = recipes.train_argv(framework, "retinanet", schedule(0.0), data, "w.pt", folder)
        if framework == TRAINER:
            assert "train.clip_grad_norm=35.0" in clipped
            assert not any("clip_grad_norm" in a for a in free)
        else:
            assert clipped[clipped.index("--clip-grad-norm") + 1] == "35.0"
            assert "--clip-grad-norm" not in free
