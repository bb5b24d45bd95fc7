"""maskrcnn-benchmark at the seed's commit 24c8c9 (PyTorch 1.1, torchvision 0.3.0, apex, Python 3.6).

The seed's launch: torch.distributed.launch over tools/train_net.py with the R-50-FPN 1x
configs, MODEL.RPN.FPN_POST_NMS_TOP_N_TRAIN 2000 for the two-stage models and DTYPE
"float16" for mixed precision (the seed reports RetinaNet fp16 as NA). detbench adds
--skip-test (no COCO evaluation after training), SOLVER.MAX_ITER (warmup + measured),
SOLVER.IMS_PER_BATCH (images per GPU x GPUs), MODEL.WEIGHT "" (random weights instead of the
configs' catalog:// ImageNet download; or the mounted file options.weights names) and
OUTPUT_DIR in the trial folder (checkpoints and last_checkpoint; the checkout is read-only).
Data: its paths_catalog reads "datasets/" relative to the folder it runs in (the trial's working
directory), so the scenario's COCO files are linked there as coco_2014_train's image folder and
annotations, and DATASETS.TRAIN is that one set.
do_train logs every 20 iterations a 20-value median and, in parentheses, the mean since the
start: the scraper keeps the means, and two of them give the exact window mean.
One node only (torch.distributed.launch without a rendezvous across nodes).
"""
from harness.frameworks.base import CONTAINER_ONLY, TRIAL_DIR, Framework, ImageRecipe
from harness.frameworks import initial
from harness.frameworks import settings as normalized

CONFIGS = {"retinanet": "configs/retinanet/retinanet_R-50-FPN_1x.yaml",
           "faster_rcnn": "configs/e2e_faster_rcnn_R_50_FPN_1x.yaml",
           "mask_rcnn": "configs/e2e_mask_rcnn_R_50_FPN_1x.yaml"}
PINS = {"maskrcnn-benchmark": "24c8c90efdb7cc51381af5ce0205b23567c3cd21",
        "apex": "665b2dd7dc9d5129d7541bad612c1d86ba4b6818",   # tools/train_net.py imports apex.amp
        "torch": "1.1.0", "torchvision": "0.3.0", "python": "3.6.8"}
WORKDIR = "/opt/maskrcnn-benchmark"
OPTIONS = ("weights",)
TRAIN_SET = "coco_2014_train"     # paths_catalog: DATA_DIR "datasets", then these two
TRAIN_IMAGES = "datasets/coco/train2014"
TRAIN_ANNOTATIONS = "datasets/coco/annotations/instances_train2014.json"


def command(ctx):
    initial.options(ctx, OPTIONS)
    initial.one_node(ctx)
    initial.coco_only(ctx)
    world = ctx.gpus * ctx.nodes
    argv = [ctx.python, "-m", "torch.distributed.launch", "--nproc_per_node=%d" % ctx.gpus,
            WORKDIR + "/tools/train_net.py", "--config-file", WORKDIR + "/" + CONFIGS[ctx.model],
            "--skip-test"]
    if ctx.model != "retinanet":
        argv += ["MODEL.RPN.FPN_POST_NMS_TOP_N_TRAIN", "2000"]
    if ctx.precision == "fp16":
        argv += ["DTYPE", "float16"]
    argv += ["DATASETS.TRAIN", '("%s",)' % TRAIN_SET, "SOLVER.MAX_ITER", str(ctx.iterations),
             "SOLVER.IMS_PER_BATCH", str(ctx.batch_per_gpu * world),
             "MODEL.WEIGHT", initial.weights(ctx) or "", "OUTPUT_DIR", TRIAL_DIR + "/output"]
    return argv + list(ctx.extra_args)


def links(ctx):
    initial.coco_only(ctx)
    return {TRAIN_IMAGES: ctx.data["images"], TRAIN_ANNOTATIONS: ctx.data["annotations"]}


def settings(ctx):
    # configs: MIN_SIZE_TRAIN 800 / MAX_SIZE_TRAIN 1333, FREEZE_CONV_BODY_AT 2 (stem + res2),
    # FrozenBatchNorm, DATALOADER.NUM_WORKERS 4, flip 0.5
    return dict(normalized.common(ctx, frozen_stages=1, norm="frozen_bn", loader_workers=4,
                                  flip=True, rpn_post_nms_train=2000, init=initial.init(ctx)),
                input_size=[800, 1333], data="coco")


FRAMEWORK = Framework(
    name="maskrcnn-benchmark", title="maskrcnn-benchmark", scraper="maskrcnn-benchmark",
    models=frozenset(CONFIGS), precisions=frozenset({"fp32", "fp16"}), status=CONTAINER_ONLY,
    why="PyTorch 1.1 + CUDA-only ops: dockerfiles/maskrcnn-benchmark on a GPU host; COCO files from the scenario",
    figures="exact window mean from two means since the start (in parentheses, 4 decimals), printed every 20 "
            "iterations (time includes data)",
    command=command, settings=settings, pins=PINS, links=links,
    images=(ImageRecipe("maskrcnn-benchmark", "python3"),)
)
