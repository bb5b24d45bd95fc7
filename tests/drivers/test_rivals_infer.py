"""The rivals' inference drivers in their pinned envs: every batch timed in its parts, the
post-processing the scenario asks for, and the settings each adapter claims really run.

Needs the envs built by .ci/provision-rivals.sh; without them the tests skip (and fail under
DETBENCH_REQUIRE_SERVICES=1)."""
import dataclasses
import json
import subprocess

import pytest

from harness import jsonlog
from harness.frameworks import FRAMEWORKS
from harness.frameworks.base import TrialContext
from harness.launch import envs
from tests.support.services import need_env

RUNS = [(fw, model) for fw in ("torchvision", "mmdetection", "detectron2")
        for model in ("retinanet", "faster_rcnn", "mask_rcnn")]
RUNS.append(("effdet", "efficientdet_d0"))
# settings a driver's META line states, compared with what its adapter claims
SHARED = ("images_per_device", "input_size", "precision", "score_threshold", "nms_threshold", "detections_per_image",
          "rpn_pre_nms_test", "rpn_post_nms_test", "candidates_per_level", "mask_threshold")


def lines(text, prefix):
    return [json.loads(l[len(prefix):]) for l in text.splitlines() if l.startswith(prefix)]


@pytest.mark.e2e
@pytest.mark.parametrize("fw,model", RUNS)
def test_a_rival_driver_times_every_batch_and_runs_what_its_adapter_claims(fw, model):
    spec = FRAMEWORKS[fw].env
    need_env(fw)
    ctx = TrialContext(framework=fw, model=model, precision="fp32", gpus=1, nodes=1, batch_per_gpu=2,
                       input_size=(128, 128) if fw == "effdet" else (96, 128), iterations=3, data=None,
                       python=envs.python_for(spec), env={"OMP_NUM_THREADS": "2"},
                       inference={"score_threshold": 0.0, "nms_threshold": 0.5 if fw == "effdet" else 0.6,
                                  "detections_per_image": 7})
    out = subprocess.run(FRAMEWORKS[fw].argv(ctx), capture_output=True, text=True, timeout=600,
                         env={"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    iters, phases = lines(out.stdout, jsonlog.ITER_PREFIX), lines(out.stdout, jsonlog.PHASES_PREFIX)
    assert [i["iteration"] for i in iters] == [p["iteration"] for p in phases] == [1, 2, 3]
    for it, ph in zip(iters, phases):
        assert it["images"] == 2 and it["time_s"] >= ph["pre_s"] + ph["net_s"] + ph["post_s"] - 1e-6
        assert min(ph["pre_s"], ph["net_s"], ph["post_s"]) >= 0
        assert 0 < ph["detections"] <= 2 * 7     # score threshold 0: every image keeps its 7 best
    [meta] = lines(out.stdout, jsonlog.META_PREFIX)
    claimed = FRAMEWORKS[fw].trial_settings(ctx)
    for key in SHARED:
        if key in claimed:
            assert meta.get(key) == claimed[key], (key, meta.get(key), claimed[key])


def test_effdet_refuses_what_its_library_cannot_do():
    from harness.errors import UserError
    base = TrialContext(framework="effdet", model="efficientdet_d0", precision="fp32", gpus=1, nodes=1,
                        batch_per_gpu=2, input_size=(384, 384), iterations=3, data=None,
                        inference={"score_threshold": 0.05, "nms_threshold": 0.5, "detections_per_image": 100})
    import dataclasses
    assert FRAMEWORKS["effdet"].argv(base)
    with pytest.raises(UserError, match="divisible by 128"):
        FRAMEWORKS["effdet"].argv(dataclasses.replace(base, input_size=(320, 320)))
    with pytest.raises(UserError, match="fixed at 0.5"):
        FRAMEWORKS["effdet"].argv(dataclasses.replace(base, inference=dict(base.inference, nms_threshold=0.6)))


def test_the_drivers_take_the_common_flags():
    ctx = TrialContext(framework="torchvision", model="retinanet", precision="bf16", gpus=1, nodes=1, batch_per_gpu=4,
                       input_size=(320, 320), iterations=12, data=None, python="/env/bin/python",
                       weights="/w/retinanet.pt",
                       inference={"score_threshold": 0.05, "nms_threshold": 0.5, "detections_per_image": 100})
    for fw in ("torchvision", "mmdetection", "detectron2"):
        argv = FRAMEWORKS[fw].argv(dataclasses.replace(ctx, framework=fw))
        assert argv[0] == "/env/bin/python" and argv[1].endswith(("torchvision_infer.py", "mmdet_infer.py",
                                                                  "detectron2_infer.py"))
        flat = " ".join(argv[2:])
        assert "--model retinanet --batch-size 4 --batches 12 --input-size 320x320 --precision bf16" in flat
        assert "--score-threshold 0.05 --nms-threshold 0.5 --detections 100 --weights /w/retinanet.pt" in flat
