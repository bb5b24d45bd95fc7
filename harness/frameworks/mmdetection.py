"""mmdetection 3.3.0 (mmengine 0.10.7, mmcv 2.1.0), run through its own tools/train.py.

harness/drivers/mmdet_driver.py writes a small config inheriting the model config of the
installed mmdet and executes the train.py that ships in the mmdet wheel. It logs every
iteration with LogProcessor window_size=1, so each ``time:`` is that iteration's own
(the scraper is told window=1). mmcv 2.1.0 has no wheel for torch 2.14: `detbench env
build mmdetection` compiles its sdist once with -std=c++20 and caches the wheel.
Reads COCO files only (make some with `detbench dataset make-coco`). The driver sets the
detection work equal to the bundled trainer's and torchvision's (docs/methodology.md):
frozen BN, proposal counts, samplers, RoIAlign, box losses, an infinite sampler.
"""
import os

from harness.vocab.pins import TELEMETRY, EnvSpec, SourceBuild
from harness.errors import UserError
from harness.frameworks.base import IMAGE_VENV, RUNS_HERE, Framework, ImageRecipe, infer_args
from harness.frameworks import initial
from harness.frameworks import settings as normalized

DRIVER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "drivers", "mmdet_driver.py")
MODELS = ("retinanet", "faster_rcnn", "mask_rcnn")
TORCH = {"torch": "2.14.1", "torchvision": "0.29.1"}
PINS = dict(TORCH, **{
    "mmengine": "0.10.7", "mmdet": "3.3.0", "numpy": "2.4.6", "opencv-python": "4.11.0.86",
    "pycocotools": "2.0.11", "scipy": "1.17.1", "shapely": "2.1.2", "matplotlib": "3.10.8",
    "pillow": "13.0.0", "addict": "2.4.0", "yapf": "0.43.0", "packaging": "25.0",
    "pyyaml": "6.0.3", "terminaltables": "3.1.10", "tqdm": "4.67.1", "six": "1.17.0",
    "rich": "14.0.0", "termcolor": "3.1.0"})
MMCV = SourceBuild(name="mmcv", version="2.1.0",
                   build_pins=tuple("%s==%s" % kv for kv in sorted(TORCH.items())),
                   cxx_std="c++20", env=(("MMCV_WITH_OPS", "1"),))
# setuptools < 81 still ships pkg_resources, which mmcv's setup.py imports
TOOLS = {"setuptools": "80.9.0", "wheel": "0.45.1", "ninja": "1.11.1.4"}
ENV = EnvSpec(framework="mmdetection", pins=dict(PINS, **TELEMETRY), source_builds=(MMCV,), tools=TOOLS)
OPTIONS = ("workers", "flip", "shuffle", "lr", "warmup_iters", "warmup_factor", "rpn_pre_nms_train",
           "rpn_post_nms_train")
CONFIG_LR = {"retinanet": 0.01, "faster_rcnn": 0.02, "mask_rcnn": 0.02}   # mmdet 3.3.0's 1x configs


# harness/drivers/mmdet_driver.py's options (tests/frameworks/test_extra_options.py holds them to its parser)
FLAGS = frozenset((
    "-h", "--help", "--model", "--iterations", "--batch-size", "--input-size", "--workers", "--ann", "--images",
    "--amp", "--no-flip", "--rpn-pre-nms-train", "--rpn-post-nms-train", "--roi-batch-per-image", "--lr",
    "--warmup-iters", "--warmup-factor", "--no-shuffle", "--launcher", "--seed", "--keep-work-dir", "--weights",
    "--depth", "--frozen-stages", "--lr-steps", "--gamma", "--weight-decay", "--clip-grad-norm",
    "--checkpoint-every", "--checkpoint-dir", "--resume"))


def _options(ctx):
    opts = dict(ctx.options)
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise UserError("mmdetection: unknown options %s (known: %s)" % (", ".join(unknown), ", ".join(OPTIONS)))
    return {"workers": int(opts.get("workers", 2)), "flip": bool(opts.get("flip", True)),
            "shuffle": bool(opts.get("shuffle", True)),
            "lr": float(opts.get("lr", CONFIG_LR[ctx.model])),
            "warmup_iters": int(opts.get("warmup_iters", 500)),      # the driver's LinearLR
            "warmup_factor": float(opts.get("warmup_factor", 0.001)),
            # mmdet's configs keep 1000 proposals after NMS; the driver takes the shared 2000
            "rpn_pre_nms_train": int(opts.get("rpn_pre_nms_train", normalized.RPN_PRE_NMS_TRAIN)),
            "rpn_post_nms_train": int(opts.get("rpn_post_nms_train", normalized.RPN_POST_NMS_TRAIN))}


def command(ctx):
    initial.coco_only(ctx)
    o = _options(ctx)
    world = ctx.gpus * ctx.nodes
    train = [DRIVER, "--model", ctx.model, "--iterations", str(ctx.iterations),
             "--batch-size", str(ctx.batch_per_gpu), "--input-size", "%dx%d" % tuple(ctx.input_size),
             "--workers", str(o["workers"]), "--ann", ctx.data["annotations"],
             "--images", ctx.data["images"], "--seed", str(ctx.seed), "--lr", repr(o["lr"]),
             "--warmup-iters", str(o["warmup_iters"]), "--warmup-factor", repr(o["warmup_factor"])]
    if ctx.model != "retinanet":
        train += ["--rpn-pre-nms-train", str(o["rpn_pre_nms_train"]),
                  "--rpn-post-nms-train", str(o["rpn_post_nms_train"])]
    if ctx.precision == "fp16":
        train.append("--amp")
    if not o["flip"]:
        train.append("--no-flip")
    if not o["shuffle"]:
        train.append("--no-shuffle")
    if ctx.weights:
        train += ["--weights", ctx.weights]
    if world == 1:
        return [ctx.python] + train + list(ctx.extra_args)
    # what tools/dist_train.sh does: one process per GPU through torch's launcher
    launch = [ctx.python, "-m", "torch.distributed.run", "--nproc_per_node", str(ctx.gpus)]
    launch += ["--nnodes", str(ctx.nodes)] if ctx.nodes > 1 else ["--standalone"]
    return launch + train + ["--launcher", "pytorch"] + list(ctx.extra_args)


def settings(ctx):
    o = _options(ctx)
    # the driver's config: frozen_stages=1, BN with requires_grad=False and norm_eval=True, the
    # samplers of mmdet's configs (256 at 0.5, 512 at 0.25), RoIAlign 2 / aligned=False, smooth L1
    # (beta 1/9) in both stages, no mask RoI cap of its own; RetinaNet: L1, P6 from P5 ('on_output')
    return normalized.driven(ctx, o)


INFER_DRIVER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "drivers", "mmdet_infer.py")


def infer(ctx):
    """harness/drivers/mmdet_infer.py: mmdetection's data preprocessor, model and predict_by_feat in eval mode."""
    if ctx.gpus * ctx.nodes != 1:
        raise UserError("mmdetection inference runs on one device only")
    return [ctx.python, INFER_DRIVER] + infer_args(ctx) + list(ctx.extra_args)


def infer_settings(ctx):
    return normalized.inference(
        ctx, rpn_pre_nms_test=normalized.RPN_PRE_NMS_TEST, rpn_post_nms_test=normalized.RPN_POST_NMS_TEST,
        candidates_per_level=normalized.RETINANET_CANDIDATES, mask_threshold=normalized.MASK_THRESHOLD)


FRAMEWORK = Framework(
    name="mmdetection", title="mmdetection", scraper="mmdet-v3",
    models=frozenset(MODELS), precisions=frozenset({"fp32", "fp16"}), status=RUNS_HERE,
    why="pinned venv with mmcv 2.1.0 built from source (C++20); COCO files only; fp16 needs CUDA",
    figures="exact per iteration: mmengine's IterTimerHook time runs from the end of the previous "
            "iteration to the end of this one (LoggerHook interval 1, LogProcessor window 1; synchronized "
            "by the loss readback); data time the wait for the batch (the driver's timer hook)",
    command=command, settings=settings, pins=PINS, scrape_options={"window": 1}, env=ENV,
    infer=infer, infer_models=frozenset(MODELS), infer_precisions=frozenset({"fp32", "fp16", "tf32"}),
    infer_settings=infer_settings,
    infer_why="mmdet_infer.py: its data preprocessor, model and predict_by_feat in eval mode; no bf16 "
              "(mmcv 2.1.0's RoIAlign has no bf16 kernel); fp16 and tf32 need CUDA",
    # mmdetection-cuda compiles mmcv's CUDA ops, for GPU hosts
    images=(ImageRecipe("mmdetection", IMAGE_VENV, wheels=True, base_recipe="torchvision", host_wheels=True),
            ImageRecipe("mmdetection-cuda", IMAGE_VENV)),
    flags=FLAGS,
)
