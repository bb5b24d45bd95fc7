"""`mode: accuracy`: every framework of a cell trains the same detector on the same data to one target.

The scenario's `accuracy:` section gives what every framework shares: the generated learnable
set (`detbench dataset make-coco --learnable` folder: its train split is trained on, its val
split scored), the schedule (iterations, learning rate per image, warmup, LR steps, weight
decay, flips), the ResNet depth of the FPN backbone, `eval_every` (a checkpoint every that many
iterations and at the end), the seeds (one trial per seed and cell: the stability table), one
target per model, and the reference framework the speedup is taken against. The matrix's
models each need a `weights:` file (`detbench weights make MODEL --depth D`): every framework
starts from it. `batch_per_gpu` and `input_size` apply as in the speed mode; the speed mode's
warmup, measure, repeats and order do not.
"""

import os
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple

from pydantic import Field, field_validator

from harness.frameworks import accuracy as recipes
from harness.plan.strict import Strict

ACCURACY = "accuracy"
SPEED_ONLY = ("warmup", "measure", "repeats", "order")  # keys an accuracy scenario has no use for
TRAIN_ANNOTATIONS = "annotations/instances_train.json"
TRAIN_IMAGES = "images"
VAL_ANNOTATIONS = "annotations/instances_val.json"
VAL_IMAGES = "images_val"
MAX_ITERATIONS = 1_000_000
MAX_SEEDS = 100


class Target(Strict):
    metric: Literal["bbox_AP50", "bbox_AP", "segm_AP50", "segm_AP"] = "bbox_AP50"
    value: float = Field(gt=0, le=1)


class AccuracyOptions(Strict):
    data: str = Field(min_length=1)  # a `make-coco --learnable` folder
    iterations: int = Field(ge=1, le=MAX_ITERATIONS)
    eval_every: int = Field(ge=1, le=MAX_ITERATIONS)
    lr_per_image: float = Field(gt=0, le=1)
    warmup_iters: int = Field(default=0, ge=0)
    warmup_factor: float = Field(default=1.0 / 3, gt=0, le=1)
    lr_steps: List[int] = []
    gamma: float = Field(default=0.1, gt=0, le=1)
    weight_decay: float = Field(default=1e-4, ge=0, lt=1)
    clip_grad_norm: float = Field(default=0, ge=0)  # > 0: every framework clips the gradients' total L2 norm
    # the box head's sampled RoIs per image (Faster and Mask R-CNN), each framework's own sampler
    roi_batch_per_image: int = Field(default=512, ge=1, le=4096)
    flip: bool = True
    depth: Literal[18, 50] = 18
    seeds: List[int] = Field(default=[0], min_length=1, max_length=MAX_SEEDS)
    targets: Dict[str, Target] = {}
    reference: Optional[str] = None
    workers: int = Field(default=1, ge=0, le=64)

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, values: List[int]) -> List[int]:
        if len(set(values)) != len(values):
            raise ValueError("lists a seed twice")
        if any(v < 0 for v in values):
            raise ValueError("seeds are whole numbers from 0")
        return values

    @field_validator("lr_steps")
    @classmethod
    def _steps(cls, values: List[int]) -> List[int]:
        if any(b <= a for a, b in zip(values, values[1:])) or any(v < 1 for v in values):
            raise ValueError("steps are iterations from 1, each after the one before")
        return values


def split(options: AccuracyOptions, name: str) -> Tuple[str, str]:
    """(annotations, images) of the learnable set's `train` or `val` split, absolute."""
    root = os.path.abspath(options.data)
    ann, images = (TRAIN_ANNOTATIONS, TRAIN_IMAGES) if name == "train" else (VAL_ANNOTATIONS, VAL_IMAGES)
    return os.path.join(root, ann), os.path.join(root, images)


Fail = Callable[[Tuple[Any, ...], str], None]


def check_keys(scenario: Any, fail: Fail) -> None:
    """An `accuracy:` section belongs to `mode: accuracy`, and that mode takes none of the speed keys."""
    given = scenario.model_fields_set
    if scenario.mode != ACCURACY:
        if "accuracy" in given:
            fail(("accuracy",), "an accuracy key: set mode: accuracy to use it")
        return
    if scenario.accuracy is None:
        fail(
            ("mode",),
            "an accuracy scenario has an accuracy: section (data, iterations, eval_every, lr_per_image, targets, ...)",
        )
    for key in SPEED_ONLY:
        if key in given:
            fail((key,), "a speed-mode key: an accuracy scenario trains accuracy.iterations per seed")


def check(scenario: Any, planned: List[Any], fail: Fail) -> None:
    """The accuracy section against the matrix; `planned`: the scenario's PlannedCells."""
    a = scenario.accuracy
    where = ("accuracy",)
    if a.eval_every > a.iterations:
        fail(where + ("eval_every",), "is more than iterations (%d): no checkpoint would be scored" % a.iterations)
    if a.warmup_iters > a.iterations:
        fail(where + ("warmup_iters",), "is more than iterations (%d)" % a.iterations)
    for i, step in enumerate(a.lr_steps):
        if step >= a.iterations:
            fail(where + ("lr_steps", i), "step %d is not before the last iteration (%d)" % (step, a.iterations))
    for name in ("train", "val"):
        ann, images = split(a, name)
        if not os.path.isfile(ann) or not os.path.isdir(images):
            fail(
                where + ("data",),
                "%s is not a `detbench dataset make-coco --learnable` folder: no %s split "
                "(%s)" % (a.data, name, ann if not os.path.isfile(ann) else images),
            )
    for axis in ("gpus", "nodes"):
        if getattr(scenario.matrix, axis) != [1]:
            fail(("matrix", axis), "accuracy trials run on one device: %s must be [1]" % axis)
    for model in a.targets:
        if model not in scenario.matrix.model:
            fail(where + ("targets", model), "model %r is not in the matrix" % model)
    for i, model in enumerate(scenario.matrix.model):
        if model not in a.targets:
            fail(
                ("matrix", "model", i),
                "%s has no target: give accuracy.targets.%s: {metric: bbox_AP50, value: 0.5}" % (model, model),
            )
        metric = a.targets[model].metric
        if metric.startswith("segm") and model != "mask_rcnn":
            fail(where + ("targets", model, "metric"), "%s has no masks: a bbox metric" % model)
    if a.reference is not None and a.reference not in scenario.matrix.framework:
        fail(where + ("reference",), "framework %r is not in the matrix" % a.reference)
    for p in planned:
        if p.excluded is not None:
            continue
        c = p.cell
        if c.framework not in recipes.RECIPES:
            fail(("matrix", "framework", scenario.matrix.framework.index(c.framework)), recipes.why_not(c.framework))
        if not recipes.supports(c.framework, c.model, c.precision):
            fail(
                ("matrix", "precision", scenario.matrix.precision.index(c.precision)),
                "%s has no accuracy recipe for %s %s; exclude that cell with a reason"
                % (c.framework, c.model, c.precision),
            )
    for i, model in enumerate(scenario.matrix.model):
        if model not in scenario.weights:
            fail(
                ("matrix", "model", i),
                "%s has no weights: file: every framework of an accuracy cell starts "
                "from one (`detbench weights make %s --depth %d`)" % (model, model, a.depth),
            )


def schedule(scenario: Any, cell: Any, seed: int) -> recipes.Schedule:
    """The Schedule every framework of `cell` trains with, for one seed."""
    a = scenario.accuracy
    return recipes.Schedule(
        iterations=a.iterations,
        eval_every=a.eval_every,
        batch=scenario.batch_per_gpu,
        input_size=(int(scenario.input_size[0]), int(scenario.input_size[1])),
        lr_per_image=a.lr_per_image,
        warmup_iters=a.warmup_iters,
        warmup_factor=a.warmup_factor,
        lr_steps=tuple(a.lr_steps),
        gamma=a.gamma,
        weight_decay=a.weight_decay,
        clip_grad_norm=a.clip_grad_norm,
        roi_batch_per_image=a.roi_batch_per_image,
        flip=a.flip,
        depth=a.depth,
        precision=cell.precision,
        seed=seed,
        workers=a.workers,
    )


# What two accuracy runs must share for one's cells to join the other's report (a precision or a
# framework trained later, `detbench accuracy report --with RUN`): the same detector trained the
# same way from the same files. The seeds, targets and reference are each run's own: the report
# reads every cell against the first run's target and reference.
SHARED_KEYS = ("backend", "batch_per_gpu", "input_size", "env", "extra_args", "options", "postprocess")
OWN_ACCURACY_KEYS = ("seeds", "targets", "reference")


def recipe_differences(base: Dict[str, Any], other: Dict[str, Any]) -> List[str]:
    """Where two stored accuracy scenarios (their documents) would not train the same detector the
    same way, one phrase per difference ([] when they would): a shared key, an `accuracy:` key but
    the seeds, targets and reference, or the weights file of a model the second trains."""
    out = []
    for key in SHARED_KEYS:
        if base.get(key) != other.get(key):
            out.append("%s %s -> %s" % (key, _said(base.get(key)), _said(other.get(key))))
    a, b = base.get("accuracy") or {}, other.get("accuracy") or {}
    for key in sorted((set(a) | set(b)) - set(OWN_ACCURACY_KEYS)):
        if a.get(key) != b.get(key):
            out.append("accuracy.%s %s -> %s" % (key, _said(a.get(key)), _said(b.get(key))))
    theirs = base.get("weights") or {}
    for model in (other.get("matrix") or {}).get("model") or []:
        mine = (other.get("weights") or {}).get(model)
        if theirs.get(model) != mine:
            out.append("weights.%s %s -> %s" % (model, _said(theirs.get(model)), _said(mine)))
    return out


def _said(value: Any) -> str:
    return "none" if value is None else repr(value)
