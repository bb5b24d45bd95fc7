"""Test-time forward and post-processing of the bundled detectors, as torchvision defines them
but for the mask paste.

`raw(model, images)` runs the network's own part (backbone, FPN, heads; for two-stage models
the RPN's test-time proposals and the RoI box head, and the mask head on the final boxes
inside `detections`, since it needs them) and `detections(model, out, image_sizes, post)`
turns its outputs into final detections per image: boxes decoded and clipped, small boxes
dropped, scores above `score_threshold`, per-class NMS at `nms_threshold`, the best
`detections_per_image`; Mask R-CNN masks laid over their boxes exactly (`paste_masks`, as
detectron2 and mmdetection paste them) and binarised at 0.5.

RetinaNet follows torchvision's RetinaNet.postprocess_detections (per level: the scores
above the threshold, the best `candidates` of them, then one class-wise NMS over the levels);
two-stage models its RPN at test time (1000 proposals per level before NMS at 0.7, 1000
kept per image) and RoIHeads.postprocess_detections (softmax, per-class boxes, background
dropped). Labels are the trainer's: 1..num_classes.
"""
import contextlib
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torchvision.ops import batched_nms

from .anchors import flatten_head
from .boxes import clip

MIN_SIZE = 1e-2            # boxes with a side below this many pixels are dropped (torchvision's)
MASK_THRESHOLD = 0.5


@dataclass(frozen=True)
class PostProcess:
    score_threshold: float = 0.05
    nms_threshold: float = 0.5
    detections_per_image: int = 100
    candidates: int = 1000          # RetinaNet: best-scoring anchors per level before NMS
    rpn_pre_nms_top_n: int = 1000   # two-stage: proposals per level before the RPN's NMS
    rpn_post_nms_top_n: int = 1000  # and kept per image after it


def is_two_stage(model):
    return hasattr(model, "rpn")


@contextlib.contextmanager
def _rpn_test_settings(rpn, post):
    saved = rpn.pre_nms_top_n, rpn.post_nms_top_n
    rpn.pre_nms_top_n, rpn.post_nms_top_n = post.rpn_pre_nms_top_n, post.rpn_post_nms_top_n
    try:
        yield
    finally:
        rpn.pre_nms_top_n, rpn.post_nms_top_n = saved


def raw(model, images, post=PostProcess()):
    """The network's outputs for a batch [B, 3, H, W] of normalised images (eval mode)."""
    feats = model.neck(model.backbone(images))
    size = tuple(images.shape[-2:])
    if not is_two_stage(model):
        cls, deltas = model.head(feats)
        anchors, per_level = model.anchors(size, [f.shape[-2:] for f in feats], images.device)
        return {"kind": "retinanet", "cls": cls.float(), "deltas": deltas.float(), "anchors": anchors,
                "per_level": per_level, "feats": feats}
    rpn = model.rpn
    logit_maps, delta_maps = rpn.head(feats)
    anchors, per_level = rpn.anchors(size, [tuple(f.shape[-2:]) for f in feats], images.device)
    logits = flatten_head(logit_maps, 1)[..., 0].float()
    deltas = flatten_head(delta_maps, 4).float()
    with _rpn_test_settings(rpn, post):
        proposals, valid = rpn.propose(anchors, per_level, logits, deltas, size)
    b, n = valid.nonzero(as_tuple=True)
    boxes = proposals[b, n]
    rois = torch.cat([b[:, None].to(boxes.dtype), boxes], dim=1)
    heads = model.roi_heads
    cls_logits, box_deltas = heads.box_head(heads.box_extractor(feats, rois))
    return {"kind": "two_stage", "rois": rois, "cls": cls_logits.float(), "deltas": box_deltas.float(),
            "feats": feats, "batch": images.shape[0]}


def _keep_best(boxes, scores, labels, groups, post):
    keep = batched_nms(boxes, scores, groups, post.nms_threshold)[:post.detections_per_image]
    return boxes[keep], scores[keep], labels[keep]


def _retinanet(model, out, image_sizes, post):
    results = []
    for i, (h, w) in enumerate(image_sizes):
        boxes_all, scores_all, labels_all, start = [], [], [], 0
        for n in out["per_level"]:
            logits = out["cls"][i, start:start + n]                   # [A, C]
            classes = logits.shape[1]
            scores = torch.sigmoid(logits).flatten()
            keep = scores > post.score_threshold
            scores, idx = scores[keep], keep.nonzero().squeeze(1)
            top = min(post.candidates, idx.numel())
            scores, order = scores.topk(top)
            idx = idx[order]
            anchor = idx // classes + start
            boxes = model.coder.decode(out["anchors"][anchor], out["deltas"][i, anchor])
            boxes_all.append(clip(boxes, h, w))
            scores_all.append(scores)
            labels_all.append(idx % classes + 1)
            start += n
        boxes, scores, labels = torch.cat(boxes_all), torch.cat(scores_all), torch.cat(labels_all)
        results.append(dict(zip(("boxes", "scores", "labels"), _keep_best(boxes, scores, labels, labels, post))))
    return results


def _two_stage(model, out, image_sizes, post):
    coder = model.roi_heads.coder
    rois = out["rois"]
    probs = F.softmax(out["cls"], -1)                                   # [R, C+1], 0 = background
    classes = probs.shape[1]
    boxes = coder.decode(rois[:, None, 1:].expand(-1, classes, -1), out["deltas"].view(len(rois), classes, 4))
    results = []
    for i, (h, w) in enumerate(image_sizes):
        mine = rois[:, 0] == i
        b = clip(boxes[mine][:, 1:], h, w).reshape(-1, 4)
        s = probs[mine][:, 1:].reshape(-1)
        labels = torch.arange(1, classes, device=rois.device).repeat(int(mine.sum()))
        wh = b[:, 2:] - b[:, :2]
        keep = (s > post.score_threshold) & (wh >= MIN_SIZE).all(1)
        b, s, labels = b[keep], s[keep], labels[keep]
        results.append(dict(zip(("boxes", "scores", "labels"), _keep_best(b, s, labels, labels, post))))
    return results


def paste_masks(probs, boxes, height, width, threshold=MASK_THRESHOLD):
    """Each [M, M] mask probability map laid exactly over its box (float corners) in an image of
    height x width and binarised (>= threshold): [D, height, width] bool.

    A pixel reads the map bilinearly at its centre, cell i of M spanning the box's i-th M-th
    (align_corners=False), with zeros beyond the map's edge, as detectron2's and mmdetection's
    pastes sample it. torchvision instead widens the box by one cell a side, truncates its
    corners to whole pixels and resizes a zero-bordered (M+2)-square map into that: up to a
    pixel off at each edge, which moves the mask IoU of objects a few tens of pixels across."""
    out = torch.zeros((len(boxes), height, width), dtype=torch.bool, device=boxes.device)
    if not len(boxes):
        return out
    m = probs.shape[-1]
    maps = probs.float()[:, None]
    for k, (x0, y0, x1, y1) in enumerate(boxes.float().tolist()):
        bw, bh = max(x1 - x0, 1e-6), max(y1 - y0, 1e-6)
        # a sample reads zero more than half a cell outside the box: no pixel beyond that can be on
        xa, xb = max(math.floor(x0 - bw / (2 * m)), 0), min(math.ceil(x1 + bw / (2 * m)), width)
        ya, yb = max(math.floor(y0 - bh / (2 * m)), 0), min(math.ceil(y1 + bh / (2 * m)), height)
        if xb <= xa or yb <= ya:
            continue
        gx = (torch.arange(xa, xb, device=boxes.device, dtype=torch.float32) + 0.5 - x0) / bw * 2 - 1
        gy = (torch.arange(ya, yb, device=boxes.device, dtype=torch.float32) + 0.5 - y0) / bh * 2 - 1
        grid = torch.stack([gx[None, :].expand(len(gy), -1), gy[:, None].expand(-1, len(gx))], -1)
        sampled = F.grid_sample(maps[k:k + 1], grid[None], mode="bilinear", padding_mode="zeros",
                                align_corners=False)[0, 0]
        out[k, ya:yb, xa:xb] = sampled >= threshold
    return out


def boxes(model, out, image_sizes, post=PostProcess()):
    """Final boxes, scores and labels per image: [{"boxes" [D, 4], "scores" [D], "labels" [D]}]."""
    if out["kind"] == "retinanet":
        return _retinanet(model, out, image_sizes, post)
    return _two_stage(model, out, image_sizes, post)


def mask_probs(model, out, results):
    """Mask R-CNN's mask head on the final boxes: each detection's [M, M] probability map of its
    label, all images' detections in order (None for a model without masks or no detections)."""
    heads = getattr(model, "roi_heads", None)
    if heads is None or heads.mask_head is None:
        return None
    rois = torch.cat([torch.cat([torch.full((len(r["boxes"]), 1), float(i), device=r["boxes"].device),
                                 r["boxes"]], 1) for i, r in enumerate(results)])
    if not len(rois):
        return None
    logits = heads.mask_head(heads.mask_extractor(out["feats"], rois)).float()
    labels = torch.cat([r["labels"] for r in results])
    return torch.sigmoid(logits[torch.arange(len(rois)), labels])


def add_masks(results, probs, image_sizes):
    """Paste each image's mask maps into it (results gain "masks" [D, H, W] bool)."""
    start = 0
    for (h, w), r in zip(image_sizes, results):
        n = len(r["boxes"])
        r["masks"] = paste_masks(probs[start:start + n] if n else None, r["boxes"], h, w)
        start += n
    return results


def detections(model, out, image_sizes, post=PostProcess()):
    """Final detections per image: [{"boxes" [D, 4], "scores" [D], "labels" [D], "masks" [D, H, W]?}]."""
    results = boxes(model, out, image_sizes, post)
    if getattr(getattr(model, "roi_heads", None), "mask_head", None) is None:
        return results
    return add_masks(results, mask_probs(model, out, results), image_sizes)


def predict(model, images, image_sizes, post=PostProcess()):
    """raw() then detections(): what an evaluation or a serving loop calls."""
    return detections(model, raw(model, images, post), image_sizes, post)
