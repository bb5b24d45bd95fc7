"""Inference benchmark of detectron2's detectors through its own inference code, timed as every
detbench inference driver times them (common.py, docs/methodology.md "Inference").

Runs in the detectron2 framework's pinned env. The model is built from the config train_net.py
trains it with (detectron2_launch.py: the bundled model-zoo config, the same architecture as the
other frameworks', no download; --weights FILE of `detbench weights make`, mapped), set to the
scenario's post-processing (ROI_HEADS / RETINANET score and NMS thresholds,
TEST.DETECTIONS_PER_IMAGE) and the shared test-time
settings (RPN: 1000 proposals per level before NMS at 0.7, 1000 kept; RetinaNet: the best 1000
anchors per level; masks binarised at 0.5), in eval mode. Per batch, from the end of the previous
one: its raw uint8 images fetched from a pool of 8 seeded images (or the first 8 of a COCO file);
pre-processing (to float on the device, then the model's preprocess_image: normalise, pad to 32);
the network (backbone and FPN; RetinaNet's head; the two-stage models' proposal generator and RoI
heads); post-processing (RetinaNet's forward_inference: anchors, decoding, score threshold, NMS,
top-k; the box predictor's inference, which runs inside the RoI heads and is timed by wrapping that
bound method, the device synchronised before and after, and taken out of the network's time; then
detector_postprocess, which pastes Mask R-CNN's masks binarised at 0.5). Prints one DETBENCH_ITER
and one DETBENCH_PHASES line per batch.
"""
import sys

import torch

try:
    from harness.drivers import common, detectron2_launch, weights_map
except ImportError:                             # run as a script in the framework's pinned env
    import common
    import detectron2_launch
    import weights_map

MODELS = detectron2_launch.MODELS
RPN_PRE_NMS_TEST, RPN_POST_NMS_TEST, RPN_NMS, CANDIDATES, MASK_THRESHOLD = 1000, 1000, 0.7, 1000, 0.5


def parse_args(argv=None):
    return common.parse_inference(common.inference_parser(__doc__.splitlines()[0], sorted(MODELS)), argv)


def test_time(cfg, model, score_threshold, nms_threshold, detections):
    """A frozen copy of a training cfg set to the post-processing given and the shared test-time
    settings (RPN 1000 per level before NMS at 0.7, 1000 kept; RetinaNet's best 1000 per level)."""
    cfg = cfg.clone()
    cfg.defrost()
    m = cfg.MODEL
    if model == "retinanet":
        m.RETINANET.SCORE_THRESH_TEST, m.RETINANET.NMS_THRESH_TEST = score_threshold, nms_threshold
        m.RETINANET.TOPK_CANDIDATES_TEST = CANDIDATES
    else:
        m.ROI_HEADS.SCORE_THRESH_TEST, m.ROI_HEADS.NMS_THRESH_TEST = score_threshold, nms_threshold
        m.RPN.PRE_NMS_TOPK_TEST, m.RPN.POST_NMS_TOPK_TEST = RPN_PRE_NMS_TEST, RPN_POST_NMS_TEST
        m.RPN.NMS_THRESH = RPN_NMS
    cfg.TEST.DETECTIONS_PER_IMAGE = detections
    cfg.freeze()
    return cfg


def build(args):
    """detectron2's model in eval mode, its test-time cfg set to the scenario's post-processing."""
    torch.manual_seed(args.seed)
    # the training launcher's own flags and defaults (R50-FPN as its model zoo builds it): one cfg builder
    train = detectron2_launch.parse_args(["--model", args.model, "--iterations", "1", "--batch-size",
                                          str(args.batch_size), "--seed", str(args.seed), "--device", args.device,
                                          "--input-size", "%dx%d" % tuple(args.size)])
    cfg = test_time(detectron2_launch.build_cfg(train), args.model, args.score_threshold,
                    args.nms_threshold, args.detections)
    model = detectron2_launch.build_model(cfg)
    if args.weights:
        try:
            weights_map.load(model, args.weights, args.model, "detectron2")
        except weights_map.WeightsError as exc:
            sys.exit("error: %s" % exc)
    return cfg, model.eval()


def main(argv=None):
    from detectron2.modeling.postprocessing import detector_postprocess
    args = parse_args(argv)
    device, sync = common.device_and_sync(args.device, args.precision)
    cfg, model = build(args)
    retina = args.model == "retinanet"
    timers = [] if retina else [common.Timed(model.roi_heads.box_predictor, "inference", sync)]
    try:
        pool = common.raw_pool(args)
    except common.InputError as exc:
        sys.exit("error: %s" % exc)
    if retina:
        extra = dict(candidates_per_level=model.test_topk_candidates)
    else:
        rpn = model.proposal_generator
        extra = dict(rpn_pre_nms_test=rpn.pre_nms_topk[False], rpn_post_nms_test=rpn.post_nms_topk[False],
                     rpn_nms_threshold=rpn.nms_thresh)
    if args.model == "mask_rcnn":
        extra["mask_threshold"] = MASK_THRESHOLD
    print(common.meta_line(args, device, **extra), flush=True)

    def step(raws, marks):
        inputs = [{"image": r.to(device).permute(2, 0, 1).float()} for r in raws]
        images = model.preprocess_image(inputs)
        marks.pre_done()
        features = model.backbone(images.tensor)
        if retina:
            levels = [features[f] for f in model.head_in_features]
            predictions = model.head(levels)
            marks.net_done()
            results = model.forward_inference(images, levels, predictions)
        else:
            proposals, _ = model.proposal_generator(images, features, None)
            results, _ = model.roi_heads(images, features, proposals, None)
            marks.net_done()
        kept = 0
        for r, raw in zip(results, raws):
            out = detector_postprocess(r, raw.shape[0], raw.shape[1], mask_threshold=MASK_THRESHOLD)
            kept += len(out)
        return kept
    with torch.inference_mode(), common.autocast(args.precision, device):
        common.time_batches(args, pool, step, sync, post_timers=timers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
