"""detectron2 at a 0.3-release commit with its CUDA ops, launched through its tools/train_net.py,
for GPU hosts (framework ``detectron2-cuda``; ``detectron2`` is the current commit on this CPU).

The pinned commit is one whose detectron2/__init__.py reads __version__ = "0.3" (checked
in a public source index); the hash of a newer release tag could not be verified offline.

upstream's documented command: ``tools/train_net.py --config-file configs/COCO-Detection/
<model>.yaml --num-gpus N`` with config overrides appended. detbench sets SOLVER.MAX_ITER,
SOLVER.IMS_PER_BATCH and (fp16) SOLVER.AMP.ENABLED; DATASETS.TEST "()" with TEST.EVAL_PERIOD 0,
so the evaluation hook that runs after the last iteration has no dataset to evaluate;
MODEL.WEIGHTS "" (random weights instead of the configs' detectron2:// ImageNet download, or
the mounted file options.weights names); OUTPUT_DIR in the trial folder (the checkout is
read-only). Data: its builtin catalog reads "datasets/" relative to the folder it runs in (the
trial's working directory), so the scenario's COCO files are linked there as coco_2017_train's
images and annotations, and DATASETS.TRAIN is that one set. The metric printer's period is fixed
at 20; at this commit it prints no ``last_time``: its ``time`` is the mean since iteration 3, and
two such means give the exact window mean.
"""
from harness.frameworks.base import IMAGE_VENV, NEEDS_GPU, TRIAL_DIR, Framework, ImageRecipe
from harness.frameworks import initial
from harness.frameworks import settings as normalized

CONFIGS = {"retinanet": "configs/COCO-Detection/retinanet_R_50_FPN_1x.yaml",
           "faster_rcnn": "configs/COCO-Detection/faster_rcnn_R_50_FPN_1x.yaml",
           "mask_rcnn": "configs/COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml"}
COMMIT = "4841e70ee48da72c32304f9ebf98138c2a70048d"
PINS = {"detectron2": COMMIT, "torch": "1.7.1+cu110", "torchvision": "0.8.2+cu110", "fvcore": "0.1.2.post20201122"}
WORKDIR = "/opt/detectron2"


OPTIONS = ("weights",)
TRAIN_SET = "coco_2017_train"     # data/datasets/builtin.py: under $DETECTRON2_DATASETS, default "datasets"
TRAIN_IMAGES = "datasets/coco/train2017"
TRAIN_ANNOTATIONS = "datasets/coco/annotations/instances_train2017.json"


def command(ctx):
    initial.options(ctx, OPTIONS)
    initial.coco_only(ctx)
    argv = [ctx.python, WORKDIR + "/tools/train_net.py", "--config-file", WORKDIR + "/" + CONFIGS[ctx.model],
            "--num-gpus", str(ctx.gpus)]
    if ctx.nodes > 1:
        argv += ["--num-machines", str(ctx.nodes)]
    argv += ["SOLVER.MAX_ITER", str(ctx.iterations),
             "SOLVER.IMS_PER_BATCH", str(ctx.batch_per_gpu * ctx.gpus * ctx.nodes),
             "INPUT.MIN_SIZE_TRAIN", "(%d,)" % min(ctx.input_size),
             "INPUT.MAX_SIZE_TRAIN", str(max(ctx.input_size)),
             "DATASETS.TRAIN", '("%s",)' % TRAIN_SET, "DATASETS.TEST", "()", "TEST.EVAL_PERIOD", "0",
             "MODEL.WEIGHTS", initial.weights(ctx) or "", "OUTPUT_DIR", TRIAL_DIR + "/output"]
    if ctx.precision == "fp16":
        argv += ["SOLVER.AMP.ENABLED", "True"]
    return argv + list(ctx.extra_args)


def links(ctx):
    initial.coco_only(ctx)
    return {TRAIN_IMAGES: ctx.data["images"], TRAIN_ANNOTATIONS: ctx.data["annotations"]}


def settings(ctx):
    # Base-RCNN-FPN / Base-RetinaNet: FREEZE_AT 2 (stem + res2), FrozenBN, 4 loader workers,
    # flip 0.5, POST_NMS_TOPK_TRAIN 1000
    return normalized.common(ctx, frozen_stages=1, norm="frozen_bn", loader_workers=4, flip=True,
                             rpn_post_nms_train=1000, init=initial.init(ctx))


FRAMEWORK = Framework(
    name="detectron2-cuda", title="detectron2 (CUDA)", scraper="detectron2",
    models=frozenset(CONFIGS), precisions=frozenset({"fp32", "fp16"}), status=NEEDS_GPU,
    why="detectron2 builds CUDA ops and its train_net.py expects a GPU: dockerfiles/detectron2-cuda",
    figures="exact window mean from two running means since iteration 3 (time: 4 decimals, printed every 20 "
            "iterations); hooks after the step count in no iteration; no data time (a 20-iteration window)",
    command=command, settings=settings, pins=PINS, links=links,
    images=(ImageRecipe("detectron2-cuda", IMAGE_VENV),)
)
