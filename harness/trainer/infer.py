"""Inference benchmark of the bundled detectors:
`python -m harness.trainer.infer CONFIG [--set key=value ...] --batch-size N --batches K ...`

Every batch is timed the one way every detbench inference driver times it: from the end of
the previous batch to the moment its final detections are ready (the device synchronised),
in parts: fetching its raw images, pre-processing (uint8 HWC images to a normalised, padded
batch on the device), the network (backbone, FPN, heads; the RPN's proposals, the box head
and, on the final boxes, the mask head) and post-processing (harness/trainer/postprocess.py:
decoding, score threshold, per-class NMS, top-k, mask paste). It prints one DETBENCH_ITER
and one DETBENCH_PHASES line per batch (harness/jsonlog.py). The raw images are a pool of 8
seeded random images at the input size, or the first 8 images of a COCO file; batch k takes
images (k-1)*N .. (k-1)*N + N-1 of the pool, cyclically.

Exit codes: 0 done, 2 bad argument or config (fp16 and tf32 need CUDA).
"""
import argparse
import os
import sys
import time

from harness import jsonlog

from .config import ConfigError, apply_overrides, load_config_module

POOL = 8
SIZE_DIVISIBILITY = 32
MODELS = {"retina": "retinanet", "faster": "faster_rcnn", "mask": "mask_rcnn"}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m harness.trainer.infer", description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--model", choices=sorted(MODELS.values()), help="checked against the config's model")
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--batches", type=int, required=True, help="batches to run, warmup included")
    p.add_argument("--input-size", required=True, metavar="HxW")
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16", "tf32"), default="fp32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--score-threshold", type=float, default=0.05)
    p.add_argument("--nms-threshold", type=float, default=0.5)
    p.add_argument("--detections", type=int, default=100, help="kept per image")
    p.add_argument("--weights", metavar="FILE", help="initial weights of the whole detector")
    p.add_argument("--data", metavar="ANNOTATIONS", help="COCO annotations: take the pool from its images")
    p.add_argument("--images", metavar="DIR")
    args = p.parse_args(argv)
    try:
        args.size = tuple(int(v) for v in args.input_size.lower().split("x"))
        assert len(args.size) == 2 and min(args.size) >= 32
    except (ValueError, AssertionError):
        p.error("--input-size takes HxW, each at least 32, e.g. 320x320")
    if args.batch_size < 1 or args.batches < 1 or args.detections < 1:
        p.error("--batch-size, --batches and --detections must be at least 1")
    if bool(args.data) != bool(args.images):
        p.error("--data and --images go together")
    return args


def raw_pool(args):
    """The pool of raw uint8 images [h, w, 3]: seeded noise at the input size, or COCO images."""
    import torch
    if not args.data:
        g = torch.Generator().manual_seed(args.seed)
        return list(torch.randint(0, 256, (POOL, args.size[0], args.size[1], 3), dtype=torch.uint8, generator=g))
    import json

    import numpy as np
    from PIL import Image
    try:
        with open(args.data, encoding="utf-8") as f:
            files = [im["file_name"] for im in json.load(f).get("images", [])][:POOL]
    except (OSError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{args.data}: cannot read the annotations: {exc}") from None
    if not files:
        raise ConfigError(f"{args.data}: no images")
    pool = []
    for name in files:
        path = os.path.join(args.images, name)
        try:
            pool.append(torch.from_numpy(np.asarray(Image.open(path).convert("RGB")).copy()))
        except OSError as exc:
            raise ConfigError(f"{path}: not a readable image: {exc}") from None
    return pool


def preprocess(torch, raws, size, device, mean, std):
    """uint8 [h, w, 3] images -> one normalised float batch [N, 3, H', W'] on the device, each image
    resized to fit the input size and the batch padded to the size divisibility; and each image's
    (height, width) after resizing."""
    import torch.nn.functional as F
    h_in, w_in = size
    images, sizes = [], []
    for raw in raws:
        x = raw.to(device).permute(2, 0, 1).float()
        h, w = x.shape[-2:]
        if (h, w) != (h_in, w_in):
            scale = min(h_in / h, w_in / w)
            x = F.interpolate(x[None], size=(max(1, round(h * scale)), max(1, round(w * scale))),
                              mode="bilinear", align_corners=False)[0]
        images.append((x - mean) / std)
        sizes.append(tuple(x.shape[-2:]))
    ph = -(-max(s[0] for s in sizes) // SIZE_DIVISIBILITY) * SIZE_DIVISIBILITY
    pw = -(-max(s[1] for s in sizes) // SIZE_DIVISIBILITY) * SIZE_DIVISIBILITY
    batch = images[0].new_zeros((len(images), 3, ph, pw))
    for i, x in enumerate(images):
        batch[i, :, :x.shape[1], :x.shape[2]] = x
    return batch, sizes


def detector_for_inference(module, cfg, device, args):
    """The config's detector with its initial weights, on the device in eval mode, and the
    post-processing of args (score threshold, NMS threshold, detections per image)."""
    from . import postprocess
    from .train import load_initial_weights
    try:
        model = module.build_detector(cfg)
    except Exception as exc:
        raise ConfigError(f"config {args.config} does not build: {type(exc).__name__}: {exc}") from None
    load_initial_weights(model, cfg)
    model.to(device).eval()
    return model, postprocess.PostProcess(score_threshold=args.score_threshold, nms_threshold=args.nms_threshold,
                                          detections_per_image=args.detections)


def run(args, out):
    import torch

    from . import engine, postprocess
    from .data import _MEAN, _STD
    from .train import with_weights_option
    module = load_config_module(args.config)
    sets = list(args.overrides) + ["data.input_size=%dx%d" % args.size, "data.images_per_device=%d" % args.batch_size]
    cfg = with_weights_option(apply_overrides(module.CONFIG, sets), args.weights)
    model_name = MODELS.get(cfg.model.name)
    if args.model and args.model != model_name:
        raise ConfigError(f"--model {args.model} but the config {args.config} builds {model_name}")
    cuda = torch.cuda.is_available() and cfg.train.device != "cpu"
    if args.precision in ("fp16", "tf32") and not cuda:
        raise ConfigError(f"--precision {args.precision} needs a CUDA device; use fp32 or bf16 on the CPU")
    device = torch.device("cuda" if cuda else "cpu")
    if args.precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(args.seed)
    model, post = detector_for_inference(module, cfg, device, args)
    pool = raw_pool(args)
    mean = torch.tensor(_MEAN, device=device).view(3, 1, 1)
    std = torch.tensor(_STD, device=device).view(3, 1, 1)

    def sync():
        if cuda:
            torch.cuda.synchronize(device)
    meta = {"mode": "inference", "model": model_name, "images_per_device": args.batch_size,
            "input_size": list(args.size), "precision": args.precision, "device": device.type,
            "score_threshold": post.score_threshold, "nms_threshold": post.nms_threshold,
            "detections_per_image": post.detections_per_image, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "data": "coco" if args.data else "synthetic"}
    if model_name == "retinanet":
        meta["candidates_per_level"] = post.candidates
    else:
        meta.update(rpn_pre_nms_test=post.rpn_pre_nms_top_n, rpn_post_nms_test=post.rpn_post_nms_top_n,
                    rpn_nms_threshold=model.rpn.nms_thresh)
    if model_name == "mask_rcnn":
        meta["mask_threshold"] = postprocess.MASK_THRESHOLD
    print(jsonlog.meta_line(meta), file=out, flush=True)
    n = args.batch_size
    with torch.inference_mode(), engine.autocast_for("fp32" if args.precision == "tf32" else args.precision,
                                                     device):
        prev = time.perf_counter()
        for k in range(1, args.batches + 1):
            raws = [pool[((k - 1) * n + i) % len(pool)] for i in range(n)]
            fetched = time.perf_counter()
            images, sizes = preprocess(torch, raws, args.size, device, mean, std)
            sync()
            pre_end = time.perf_counter()
            net_out = postprocess.raw(model, images, post)
            sync()
            net_end = time.perf_counter()
            results = postprocess.boxes(model, net_out, sizes, post)
            sync()
            masks_s = 0.0
            if model_name == "mask_rcnn":
                start = time.perf_counter()
                probs = postprocess.mask_probs(model, net_out, results)      # the network's mask head
                sync()
                masks_s = time.perf_counter() - start
                postprocess.add_masks(results, probs, sizes)
            sync()
            end = time.perf_counter()
            kept = sum(len(r["boxes"]) for r in results)
            print(jsonlog.iter_line(k, end - prev, fetched - prev, n), file=out)
            print(jsonlog.phases_line(k, pre_end - fetched, net_end - pre_end + masks_s,
                                      end - net_end - masks_s, kept), file=out, flush=True)
            prev = end


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        run(args, sys.stdout)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
