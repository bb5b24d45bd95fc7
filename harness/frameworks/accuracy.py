"""The commands of an accuracy trial (scenario `mode: accuracy`), one recipe per framework.

Every framework of an accuracy cell gets the same `Schedule`: iterations, images per
iteration, input size, learning rate per image (times the batch), linear warmup, the
iterations after which the rate is multiplied by `gamma`, weight decay (biases and norms
too, as torchvision's and mmdetection's SGD do), optionally a clip of the gradients'
total L2 norm (each framework's own clipping where it has one), horizontal flips, the ResNet depth of the
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

from harness.frameworks import detbench_trainer, detectron2, mmdetection, torchvision
from harness.vocab.catalog import TWO_STAGE
from harness.vocab.sources import cached_archive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the rivals' dump drivers: one flag set (drivers/common.py's dump_parser)
RIVAL_DUMPS = {name: os.path.join(ROOT, "harness", "drivers", "%s_eval.py" % stem)
               for name, stem in (("torchvision", "torchvision"), ("mmdetection", "mmdet"),
                                  ("detectron2", "detectron2"))}
# framework -> (models it trains to a target, precisions)
RECIPES = {
    "detbench-trainer": (("retinanet", "faster_rcnn", "mask_rcnn"), ("fp32", "bf16")),
    "torchvision": (("retinanet", "faster_rcnn", "mask_rcnn"), ("fp32", "bf16")),
    # mmdetection's CPU runs are fp32 only (its drivers' --amp is CUDA fp16)
    "mmdetection": (("retinanet", "faster_rcnn", "mask_rcnn"), ("fp32",)),
    "detectron2": (("retinanet", "faster_rcnn", "mask_rcnn"), ("fp32", "bf16")),
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
    clip_grad_norm: float = 0.0     # > 0: the gradients' total L2 norm is clipped to it before each step
    roi_batch_per_image: int = 512  # Faster and Mask R-CNN: the box head's sampled RoIs per image

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
        if s.clip_grad_norm:
            sets["train.clip_grad_norm"] = repr(s.clip_grad_norm)
        if model in TWO_STAGE:
            sets["model.roi_batch_per_image"] = s.roi_batch_per_image
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
    if framework not in RIVAL_DRIVERS:
        raise ValueError(why_not(framework))
    driver, own = RIVAL_DRIVERS[framework]
    argv = [python, driver, "--model", model, "--depth", str(s.depth), "--iterations", str(s.iterations),
            "--batch-size", str(s.batch), "--input-size", size, "--workers", str(s.workers)]
    argv += own(s, ann, images)
    argv += ["--lr", repr(s.lr), "--warmup-iters", str(s.warmup_iters), "--warmup-factor", repr(s.warmup_factor),
             "--weight-decay", repr(s.weight_decay), "--gamma", repr(s.gamma), "--seed", str(s.seed),
             "--checkpoint-every", str(s.eval_every), "--checkpoint-dir", folder]
    if s.lr_steps:
        argv += ["--lr-steps", ",".join(map(str, s.lr_steps))]
    if s.clip_grad_norm:
        argv += ["--clip-grad-norm", repr(s.clip_grad_norm)]
    if model in TWO_STAGE:
        argv += ["--roi-batch-per-image", str(s.roi_batch_per_image)]
    if not s.flip:
        argv.append("--no-flip")
    argv += ["--weights", weights] if weights else []     # each driver loads it only when not resuming
    return argv + (["--resume", resume] if resume else [])


# Each rival driver takes the schedule's flags the same way; what differs is how it is told the data
# and that every stage trains with BN frozen: torchvision's trainable_layers 5, mmdetection's
# frozen_stages -1 (its SGD decays biases and norms too), detectron2's FREEZE_AT 0 (its solver's
# SOLVER.STEPS and GAMMA; the weight decay on biases and norms too). detectron2's launcher runs the
# tools/train_net.py of the pinned commit's archive in the cache (checked there to be that commit);
# its DetectionCheckpointer writes every SOLVER.CHECKPOINT_PERIOD-th iteration and the last, and
# train_net.py --resume goes on from the checkpoint folder.
RIVAL_DRIVERS = {
    "torchvision": (torchvision.DRIVER, lambda s, ann, images: [
        "--precision", s.precision, "--norm", "frozen_bn", "--trainable-layers", "5", "--print-freq", "1",
        "--schedule", "declared",
        "--data", ann, "--images", images]),
    "mmdetection": (mmdetection.DRIVER, lambda s, ann, images: [
        "--ann", ann, "--images", images, "--frozen-stages", "-1"]),
    "detectron2": (detectron2.LAUNCHER, lambda s, ann, images: [
        "--source-archive", str(cached_archive(detectron2.DETECTRON2)), "--commit", detectron2.COMMIT,
        "--precision", s.precision, "--data", ann, "--images", images, "--freeze-at", "0"]),
}


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
    if framework in RIVAL_DUMPS:
        return [python, RIVAL_DUMPS[framework], "--model", model, "--depth", str(s.depth), "--checkpoint",
                checkpoint, "--data", ann, "--images", images, "--input-size", size, "--out", out]
    raise ValueError(why_not(framework))


def floor_dump_argv(model: str, s: Schedule, weights: str, val: Tuple[str, str], out: str,
                    python: str = sys.executable) -> List[str]:
    """The command that writes the val-split detections of the shared initial weights, untrained
    (iteration 0: the noise floor), through the bundled trainer's dump: the file is one state of
    one architecture, so any framework loading it would score the same detector."""
    ann, images = val
    block, layers = BLOCKS[s.depth]
    return [python, "-m", "harness.trainer.evaluate",
            os.path.join(detbench_trainer.CONFIG_DIR, detbench_trainer.CONFIGS[model]),
            "--weights", weights, "--data", ann, images, "--set", "data.input_size=%dx%d" % tuple(s.input_size),
            "--set", "model.block=%s" % block, "--set", "model.layers=%s" % layers,
            "--set", "model.norm=frozen_bn", "--dump-only", "--detections-out", out]


def score_argv(model: str, val_annotations: str, detections: str, python: str = sys.executable) -> List[str]:
    """The one COCOeval every framework's detections go through (detbench's own environment)."""
    iou = "bbox,segm" if model == "mask_rcnn" else "bbox"
    return [python, "-m", "harness.trainer.cocometrics", val_annotations, detections, "--iou", iou]


def trial_key(cell_key: str, seed: int) -> str:
    """An accuracy trial's key: its cell's and its seed."""
    return "%s/s%d" % (cell_key, seed)


# --- what an accuracy trial's log says --------------------------------------------------------

_TORCHVISION_LOSS = re.compile(r"^Epoch: \[(\d+)\]\s+\[\s*(\d+)/(\d+)\].*?\bloss: ([-+0-9.eEnaif]+) ")
_MMENGINE_LOSS = re.compile(r"\bIter\(train\) \[\s*(\d+)/\d+\].*?\sloss: ([-+0-9.eEnaif]+)")
# detectron2's CommonMetricPrinter (0-based iter; total_loss the median of the last 20 iterations)
_DETECTRON2_LOSS = re.compile(r"\biter: (\d+)  total_loss: ([-+0-9.eEnaif]+)  ")
_ITER_PREFIX = "DETBENCH_ITER "
_CHECKPOINT = re.compile(r"^checkpoint (.*iter_(\d+)\.pth)$")


def loss_of_line(line: str) -> Optional[Tuple[int, float]]:
    """(1-based iteration, training loss) of a log line: the bundled trainer's DETBENCH_ITER line,
    torchvision's reference line (its counter starts at 0 in each epoch), mmengine's `Iter(train) [ i/N]` line
    or detectron2's `iter: i  total_loss: L` (its counter starts at 0); None for any other line."""
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
    if m:   # the batch within its epoch, epochs of equal length: the iteration is epoch * N + i + 1
        try:
            return int(m.group(1)) * int(m.group(3)) + int(m.group(2)) + 1, float(m.group(4))
        except ValueError:
            return None
    m = _MMENGINE_LOSS.search(line)
    if m:
        try:
            return int(m.group(1)), float(m.group(2))
        except ValueError:
            return None
    m = _DETECTRON2_LOSS.search(line)
    if m:
        try:
            return int(m.group(1)) + 1, float(m.group(2))
        except ValueError:
            return None
    return None


def checkpoint_of_line(line: str) -> Optional[Tuple[int, str]]:
    """(iteration, path) of a `checkpoint PATH` line (the bundled trainer's and every driver's)."""
    m = _CHECKPOINT.match(line.strip())
    return (int(m.group(2)), m.group(1)) if m else None
