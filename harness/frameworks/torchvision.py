"""torchvision 0.29 detection models, trained by its reference recipe (references/detection).

Where that recipe's scripts at the pinned tag are not on the machine, harness/drivers/
torchvision_driver.py runs detbench's replica of them in the framework's own pinned venv
(`detbench env build torchvision`): the reference's sampler, per-draw flips, aspect-ratio
grouping, SGD, warmup and step schedule, and its MetricLogger line at every iteration with
window 1, so every record is one iteration's exact time. The scenario's `warmup_iters` or
`warmup_factor` replace the reference's warmup (`--schedule declared`); `flip: false` and
`shuffle: false` depart from it too; the settings line names each.
"""
import os

from harness.vocab.pins import TELEMETRY, EnvSpec
from harness.errors import UserError
from harness.frameworks.base import IMAGE_VENV, RUNS_HERE, Framework, ImageRecipe, infer_args
from harness.frameworks import settings as normalized

DRIVER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "drivers", "torchvision_driver.py")
INFER_DRIVER = os.path.join(os.path.dirname(DRIVER), "torchvision_infer.py")
MODELS = {"retinanet": "retinanet_resnet50_fpn", "faster_rcnn": "fasterrcnn_resnet50_fpn",
          "mask_rcnn": "maskrcnn_resnet50_fpn"}
PINS = {"torch": "2.14.1", "torchvision": "0.29.1", "numpy": "2.4.6", "pillow": "13.0.0", "pycocotools": "2.0.11"}
ENV = EnvSpec(framework="torchvision", pins=dict(PINS, **TELEMETRY))
OPTIONS = ("workers", "norm", "trainable_layers", "lr", "warmup_iters", "warmup_factor", "flip", "shuffle",
           "rpn_pre_nms_train", "rpn_post_nms_train")


def _options(ctx):
    opts = dict(ctx.options)
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise UserError("torchvision: unknown options %s (known: %s)" % (", ".join(unknown), ", ".join(OPTIONS)))
    return {"workers": int(opts.get("workers", 0)), "norm": str(opts.get("norm", "frozen_bn")),
            "trainable_layers": int(opts.get("trainable_layers", 3)), "lr": float(opts.get("lr", 0.0025)),
            "warmup_iters": int(opts.get("warmup_iters", 0)),
            "warmup_factor": float(opts.get("warmup_factor", 1.0 / 3)),
            "flip": bool(opts.get("flip", True)), "shuffle": bool(opts.get("shuffle", True)),
            "declared_schedule": "warmup_iters" in opts or "warmup_factor" in opts,
            "rpn_pre_nms_train": int(opts.get("rpn_pre_nms_train", normalized.RPN_PRE_NMS_TRAIN)),
            "rpn_post_nms_train": int(opts.get("rpn_post_nms_train", normalized.RPN_POST_NMS_TRAIN))}


def command(ctx):
    if ctx.gpus * ctx.nodes != 1:
        raise UserError("torchvision driver trains on one device only (got %d GPUs x %d nodes)"
                        % (ctx.gpus, ctx.nodes))
    o = _options(ctx)
    argv = [ctx.python, DRIVER, "--model", ctx.model, "--iterations", str(ctx.iterations),
            "--batch-size", str(ctx.batch_per_gpu), "--input-size", "%dx%d" % tuple(ctx.input_size),
            "--precision", ctx.precision, "--workers", str(o["workers"]), "--norm", o["norm"],
            "--trainable-layers", str(o["trainable_layers"]), "--lr", repr(o["lr"]),
            "--warmup-iters", str(o["warmup_iters"]), "--warmup-factor", repr(o["warmup_factor"]),
            "--rpn-pre-nms-train", str(o["rpn_pre_nms_train"]),
            "--rpn-post-nms-train", str(o["rpn_post_nms_train"]), "--seed", str(ctx.seed),
            "--print-freq", "1"]
    if o["declared_schedule"]:   # the scenario's warmup replaces the reference's epoch-0 warmup
        argv += ["--schedule", "declared"]
    if not o["flip"]:
        argv.append("--no-flip")
    if not o["shuffle"]:
        argv.append("--no-shuffle")
    if ctx.weights:
        argv += ["--weights", ctx.weights]
    if ctx.data:
        argv += ["--data", ctx.data["annotations"], "--images", ctx.data["images"]]
    return argv + list(ctx.extra_args)


def settings(ctx):
    o = _options(ctx)
    if not o["declared_schedule"]:
        # the reference's warmup from 1/1000 over min(1000, batches per epoch - 1) iterations and its
        # MultiStepLR at epochs 16 and 22; synthetic data is one epoch of the run's iterations
        per_epoch = ctx.iterations if not ctx.data else None
        o = dict(o, warmup_factor=0.001, warmup_iters=min(1000, per_epoch - 1) if per_epoch else 0)
    # torchvision's own defaults for the samplers (256 at 0.5, 512 at 0.25), MultiScaleRoIAlign
    # (sampling_ratio=2, aligned=False), its smooth L1 (beta 1/9) in both stages, no mask RoI cap
    # of its own, and RetinaNet's L1 box loss with P6/P7 from P5 (LastLevelP6P7(256, 256))
    out = normalized.driven(ctx, o, frozen_stages=4 - o["trainable_layers"], norm=o["norm"])
    if not o["declared_schedule"] and ctx.data:
        # its length follows the data set's, which the driver reads when the trial runs: not declared
        del out["warmup"]
    return out


def infer(ctx):
    """harness/drivers/torchvision_infer.py: torchvision's model, transform and post-processing in eval mode."""
    if ctx.gpus * ctx.nodes != 1:
        raise UserError("torchvision inference runs on one device only")
    _options(ctx)     # the scenario's torchvision options are still checked; none changes inference
    return [ctx.python, INFER_DRIVER] + infer_args(ctx) + list(ctx.extra_args)


def infer_settings(ctx):
    return normalized.inference(
        ctx, rpn_pre_nms_test=normalized.RPN_PRE_NMS_TEST, rpn_post_nms_test=normalized.RPN_POST_NMS_TEST,
        candidates_per_level=normalized.RETINANET_CANDIDATES, mask_threshold=normalized.MASK_THRESHOLD)


FRAMEWORK = Framework(
    name="torchvision", title="torchvision", scraper="torchvision-ref",
    models=frozenset(MODELS), precisions=frozenset({"fp32", "tf32", "fp16", "bf16"}),
    status=RUNS_HERE, why="pinned venv (torch 2.14.1, torchvision 0.29.1); references/detection of v0.29.1 where "
                          "its archive was given to `detbench env build torchvision` (DETBENCH_TORCHVISION_SOURCE), "
                          "else detbench's replica of it; one device; fp16 needs CUDA",
    figures="exact per iteration: time from the end of the previous iteration to the end of this one "
            "(MetricLogger window 1, print freq 1; CUDA synchronized), data time the wait for the batch",
    command=command, settings=settings, pins=PINS, scrape_options={"window": 1}, env=ENV,
    infer=infer, infer_models=frozenset(MODELS), infer_precisions=frozenset({"fp32", "tf32", "fp16", "bf16"}),
    infer_settings=infer_settings,
    infer_why="torchvision_infer.py: its transform, model and postprocess_detections in eval mode; "
              "fp16 and tf32 need CUDA",
    # the trainer's image: its closure, line for line
    images=(ImageRecipe("torchvision", IMAGE_VENV, base_recipe="detbench-trainer"),)
)
