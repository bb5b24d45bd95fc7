"""tensorpack's examples/FasterRCNN at d71184c41e62 (2019-08-31), the SimpleDet paper's d71184.

(The paper prints d71184 under mmdetection and cda5fd under tensorpack; d71184 is this
tensorpack commit: see reports/published/simpledet-paper.yaml.) TensorFlow 1.14, Python 3.6.

upstream's launch: ``python examples/FasterRCNN/train.py --config KEY=VALUE ...`` (config.py's
keys; values other than strings are Python literals). detbench passes MODE_MASK (Mask R-CNN or
Faster R-CNN), MODE_FPN=True (the R50-FPN models), TRAIN.NUM_GPUS, BACKBONE.WEIGHTS '' (random
weights; or the mounted .npz options.weights names: nothing is downloaded), DATA.BASEDIR and
DATA.TRAIN, TRAIN.EVAL_PERIOD=0 (no COCO evaluation), --logdir in the trial folder, and a
schedule of STEPS_PER_EPOCH-step epochs that ends after the first epoch at or past the
window's end: train.py runs LR_SCHEDULE[-1] * 8 / NUM_GPUS // STEPS_PER_EPOCH epochs, so
TRAIN.LR_SCHEDULE is [L, L, L] with that quotient equal to the epochs wanted (its learning-rate
decays then fall after the last epoch), and TRAIN.CHECKPOINT_PERIOD lies past it (train.py
still saves the model once the last epoch ends). Extra arguments join --config as KEY=VALUE.

Data: COCO under DATA.BASEDIR as train2017/ and annotations/instances_train2017.json (the
registry's coco_train2017); DATA.BASEDIR is the coco/ folder of the trial's working
directory, where detbench links the scenario's files under those names.

One image per GPU (NOTES.md: only a single image per GPU is supported): batch_per_gpu must be
1. No mixed precision at this commit: fp32 only. No RetinaNet in the example (Faster and Mask
R-CNN, C4 or FPN, and Cascade R-CNN). config.finalize_configs refuses a visible GPU count that
is neither a divisor nor a multiple of 8, so the cell's GPUs must be 1, 2, 4 or a multiple of 8.
One node only (the replicated trainer; multi-node needs its Horovod trainer).
With the example's fixed 800-pixel short side cuDNN autotuning stays on, and NOTES.md says the
speed then climbs for about 10k steps: give TF_CUDNN_USE_AUTOTUNE=0 in the scenario's env for
short trials.

Log: ThroughputTracker (samples_per_step = NUM_GPUS) prints images/s over each whole epoch
when it ends, 5 significant digits: records are THROUGHPUT over STEPS_PER_EPOCH iterations.
"""
from harness.errors import UserError
from harness.frameworks.base import (CONTAINER_ONLY, TRIAL_DIR, WORKDIR as TRIAL_WORKDIR, Framework,
                                     ImageRecipe)
from harness.frameworks import initial
from harness.frameworks import settings as normalized

MODELS = ("faster_rcnn", "mask_rcnn")
COMMIT = "d71184c41e622ba68d7028bc9d7e6c7fee2be8e2"   # 2019-08-31, "fix #1312"
PINS = {"tensorpack": COMMIT + " (library and example from one checkout; 0.9.7.1)",
        "tensorflow-gpu": "1.14.0", "python": "3.6"}
WORKDIR = "/opt/tensorpack"
STEPS_PER_EPOCH = 10
BASE_LR, WARMUP_ITERS, WARMUP_FACTOR = 0.01, 1000, 0.33   # config.py: TRAIN.BASE_LR, WARMUP, WARMUP_INIT_LR / BASE_LR
TRAIN_SET = "coco_train2017"      # dataset/coco.py: BASEDIR/train2017 + BASEDIR/annotations/instances_train2017.json
TRAIN_IMAGES = "coco/train2017"
TRAIN_ANNOTATIONS = "coco/annotations/instances_train2017.json"
OPTIONS = ("weights",)


def epochs(ctx):
    """Whole epochs that cover warmup + measured iterations."""
    return -(-ctx.iterations // STEPS_PER_EPOCH)


def schedule_end(ctx):
    """LR_SCHEDULE's last entry for which train.py runs epochs(ctx) epochs (a multiple of 1/8,
    so the float arithmetic of train.py is exact)."""
    value = epochs(ctx) * STEPS_PER_EPOCH * ctx.gpus / 8.0
    return repr(int(value)) if value == int(value) else repr(value)


def check(ctx):
    initial.options(ctx, OPTIONS)
    initial.one_node(ctx)
    initial.coco_only(ctx)
    if ctx.precision != "fp32":
        raise UserError("%s: trains in fp32 only (no mixed precision at %s), got %s"
                        % (ctx.framework, COMMIT[:12], ctx.precision))
    if ctx.batch_per_gpu != 1:
        raise UserError("%s: its FasterRCNN example trains one image per GPU; batch_per_gpu must be 1, got %d"
                        % (ctx.framework, ctx.batch_per_gpu))
    if 8 % ctx.gpus and ctx.gpus % 8:
        raise UserError("%s: trains on 1, 2, 4 or a multiple of 8 GPUs (config.finalize_configs), got %d"
                        % (ctx.framework, ctx.gpus))


def command(ctx):
    check(ctx)
    end = schedule_end(ctx)
    config = ["MODE_MASK=%s" % (ctx.model == "mask_rcnn"), "MODE_FPN=True",
              "DATA.BASEDIR=%s/%s/coco" % (TRIAL_DIR, TRIAL_WORKDIR), "DATA.TRAIN=('%s',)" % TRAIN_SET,
              "TRAIN.NUM_GPUS=%d" % ctx.gpus, "TRAIN.STEPS_PER_EPOCH=%d" % STEPS_PER_EPOCH,
              "TRAIN.LR_SCHEDULE=[%s, %s, %s]" % (end, end, end), "TRAIN.EVAL_PERIOD=0",
              "TRAIN.CHECKPOINT_PERIOD=%d" % (epochs(ctx) + 1), "BACKBONE.WEIGHTS=%s" % (initial.weights(ctx) or "")]
    return [ctx.python, WORKDIR + "/examples/FasterRCNN/train.py", "--logdir", TRIAL_DIR + "/train_log",
            "--config"] + config + list(ctx.extra_args)


def links(ctx):
    initial.coco_only(ctx)
    return {TRAIN_IMAGES: ctx.data["images"], TRAIN_ANNOTATIONS: ctx.data["annotations"]}


def settings(ctx):
    # config.py: TRAIN_SHORT_EDGE_SIZE [800, 800], MAX_SIZE 1333 rounded up to a multiple of 32
    # (1344) by finalize_configs, FREEZE_AT 2 (stem + res2) with FreezeBN, a random horizontal
    # flip, DATA.NUM_WORKERS 10 loader processes shared by the GPUs, 2000 proposals per image
    # after NMS (TRAIN_PER_LEVEL_NMS_TOPK, per level and after merging); train.py keeps BASE_LR
    # 0.01 at any GPU count and warms up linearly over 1000 steps from WARMUP_INIT_LR (0.0033,
    # lowered by 8 / NUM_GPUS beyond 8 GPUs); the image order is reshuffled each pass
    out = normalized.common(ctx, frozen_stages=1, norm="frozen_bn", loader_workers=10, flip=True,
                            rpn_post_nms_train=2000, init=initial.init(ctx))
    out.update(input_size=[800, 1344], data="coco")
    return dict(out, **normalized.schedule(BASE_LR, WARMUP_ITERS, WARMUP_FACTOR * min(8.0 / ctx.gpus, 1.0),
                                           shuffle=True))


FRAMEWORK = Framework(
    name="tensorpack", title="tensorpack", scraper="tensorpack",
    models=frozenset(MODELS), precisions=frozenset({"fp32"}), status=CONTAINER_ONLY,
    why="TensorFlow 1.14 on CUDA 10.0, GPU only: dockerfiles/tensorpack on a GPU host; COCO files from the "
        "scenario; one image per GPU",
    figures="images/s over each %d-iteration epoch (ThroughputTracker, 5 significant digits; epoch-end "
            "callbacks excluded); no iteration or data time" % STEPS_PER_EPOCH,
    command=command, settings=settings, pins=PINS, scrape_options={"steps_per_epoch": STEPS_PER_EPOCH},
    links=links,
    images=(ImageRecipe("tensorpack", "python3"),)
)
