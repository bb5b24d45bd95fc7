"""COCO average precision of a set of detections, through pycocotools' COCOeval.

`score(ann_file, detections, iou_types)` -> {iou_type: {"AP", "AP50", "AP75", "APs", "APm",
"APl"}}, each the figure COCOeval's summarize() prints first for that type (IoU 0.50:0.95,
0.50, 0.75; small, medium and large objects; 100 detections per image). A figure COCOeval
cannot place (no ground truth of that size) is None. With no detections at all every
figure of a type that has ground truth is 0.0: nothing was found.
"""
import contextlib
import io

import numpy as np

METRICS = ("AP", "AP50", "AP75", "APs", "APm", "APl")


def _quiet(fn, *args):
    """pycocotools prints progress lines; keep them out of our output."""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


def ground_truth(ann_file):
    from pycocotools.coco import COCO
    return _quiet(COCO, ann_file)


def encode_mask(mask):
    """A binary mask [H, W] (numpy bool or uint8) as COCO's compressed RLE, JSON-ready."""
    from pycocotools import mask as mask_utils
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    rle["counts"] = rle["counts"].decode("ascii")
    return rle


def score(gt, detections, iou_types):
    """COCOeval of `detections` (COCO result dicts) against the COCO object `gt`."""
    from pycocotools.cocoeval import COCOeval
    out = {}
    for iou_type in iou_types:
        if iou_type == "segm":
            dets = [d for d in detections if "segmentation" in d]
        else:
            dets = [{k: v for k, v in d.items() if k != "segmentation"} for d in detections]
        if not dets:
            out[iou_type] = {name: 0.0 for name in METRICS}
            continue
        found = _quiet(gt.loadRes, dets)
        ev = COCOeval(gt, found, iou_type)
        _quiet(ev.evaluate)
        _quiet(ev.accumulate)
        _quiet(ev.summarize)
        out[iou_type] = {name: (None if value < 0 else round(float(value), 4))
                         for name, value in zip(METRICS, ev.stats[:len(METRICS)])}
    return out


def table(results):
    """The figures as a small fixed-width table, one row per IoU type."""
    lines = ["%-5s " % "" + " ".join("%6s" % m for m in METRICS)]
    for iou_type, figures in results.items():
        cells = ("%6s" % "-" if figures[m] is None else "%6.3f" % figures[m] for m in METRICS)
        lines.append("%-5s " % iou_type + " ".join(cells))
    return "\n".join(lines)
