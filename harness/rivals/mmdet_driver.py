"""Run mmdetection 3.x's own tools/train.py on a small config that inherits a model config.

Runs inside the mmdetection framework's pinned env. It writes, into a fresh work
directory, a config whose ``_base_`` is the installed model config (``mmdet::...``)
and which changes only what a benchmark must: the COCO files to read, the input size,
images per GPU, loader workers, an iteration-based loop of exactly N iterations, no
validation or checkpoints, no pretrained download, and logging of EVERY iteration with
a window of 1 (so the printed time is that iteration's own). Then it executes the
train.py that ships in the mmdet wheel (mmdet/.mim/tools/train.py) as ``__main__``.
"""
import argparse
import importlib.util
import os
import runpy
import shutil
import sys
import tempfile

BASES = {
    "retinanet": "mmdet::retinanet/retinanet_r50_fpn_1x_coco.py",
    "faster_rcnn": "mmdet::faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py",
    "mask_rcnn": "mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py",
}

TEMPLATE = """\
_base_ = {base!r}
model = dict(backbone=dict(init_cfg=None){rpn})
data_root = ''
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask={masks}),
    dict(type='Resize', scale=({width}, {height}), keep_ratio=True),
    dict(type='RandomFlip', prob={flip}),
    dict(type='PackDetInputs'),
]
train_dataloader = dict(
    batch_size={batch}, num_workers={workers}, persistent_workers={persistent},
    dataset=dict(data_root='', ann_file={ann!r}, data_prefix=dict(img={images!r}),
                 pipeline=train_pipeline))
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters={iters}, val_interval={never})
val_dataloader = None
val_evaluator = None
val_cfg = None
test_dataloader = None
test_evaluator = None
test_cfg = None
param_scheduler = [dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=500)]
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=1),
    checkpoint=dict(type='CheckpointHook', interval={never}, by_epoch=False, save_last=False))
log_processor = dict(type='LogProcessor', window_size=1, by_epoch=False)
randomness = dict(seed={seed})
"""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(BASES), required=True)
    p.add_argument("--iterations", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--input-size", default="800x1333", help="HxW the Resize step scales to")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--ann", required=True, help="COCO instances JSON")
    p.add_argument("--images", required=True, help="image folder")
    p.add_argument("--amp", action="store_true", help="mixed precision (train.py --amp)")
    p.add_argument("--no-flip", dest="flip", action="store_false")
    p.add_argument("--rpn-post-nms-train", type=int, default=None,
                   help="proposals kept per image in training (config default: 1000)")
    p.add_argument("--launcher", default="none", choices=["none", "pytorch"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep-work-dir", action="store_true")
    return p.parse_args(argv)


def write_config(args, path):
    height, width = (int(v) for v in args.input_size.lower().split("x"))
    rpn = ""
    if args.rpn_post_nms_train and args.model != "retinanet":
        rpn = ", train_cfg=dict(rpn_proposal=dict(max_per_img=%d))" % args.rpn_post_nms_train
    text = TEMPLATE.format(
        base=BASES[args.model], rpn=rpn, masks=args.model == "mask_rcnn", width=width, height=height,
        flip=0.5 if args.flip else 0.0, batch=args.batch_size, workers=args.workers,
        persistent=args.workers > 0, ann=os.path.abspath(args.ann),
        images=os.path.join(os.path.abspath(args.images), ""), iters=args.iterations,
        never=10 ** 9, seed=args.seed)
    with open(path, "w") as f:
        f.write(text)


def train_script():
    spec = importlib.util.find_spec("mmdet")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("mmdet is not installed in this env (%s)" % sys.executable)
    path = os.path.join(list(spec.submodule_search_locations)[0], ".mim", "tools", "train.py")
    if not os.path.isfile(path):
        raise SystemExit("mmdet's tools/train.py not found at %s" % path)
    return path


def main(argv=None):
    args = parse_args(argv)
    script = train_script()
    work = tempfile.mkdtemp(prefix="detbench-mmdet-")
    try:
        config = os.path.join(work, "detbench_%s.py" % args.model)
        write_config(args, config)
        sys.argv = [script, config, "--work-dir", os.path.join(work, "work"), "--launcher", args.launcher]
        if args.amp:
            sys.argv.append("--amp")
        print("detbench: running %s %s" % (script, " ".join(sys.argv[1:])), flush=True)
        sys.path.insert(0, os.path.dirname(script))
        runpy.run_path(script, run_name="__main__")
    finally:
        if not args.keep_work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
