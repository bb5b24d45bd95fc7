"""The bundled detectors' inference: the same final detections as torchvision's on the same
weights and images, and `python -m harness.trainer.infer` timing every batch in its parts."""
import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from conftest import ROOT, config_path  # noqa: E402
from torchvision.models.detection import transform  # noqa: E402
from torchvision.ops import box_iou  # noqa: E402

from harness import jsonlog  # noqa: E402
from harness.drivers import torchvision_driver  # noqa: E402
from harness.trainer import postprocess, weights  # noqa: E402
from harness.trainer.config import load_config_module  # noqa: E402
from harness.trainer.data import _MEAN, _STD  # noqa: E402

CONFIGS = {"retinanet": "retina_r50v1_fpn_1x", "faster_rcnn": "faster_r50v1_fpn_1x",
           "mask_rcnn": "mask_r50v1_fpn_1x"}
H, W = 128, 160


def both(model, tmp_path):
    path = str(tmp_path / ("%s.pt" % model))
    weights.save(path, model, 7, weights.make(model, 7))
    args = torchvision_driver.parse_args(["--model", model, "--iterations", "1", "--device", "cpu"])
    tv = torchvision_driver.build_model(args, H, W)
    weights.load_into(tv, path, model, "torchvision")
    module = load_config_module(config_path(CONFIGS[model]))
    bt = module.build_detector(module.CONFIG)
    weights.load_into(bt, path, model, "detbench-trainer")
    if model == "retinanet":
        tv.score_thresh, tv.nms_thresh, tv.detections_per_img, tv.topk_candidates = 0.0, 0.5, 100, 1000
    else:
        tv.roi_heads.score_thresh, tv.roi_heads.nms_thresh, tv.roi_heads.detections_per_img = 0.0, 0.5, 100
        tv.rpn._pre_nms_top_n["testing"], tv.rpn._post_nms_top_n["testing"] = 1000, 1000
    raw = torch.randint(0, 256, (2, H, W, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    x = raw.permute(0, 3, 1, 2).float()
    mean, std = torch.tensor(_MEAN).view(1, 3, 1, 1), torch.tensor(_STD).view(1, 3, 1, 1)
    with torch.inference_mode():
        ours = postprocess.predict(bt.eval(), (x - mean) / std, [(H, W)] * 2,
                                   postprocess.PostProcess(score_threshold=0.0))
        theirs = tv.eval()([im / 255.0 for im in x])
    return ours, theirs


# share of torchvision's detections the trainer finds too (same label, box IoU > 0.99): the
# two-stage models agree but for near-ties; RetinaNet's anchors differ on purpose (exact octave
# sizes, docs/methodology.md), which moves some boxes of random weights past the IoU bar
@pytest.mark.slow
@pytest.mark.parametrize("model,share", [("retinanet", 0.6), ("faster_rcnn", 0.97), ("mask_rcnn", 0.97)])
def test_final_detections_match_torchvisions(tmp_path, monkeypatch, model, share):
    # the masks' probabilities are compared: torchvision's maps go through the trainer's paste
    # (torchvision's own widens each box by a cell and truncates it to whole pixels;
    # tests/trainer/test_paste.py pins the trainer's)
    monkeypatch.setattr(transform, "paste_masks_in_image",
                        lambda masks, boxes, hw: postprocess.paste_masks(masks[:, 0], boxes, *hw)[:, None].float())
    ours, theirs = both(model, tmp_path)
    for a, b in zip(theirs, ours):
        assert len(a["boxes"]) == len(b["boxes"]) == 100
        assert torch.allclose(a["scores"][:10], b["scores"][:10], rtol=1e-3)
        same = (box_iou(a["boxes"], b["boxes"]) > 0.99) & (a["labels"][:, None] == b["labels"][None])
        assert same.any(1).float().mean() >= share
        if model == "mask_rcnn":
            pair = same.float().argmax(1)
            found = same.any(1)
            am, bm = (a["masks"][:, 0] > 0.5)[found], b["masks"][pair[found]]
            union = (am | bm).flatten(1).sum(1)
            inter = (am & bm).flatten(1).sum(1)
            agree = torch.where(union > 0, inter.float() / union.clamp(min=1), torch.ones(len(union)))
            assert agree.mean() > 0.95 and bm.any()


def test_the_driver_times_every_batch_in_its_parts():
    out = subprocess.run([sys.executable, "-m", "harness.trainer.infer", config_path("mask_tiny"), "--batch-size", "2",
                          "--batches", "3", "--input-size", "64x96", "--score-threshold", "0.0", "--detections", "5"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    iters = [json.loads(l[len(jsonlog.ITER_PREFIX):]) for l in out.stdout.splitlines()
             if l.startswith(jsonlog.ITER_PREFIX)]
    phases = [json.loads(l[len(jsonlog.PHASES_PREFIX):]) for l in out.stdout.splitlines()
              if l.startswith(jsonlog.PHASES_PREFIX)]
    assert [i["iteration"] for i in iters] == [p["iteration"] for p in phases] == [1, 2, 3]
    for it, ph in zip(iters, phases):
        assert it["images"] == 2 and ph["detections"] == 10
        assert it["time_s"] >= ph["pre_s"] + ph["net_s"] + ph["post_s"] > 0
    meta_line = next(l for l in out.stdout.splitlines() if l.startswith(jsonlog.META_PREFIX))
    meta = json.loads(meta_line[len(jsonlog.META_PREFIX):])
    assert meta["mode"] == "inference" and meta["rpn_post_nms_test"] == 1000 and meta["mask_threshold"] == 0.5


@pytest.mark.parametrize("precision", ["fp16", "tf32"])
def test_cuda_only_precisions_are_one_line_on_the_cpu(precision):
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    out = subprocess.run([sys.executable, "-m", "harness.trainer.infer", config_path("retina_tiny"),
                          "--batch-size", "1", "--batches", "1", "--input-size", "64x64", "--precision", precision],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0 and "needs a CUDA device" in out.stderr
