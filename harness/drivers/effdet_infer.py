"""Inference benchmark of EfficientDet-D0 through the effdet library (PyPI effdet 0.4.1), timed as
every detbench inference driver times it (harness/jsonlog.py, docs/methodology.md).

Runs in the effdet framework's pinned env. The model is effdet's own
``create_model("efficientdet_d0", bench_task="predict", pretrained=False,
pretrained_backbone=False, image_size=...)`` (random weights, nothing downloaded; --weights
FILE loads a state dict of the bench's model). Per batch, from the end of the previous one: its
raw uint8 images fetched from a pool of 8 seeded images (or the first 8 of a COCO file);
pre-processing (to float on the device, normalised with effdet's ImageNet mean and std, padded
to the input size); the network (EfficientNet backbone, BiFPN, class and box heads:
``bench.model``); post-processing (effdet's own ``_post_process``: the best 5000 anchor scores
over all levels, and ``_batch_detection``: box decoding and per-class NMS at IoU 0.5, effdet's
fixed threshold, keeping max_det_per_image; then the scenario's score threshold on the kept
detections). Prints one DETBENCH_ITER and one DETBENCH_PHASES line per batch.
"""
import argparse
import json
import os
import sys
import time

import torch

POOL = 8
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)
NMS_THRESHOLD = 0.5          # effdet's generate_detections fixes it


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["efficientdet_d0"], required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--batches", type=int, required=True)
    p.add_argument("--input-size", required=True, metavar="HxW")
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16", "tf32"), default="fp32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--score-threshold", type=float, default=0.05)
    p.add_argument("--nms-threshold", type=float, default=NMS_THRESHOLD)
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
    if any(v % 128 for v in args.size):
        p.error("EfficientDet's pyramid (levels 3 to 7) needs sides divisible by 128, got %s" % args.input_size)
    if args.nms_threshold != NMS_THRESHOLD:
        p.error("effdet's NMS IoU is fixed at %g" % NMS_THRESHOLD)
    if args.precision in ("fp16", "tf32") and not args.device.startswith("cuda"):
        p.error("--precision %s needs a CUDA device; use fp32 or bf16 on the CPU" % args.precision)
    return args


def build(args):
    from effdet import create_model
    torch.manual_seed(args.seed)
    bench = create_model("efficientdet_d0", bench_task="predict", pretrained=False, pretrained_backbone=False,
                         image_size=args.size, max_det_per_image=args.detections)
    if args.weights:
        try:
            state = torch.load(args.weights, map_location="cpu", weights_only=True)
            bench.model.load_state_dict(state.get("state_dict", state) if isinstance(state, dict) else state)
        except (OSError, RuntimeError, ValueError) as exc:
            sys.exit("error: %s: not an EfficientDet-D0 state dict: %s" % (args.weights, exc))
    return bench.to(args.device).eval()


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


def preprocess(raws, size, device, mean, std):
    """uint8 [h, w, 3] images -> a normalised [N, 3, H, W] batch on the device: each image scaled to
    fit the input size (keeping its aspect) and padded at the bottom and right, as effdet's loader does."""
    import torch.nn.functional as F
    batch = torch.zeros((len(raws), 3) + tuple(size), device=device)
    for i, raw in enumerate(raws):
        x = raw.to(device).permute(2, 0, 1).float()
        h, w = x.shape[-2:]
        if (h, w) != tuple(size):
            scale = min(size[0] / h, size[1] / w)
            x = F.interpolate(x[None], size=(int(h * scale), int(w * scale)), mode="bilinear",
                              align_corners=False)[0]
        batch[i, :, :x.shape[1], :x.shape[2]] = (x - mean) / std
    return batch


def main(argv=None):
    args = parse_args(argv)
    from effdet.bench import _batch_detection, _post_process
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    def sync():
        if cuda:
            torch.cuda.synchronize(device)
    bench = build(args)
    pool = raw_pool(args)
    mean = torch.tensor(MEAN, device=device).view(3, 1, 1)
    std = torch.tensor(STD, device=device).view(3, 1, 1)
    meta = {"mode": "inference", "model": args.model, "images_per_device": args.batch_size,
            "input_size": list(args.size), "precision": args.precision, "device": device.type,
            "score_threshold": args.score_threshold, "nms_threshold": NMS_THRESHOLD,
            "detections_per_image": bench.max_det_per_image, "candidates": bench.max_detection_points,
            "torch": torch.__version__, "threads": torch.get_num_threads(),
            "data": "coco" if args.data else "synthetic"}
    print("DETBENCH_META " + json.dumps(meta, sort_keys=True, separators=(",", ":")), flush=True)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
    autocast = torch.autocast(device.type, dtype=dtype) if dtype else torch.autocast(device.type, enabled=False)
    n = args.batch_size
    with torch.inference_mode(), autocast:
        prev = time.perf_counter()
        for k in range(1, args.batches + 1):
            raws = [pool[((k - 1) * n + i) % len(pool)] for i in range(n)]
            fetched = time.perf_counter()
            images = preprocess(raws, args.size, device, mean, std)
            sync()
            pre_end = time.perf_counter()
            class_out, box_out = bench.model(images)
            sync()
            net_end = time.perf_counter()
            class_out, box_out, indices, classes = _post_process(
                class_out, box_out, num_levels=bench.num_levels, num_classes=bench.num_classes,
                max_detection_points=bench.max_detection_points)
            found = _batch_detection(n, class_out.float(), box_out.float(), bench.anchors.boxes, indices, classes,
                                     max_det_per_image=bench.max_det_per_image, soft_nms=bench.soft_nms)
            kept = int((found[..., 4] > args.score_threshold).sum())     # [N, D, (x1 y1 x2 y2 score class)]
            sync()
            end = time.perf_counter()
            print("DETBENCH_ITER " + json.dumps({"iteration": k, "time_s": end - prev, "data_time_s": fetched - prev,
                                                 "images": n, "loss": None, "losses": {}, "lr": None,
                                                 "peak_mem_mb": None}, separators=(",", ":")))
            print("DETBENCH_PHASES " + json.dumps({"iteration": k, "pre_s": pre_end - fetched, "net_s": net_end - pre_end,
                                                   "post_s": end - net_end, "detections": kept},
                                                  separators=(",", ":")), flush=True)
            prev = end
    return 0


if __name__ == "__main__":
    sys.exit(main())
