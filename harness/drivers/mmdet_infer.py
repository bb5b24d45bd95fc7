"""Inference benchmark of mmdetection 3.x's detectors through its own inference code, timed
as every detbench inference driver times them (harness/jsonlog.py, docs/methodology.md).

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
import argparse
import json
import os
import sys
import tempfile
import time

import torch

try:
    from harness.drivers import weights_map
except ImportError:
    import weights_map

BASES = {
    "retinanet": "mmdet::retinanet/retinanet_r50_fpn_1x_coco.py",
    "faster_rcnn": "mmdet::faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py",
    "mask_rcnn": "mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py",
}
POOL = 8
RPN_PRE_NMS_TEST, RPN_POST_NMS_TEST, RPN_NMS, CANDIDATES, MASK_THRESHOLD = 1000, 1000, 0.7, 1000, 0.5

CONFIG = """\
_base_ = {base!r}
model = dict(
    backbone=dict(init_cfg=None, frozen_stages=1, norm_cfg=dict(type='BN', requires_grad=False), norm_eval=True),
    test_cfg={test_cfg}{neck})
"""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(BASES), required=True)
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
        p.error("--precision %s needs a CUDA device; use fp32 on the CPU" % args.precision)
    return args


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
    if not args.data:
        g = torch.Generator().manual_seed(args.seed)
        rgb = torch.randint(0, 256, (POOL, args.size[0], args.size[1], 3), dtype=torch.uint8, generator=g)
    else:
        import numpy as np
        from PIL import Image
        with open(args.data, encoding="utf-8") as f:
            files = [im["file_name"] for im in json.load(f)["images"]][:POOL]
        rgb = [torch.from_numpy(np.asarray(Image.open(os.path.join(args.images, n)).convert("RGB")).copy())
               for n in files]
    return [im.permute(2, 0, 1).flip(0).contiguous() for im in rgb]     # HWC RGB -> CHW BGR


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
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    def sync():
        if cuda:
            torch.cuda.synchronize(device)
    model = build(args)
    timers = []
    if args.model != "retinanet":
        timers.append(PostTimer(model.roi_head.bbox_head, "predict_by_feat", sync))
        if args.model == "mask_rcnn":
            timers.append(PostTimer(model.roi_head.mask_head, "predict_by_feat", sync))
    pool = raw_pool(args)
    meta = {"mode": "inference", "model": args.model, "images_per_device": args.batch_size,
            "input_size": list(args.size), "precision": args.precision, "device": device.type,
            "score_threshold": args.score_threshold, "nms_threshold": args.nms_threshold,
            "detections_per_image": args.detections, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "data": "coco" if args.data else "synthetic"}
    if args.model == "retinanet":
        meta["candidates_per_level"] = model.test_cfg["nms_pre"]
    else:
        rpn = model.test_cfg["rpn"]
        meta.update(rpn_pre_nms_test=rpn["nms_pre"], rpn_post_nms_test=rpn["max_per_img"],
                    rpn_nms_threshold=rpn["nms"]["iou_threshold"])
    if args.model == "mask_rcnn":
        meta["mask_threshold"] = model.test_cfg["rcnn"]["mask_thr_binary"]
    print("DETBENCH_META " + json.dumps(meta, sort_keys=True, separators=(",", ":")), flush=True)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
    autocast = torch.autocast(device.type, dtype=dtype) if dtype else torch.autocast(device.type, enabled=False)
    n = args.batch_size
    with torch.inference_mode(), autocast:
        prev = time.perf_counter()
        for k in range(1, args.batches + 1):
            raws = [pool[((k - 1) * n + i) % len(pool)] for i in range(n)]
            fetched = time.perf_counter()
            data = model.data_preprocessor({"inputs": [r.to(device) for r in resize(raws, args.size)],
                                            "data_samples": samples(raws, args.size)}, False)
            inputs, data_samples = data["inputs"], data["data_samples"]
            sync()
            pre_end = time.perf_counter()
            for t in timers:
                t.spent = 0.0
            feats = model.extract_feat(inputs)
            metas = [s.metainfo for s in data_samples]
            if args.model == "retinanet":
                outs = model.bbox_head(feats)
                sync()
                net_end = time.perf_counter()
                results = model.bbox_head.predict_by_feat(*outs, batch_img_metas=metas, rescale=True)
            else:
                proposals = model.rpn_head.predict(feats, data_samples, rescale=False)
                results = model.roi_head.predict(feats, proposals, data_samples, rescale=True)
                sync()
                net_end = time.perf_counter()
            sync()
            end = time.perf_counter()
            inner = sum(t.spent for t in timers)
            kept = sum(len(r.bboxes) for r in results)
            print("DETBENCH_ITER " + json.dumps({"iteration": k, "time_s": end - prev, "data_time_s": fetched - prev,
                                                 "images": n, "loss": None, "losses": {}, "lr": None,
                                                 "peak_mem_mb": None}, separators=(",", ":")))
            print("DETBENCH_PHASES " + json.dumps({"iteration": k, "pre_s": pre_end - fetched,
                                                   "net_s": net_end - pre_end - inner,
                                                   "post_s": end - net_end + inner, "detections": kept},
                                                  separators=(",", ":")), flush=True)
            prev = end
    return 0


if __name__ == "__main__":
    sys.exit(main())
