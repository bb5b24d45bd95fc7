"""Write one mmdetection checkpoint's detections on a val split in COCO's result format.

    python mmdet_eval.py --model M --depth D --checkpoint FILE --data ANN --images DIR \
        --input-size HxW --out FILE

Runs in the mmdetection framework's pinned env. The model is built from the config
mmdet_driver.py trains with (the same depth, neck and heads), loaded strictly from a
checkpoint its ``--checkpoint-every`` wrote (mmengine's ``iter_N.pth``), and run through
mmdetection's own ``predict`` (data preprocessor, heads, post-processing, boxes and masks
rescaled to each image's own size) with the test-time settings every framework's dump shares:
score threshold 0.05, per-class NMS at 0.5, 100 detections per image, RPN 1000 proposals per
level before NMS at 0.7 and 1000 kept, RetinaNet's best 1000 per level, masks binarised at
0.5. Images are read as its training loader reads them (BGR) and resized to fit the input
size. A label is mapped to the val split's category of the same COCO class name, as
mmdetection's CocoDataset maps them in training. Masks are written as COCO's compressed RLE.
Scoring is not done here: every framework's file goes through the one COCOeval
(harness/trainer/cocometrics.py). Exit codes: 0 done, 2 bad input.
"""
import os
import sys
import tempfile
from types import SimpleNamespace

import torch

try:
    from harness.drivers import common, mmdet_driver, mmdet_infer
except ImportError:                     # run as a script in the framework's pinned env
    import common
    import mmdet_driver
    import mmdet_infer

def parse_args(argv=None):
    return common.dump_parser(__doc__.splitlines()[0], mmdet_driver.BASES, mmdet_driver.STAGE_CHANNELS).parse_args(argv)


def build(args):
    """The trained architecture with the shared test-time settings, in eval mode (weights not loaded)."""
    from mmengine.config import Config
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    register_all_modules()
    train_args = mmdet_driver.parse_args(["--model", args.model, "--iterations", "1", "--depth", str(args.depth),
                                          "--frozen-stages", "-1", "--ann", args.data, "--images", args.images,
                                          "--input-size", args.input_size])
    with tempfile.TemporaryDirectory(prefix="detbench-mmdet-eval-") as work:
        path = os.path.join(work, "detbench_%s_eval.py" % args.model)
        mmdet_driver.write_config(train_args, path)
        cfg = Config.fromfile(path)
    shared = SimpleNamespace(model=args.model, score_threshold=args.score_threshold,
                             nms_threshold=common.DUMP_NMS_THRESHOLD, detections=common.DUMP_DETECTIONS)
    cfg.model.test_cfg = mmdet_infer.test_cfg(shared)
    return MODELS.build(cfg.model)


def load_image(path):
    """uint8 [3, H, W] in BGR, as mmdetection's LoadImageFromFile gives it."""
    from PIL import Image
    with Image.open(path) as im:
        im = im.convert("RGB")
        h, w = im.height, im.width
        img = torch.frombuffer(bytearray(im.tobytes()), dtype=torch.uint8)
    return img.view(h, w, 3).permute(2, 0, 1).flip(0).contiguous()


def category_ids(doc):
    """mmdetection's label i -> the val split's category id of COCO class i (None where it has none)."""
    from mmdet.datasets import CocoDataset
    by_name = {c["name"]: int(c["id"]) for c in doc["categories"]}
    return [by_name.get(name) for name in CocoDataset.METAINFO["classes"]]


def encode(mask):
    from pycocotools import mask as mask_utils
    import numpy as np
    rle = mask_utils.encode(np.asfortranarray(mask.numpy().astype(np.uint8)))
    rle["counts"] = rle["counts"].decode("ascii")
    return rle


def main(argv=None):
    args = parse_args(argv)
    size = tuple(int(v) for v in args.input_size.lower().split("x"))
    # an mmengine checkpoint holds its log history besides tensors; the file is the trial's own
    read = common.read_dump_inputs(args, lambda state: isinstance(state, dict) and "state_dict" in state,
                                   weights_only=False)
    if read is None:
        return 2
    state, doc = read
    model = build(args)
    model.load_state_dict(state["state_dict"])
    model.eval()
    cat_ids = category_ids(doc)
    images = sorted(doc["images"], key=lambda im: im["id"])
    out = []
    for start in range(0, len(images), args.batch_size):
        chunk = images[start:start + args.batch_size]
        raws = [load_image(os.path.join(args.images, im["file_name"])) for im in chunk]
        with torch.inference_mode():
            data = model.data_preprocessor({"inputs": mmdet_infer.resize(raws, size),
                                            "data_samples": mmdet_infer.samples(raws, size)}, False)
            results = model.predict(data["inputs"], data["data_samples"], rescale=True)
        for info, res in zip(chunk, results):
            pred = res.pred_instances
            masks = pred.masks.cpu() if "masks" in pred else None
            for k, (box, score, label) in enumerate(zip(pred.bboxes.tolist(), pred.scores.tolist(),
                                                        pred.labels.tolist())):
                cat = cat_ids[label] if 0 <= label < len(cat_ids) else None
                if cat is None:
                    continue        # a class the val split has no category for: it cannot be right
                out.append(common.coco_detection(info["id"], cat, box, score,
                                                 None if masks is None else encode(masks[k])))
    common.write_detections(args.out, out, len(images))
    return 0


if __name__ == "__main__":
    sys.exit(main())
