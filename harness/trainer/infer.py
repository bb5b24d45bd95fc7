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
import sys
import time

from harness.drivers import common

from .config import ConfigError, apply_overrides, load_config_module
from .weights import TRAINER_MODELS as MODELS

SIZE_DIVISIBILITY = 32


def parse_args(argv):
    p = common.inference_parser(__doc__.splitlines()[0], sorted(MODELS.values()), model_required=False,
                                device=False, prog="python -m harness.trainer.infer")
    p.add_argument("config")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    return common.parse_inference(p, argv)


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
    problem = common.cuda_only(args.precision, cuda)
    if problem:
        raise ConfigError(problem)
    device, sync = common.device_and_sync("cuda" if cuda else "cpu", args.precision)
    torch.manual_seed(args.seed)
    model, post = detector_for_inference(module, cfg, device, args)
    try:
        pool = common.raw_pool(args)
    except common.InputError as exc:
        raise ConfigError(str(exc)) from None
    mean = torch.tensor(_MEAN, device=device).view(3, 1, 1)
    std = torch.tensor(_STD, device=device).view(3, 1, 1)
    extra = dict(model=model_name, score_threshold=post.score_threshold, nms_threshold=post.nms_threshold,
                 detections_per_image=post.detections_per_image)
    if model_name == "retinanet":
        extra["candidates_per_level"] = post.candidates
    else:
        extra.update(rpn_pre_nms_test=post.rpn_pre_nms_top_n, rpn_post_nms_test=post.rpn_post_nms_top_n,
                     rpn_nms_threshold=model.rpn.nms_thresh)
    if model_name == "mask_rcnn":
        extra["mask_threshold"] = postprocess.MASK_THRESHOLD
    print(common.meta_line(args, device, **extra), file=out, flush=True)

    def step(raws, marks):
        images, sizes = preprocess(torch, raws, args.size, device, mean, std)
        marks.pre_done()
        net_out = postprocess.raw(model, images, post)
        marks.net_done()
        results = postprocess.boxes(model, net_out, sizes, post)
        if model_name == "mask_rcnn":
            sync()
            start = time.perf_counter()
            probs = postprocess.mask_probs(model, net_out, results)      # the network's mask head
            sync()
            marks.net_in_post = time.perf_counter() - start
            postprocess.add_masks(results, probs, sizes)
        return sum(len(r["boxes"]) for r in results)
    with torch.inference_mode(), engine.autocast_for("fp32" if args.precision == "tf32" else args.precision,
                                                     device):
        common.time_batches(args, pool, step, sync, out=out)


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
