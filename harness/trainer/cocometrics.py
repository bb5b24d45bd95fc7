"""COCO average precision of a set of detections, through pycocotools' COCOeval.

`score(ann_file, detections, iou_types)` -> {iou_type: {"AP", "AP50", "AP75", "APs", "APm",
"APl"}}, each the figure COCOeval's summarize() prints first for that type (IoU 0.50:0.95,
0.50, 0.75; small, medium and large objects; 100 detections per image). A figure COCOeval
cannot place (no ground truth of that size) is None. With no detections at all every
figure of a type that has ground truth is 0.0: nothing was found.

`python -m harness.trainer.cocometrics ANNOTATIONS DETECTIONS [--iou bbox,segm]` scores a
detections file (COCO's result format, as every framework's accuracy dump writes it) and
prints one JSON line {iou_type: figures}: the one COCOeval of every accuracy run. Masks given
as uncompressed RLE (counts a list, column-major, as written where pycocotools is missing)
are compressed first. Exit code 2 for a file that cannot be read.
"""
import argparse
import contextlib
import io
import json
import sys

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


def compress(segmentation):
    """COCO's compressed RLE of a segmentation given as uncompressed RLE; others unchanged."""
    if isinstance(segmentation, dict) and isinstance(segmentation.get("counts"), list):
        from pycocotools import mask as mask_utils
        h, w = segmentation["size"]
        rle = mask_utils.frPyObjects(segmentation, h, w)
        rle["counts"] = rle["counts"].decode("ascii")
        return rle
    return segmentation


def score(gt, detections, iou_types):
    """COCOeval of `detections` (COCO result dicts) against the COCO object `gt`."""
    from pycocotools.cocoeval import COCOeval
    out = {}
    for iou_type in iou_types:
        if iou_type == "segm":
            dets = [dict(d, segmentation=compress(d["segmentation"])) for d in detections if "segmentation" in d]
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


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m harness.trainer.cocometrics", description=__doc__.splitlines()[0])
    p.add_argument("annotations", help="COCO instances file (the ground truth)")
    p.add_argument("detections", help="detections in COCO's result format (a JSON list)")
    p.add_argument("--iou", default="bbox", help="comma-separated IoU types: bbox, segm")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    types = [t.strip() for t in args.iou.split(",") if t.strip()]
    bad = [t for t in types if t not in ("bbox", "segm")]
    if bad or not types:
        p.error("--iou takes bbox and segm, got %r" % args.iou)
    try:
        with open(args.detections, encoding="utf-8") as fh:
            detections = json.load(fh)
        if not isinstance(detections, list):
            raise ValueError("not a JSON list of detections")
        gt = ground_truth(args.annotations)
        figures = score(gt, detections, types)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AssertionError) as exc:
        print("error: %s: %s" % (args.detections, str(exc).strip().splitlines()[0] if str(exc).strip()
                                 else type(exc).__name__), file=sys.stderr, flush=True)
        return 2
    print(json.dumps(dict(figures, detections=len(detections)), sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
