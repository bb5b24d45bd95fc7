"""The commands of an accuracy trial (scenario `mode: accuracy`), one recipe per framework.

Every framework of an accuracy cell gets the same `Schedule`: iterations, images per
iteration, input size, learning rate per image (times the batch), linear warmup, the
iterations after which the rate is multiplied by `gamma`, weight decay (biases and norms
too, as torchvision's and mmdetection's SGD do), horizontal flips, the ResNet depth of the
FPN backbone with every stage trainable, and a checkpoint every `eval_every` iterations and
at the end. Three commands per framework: `train_argv` (from the shared weights file, or
`resume` after a checkpoint), `dump_argv` (one checkpoint's val-split detections in COCO's
result format) and, the same for all, `score_argv` (pycocotools' COCOeval, harness/trainer/
cocometrics.py, in detbench's own environment).
"""
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import List, Optional, Tuple

from harness.frameworks import detbench_trainer, mmdetection, torchvision

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TV_EVAL = os.path.join(ROOT, "harness", "drivers", "torchvision_eval.py")
MMDET_EVAL = os.path.join(ROOT, "harness", "drivers", "mmdet_eval.py")
# framework -> (models it trains to a target, precisions)
RECIPES = {
    "detbench-trainer": (("retinanet", "faster_rcnn", "mask_rcnn"), ("fp32", "bf16")),
    "torchvision": (("retinanet", "faster_rcnn", "mask_rcnn"), ("fp32", "bf16")),
    # mmdetection's CPU runs are fp32 only (its drivers' --amp is CUDA fp16)
    "mmdetection": (("retinanet", "faster_rcnn", "mask_rcnn"), ("fp32",)),
}
TRAINER_MODELS = {"retinanet": "retina", "faster_rcnn": "faster", "mask_rcnn": "mask"}
BLOCKS = {18: ("basic", "2,2,2,2"), 50: ("bottleneck", "3,4,6,3")}


@dataclass(frozen=True)
class Schedule:
    iterations: int
    eval_every: int
    batch: int
    input_size: Tuple[int, int]
    lr_per_image: float
    warmup_iters: int
    warmup_factor: float
    lr_steps: Tuple[int, ...]
    gamma: float
    weight_decay: float
    flip: bool
    depth: int
    precision: str
    seed: int
    workers: int = 1

    @property
    def lr(self) -> float:
        return self.lr_per_image * self.batch

    @property
    def checkpoints(self) -> List[int]:
        """The iterations after which a checkpoint is written: every eval_every-th and the last."""
        out = list(range(self.eval_every, self.iterations + 1, self.eval_every))
        return out if out and out[-1] == self.iterations else out + [self.iterations]


def supports(framework: str, model: str, precision: str) -> bool:
    recipe = RECIPES.get(framework)
    return recipe is not None and model in recipe[0] and precision in recipe[1]


def why_not(framework: str) -> str:
    return "%s has no accuracy recipe (known: %s)" % (framework, ", ".join(RECIPES))


def train_argv(framework: str, model: str, s: Schedule, data: Tuple[str, str], weights: Optional[str],
               folder: str, resume: Optional[str] = None, python: str = sys.executable) -> List[str]:
    """The training command: checkpoints go to `folder` as iter_<N>.pth with a `checkpoint PATH` line."""
    ann, images = data
    size = "%dx%d" % tuple(s.input_size)
    if framework == "detbench-trainer":
        block, layers = BLOCKS[s.depth]
        sets = {
            "model.block": block, "model.layers": layers, "model.frozen_stages": 0, "model.norm": "frozen_bn",
            "data.source": "coco", "data.coco_json": ann, "data.coco_images": images,
            "data.images_per_device": s.batch, "data.input_size": size, "data.workers": s.workers,
            "data.flip_prob": 0.5 if s.flip else 0.0,
            "train.max_iter": s.iterations, "train.precision": s.precision, "train.seed": s.seed,
            "train.lr": repr(s.lr), "train.lr_reference_batch": s.batch, "train.warmup_iters": s.warmup_iters,
            "train.warmup_factor": repr(s.warmup_factor), "train.weight_decay": repr(s.weight_decay),
            "train.decay_norm_bias": "true", "train.schedule": "step", "train.gamma": repr(s.gamma),
            "train.checkpoint_every": s.eval_every, "train.checkpoint_dir": folder,
        }
        if s.lr_steps:
            sets["train.steps"] = ",".join(map(str, s.lr_steps))
        else:
            sets["train.schedule"] = "constant"
        argv = [python, "-m", "harness.trainer.train",
                os.path.join(detbench_trainer.CONFIG_DIR, detbench_trainer.CONFIGS[model])]
        for key, value in sets.items():
            argv += ["--set", "%s=%s" % (key, value)]
        argv += ["--weights", weights] if weights else []     # a resumed run names its start too (checked)
        return argv + (["--resume", resume] if resume else [])
    if framework == "torchvision":
        argv = [python, torchvision.DRIVER, "--model", model, "--depth", str(s.depth),
                "--iterations", str(s.iterations), "--batch-size", str(s.batch), "--input-size", size,
                "--precision", s.precision, "--workers", str(s.workers), "--norm", "frozen_bn",
                "--trainable-layers", "5", "--lr", repr(s.lr), "--warmup-iters", str(s.warmup_iters),
                "--warmup-factor", repr(s.warmup_factor), "--weight-decay", repr(s.weight_decay),
                "--gamma", repr(s.gamma), "--seed", str(s.seed), "--print-freq", "1",
                "--data", ann, "--images", images, "--checkpoint-every", str(s.eval_every),
                "--checkpoint-dir", folder]
        if s.lr_steps:
            argv += ["--lr-steps", ",".join(map(str, s.lr_steps))]
        if not s.flip:
            argv.append("--no-flip")
        argv += ["--weights", weights] if weights else []     # not loaded again on a resume
        return argv + (["--resume", resume] if resume else [])
    if framework == "mmdetection":
        # every stage trainable (frozen_stages -1), BN frozen as everywhere; mmengine's SGD decays
        # biases and norms too; a resumed run takes its weights from the checkpoint (the driver
        # does not load the file again)
        argv = [python, mmdetection.DRIVER, "--model", model, "--depth", str(s.depth),
                "--iterations", str(s.iterations), "--batch-size", str(s.batch), "--input-size", size,
                "--workers", str(s.workers), "--ann", ann, "--images", images, "--frozen-stages", "-1",
                "--lr", repr(s.lr), "--warmup-iters", str(s.warmup_iters), "--warmup-factor", repr(s.warmup_factor),
                "--weight-decay", repr(s.weight_decay), "--gamma", repr(s.gamma), "--seed", str(s.seed),
                "--checkpoint-every", str(s.eval_every), "--checkpoint-dir", folder]
        if s.lr_steps:
            argv += ["--lr-steps", ",".join(map(str, s.lr_steps))]
        if not s.flip:
            argv.append("--no-flip")
        argv += ["--weights", weights] if weights else []
        return argv + (["--resume", resume] if resume else [])
    raise ValueError(why_not(framework))


def dump_argv(framework: str, model: str, s: Schedule, checkpoint: str, val: Tuple[str, str], out: str,
              python: str = sys.executable) -> List[str]:
    """The command that writes one checkpoint's val-split detections (COCO result format) to `out`."""
    ann, images = val
    size = "%dx%d" % tuple(s.input_size)
    if framework == "detbench-trainer":
        return [python, "-m", "harness.trainer.evaluate",
                os.path.join(detbench_trainer.CONFIG_DIR, detbench_trainer.CONFIGS[model]),
                "--weights", checkpoint, "--data", ann, images, "--set", "data.input_size=%s" % size,
                "--dump-only", "--detections-out", out]
    if framework == "torchvision":
        return [python, TV_EVAL, "--model", model, "--depth", str(s.depth), "--checkpoint", checkpoint,
                "--data", ann, "--images", images, "--input-size", size, "--out", out]
    if framework == "mmdetection":
        return [python, MMDET_EVAL, "--model", model, "--depth", str(s.depth), "--checkpoint", checkpoint,
                "--data", ann, "--images", images, "--input-size", size, "--out", out]
    raise ValueError(why_not(framework))


def score_argv(model: str, val_annotations: str, detections: str, python: str = sys.executable) -> List[str]:
    """The one COCOeval every framework's detections go through (detbench's own environment)."""
    iou = "bbox,segm" if model == "mask_rcnn" else "bbox"
    return [python, "-m", "harness.trainer.cocometrics", val_annotations, detections, "--iou", iou]


def trial_key(cell_key: str, seed: int) -> str:
    """An accuracy trial's key: its cell's and its seed."""
    return "%s/s%d" % (cell_key, seed)


# --- what an accuracy trial's log says --------------------------------------------------------

_TORCHVISION_LOSS = re.compile(r"^Epoch: \[\d+\]\s+\[\s*(\d+)/\d+\].*?\bloss: ([-+0-9.eEnaif]+) ")
_MMENGINE_LOSS = re.compile(r"\bIter\(train\) \[\s*(\d+)/\d+\].*?\sloss: ([-+0-9.eEnaif]+)")
_ITER_PREFIX = "DETBENCH_ITER "
_CHECKPOINT = re.compile(r"^checkpoint (.*iter_(\d+)\.pth)$")


def loss_of_line(line: str) -> Optional[Tuple[int, float]]:
    """(1-based iteration, training loss) of a log line: the bundled trainer's DETBENCH_ITER line,
    torchvision's reference line (its counter starts at 0) or mmengine's `Iter(train) [ i/N]` line;
    None for any other line."""
    line = line.strip()
    if line.startswith(_ITER_PREFIX):
        try:
            obj = json.loads(line[len(_ITER_PREFIX):])
        except ValueError:
            return None
        if isinstance(obj, dict) and isinstance(obj.get("loss"), (int, float)) and "iteration" in obj:
            return int(obj["iteration"]), float(obj["loss"])
        return None
    m = _TORCHVISION_LOSS.match(line)
    if m:
        try:
            return int(m.group(1)) + 1, float(m.group(2))
        except ValueError:
            return None
    m = _MMENGINE_LOSS.search(line)
    if m:
        try:
            return int(m.group(1)), float(m.group(2))
        except ValueError:
            return None
    return None


def checkpoint_of_line(line: str) -> Optional[Tuple[int, str]]:
    """(iteration, path) of a `checkpoint PATH` line (the bundled trainer's and every driver's)."""
    m = _CHECKPOINT.match(line.strip())
    return (int(m.group(2)), m.group(1)) if m else None
