"""torchvision 0.29 detection models, trained by harness/rivals/torchvision_driver.py.

The driver runs in the framework's own pinned venv (`detbench env build torchvision`)
and prints torchvision's reference MetricLogger line at every iteration with window 1,
so every record is one iteration's exact time.
"""
import os

from harness.envs import EnvSpec
from harness.errors import UserError
from harness.frameworks.base import RUNS_HERE, Framework
from harness.rivals import settings as rival_settings

DRIVER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "rivals", "torchvision_driver.py")
MODELS = {"retinanet": "retinanet_resnet50_fpn", "faster_rcnn": "fasterrcnn_resnet50_fpn",
          "mask_rcnn": "maskrcnn_resnet50_fpn"}
PINS = {"torch": "2.14.1", "torchvision": "0.29.1", "numpy": "2.4.6", "pillow": "13.0.0"}
ENV = EnvSpec(framework="torchvision", pins=PINS)
OPTIONS = ("workers", "norm", "trainable_layers", "lr", "flip", "rpn_post_nms_train")


def _options(ctx):
    opts = dict(ctx.options)
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise UserError("torchvision: unknown options %s (known: %s)" % (", ".join(unknown), ", ".join(OPTIONS)))
    return {"workers": int(opts.get("workers", 0)), "norm": str(opts.get("norm", "frozen_bn")),
            "trainable_layers": int(opts.get("trainable_layers", 3)), "lr": float(opts.get("lr", 0.0025)),
            "flip": bool(opts.get("flip", True)),
            "rpn_post_nms_train": int(opts.get("rpn_post_nms_train", 2000))}


def command(ctx):
    if ctx.gpus * ctx.nodes != 1:
        raise UserError("torchvision driver trains on one device only (got %d GPUs x %d nodes)"
                        % (ctx.gpus, ctx.nodes))
    o = _options(ctx)
    argv = [ctx.python, DRIVER, "--model", ctx.model, "--iterations", str(ctx.iterations),
            "--batch-size", str(ctx.batch_per_gpu), "--input-size", "%dx%d" % tuple(ctx.input_size),
            "--precision", ctx.precision, "--workers", str(o["workers"]), "--norm", o["norm"],
            "--trainable-layers", str(o["trainable_layers"]), "--lr", repr(o["lr"]),
            "--rpn-post-nms-train", str(o["rpn_post_nms_train"]), "--seed", str(ctx.seed),
            "--print-freq", "1"]
    if not o["flip"]:
        argv.append("--no-flip")
    if ctx.data:
        argv += ["--data", ctx.data["annotations"], "--images", ctx.data["images"]]
    return argv + list(ctx.extra_args)


def settings(ctx):
    o = _options(ctx)
    return rival_settings.common(ctx, frozen_stages=4 - o["trainable_layers"], norm=o["norm"],
                                 loader_workers=o["workers"], flip=o["flip"],
                                 rpn_post_nms_train=o["rpn_post_nms_train"])


FRAMEWORK = Framework(
    name="torchvision", title="torchvision", scraper="torchvision-ref",
    models=frozenset(MODELS), precisions=frozenset({"fp32", "tf32", "fp16", "bf16"}),
    status=RUNS_HERE, why="pinned venv (torch 2.14.1, torchvision 0.29.1); one device; fp16 needs CUDA",
    figures="per iteration, exact (MetricLogger window 1, print freq 1; CUDA synchronized)",
    command=command, settings=settings, pins=PINS, scrape_options={"window": 1}, env=ENV)
