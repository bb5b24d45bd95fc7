"""Inference benchmark of torchvision's detection models, timed as every detbench inference
driver times them (harness/jsonlog.py, docs/methodology.md "Inference").

Runs in the torchvision framework's pinned env. The model is built as
torchvision_driver.py builds it (no download; --weights FILE of `detbench weights make`),
set to the scenario's post-processing and the shared test-time settings (RPN: 1000
proposals per level before NMS, 1000 kept; RetinaNet: the best 1000 anchors per level), in
eval mode. Per batch, from the end of the previous one: its raw uint8 images fetched from a
pool of 8 seeded images (or the first 8 of a COCO file); pre-processing (to float on the
device, then torchvision's own GeneralizedRCNNTransform: normalise, resize, batch); the
network (backbone, FPN, heads; the RPN and the RoI heads); post-processing (torchvision's
postprocess_detections, then its transform's postprocess, which pastes Mask R-CNN's masks,
binarised at 0.5). postprocess_detections runs inside the RoI heads' (RetinaNet's) forward,
so it is timed by wrapping that bound method (the device synchronised before and after) and
taken out of the network's time. Prints one DETBENCH_ITER and one DETBENCH_PHASES line per batch.
"""
import argparse
import json
import os
import sys
import time

import torch

import torchvision_driver
from torchvision_driver import MODELS

try:
    from harness.drivers import weights_map
except ImportError:
    import weights_map

POOL = 8
RPN_PRE_NMS_TEST, RPN_POST_NMS_TEST, CANDIDATES, MASK_THRESHOLD = 1000, 1000, 1000, 0.5


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(MODELS), required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--batches", type=int, required=True)
    p.add_argument("--input-size", required=True, metavar="HxW")
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16", "tf32"), default="fp32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--score-threshold", type=float, default=0.05)
    p.add_argument("--nms-threshold", type=float, default=0.5)
    p.add_argument("--detections", type=int, default=100)
    p.add_argument("--weights", metavar="FILE")
    p.add_argument("--data", metavar="ANNOTATIONS")
    p.add_argument("--images", metavar="DIR")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    try:
        args.size = tuple(int(v) for v in args.input_size.lower().split("x"))
        assert len(args.size) == 2
    except (ValueError, AssertionError):
        p.error("--input-size takes HxW")
    if args.precision in ("fp16", "tf32") and not args.device.startswith("cuda"):
        p.error("--precision %s needs a CUDA device; use fp32 or bf16 on the CPU" % args.precision)
    return args


def iter_line(k, time_s, data_s, images):
    return "DETBENCH_ITER " + json.dumps({"iteration": k, "time_s": time_s, "data_time_s": data_s, "images": images,
                                          "loss": None, "losses": {}, "lr": None, "peak_mem_mb": None},
                                         separators=(",", ":"))


def phases_line(k, pre, net, post, detections):
    return "DETBENCH_PHASES " + json.dumps({"iteration": k, "pre_s": pre, "net_s": net, "post_s": post,
                                            "detections": detections}, separators=(",", ":"))


def build(args):
    torch.manual_seed(args.seed)
    train_args = torchvision_driver.parse_args(["--model", args.model, "--iterations", "1", "--device", args.device])
    model = torchvision_driver.build_model(train_args, *args.size)
    if args.weights:
        try:
            weights_map.load(model, args.weights, args.model, "torchvision")
        except weights_map.WeightsError as exc:
            sys.exit("error: %s" % exc)
    if args.model == "retinanet":
        model.score_thresh, model.nms_thresh = args.score_threshold, args.nms_threshold
        model.detections_per_img, model.topk_candidates = args.detections, CANDIDATES
    else:
        heads = model.roi_heads
        heads.score_thresh, heads.nms_thresh, heads.detections_per_img = (
            args.score_threshold, args.nms_threshold, args.detections)
        model.rpn._pre_nms_top_n["testing"] = RPN_PRE_NMS_TEST
        model.rpn._post_nms_top_n["testing"] = RPN_POST_NMS_TEST
    return model.to(args.device).eval()


def raw_pool(args):
    if not args.data:
        g = torch.Generator().manual_seed(args.seed)
        return list(torch.randint(0, 256, (POOL, args.size[0], args.size[1], 3), dtype=torch.uint8, generator=g))
    import numpy as np
    from PIL import Image
    with open(args.data, encoding="utf-8") as f:
        files = [im["file_name"] for im in json.load(f)["images"]][:POOL]
    return [torch.from_numpy(np.asarray(Image.open(os.path.join(args.images, n)).convert("RGB")).copy())
            for n in files]


class PostTimer:
    """Wraps a bound post-processing method: its seconds in the last batch, the device synchronised."""

    def __init__(self, owner, name, sync):
        self.inner, self.sync, self.spent = getattr(owner, name), sync, 0.0
        setattr(owner, name, self)

    def __call__(self, *a, **kw):
        self.sync()
        start = time.perf_counter()
        out = self.inner(*a, **kw)
        self.sync()
        self.spent += time.perf_counter() - start
        return out


def network(model, images):
    """The model's forward after its transform: (raw detections per image, on the transformed sizes)."""
    features = model.backbone(images.tensors)
    if isinstance(features, torch.Tensor):
        features = {"0": features}
    if hasattr(model, "rpn"):
        proposals, _ = model.rpn(images, features)
        detections, _ = model.roi_heads(features, proposals, images.image_sizes)
        return detections
    features = list(features.values())
    head_outputs = model.head(features)
    anchors = model.anchor_generator(images, features)
    num_per_level = [x.size(2) * x.size(3) for x in features]
    hw = sum(num_per_level)
    per_anchor = head_outputs["cls_logits"].size(1) // hw
    num_per_level = [n * per_anchor for n in num_per_level]
    split_head = {k: list(v.split(num_per_level, dim=1)) for k, v in head_outputs.items()}
    split_anchors = [list(a.split(num_per_level)) for a in anchors]
    return model.postprocess_detections(split_head, split_anchors, images.image_sizes)


def main(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    def sync():
        if cuda:
            torch.cuda.synchronize(device)
    model = build(args)
    owner = model if args.model == "retinanet" else model.roi_heads
    timer = PostTimer(owner, "postprocess_detections", sync)
    pool = raw_pool(args)
    meta = {"mode": "inference", "model": args.model, "images_per_device": args.batch_size,
            "input_size": list(args.size), "precision": args.precision, "device": device.type,
            "score_threshold": args.score_threshold, "nms_threshold": args.nms_threshold,
            "detections_per_image": args.detections, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "data": "coco" if args.data else "synthetic"}
    if args.model == "retinanet":
        meta["candidates_per_level"] = model.topk_candidates
    else:
        meta.update(rpn_pre_nms_test=model.rpn._pre_nms_top_n["testing"],
                    rpn_post_nms_test=model.rpn._post_nms_top_n["testing"], rpn_nms_threshold=model.rpn.nms_thresh)
    if args.model == "mask_rcnn":
        meta["mask_threshold"] = MASK_THRESHOLD
    print("DETBENCH_META " + json.dumps(meta, sort_keys=True, separators=(",", ":")), flush=True)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    autocast = torch.autocast(device.type, dtype=dtype) if dtype else torch.autocast(device.type, enabled=False)
    n = args.batch_size
    with torch.inference_mode(), autocast:
        prev = time.perf_counter()
        for k in range(1, args.batches + 1):
            raws = [pool[((k - 1) * n + i) % len(pool)] for i in range(n)]
            fetched = time.perf_counter()
            floats = [r.to(device).permute(2, 0, 1).float() / 255.0 for r in raws]
            original = [tuple(f.shape[-2:]) for f in floats]
            images, _ = model.transform(floats)
            sync()
            pre_end = time.perf_counter()
            timer.spent = 0.0
            detections = network(model, images)
            sync()
            net_end = time.perf_counter()
            results = model.transform.postprocess(detections, images.image_sizes, original)
            if args.model == "mask_rcnn":
                for r in results:
                    r["masks"] = r["masks"] > MASK_THRESHOLD
            sync()
            end = time.perf_counter()
            kept = sum(len(r["boxes"]) for r in results)
            print(iter_line(k, end - prev, fetched - prev, n))
            print(phases_line(k, pre_end - fetched, net_end - pre_end - timer.spent,
                              end - net_end + timer.spent, kept), flush=True)
            prev = end
    return 0


if __name__ == "__main__":
    sys.exit(main())
