"""Run by tests/trainer/test_weights.py under the mmdetection env's python: MODEL FILE.

Builds mmdet's model from the config the mmdetection driver writes, and torchvision's as its
driver builds it, loads the same weights file into both, and prints one JSON object: the
largest relative error of each compared output (backbone+FPN levels, heads) and whether
mmdet's state maps back to the file exactly.
"""
import json
import os
import sys
import tempfile

import torch
from mmengine.config import Config
from mmdet.registry import MODELS
from mmdet.utils import register_all_modules

from harness.drivers import mmdet_driver, torchvision_driver, weights_map


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-12))


def flat(maps, channels):
    return torch.cat([m.permute(0, 2, 3, 1).reshape(m.shape[0], -1, channels) for m in maps], dim=1)


def build_mmdet(model):
    register_all_modules()
    with tempfile.TemporaryDirectory() as tmp:
        args = mmdet_driver.parse_args(["--model", model, "--iterations", "1", "--ann", os.path.join(tmp, "a.json"),
                                        "--images", tmp])
        path = os.path.join(tmp, "config.py")
        mmdet_driver.write_config(args, path)
        cfg = Config.fromfile(path)
    return MODELS.build(cfg.model)


def main(model, path):
    mm = build_mmdet(model)
    weights_map.load(mm, path, model, "mmdetection")
    tv = torchvision_driver.build_model(
        torchvision_driver.parse_args(["--model", model, "--iterations", "1", "--device", "cpu"]), 800, 1333)
    weights_map.load(tv, path, model, "torchvision")
    mm.eval()
    tv.eval()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(1, 3, 64, 96, generator=g)
    out = {}
    with torch.no_grad():
        theirs = list(tv.backbone(x).values())
        ours = list(mm.extract_feat(x))
        for i, (a, b) in enumerate(zip(theirs, ours)):
            out["level_%d" % i] = rel(b, a)
        if model == "retinanet":
            cls, box = mm.bbox_head(ours)
            out["retina_cls"] = rel(flat(cls, 80), tv.head.classification_head(theirs)[..., 1:])
            out["retina_box"] = rel(flat(box, 4), tv.head.regression_head(theirs))
        else:
            obj, deltas = mm.rpn_head(ours)
            tv_obj, tv_deltas = tv.rpn.head(theirs)
            out["rpn_objectness"] = max(rel(b, a) for a, b in zip(tv_obj, obj))
            out["rpn_deltas"] = max(rel(b, a) for a, b in zip(tv_deltas, deltas))
            rois = torch.rand(5, 256, 7, 7, generator=g)
            scores, boxes = mm.roi_head.bbox_head(rois)
            tv_scores, tv_boxes = tv.roi_heads.box_predictor(tv.roi_heads.box_head(rois))
            out["box_scores"] = rel(scores, torch.cat([tv_scores[:, 1:], tv_scores[:, :1]], dim=1))
            out["box_deltas"] = rel(boxes, tv_boxes[:, 4:])
            if model == "mask_rcnn":
                masks_in = torch.rand(5, 256, 14, 14, generator=g)
                tv_masks = tv.roi_heads.mask_predictor(tv.roi_heads.mask_head(masks_in))
                out["mask_logits"] = rel(mm.roi_head.mask_head(masks_in), tv_masks[:, 1:])
    state = weights_map.read(path, model)
    back = weights_map.from_framework(mm.state_dict(), "mmdetection", model, state)
    out["round_trip_exact"] = set(back) == set(state) and all(torch.equal(back[k], state[k]) for k in state)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
