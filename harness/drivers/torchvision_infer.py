"""Inference benchmark of torchvision's detection models, timed as every detbench inference
driver times them (common.py, docs/methodology.md "Inference").

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
import sys

import torch

try:
    from harness.drivers import common, torchvision_driver, weights_map
except ImportError:                             # run as a script in the framework's pinned env
    import common
    import torchvision_driver
    import weights_map

MODELS = torchvision_driver.MODELS

RPN_PRE_NMS_TEST, RPN_POST_NMS_TEST, CANDIDATES, MASK_THRESHOLD = 1000, 1000, 1000, 0.5


def parse_args(argv=None):
    return common.parse_inference(common.inference_parser(__doc__.splitlines()[0], sorted(MODELS)), argv)


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
    device, sync = common.device_and_sync(args.device, args.precision)
    model = build(args)
    owner = model if args.model == "retinanet" else model.roi_heads
    timer = common.Timed(owner, "postprocess_detections", sync)
    try:
        pool = common.raw_pool(args)
    except common.InputError as exc:
        sys.exit("error: %s" % exc)
    if args.model == "retinanet":
        extra = dict(candidates_per_level=model.topk_candidates)
    else:
        extra = dict(rpn_pre_nms_test=model.rpn._pre_nms_top_n["testing"],
                     rpn_post_nms_test=model.rpn._post_nms_top_n["testing"], rpn_nms_threshold=model.rpn.nms_thresh)
    if args.model == "mask_rcnn":
        extra["mask_threshold"] = MASK_THRESHOLD
    print(common.meta_line(args, device, **extra), flush=True)

    def step(raws, marks):
        floats = [r.to(device).permute(2, 0, 1).float() / 255.0 for r in raws]
        original = [tuple(f.shape[-2:]) for f in floats]
        images, _ = model.transform(floats)
        marks.pre_done()
        detections = network(model, images)
        marks.net_done()
        results = model.transform.postprocess(detections, images.image_sizes, original)
        if args.model == "mask_rcnn":
            for r in results:
                r["masks"] = r["masks"] > MASK_THRESHOLD
        return sum(len(r["boxes"]) for r in results)
    with torch.inference_mode(), common.autocast(args.precision, device):
        common.time_batches(args, pool, step, sync, post_timers=[timer])
    return 0


if __name__ == "__main__":
    sys.exit(main())
