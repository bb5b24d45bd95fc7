"""COCO evaluation of a trained detector:
`python -m harness.trainer.evaluate CONFIG --weights FILE --data ANNOTATIONS IMAGES [--set key=value ...]`

The model is the config's, with the model settings a trainer checkpoint records (--set
overrides both). Every image of the annotation file is read as training reads it (fitted into the config's
data.input_size keeping its aspect ratio, padded bottom-right, normalised), the network runs
in eval mode and harness/trainer/postprocess.py turns its outputs into final detections
(score threshold, per-class NMS, the best --detections per image; Mask R-CNN masks pasted).
Boxes and masks are mapped back to each image's own size and scored by pycocotools' COCOeval
(harness/trainer/cocometrics.py): bbox AP for every model, segm AP for Mask R-CNN.

Output: one JSON line (`{"bbox": {"AP": ..., "AP50": ...}, "segm": ..., "images": N,
"detections": D, ...}`), then the same figures as a table. `--detections-out FILE` also
writes the detections in COCO's result format; with `--dump-only` nothing is scored here (an
accuracy run scores every framework's file with the one shared COCOeval,
`python -m harness.trainer.cocometrics`) and the JSON line gives the counts only.

Exit codes: 0 done, 2 bad argument, config, weights or data input.
"""
import argparse
import json
import os
import sys
import time

from .. import atomic
from .config import ConfigError, apply_overrides, load_config_module
from .infer import detector_for_inference

MODELS = {"retina": "retinanet", "faster": "faster_rcnn", "mask": "mask_rcnn"}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m harness.trainer.evaluate", description=__doc__.splitlines()[0])
    p.add_argument("config", help="path to a trainer config .py file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting, e.g. data.input_size=128x128 (repeatable)")
    p.add_argument("--weights", metavar="FILE", required=True,
                   help="the detector's weights (a trainer checkpoint, a plain state_dict, a detbench weights file)")
    p.add_argument("--data", nargs=2, metavar=("ANNOTATIONS", "IMAGES"), required=True,
                   help="COCO instances file and its image folder")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--score-threshold", type=float, default=0.05)
    p.add_argument("--nms-threshold", type=float, default=0.5)
    p.add_argument("--detections", type=int, default=100, help="kept per image")
    p.add_argument("--detections-out", metavar="FILE", help="also write the detections (COCO result format)")
    p.add_argument("--dump-only", action="store_true", help="write --detections-out and score nothing")
    args = p.parse_args(argv)
    if args.dump_only and not args.detections_out:
        p.error("--dump-only needs --detections-out")
    if args.batch_size < 1 or args.detections < 1:
        p.error("--batch-size and --detections must be at least 1")
    return args


def _to_coco(result, scale, original, cat_ids, probs, paste):
    """One image's detections, in the network's input frame, as COCO result dicts in its own frame."""
    h0, w0 = original
    boxes = result["boxes"] / scale
    boxes[:, 0::2] = boxes[:, 0::2].clamp(0, w0)
    boxes[:, 1::2] = boxes[:, 1::2].clamp(0, h0)
    masks = None
    if probs is not None:
        masks = paste(probs, boxes, h0, w0).cpu().numpy()
    out = []
    for k, (box, s, label) in enumerate(zip(boxes.tolist(), result["scores"].tolist(), result["labels"].tolist())):
        if not 1 <= label <= len(cat_ids):
            continue        # a class the annotations have no category for (a model of more classes): never right
        x0, y0, x1, y1 = box
        det = {"category_id": cat_ids[label - 1], "bbox": [round(x0, 2), round(y0, 2), round(x1 - x0, 2),
                                                           round(y1 - y0, 2)], "score": round(s, 5)}
        if masks is not None:
            from .cocometrics import encode_mask
            det["segmentation"] = encode_mask(masks[k])
        out.append(det)
    return out


def detect(model, records, size, device, post, batch_size):
    """COCO result dicts (without image_id) per record, in order."""
    import torch

    from . import coco, postprocess
    from .data import _MEAN, _STD
    mean = torch.tensor(_MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(_STD, device=device).view(1, 3, 1, 1)
    per_image = []
    for start in range(0, len(records), batch_size):
        chunk = records[start:start + batch_size]
        loaded = [coco.load_image(r["path"], size) for r in chunk]
        images = (torch.stack([im for im, _, _, _ in loaded]).to(device).float() - mean) / std
        sizes = [s for _, _, s, _ in loaded]
        with torch.inference_mode():
            out = postprocess.raw(model, images, post)
            results = postprocess.boxes(model, out, sizes, post)
            probs = postprocess.mask_probs(model, out, results)
        first = 0
        for rec, (_, scale, _, original), result in zip(chunk, loaded, results):
            n = len(result["boxes"])
            mine = probs[first:first + n] if probs is not None else None
            first += n
            per_image.append((rec, scale, original, result, mine))
    return per_image


def with_model_of_checkpoint(cfg, path):
    """A trainer checkpoint records the model settings it was trained with (checkpoint.py):
    those replace the config's (--set still overrides them); other weights files change nothing."""
    import dataclasses

    from .pretrained import CHECKPOINT_FORMAT, read
    obj = read(path)
    if not (isinstance(obj, dict) and obj.get("format") == CHECKPOINT_FORMAT and isinstance(obj.get("config"), dict)):
        return cfg
    fields = {f.name for f in dataclasses.fields(cfg.model)} - {"weights", "backbone_weights", "name"}
    saved = {key[len("model."):]: tuple(value) if isinstance(value, list) else value
             for key, value in obj["config"].items() if key.startswith("model.")}
    if saved.get("name", cfg.model.name) != cfg.model.name:
        raise ConfigError(f"{path}: checkpoint of a {saved['name']} model, the config builds {cfg.model.name}")
    try:
        model = dataclasses.replace(cfg.model, **{k: v for k, v in saved.items() if k in fields})
    except (TypeError, ConfigError) as exc:
        raise ConfigError(f"{path}: its model settings do not make a model: {exc}") from None
    return dataclasses.replace(cfg, model=model)


def run(args, out):
    import torch

    from . import coco, cocometrics, postprocess
    from .train import with_weights_option
    module = load_config_module(args.config)
    base = with_model_of_checkpoint(module.CONFIG, args.weights)
    cfg = with_weights_option(apply_overrides(base, args.overrides), args.weights)
    ann_file, images_dir = args.data
    records, n_cats = coco.load_annotations(ann_file, images_dir)
    if n_cats > cfg.model.num_classes:
        raise coco.DataError(f"{ann_file} has {n_cats} categories, the model has {cfg.model.num_classes} "
                             "(set model.num_classes)")
    with open(ann_file, encoding="utf-8") as fh:
        cat_ids = sorted(int(c["id"]) for c in json.load(fh)["categories"])
    device = torch.device("cuda" if torch.cuda.is_available() and cfg.train.device != "cpu" else "cpu")
    torch.manual_seed(cfg.train.seed)
    model, post = detector_for_inference(module, cfg, device, args)
    started = time.perf_counter()
    detections = []
    for rec, scale, original, result, probs in detect(model, records, cfg.data.input_size, device, post,
                                                      args.batch_size):
        for det in _to_coco(result, scale, original, cat_ids, probs, postprocess.paste_masks):
            det["image_id"] = rec["id"]
            detections.append(det)
    seconds = time.perf_counter() - started
    iou_types = ["bbox", "segm"] if cfg.model.name == "mask" else ["bbox"]
    if args.detections_out:
        with atomic.replacing(args.detections_out) as fh:
            json.dump(detections, fh)
    if args.dump_only:
        line = dict(model=MODELS[cfg.model.name], weights=args.weights, annotations=ann_file, images=len(records),
                    detections=len(detections), seconds=round(seconds, 2), out=args.detections_out)
        print(json.dumps(line, sort_keys=True), file=out, flush=True)
        return line
    figures = cocometrics.score(cocometrics.ground_truth(ann_file), detections, iou_types)
    line = dict(figures, model=MODELS[cfg.model.name], weights=args.weights, annotations=ann_file,
                images=len(records), detections=len(detections), seconds=round(seconds, 2))
    print(json.dumps(line, sort_keys=True), file=out)
    print(cocometrics.table(figures), file=out, flush=True)
    return line


def main(argv=None):
    from pycocotools import coco as _pycocotools  # noqa: F401  (a missing install fails here, plainly)

    from .coco import DataError
    from .pretrained import WeightsError
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        run(args, sys.stdout)
    except (ConfigError, DataError, WeightsError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
