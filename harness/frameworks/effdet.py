"""rwightman's efficientdet-pytorch (effdet): EfficientDet-D0 through its own train.py.

upstream's documented command: ``train.py /coco --model efficientdet_d0 -b B --amp ...``
(one process per GPU through torch's launcher for several GPUs). detbench sets
--log-interval 1, so each line carries that iteration's own time (AverageMeter.val,
CUDA synchronized) and the scraper reads exact per-iteration figures. train.py moves the
model to CUDA unconditionally, so it needs a GPU.
"""
import os

from harness.frameworks.base import NEEDS_GPU, Framework
from harness.rivals import settings as rival_settings

COMMIT = "861838fdb4693b2ebc84ac857c1d04285d30120f"
PINS = {"efficientdet-pytorch": COMMIT, "torch": "2.14.1", "torchvision": "0.29.1", "timm": "1.0.15",
        "pycocotools": "2.0.11", "omegaconf": "2.3.0"}
WORKDIR = "/opt/efficientdet-pytorch"
DATA = "/data/coco"               # COCO 2017 layout, mounted into the container


def command(ctx):
    # train.py takes the COCO root (annotations/ + train2017/): the folder above the annotations file
    root = os.path.dirname(os.path.dirname(ctx.data["annotations"])) if ctx.data else DATA
    train = [WORKDIR + "/train.py", root, "--model", "efficientdet_d0",
             "-b", str(ctx.batch_per_gpu), "--log-interval", "1", "--epochs", "1",
             "--workers", str(int(ctx.options.get("workers", 4))), "--seed", str(ctx.seed)]
    if ctx.precision == "fp16":
        train.append("--amp")
    if ctx.gpus * ctx.nodes == 1:
        return [ctx.python] + train + list(ctx.extra_args)
    return [ctx.python, "-m", "torch.distributed.run", "--nproc_per_node", str(ctx.gpus), "--standalone"] + \
        train + list(ctx.extra_args)


def settings(ctx):
    # effdet trains every layer with BatchNorm (SyncBN with --sync-bn); 512x512 input for D0
    return dict(rival_settings.common(ctx, frozen_stages=-1, norm="bn", loader_workers=int(
        ctx.options.get("workers", 4)), flip=True), input_size=[512, 512], data="coco")


FRAMEWORK = Framework(
    name="effdet", title="effdet (PyTorch)", scraper="effdet",
    models=frozenset({"efficientdet_d0"}), precisions=frozenset({"fp32", "fp16"}), status=NEEDS_GPU,
    why="train.py calls model.cuda() unconditionally: dockerfiles/effdet on a GPU host; COCO 2017 mounted",
    figures="per iteration, exact (log interval 1; AverageMeter.val after CUDA sync)",
    command=command, settings=settings, pins=PINS)
