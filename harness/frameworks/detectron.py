"""Detectron (Caffe2, Python 2.7) at 6efa991ae6d3 (2019-08-16), the SimpleDet paper's detectron@6efa99.

upstream's launch: ``python tools/train_net.py --cfg configs/12_2017_baselines/<config>.yaml``
with config overrides appended (key, value pairs). The R-50-FPN 1x configs at this commit are
e2e_faster_rcnn_R-50-FPN_1x, e2e_mask_rcnn_R-50-FPN_1x and retinanet_R-50-FPN_1x. detbench adds
--skip-test (no COCO evaluation after training), NUM_GPUS, TRAIN.IMS_PER_BATCH (images per GPU:
Detectron's minibatch is IMS_PER_BATCH x NUM_GPUS), SOLVER.MAX_ITER (warmup + measured),
SOLVER.BASE_LR scaled linearly from the configs' 16-image batch (GETTING_STARTED.md asks for
the linear scaling rule when the minibatch changes, and the loop stops the run on a NaN
loss), TRAIN.WEIGHTS "" (random weights instead of the configs' https:// ImageNet file,
which assert_and_infer_cfg would download; or the mounted Detectron .pkl options.weights
names), TRAIN.DATASETS and OUTPUT_DIR in the trial folder (the checkout is read-only).
The argv starts with the image's Python 2 (PYTHON2), not ctx.python: the image's python3 only
runs runner.py.

Data: dataset_catalog.py looks for COCO under detectron/datasets/data/coco of the checkout;
dockerfiles/detectron makes that a link to /proc/self/cwd/coco, the coco/ folder of the
folder the trial runs in, where detbench links the scenario's images as coco_train2014 and
its annotations as annotations/instances_train2014.json (the catalog's coco_2014_train).

No mixed precision at this commit (no fp16 or float16 anywhere in its config or ops): fp32
only. One node only: one process drives all of NUM_GPUS on one machine.

Log: training_stats.py prints ``json_stats: {...}`` at 0-based iterations 0, 20, 40, ... and
at the last one; its ``time`` is the iteration timer's mean since its reset after iteration
20 (before it, since iteration 0), so two records give the exact window mean. The records
fall at 1-based iterations 1, 21, 41, ... and at the last (warmup + measured), so a warmup
of 20k + 1 iterations puts the window's start on a record too.
"""
from harness.errors import UserError
from harness.frameworks.base import CONTAINER_ONLY, TRIAL_DIR, Framework, ImageRecipe
from harness.frameworks import initial
from harness.frameworks import settings as normalized

CONFIGS = {"retinanet": "configs/12_2017_baselines/retinanet_R-50-FPN_1x.yaml",
           "faster_rcnn": "configs/12_2017_baselines/e2e_faster_rcnn_R-50-FPN_1x.yaml",
           "mask_rcnn": "configs/12_2017_baselines/e2e_mask_rcnn_R-50-FPN_1x.yaml"}
BASE_LR = {"retinanet": 0.01, "faster_rcnn": 0.02, "mask_rcnn": 0.02}   # the configs', for 8 GPUs x 2 images
CONFIG_BATCH = 16
WARMUP_ITERS, WARMUP_FACTOR = 500, 1.0 / 3.0     # config.py's SOLVER.WARM_UP_* (linear)
COMMIT = "6efa991ae6d3f87abd3b1f475e3b98cbd37d25ca"   # 2019-08-16
PINS = {"detectron": COMMIT, "torch": "1.1.0 (cu100, cp27: Caffe2 and the Detectron ops)", "python": "2.7"}
WORKDIR = "/opt/detectron"
PYTHON2 = "/usr/bin/python2"      # dockerfiles/detectron: Ubuntu 18.04's Python 2.7
TRAIN_SET = "coco_2014_train"     # dataset_catalog: data/coco/coco_train2014 + annotations/instances_train2014.json
TRAIN_IMAGES = "coco/coco_train2014"
TRAIN_ANNOTATIONS = "coco/annotations/instances_train2014.json"
OPTIONS = ("weights",)


def refuse_fp16(ctx):
    if ctx.precision != "fp32":
        raise UserError("%s: trains in fp32 only (no mixed precision at %s), got %s"
                        % (ctx.framework, COMMIT[:12], ctx.precision))


def lr(ctx):
    return BASE_LR[ctx.model] * ctx.batch_per_gpu * ctx.gpus / CONFIG_BATCH


def command(ctx):
    initial.options(ctx, OPTIONS)
    initial.one_node(ctx)
    initial.coco_only(ctx)
    refuse_fp16(ctx)
    argv = [PYTHON2, WORKDIR + "/tools/train_net.py", "--cfg", WORKDIR + "/" + CONFIGS[ctx.model], "--skip-test",
            "NUM_GPUS", str(ctx.gpus), "TRAIN.IMS_PER_BATCH", str(ctx.batch_per_gpu),
            "SOLVER.MAX_ITER", str(ctx.iterations), "SOLVER.BASE_LR", repr(lr(ctx)),
            "TRAIN.WEIGHTS", initial.weights(ctx) or "", "TRAIN.DATASETS", "('%s',)" % TRAIN_SET,
            "OUTPUT_DIR", TRIAL_DIR + "/output"]
    return argv + list(ctx.extra_args)


def links(ctx):
    initial.coco_only(ctx)
    return {TRAIN_IMAGES: ctx.data["images"], TRAIN_ANNOTATIONS: ctx.data["annotations"]}


def settings(ctx):
    # configs and config.py: SCALES (800,) / MAX_SIZE 1333, FREEZE_AT 2 (stem + res2) with
    # AffineChannel in place of BN (fixed statistics and affine), 4 loader threads of the
    # training process (DATA_LOADER.NUM_THREADS, shared by the GPUs), the roidb doubled with
    # flipped copies (TRAIN.USE_FLIPPED). RPN_POST_NMS_TOP_N 2000 keeps the top 2000 proposals of
    # a GPU's whole minibatch (collect_and_distribute_fpn_rpn_proposals.py), so per image it is
    # 2000 / images per GPU
    schedule = normalized.schedule(lr(ctx), WARMUP_ITERS, WARMUP_FACTOR, shuffle=True)
    return dict(normalized.common(ctx, frozen_stages=1, norm="frozen_bn", loader_workers=4, flip=True,
                                  rpn_post_nms_train=2000 // ctx.batch_per_gpu, init=initial.init(ctx)),
                input_size=[800, 1333], data="coco", **schedule)


FRAMEWORK = Framework(
    name="detectron", title="Detectron", scraper="detectron",
    models=frozenset(CONFIGS), precisions=frozenset({"fp32"}), status=CONTAINER_ONLY,
    why="Python 2.7 + Caffe2 with CUDA-only Detectron ops: dockerfiles/detectron on a GPU host; COCO files "
        "from the scenario",
    figures="exact window mean from two running means (time: 6 decimals; since iteration 1, then since 22), "
            "printed at 1-based iterations 1, 21, 41, ... and the last (time includes the wait for data)",
    command=command, settings=settings, pins=PINS, links=links,
    # python3 runs runner.py; the trial itself runs Python 2.7
    images=(ImageRecipe("detectron", "python3"),)
)
