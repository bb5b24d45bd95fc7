"""Inference benchmark of mmdetection 3.x's detectors through its own inference code, timed
as every detbench inference driver times them (common.py, docs/methodology.md).

Runs in the mmdetection framework's pinned env. The model is built from the installed model
config (``mmdet::...``) with the changes the training driver makes for the same architecture
(frozen BN, RetinaNet's P6 from P5), random weights (or --weights FILE of `detbench weights
make`, mapped), and its test_cfg set to the scenario's post-processing and the shared test-time
settings (RPN: 1000 per level before NMS at 0.7, 1000 kept; RetinaNet: the best 1000 per level;
masks binarised at 0.5). Per batch, from the end of the previous one: its raw images fetched
from a pool of 8 seeded images (or the first 8 of a COCO file); pre-processing (the model's
DetDataPreprocessor: to float, BGR to RGB as its config says, normalise, pad to 32); the network
(extract_feat, the heads; for two-stage models the RPN's proposals and the RoI heads); post-
processing (the heads' predict_by_feat: decoding, score threshold, NMS, top-k, mask paste).
In the two-stage models predict_by_feat runs inside the RoI head's predict, so it is timed by
wrapping those bound methods (the device synchronised before and after) and taken out of the
network's time. Prints one DETBENCH_ITER and one DETBENCH_PHASES line per batch.
"""
import os
import sys
import tempfile

import torch

try:
    from harness.drivers import common, weights_map
except ImportError:                             # run as a script in the framework's pinned env
    import common
    import weights_map

BASES = {
    "retinanet": "mmdet::retinanet/retinanet_r50_fpn_1x_coco.py",
    "faster_rcnn": "mmdet::faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py",
    "mask_rcnn": "mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py",
}
RPN_PRE_NMS_TEST, RPN_POST_NMS_TEST, RPN_NMS, CANDIDATES, MASK_THRESHOLD = 1000, 1000, 0.7, 1000, 0.5

CONFIG = """\
_base_ = {base!r}
model = dict(
    backbone=dict(init_cfg=None, frozen_stages=1, norm_cfg=dict(type='BN', requires_grad=False), norm_eval=True),
    test_cfg={test_cfg}{neck})
"""


def parse_args(argv=None):
    return common.parse_inference(common.inference_parser(__doc__.splitlines()[0], sorted(BASES)), argv,
                                  cpu_precisions=("fp32",))


def test_cfg(args):
    nms = dict(type="nms", iou_threshold=args.nms_threshold)
    if args.model == "retinanet":
        return dict(nms_pre=CANDIDATES, min_bbox_size=0, score_thr=args.score_threshold, nms=nms,
                    max_per_img=args.detections)
    rcnn = dict(score_thr=args.score_threshold, nms=nms, max_per_img=args.detections)
    if args.model == "mask_rcnn":
        rcnn["mask_thr_binary"] = MASK_THRESHOLD
    return dict(rpn=dict(nms_pre=RPN_PRE_NMS_TEST, max_per_img=RPN_POST_NMS_TEST,
                         nms=dict(type="nms", iou_threshold=RPN_NMS), min_bbox_size=0), rcnn=rcnn)


def build(args):
    from mmengine.config import Config
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    register_all_modules()
    neck = (",\n    neck=dict(add_extra_convs='on_output', relu_before_extra_convs=True)"
            if args.model == "retinanet" else "")
    with tempfile.TemporaryDirectory(prefix="detbench-mmdet-infer-") as work:
        path = os.path.join(work, "detbench_%s_infer.py" % args.model)
        with open(path, "w") as f:
            f.write(CONFIG.format(base=BASES[args.model], test_cfg=repr(test_cfg(args)), neck=neck))
        cfg = Config.fromfile(path)
    torch.manual_seed(args.seed)
    model = MODELS.build(cfg.model)
    model.init_weights()
    if args.weights:
        try:
            weights_map.load(model, args.weights, args.model, "mmdetection")
        except weights_map.WeightsError as exc:
            sys.exit("error: %s" % exc)
    return model.to(args.device).eval()


def raw_pool(args):
    """uint8 images [3, H, W] in the channel order mmdetection's loader gives (BGR)."""
    return [im.permute(2, 0, 1).flip(0).contiguous() for im in common.raw_pool(args)]     # HWC RGB -> CHW BGR


def samples(raws, size):
    from mmdet.structures import DetDataSample
    out = []
    for im in raws:
        s = DetDataSample()
        h, w = im.shape[-2:]
        scale = min(size[0] / h, size[1] / w)
        s.set_metainfo(dict(img_shape=(round(h * scale), round(w * scale)), ori_shape=(h, w),
                            scale_factor=(scale, scale)))
        out.append(s)
    return out


def resize(raws, size):
    """Images that are not at the input size are scaled to fit it (the test pipeline's Resize)."""
    import torch.nn.functional as F
    out = []
    for im in raws:
        h, w = im.shape[-2:]
        if (h, w) != tuple(size):
            scale = min(size[0] / h, size[1] / w)
            im = F.interpolate(im[None].float(), size=(round(h * scale), round(w * scale)), mode="bilinear",
                               align_corners=False)[0].round().clamp(0, 255).to(torch.uint8)
        out.append(im)
    return out


def main(argv=None):
    args = parse_args(argv)
    device, sync = common.device_and_sync(args.device, args.precision)
    model = build(args)
    timers = []
    if args.model != "retinanet":
        timers.append(common.Timed(model.roi_head.bbox_head, "predict_by_feat", sync))
        if args.model == "mask_rcnn":
            timers.append(common.Timed(model.roi_head.mask_head, "predict_by_feat", sync))
    try:
        pool = raw_pool(args)
    except common.InputError as exc:
        sys.exit("error: %s" % exc)
    if args.model == "retinanet":
        extra = dict(candidates_per_level=model.test_cfg["nms_pre"])
    else:
        rpn = model.test_cfg["rpn"]
        extra = dict(rpn_pre_nms_test=rpn["nms_pre"], rpn_post_nms_test=rpn["max_per_img"],
                     rpn_nms_threshold=rpn["nms"]["iou_threshold"])
    if args.model == "mask_rcnn":
        extra["mask_threshold"] = model.test_cfg["rcnn"]["mask_thr_binary"]
    print(common.meta_line(args, device, **extra), flush=True)

    def step(raws, marks):
        data = model.data_preprocessor({"inputs": [r.to(device) for r in resize(raws, args.size)],
                                        "data_samples": samples(raws, args.size)}, False)
        inputs, data_samples = data["inputs"], data["data_samples"]
        marks.pre_done()
        feats = model.extract_feat(inputs)
        metas = [s.metainfo for s in data_samples]
        if args.model == "retinanet":
            outs = model.bbox_head(feats)
            marks.net_done()
            results = model.bbox_head.predict_by_feat(*outs, batch_img_metas=metas, rescale=True)
        else:
            proposals = model.rpn_head.predict(feats, data_samples, rescale=False)
            results = model.roi_head.predict(feats, proposals, data_samples, rescale=True)
            marks.net_done()
        return sum(len(r.bboxes) for r in results)
    with torch.inference_mode(), common.autocast(args.precision, device):
        common.time_batches(args, pool, step, sync, post_timers=timers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
