"""Inference benchmark of EfficientDet-D0 through the effdet library (PyPI effdet 0.4.1), timed as
every detbench inference driver times it (common.py, docs/methodology.md).

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
import sys

import torch

try:
    from harness.drivers import common
except ImportError:                             # run as a script in the framework's pinned env
    import common

MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)
NMS_THRESHOLD = 0.5          # effdet's generate_detections fixes it


def parse_args(argv=None):
    p = common.inference_parser(__doc__.splitlines()[0], ["efficientdet_d0"], nms_threshold=NMS_THRESHOLD)
    args = common.parse_inference(p, argv)
    if any(v % 128 for v in args.size):
        p.error("EfficientDet's pyramid (levels 3 to 7) needs sides divisible by 128, got %s" % args.input_size)
    if args.nms_threshold != NMS_THRESHOLD:
        p.error("effdet's NMS IoU is fixed at %g" % NMS_THRESHOLD)
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
    device, sync = common.device_and_sync(args.device, args.precision)
    bench = build(args)
    try:
        pool = common.raw_pool(args)
    except common.InputError as exc:
        sys.exit("error: %s" % exc)
    mean = torch.tensor(MEAN, device=device).view(3, 1, 1)
    std = torch.tensor(STD, device=device).view(3, 1, 1)
    print(common.meta_line(args, device, nms_threshold=NMS_THRESHOLD, detections_per_image=bench.max_det_per_image,
                           candidates=bench.max_detection_points), flush=True)

    def step(raws, marks):
        images = preprocess(raws, args.size, device, mean, std)
        marks.pre_done()
        class_out, box_out = bench.model(images)
        marks.net_done()
        class_out, box_out, indices, classes = _post_process(
            class_out, box_out, num_levels=bench.num_levels, num_classes=bench.num_classes,
            max_detection_points=bench.max_detection_points)
        found = _batch_detection(len(raws), class_out.float(), box_out.float(), bench.anchors.boxes, indices,
                                 classes, max_det_per_image=bench.max_det_per_image, soft_nms=bench.soft_nms)
        return int((found[..., 4] > args.score_threshold).sum())     # [N, D, (x1 y1 x2 y2 score class)]
    with torch.inference_mode(), common.autocast(args.precision, device):
        common.time_batches(args, pool, step, sync)
    return 0


if __name__ == "__main__":
    sys.exit(main())
