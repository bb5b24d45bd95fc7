"""Run mmdetection 3.x's own tools/train.py on a small config that inherits a model config.

Runs inside the mmdetection framework's pinned env. It writes, into a fresh work
directory, a config whose ``_base_`` is the installed model config (``mmdet::...``)
and which changes only what a benchmark must: the COCO files to read, the input size,
images per GPU, loader workers, an iteration-based loop of exactly N iterations, no
validation or checkpoints, no pretrained download (``--weights FILE`` loads a file of
`detbench weights make` through a hook instead), and logging of EVERY iteration with
a window of 1 (so the printed time is that iteration's own). RetinaNet's FPN takes P6 from
P5 with a ReLU before P7, as in torchvision and the bundled trainer. Then it executes the
train.py that ships in the mmdet wheel (mmdet/.mim/tools/train.py) as ``__main__``.

To do the same work as the other frameworks it also sets: an InfiniteSampler (mmengine's
IterBasedTrainLoop otherwise sleeps 2 s each time the dataset wraps), BN frozen for real
(requires_grad=False, norm_eval=True, frozen_stages=1), the scenario's RPN proposal counts
(default 2000 per level before NMS, 2000 per image after), RoIAlign with sampling_ratio 2 and
aligned=False, smooth L1 (beta 1/9) box losses, and RPN low-quality matches at any IoU. Its
hooks (mmdet_hooks.py) make data_time the wait for the batch only, print one
DETBENCH_WORK line per iteration and, before the first, the DETBENCH_SETTINGS line read from
the merged config and the built model.

For time to accuracy (`detbench accuracy`) the same config takes a ResNet-18 backbone
(``--depth 18``), any number of frozen stages (``--frozen-stages -1``: none), the weight decay,
MultiStepLR steps, and a checkpoint every N iterations and at the end (mmengine's CheckpointHook,
``iter_N.pth`` in ``--checkpoint-dir``, which then is the work directory and is kept) announced
by one ``checkpoint PATH`` line each; ``--resume FILE`` goes on from one with train.py's own
``--resume`` (model, optimizer, schedulers and iteration).
"""
import argparse
import importlib.util
import os
import runpy
import shutil
import sys
import tempfile

try:
    from harness.drivers import common, mmdet_hooks, weights_map      # imported from the harness (tests)
except ImportError:
    import common                               # run as a script in the framework's pinned env
    import mmdet_hooks
    import weights_map

BASES = {
    "retinanet": "mmdet::retinanet/retinanet_r50_fpn_1x_coco.py",
    "faster_rcnn": "mmdet::faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py",
    "mask_rcnn": "mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py",
}

TEMPLATE = """\
_base_ = {base!r}
model = dict(
    backbone=dict(init_cfg=None, frozen_stages={frozen}, norm_cfg=dict(type='BN', requires_grad=False),
                  norm_eval=True{depth}){neck}{heads})
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
    sampler=dict(type='InfiniteSampler', shuffle={shuffle}),
    dataset=dict(data_root='', ann_file={ann!r}, data_prefix=dict(img={images!r}),
                 pipeline=train_pipeline))
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters={iters}, val_interval={never})
val_dataloader = None
val_evaluator = None
val_cfg = None
test_dataloader = None
test_evaluator = None
test_cfg = None
param_scheduler = [dict(type='LinearLR', start_factor={warmup_factor!r}, by_epoch=False, begin=0,
                        end={warmup_iters}){steps}]
default_hooks = dict(
    timer=dict(type={timer!r}),
    logger=dict(type='LoggerHook', interval=1),
    checkpoint=dict(type='CheckpointHook', interval={every}, by_epoch=False, save_last={save_last},
                    max_keep_ckpts=-1))
log_processor = dict(type='LogProcessor', window_size=1, by_epoch=False)
randomness = dict(seed={seed})
"""

# the two-stage detectors' heads and training settings, set like torchvision's and the
# bundled trainer's (RoIAlign, box losses, samplers, proposal counts, RPN matching)
TWO_STAGE = """,
    rpn_head=dict(loss_bbox=dict(type='SmoothL1Loss', beta=1.0 / 9.0, loss_weight=1.0)),
    roi_head=dict(
        bbox_roi_extractor=dict(roi_layer=dict(type='RoIAlign', output_size=7, sampling_ratio={ratio},
                                               aligned={aligned})),
        bbox_head=dict(loss_bbox=dict(type='SmoothL1Loss', beta=1.0 / 9.0, loss_weight=1.0)){mask}),
    train_cfg=dict(
        rpn=dict(assigner=dict(min_pos_iou=0.0), sampler=dict(num=256, pos_fraction=0.5)),
        rpn_proposal=dict(nms_pre={pre}, max_per_img={post}),
        rcnn=dict(sampler=dict(num={roi_batch}, pos_fraction=0.25)))"""
MASK_ROI = """,
        mask_roi_extractor=dict(roi_layer=dict(type='RoIAlign', output_size=14, sampling_ratio={ratio},
                                               aligned={aligned}))"""
ROI_ALIGN_SAMPLING_RATIO = 2
ROI_ALIGN_ALIGNED = False
# the output channels of ResNet's four stages, which the FPN reads, by depth
STAGE_CHANNELS = {18: [64, 128, 256, 512], 50: [256, 512, 1024, 2048]}
CHECKPOINT_HOOK = "DetbenchCheckpointLineHook"


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
    p.add_argument("--rpn-pre-nms-train", type=int, default=2000,
                   help="proposals per level and image before NMS in training (rpn_proposal.nms_pre)")
    p.add_argument("--rpn-post-nms-train", type=int, default=2000,
                   help="proposals kept per image in training (rpn_proposal.max_per_img; "
                        "mmdet's config: 1000)")
    p.add_argument("--roi-batch-per-image", type=int, default=512,
                   help="the box head's sampled RoIs per image (train_cfg.rcnn.sampler.num)")
    p.add_argument("--lr", type=float, default=None, help="SGD learning rate (default: the model config's)")
    p.add_argument("--warmup-iters", type=int, default=500, help="LinearLR warmup iterations")
    p.add_argument("--warmup-factor", type=float, default=0.001, help="LinearLR start factor")
    p.add_argument("--no-shuffle", dest="shuffle", action="store_false",
                   help="take the images in the file's order, cycled")
    p.add_argument("--launcher", default="none", choices=["none", "pytorch"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep-work-dir", action="store_true")
    p.add_argument("--weights", metavar="FILE",
                   help="initial weights made by `detbench weights make` (torchvision's layout, mapped)")
    p.add_argument("--depth", type=int, choices=sorted(STAGE_CHANNELS), default=50, help="ResNet depth")
    p.add_argument("--frozen-stages", type=int, default=1, choices=[-1, 0, 1, 2, 3, 4],
                   help="ResNet stages kept frozen (mmdet's frozen_stages; -1: none, 0: the stem)")
    common.add_accuracy_flags(p, weight_decay=None)     # None: the config's
    return common.checked_accuracy_flags(p, p.parse_args(argv))


def write_config(args, path):
    height, width = (int(v) for v in args.input_size.lower().split("x"))
    heads = ""
    if args.model != "retinanet":
        roi = dict(ratio=ROI_ALIGN_SAMPLING_RATIO, aligned=ROI_ALIGN_ALIGNED)
        heads = TWO_STAGE.format(pre=args.rpn_pre_nms_train, post=args.rpn_post_nms_train,
                                 roi_batch=args.roi_batch_per_image,
                                 mask=MASK_ROI.format(**roi) if args.model == "mask_rcnn" else "", **roi)
    # RetinaNet's P6 from the P5 output (not C5) and a ReLU before P7, as torchvision and the
    # bundled trainer build it: the same architecture, so the same weights file fits all three
    neck = []
    if args.model == "retinanet":
        neck += ["add_extra_convs='on_output'", "relu_before_extra_convs=True"]
    if args.depth != 50:
        neck.append("in_channels=%r" % STAGE_CHANNELS[args.depth])
    neck = ", neck=dict(%s)" % ", ".join(neck) if neck else ""
    steps = (",\n    dict(type='MultiStepLR', by_epoch=False, begin=0, end=%d, milestones=%r, gamma=%r)"
             % (args.iterations, list(args.lr_steps), args.gamma) if args.lr_steps else "")
    text = TEMPLATE.format(
        base=BASES[args.model], heads=heads, neck=neck, frozen=args.frozen_stages,
        depth=", depth=%d" % args.depth if args.depth != 50 else "", steps=steps,
        every=args.checkpoint_every or 10 ** 9, save_last=bool(args.checkpoint_every),
        masks=args.model == "mask_rcnn", width=width,
        height=height, timer=mmdet_hooks.TIMER_HOOK, shuffle=args.shuffle,
        warmup_factor=args.warmup_factor if args.warmup_iters > 0 else 1.0, warmup_iters=max(args.warmup_iters, 1),
        flip=0.5 if args.flip else 0.0, batch=args.batch_size, workers=args.workers,
        persistent=args.workers > 0, ann=os.path.abspath(args.ann),
        images=os.path.join(os.path.abspath(args.images), ""), iters=args.iterations,
        never=10 ** 9, seed=args.seed)
    optimizer = {}
    if args.lr is not None:
        optimizer["lr"] = args.lr
    if args.weight_decay is not None:
        optimizer["weight_decay"] = args.weight_decay
    wrapper = {"optimizer": optimizer} if optimizer else {}
    if getattr(args, "clip_grad_norm", 0):     # mmengine's OptimWrapper clips the total L2 norm before each step
        wrapper["clip_grad"] = {"max_norm": args.clip_grad_norm, "norm_type": 2}
    if wrapper:
        text += "optim_wrapper = %r\n" % wrapper
    hooks = [dict(type=mmdet_hooks.WORK_HOOK)]
    if args.checkpoint_every:
        hooks.append(dict(type=CHECKPOINT_HOOK, every=args.checkpoint_every))
    if args.weights and not args.resume:
        hooks.append(dict(type=WEIGHTS_HOOK, path=os.path.abspath(args.weights), model=args.model))
    text += "custom_hooks = %r\n" % hooks
    with open(path, "w") as f:
        f.write(text)


WEIGHTS_HOOK = mmdet_hooks.WEIGHTS_HOOK


def register_weights_hook():
    """A hook that loads the weights file into the model before the first iteration.

    It runs after mmengine's own initialisation and checkpoint loading (before_train), maps
    torchvision's names to mmdet's and loads strictly: a file that does not fit stops the
    trial with one line (WeightsError, caught in main)."""
    from mmengine.hooks import Hook
    from mmengine.model import is_model_wrapper
    from mmengine.registry import HOOKS

    class DetbenchWeightsHook(Hook):
        priority = "VERY_HIGH"

        def __init__(self, path, model):
            self.path, self.model = path, model

        def before_train(self, runner):
            net = runner.model.module if is_model_wrapper(runner.model) else runner.model
            count = weights_map.load(net, self.path, self.model, "mmdetection")
            print("loaded weights %s: %d tensors" % (self.path, count), flush=True)

    HOOKS.register_module(name=WEIGHTS_HOOK, module=DetbenchWeightsHook, force=True)


def register_checkpoint_hook():
    """A hook that prints `checkpoint PATH` for each checkpoint mmengine's CheckpointHook writes:
    it runs after that hook (lowest priority) in the same after_train_iter, on the iterations it
    saves at (every N-th and the last), and names the file only once it is there."""
    from mmengine.hooks import Hook
    from mmengine.registry import HOOKS

    class DetbenchCheckpointLineHook(Hook):
        priority = "LOWEST"

        def __init__(self, every):
            self.every = every

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            done = runner.iter + 1
            if done % self.every and done != runner.max_iters:
                return
            path = os.path.join(runner.work_dir, "iter_%d.pth" % done)
            if os.path.isfile(path):
                print("checkpoint %s" % path, flush=True)

    HOOKS.register_module(name=CHECKPOINT_HOOK, module=DetbenchCheckpointLineHook, force=True)


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
    work_dir = os.path.abspath(args.checkpoint_dir) if args.checkpoint_dir else os.path.join(work, "work")
    try:
        config = os.path.join(work, "detbench_%s.py" % args.model)
        write_config(args, config)
        sys.argv = [script, config, "--work-dir", work_dir, "--launcher", args.launcher]
        if args.amp:
            sys.argv.append("--amp")
        if args.resume:
            sys.argv += ["--resume", os.path.abspath(args.resume)]
            # mmengine's resume loads with torch.load's default, weights_only since torch 2.6, which
            # refuses the log history its checkpoints hold; the file is this trial's own
            os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
        print("detbench: running %s %s" % (script, " ".join(sys.argv[1:])), flush=True)
        sys.path.insert(0, os.path.dirname(script))
        mmdet_hooks.register()
        if args.weights and not args.resume:      # a resumed run's weights come from its checkpoint
            register_weights_hook()
        if args.checkpoint_every:
            register_checkpoint_hook()
        try:
            runpy.run_path(script, run_name="__main__")
        except weights_map.WeightsError as exc:
            print("error: %s" % exc, file=sys.stderr, flush=True)
            return 2
    finally:
        if not args.keep_work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
