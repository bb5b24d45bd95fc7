"""One RoI sample size for every framework of a two-stage accuracy cell: `roi_batch_per_image` in
the Schedule reaches each framework's own sampler (the bundled trainer's RoI heads, torchvision's
box_batch_size_per_image, mmdetection's train_cfg.rcnn.sampler.num, detectron2's
ROI_HEADS.BATCH_SIZE_PER_IMAGE), and each says so in its DETBENCH_SETTINGS line, read from its
own objects. RetinaNet has no RoIs and is not told any.

The rivals need their pinned envs (`detbench env build NAME`): skipped with a reason without one,
failed under DETBENCH_REQUIRE_SERVICES=1."""
import json
import os
import subprocess
import sys

import pytest

from harness.frameworks import FRAMEWORKS
from harness.frameworks import accuracy as recipes
from harness.launch import envs
from tests.support.cliproc import ROOT
from tests.support.services import need_env
from tests.support.tinyaccuracy import learnable_with_weights

TRAINER = "detbench-trainer"


def schedule(rois):
    return recipes.Schedule(iterations=1, eval_every=1, batch=1, input_size=(64, 64), lr_per_image=0.001,
                            warmup_iters=0, warmup_factor=1.0, lr_steps=(), gamma=0.1, weight_decay=0.0,
                            flip=False, depth=18, precision="fp32", seed=0, workers=0, roi_batch_per_image=rois)


def test_only_two_stage_models_are_told_a_roi_sample_size():
    for framework in ("detbench-trainer", "torchvision", "mmdetection", "detectron2"):
        for model, told in (("retinanet", False), ("faster_rcnn", True), ("mask_rcnn", True)):
            argv = recipes.train_argv(framework, model, schedule(48), ("a.json", "img"), "w.pt", "ck")
            text = " ".join(argv)
            assert ("model.roi_batch_per_image=48" in text or "--roi-batch-per-image 48" in text) == told, argv


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return learnable_with_weights(tmp_path_factory.mktemp("rois"), "faster_rcnn")


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("framework", [TRAINER, "torchvision", "mmdetection", "detectron2"])
def test_each_framework_samples_the_schedule_s_rois_per_image(framework, data, tmp_path):
    if framework == TRAINER:
        python = sys.executable
    else:
        need_env(framework)
        python = envs.python_for(FRAMEWORKS[framework].env)
    split, weights = data
    argv = recipes.train_argv(framework, "faster_rcnn", schedule(48), split, weights, str(tmp_path), python=python)
    proc = subprocess.run(argv, cwd=str(ROOT), capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    said = [json.loads(line.split(" ", 1)[1])["settings"] for line in proc.stdout.splitlines()
            if line.startswith("DETBENCH_SETTINGS ")]
    assert len(said) == 1, proc.stdout[-3000:]
    assert said[0]["roi_batch_per_image"] == 48
