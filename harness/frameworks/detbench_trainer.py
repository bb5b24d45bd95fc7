"""The bundled SimpleDet-style PyTorch trainer (harness/trainer), launched like any rival."""
import os

from harness.frameworks.base import RUNS_HERE, Framework
from harness.rivals.settings import common

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "trainer", "configs")
CONFIGS = {
    "retinanet": "retina_r50v1_fpn_1x.py",
    "faster_rcnn": "faster_r50v1_fpn_1x.py",
    "mask_rcnn": "mask_r50v1_fpn_1x.py",
}


def _value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def command(ctx):
    world = ctx.gpus * ctx.nodes
    sets = {
        "train.max_iter": ctx.iterations,
        "train.precision": "fp32" if ctx.precision == "tf32" else ctx.precision,
        "train.seed": ctx.seed,
        "data.images_per_device": ctx.batch_per_gpu,
        "data.input_size": "%dx%d" % tuple(ctx.input_size),
    }
    if ctx.precision == "tf32":
        sets["train.tf32"] = True
    if ctx.data:
        sets["data.source"] = "coco"
        sets["data.coco_json"] = ctx.data["annotations"]
        sets["data.coco_images"] = ctx.data["images"]
    else:
        sets["data.source"] = "synthetic"
    sets.update(ctx.options)
    train = ["-m", "harness.trainer.train", os.path.join(CONFIG_DIR, CONFIGS[ctx.model])]
    for key, value in sets.items():
        train += ["--set", "%s=%s" % (key, _value(value))]
    if world == 1:
        launch = [ctx.python]
    else:
        launch = [ctx.python, "-m", "torch.distributed.run", "--nproc_per_node", str(ctx.gpus)]
        if ctx.nodes > 1:
            launch += ["--nnodes", str(ctx.nodes)]
            if ctx.rendezvous:
                launch += ["--rdzv-backend", ctx.rendezvous]
        else:
            launch += ["--standalone"]
    return launch + train + list(ctx.extra_args)


def settings(ctx):
    opts = ctx.options
    workers = int(opts.get("data.workers", 2)) if ctx.data else 0   # synthetic data needs no loader
    return common(ctx, frozen_stages=1, norm=opts.get("model.norm", "frozen_bn"), loader_workers=workers,
                  flip=False, rpn_post_nms_train=int(opts.get("model.rpn_post_nms_top_n_train", 2000)))


FRAMEWORK = Framework(
    name="detbench-trainer", title="detbench-trainer (PyTorch)", scraper="detbench-jsonl",
    models=frozenset(CONFIGS), precisions=frozenset({"fp32", "tf32", "fp16", "bf16"}),
    status=RUNS_HERE, why="bundled PyTorch trainer (pip extra `trainer`); fp16 needs CUDA",
    figures="per iteration, exact (CUDA synchronized)", command=command, settings=settings)
