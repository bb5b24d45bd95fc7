"""rwightman's efficientdet-pytorch (effdet): EfficientDet-D0 through its own train.py.

upstream's documented command: ``train.py /coco --model efficientdet_d0 -b B --amp ...``
(one process per GPU through torch's launcher for several GPUs). detbench sets
--log-interval 1; each line carries the mean since the epoch's start (AverageMeter.avg,
CUDA synchronized), and two of them give the exact window mean. detbench also sets --output
in the trial folder. train.py has no flag to skip timm's ImageNet backbone download or to
stop before a whole epoch and its evaluation, so harness/rivals/effdet_launch.py starts it
with random weights and ends it (exit 0) after warmup + measured iterations. train.py moves
the model to CUDA unconditionally, so it needs a GPU.
"""
import os
from pathlib import Path

from harness.spec.pins import EnvSpec
from harness.frameworks.base import NEEDS_GPU, TRIAL_DIR, Framework, infer_args
from harness.rivals import initial
from harness.rivals import settings as rival_settings

COMMIT = "861838fdb4693b2ebc84ac857c1d04285d30120f"
PINS = {"efficientdet-pytorch": COMMIT, "torch": "2.14.1", "torchvision": "0.29.1", "timm": "1.0.15",
        "pycocotools": "2.0.11", "omegaconf": "2.3.0"}
WORKDIR = "/opt/efficientdet-pytorch"
DATA = "/data/coco"               # COCO 2017 layout, mounted into the container
LAUNCH = Path(__file__).resolve().parents[1] / "rivals" / "effdet_launch.py"
OPTIONS = ("workers",)
# the effdet library from PyPI in a pinned env of its own: inference runs here, on the CPU too
ENV = EnvSpec(framework="effdet", pins={
    "effdet": "0.4.1", "torch": "2.14.1", "torchvision": "0.29.1", "timm": "1.0.15", "pycocotools": "2.0.11",
    "omegaconf": "2.3.0", "numpy": "2.4.6", "pillow": "13.0.0"})


def command(ctx):
    initial.options(ctx, OPTIONS)
    initial.one_node(ctx)         # torch.distributed.run --standalone: one node
    initial.init(ctx)
    # train.py takes the COCO root (annotations/ + train2017/): the folder above the annotations file
    root = os.path.dirname(os.path.dirname(ctx.data["annotations"])) if ctx.data else DATA
    train = [str(LAUNCH), "--effdet", WORKDIR, "--stop-after", str(ctx.iterations), "--",
             root, "--model", "efficientdet_d0",
             "-b", str(ctx.batch_per_gpu), "--log-interval", "1", "--epochs", "1",
             "--workers", str(int(ctx.options.get("workers", 4))), "--seed", str(ctx.seed),
             "--output", TRIAL_DIR + "/output"]
    if ctx.precision == "fp16":
        train.append("--amp")
    if ctx.gpus * ctx.nodes == 1:
        return [ctx.python] + train + list(ctx.extra_args)
    return [ctx.python, "-m", "torch.distributed.run", "--nproc_per_node", str(ctx.gpus), "--standalone"] + \
        train + list(ctx.extra_args)


def settings(ctx):
    # effdet trains every layer with BatchNorm (SyncBN with --sync-bn); 512x512 input for D0
    return dict(rival_settings.common(ctx, frozen_stages=-1, norm="bn", loader_workers=int(
        ctx.options.get("workers", 4)), flip=True, init=initial.init(ctx)), input_size=[512, 512], data="coco")


INFER_DRIVER = Path(__file__).resolve().parents[1] / "rivals" / "effdet_infer.py"
NMS_THRESHOLD = 0.5                    # fixed in effdet's generate_detections
CANDIDATES = 5000                      # effdet's max_detection_points, over all levels


def infer(ctx):
    """harness/rivals/effdet_infer.py: effdet's DetBenchPredict parts (its model, _post_process and
    _batch_detection), in the effdet env."""
    from harness.errors import UserError
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
    return rival_settings.inference(ctx, candidates_all_levels=CANDIDATES, norm="bn", backbone="EfficientNet-B0")


FRAMEWORK = Framework(
    name="effdet", title="effdet (PyTorch)", scraper="effdet",
    models=frozenset({"efficientdet_d0"}), precisions=frozenset({"fp32", "fp16"}), status=NEEDS_GPU,
    why="train.py calls model.cuda() unconditionally: dockerfiles/effdet on a GPU host; COCO 2017 mounted",
    figures="exact window mean from two means since the epoch start (AverageMeter.avg, 3 decimals, CUDA sync)",
    command=command, settings=settings, pins=PINS, env=ENV,
    infer=infer, infer_models=frozenset({"efficientdet_d0"}), infer_precisions=frozenset({"fp32", "bf16", "fp16", "tf32"}),
    infer_settings=infer_settings,
    infer_why="effdet_infer.py: the effdet 0.4.1 library in its pinned env (runs on the CPU); input sides "
              "divisible by 128; NMS IoU fixed at 0.5; fp16 and tf32 need CUDA")
