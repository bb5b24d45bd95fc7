"""rwightman's efficientdet-pytorch (effdet): EfficientDet-D0 training, two ways.

Which one a cell uses is its scenario option ``options.effdet.trainer``:

- ``library`` (the default): harness/drivers/effdet_driver.py trains through the effdet 0.4.1
  library from PyPI (``create_model(..., bench_task="train")``, its transforms, collate and
  anchor labeler, timm's optimizer) in effdet's pinned env (`detbench env build effdet`),
  on the CPU or one CUDA device, at the scenario's input size (sides multiples of 128), in
  fp32, bf16 (torch.autocast; the CPU's mixed precision) or fp16 (CUDA). Random weights, or
  a state dict of the EfficientDet model named by ``options.effdet.weights``. In a container
  it runs in the image of dockerfiles/effdet (the torchvision image plus the effdet library).
- ``upstream``: efficientdet-pytorch's own train.py at COMMIT, documented as
  ``train.py /coco --model efficientdet_d0 -b B --amp ...`` (one process per GPU through
  torch's launcher for several GPUs), in the image of dockerfiles/effdet-upstream (the docker
  backend with ``docker: {images: {effdet: effdet-upstream}}``) with COCO 2017 mounted.
  train.py moves the model to CUDA unconditionally, so this needs a GPU; its input size is
  the model config's 512x512 and its mixed precision is fp16 only. detbench sets
  --log-interval 1 and --output in the trial folder. train.py has no flag to skip timm's
  ImageNet backbone download or to stop before a whole epoch and its evaluation, so
  harness/drivers/effdet_launch.py starts it with random weights and ends it (exit 0) after
  warmup + measured iterations.

Both print train.py's line at every iteration: each value and the mean since the epoch's
start (AverageMeter.avg, 3 decimals); two of them give the exact window mean. The driver
also prints one DETBENCH_WORK line per iteration (positive anchors).
"""
import os
from pathlib import Path

from harness.errors import UserError
from harness.vocab.pins import TELEMETRY, EnvSpec
from harness.frameworks.base import IMAGE_VENV, RUNS_HERE, TRIAL_DIR, Framework, ImageRecipe, infer_args
from harness.frameworks import initial
from harness.frameworks import settings as normalized

COMMIT = "861838fdb4693b2ebc84ac857c1d04285d30120f"
PINS = {"efficientdet-pytorch": COMMIT, "torch": "2.14.1", "torchvision": "0.29.1", "timm": "1.0.15",
        "pycocotools": "2.0.11", "omegaconf": "2.3.0"}
WORKDIR = "/opt/efficientdet-pytorch"
DATA = "/data/coco"               # COCO 2017 layout, mounted into the container
RIVALS = Path(__file__).resolve().parents[1] / "drivers"
LAUNCH = RIVALS / "effdet_launch.py"
DRIVER = RIVALS / "effdet_driver.py"
TRAINERS = ("library", "upstream")
OPTIONS = ("workers", "trainer", "lr", "weights")
SIDE = 128                        # EfficientDet's pyramid (levels 3 to 7): sides are multiples of 128
UPSTREAM_SIZE = [512, 512]        # train.py's input: the model config's image_size
DEFAULT_LR = 0.01                 # train.py's --lr, the driver's constant rate
UPSTREAM_LR = 0.0001              # train.py's --warmup-lr: its rate through the first epoch
# the effdet library from PyPI in a pinned env of its own: training and inference run here, on the CPU too
ENV = EnvSpec(framework="effdet", pins={
    "effdet": "0.4.1", "torch": "2.14.1", "torchvision": "0.29.1", "timm": "1.0.15", "pycocotools": "2.0.11",
    "omegaconf": "2.3.0", "numpy": "2.4.6", "pillow": "13.0.0", **TELEMETRY})


def _options(ctx):
    opts = initial.options(ctx, OPTIONS)
    trainer = opts.get("trainer", "library")
    if trainer not in TRAINERS:
        raise UserError("effdet: options.trainer is one of %s, got %r" % (", ".join(TRAINERS), trainer))
    try:
        workers, lr = int(opts.get("workers", 4)), float(opts.get("lr", DEFAULT_LR))
    except (TypeError, ValueError):
        raise UserError("effdet: options.workers is a whole number and options.lr a number") from None
    if workers < 0 or not lr > 0:
        raise UserError("effdet: options.workers is at least 0 and options.lr above 0")
    return {"trainer": trainer, "workers": workers, "lr": lr}


def command(ctx):
    o = _options(ctx)
    return library_command(ctx, o) if o["trainer"] == "library" else upstream_command(ctx, o)


def library_command(ctx, o):
    if ctx.gpus * ctx.nodes != 1:
        raise UserError("effdet's library driver trains on one device (got %d GPUs x %d nodes); "
                        "options.effdet.trainer: upstream runs train.py on several GPUs" % (ctx.gpus, ctx.nodes))
    if any(v % SIDE for v in ctx.input_size):
        raise UserError("EfficientDet's pyramid (levels 3 to 7) needs input sides that are multiples of %d, "
                        "got %dx%d" % ((SIDE,) + tuple(ctx.input_size)))
    argv = [ctx.python, str(DRIVER), "--model", ctx.model, "--iterations", str(ctx.iterations),
            "--batch-size", str(ctx.batch_per_gpu), "--input-size", "%dx%d" % tuple(ctx.input_size),
            "--precision", ctx.precision, "--workers", str(o["workers"]), "--lr", repr(o["lr"]),
            "--seed", str(ctx.seed)]
    weights = initial.weights(ctx)
    if weights:
        argv += ["--weights", weights]
    if ctx.data:
        argv += ["--data", ctx.data["annotations"], "--images", ctx.data["images"]]
    return argv + list(ctx.extra_args)


def upstream_command(ctx, o):
    initial.one_node(ctx)         # torch.distributed.run --standalone: one node
    if ctx.precision not in ("fp32", "fp16"):
        raise UserError("effdet's train.py has fp32 and fp16 (--amp) only, got %s; options.effdet.trainer: "
                        "library trains in bf16" % ctx.precision)
    if list(ctx.input_size) != UPSTREAM_SIZE:
        raise UserError("effdet's train.py trains at its model config's %dx%d, got %dx%d; options.effdet.trainer: "
                        "library takes the scenario's size" % tuple(UPSTREAM_SIZE + list(ctx.input_size)))
    if initial.weights(ctx) or "lr" in ctx.options:
        raise UserError("effdet's train.py runs with random weights and its own schedule here: "
                        "options.effdet.weights and options.effdet.lr need options.effdet.trainer: library")
    # train.py takes the COCO root (annotations/ + train2017/): the folder above the annotations file
    root = os.path.dirname(os.path.dirname(ctx.data["annotations"])) if ctx.data else DATA
    train = [str(LAUNCH), "--effdet", WORKDIR, "--stop-after", str(ctx.iterations), "--",
             root, "--model", "efficientdet_d0",
             "-b", str(ctx.batch_per_gpu), "--log-interval", "1", "--epochs", "1",
             "--workers", str(o["workers"]), "--seed", str(ctx.seed),
             "--output", TRIAL_DIR + "/output"]
    if ctx.precision == "fp16":
        train.append("--amp")
    if ctx.gpus * ctx.nodes == 1:
        return [ctx.python] + train + list(ctx.extra_args)
    return [ctx.python, "-m", "torch.distributed.run", "--nproc_per_node", str(ctx.gpus), "--standalone"] + \
        train + list(ctx.extra_args)


def settings(ctx):
    # effdet trains every layer with BatchNorm (SyncBN with --sync-bn); random flip in its transforms
    o = _options(ctx)
    out = normalized.common(ctx, frozen_stages=-1, norm="bn", loader_workers=o["workers"], flip=True,
                            init=initial.init(ctx))
    if o["trainer"] == "library":
        out.update(input_size=list(ctx.input_size), lr=o["lr"], trainer="effdet 0.4.1 library")
    else:
        out.update(input_size=UPSTREAM_SIZE, lr=UPSTREAM_LR, trainer="train.py@" + COMMIT[:7])
    return out


INFER_DRIVER = Path(__file__).resolve().parents[1] / "drivers" / "effdet_infer.py"
NMS_THRESHOLD = 0.5                    # fixed in effdet's generate_detections
CANDIDATES = 5000                      # effdet's max_detection_points, over all levels


def infer(ctx):
    """harness/drivers/effdet_infer.py: effdet's DetBenchPredict parts (its model, _post_process and
    _batch_detection), in the effdet env."""
    if ctx.gpus * ctx.nodes != 1:
        raise UserError("effdet inference runs on one device only")
    if any(v % 128 for v in ctx.input_size):
        raise UserError("EfficientDet's pyramid (levels 3 to 7) needs input sides divisible by 128, got %dx%d"
                        % tuple(ctx.input_size))
    if float((ctx.inference or {}).get("nms_threshold", NMS_THRESHOLD)) != NMS_THRESHOLD:
        raise UserError("effdet's NMS IoU threshold is fixed at %g: set postprocess.nms_threshold to it "
                        "or exclude effdet" % NMS_THRESHOLD)
    return [ctx.python, str(INFER_DRIVER)] + infer_args(ctx) + list(ctx.extra_args)


def infer_settings(ctx):
    return normalized.inference(ctx, candidates_all_levels=CANDIDATES, norm="bn", backbone="EfficientNet-B0")


FRAMEWORK = Framework(
    name="effdet", title="effdet (PyTorch)", scraper="effdet",
    models=frozenset({"efficientdet_d0"}), precisions=frozenset({"fp32", "bf16", "fp16"}), status=RUNS_HERE,
    why="effdet_driver.py: the effdet 0.4.1 library in its pinned env, CPU or one GPU, fp16 on CUDA only; "
        "options.effdet.trainer: upstream runs train.py@861838 in dockerfiles/effdet-upstream (a GPU, fp32/fp16, "
        "512x512)",
    figures="exact window mean from two means since the epoch start (AverageMeter.avg, 3 decimals): an "
            "iteration from the end of the previous one to the end of its step (device synchronised), "
            "data time the wait for the batch",
    command=command, settings=settings, pins=PINS, env=ENV,
    infer=infer, infer_models=frozenset({"efficientdet_d0"}),
    infer_precisions=frozenset({"fp32", "bf16", "fp16", "tf32"}),
    infer_settings=infer_settings,
    infer_why="effdet_infer.py: the effdet 0.4.1 library in its pinned env (runs on the CPU); input sides "
              "divisible by 128; NMS IoU fixed at 0.5; fp16 and tf32 need CUDA",
    # effdet-upstream runs efficientdet-pytorch's own train.py, for GPU hosts
    images=(ImageRecipe("effdet", IMAGE_VENV, wheels=True, base_recipe="torchvision",
                        build_here=("antlr4-python3-runtime",)),
            ImageRecipe("effdet-upstream", IMAGE_VENV))
)
