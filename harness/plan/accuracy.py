"""`mode: accuracy`: every framework of a cell trains the same detector on the same data to one target.

The scenario's `accuracy:` section gives what every framework shares: the generated learnable
set (`detbench dataset make-coco --learnable` folder: its train split is trained on, its val
split scored), the schedule (iterations, learning rate per image, warmup, LR steps, weight
decay, flips), the ResNet depth of the FPN backbone, `eval_every` (a checkpoint every that many
iterations and at the end), the seeds (one trial per seed and cell: the stability table), the
targets per model (one value, a list, or a range with a step: the speedup profile), the rule by
which a target counts as reached, the subject framework judged against every other with the
speedup it claims, an optional group-sequential plan under which more seeds may join later, and
the reference framework of the table's speedup column. All of it is declared before the run: it
is the protocol the report's verdict is read under. The matrix's
models each need a `weights:` file (`detbench weights make MODEL --depth D`): every framework
starts from it. `batch_per_gpu` and `input_size` apply as in the speed mode; the speed mode's
warmup, measure, repeats and order do not.
"""

import math
import os
import statistics
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple

from pydantic import Field, field_validator, model_validator

from harness.frameworks import accuracy as recipes
from harness.plan.strict import Strict

ACCURACY = "accuracy"
SPEED_ONLY = ("warmup", "measure", "repeats")  # keys an accuracy scenario has no use for
TRAIN_ANNOTATIONS = "annotations/instances_train.json"
TRAIN_IMAGES = "images"
VAL_ANNOTATIONS = "annotations/instances_val.json"
VAL_IMAGES = "images_val"
MAX_ITERATIONS = 1_000_000
MAX_SEEDS = 100


MAX_LEVELS = 50  # target levels of one model
SPENDINGS = ("obrien_fleming", "pocock")


class Target(Strict):
    """A model's targets: one `value`, a list of `values`, or a `range: [low, high]` every `step`."""

    metric: Literal["bbox_AP50", "bbox_AP", "segm_AP50", "segm_AP"] = "bbox_AP50"
    value: Optional[float] = Field(default=None, gt=0, le=1)
    values: Optional[List[float]] = Field(default=None, min_length=1, max_length=MAX_LEVELS)
    range: Optional[List[float]] = Field(default=None, min_length=2, max_length=2)
    step: Optional[float] = Field(default=None, gt=0, le=1)

    @model_validator(mode="after")
    def _one_form(self) -> "Target":
        given = [k for k in ("value", "values", "range") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give one of value, values or range (got %s)" % (", ".join(given) or "none"))
        if self.step is not None and self.range is None:
            raise ValueError("step goes with range")
        if self.range is not None:
            low, high = self.range
            if not 0 < low < high <= 1:
                raise ValueError("range is [low, high] with 0 < low < high <= 1")
            if (high - low) / (self.step or 0.05) + 1 > MAX_LEVELS:
                raise ValueError("range over step gives more than %d levels" % MAX_LEVELS)
        if self.values is not None:
            if any(not 0 < v <= 1 for v in self.values):
                raise ValueError("values lie in (0, 1]")
            if sorted(set(self.values)) != self.values:
                raise ValueError("values rise, each once")
        return self

    def levels(self) -> List[float]:
        """Every declared level, lowest first."""
        if self.value is not None:
            return [self.value]
        if self.values is not None:
            return list(self.values)
        assert self.range is not None
        low, high = self.range
        step = self.step or 0.05
        n = int(math.floor((high - low) / step + 1e-9))
        return sorted({round(low + i * step, 6) for i in range(n + 1)} | {round(high, 6)})


def target_levels(doc: Dict[str, Any]) -> Tuple[str, List[float]]:
    """(metric, levels) of a stored target document (either form)."""
    t = Target.model_validate(doc)
    return t.metric, t.levels()


class Sequential(Strict):
    """More seeds after the first look, declared before the run: `looks` lists each later look's
    seeds; the overall two-sided error `alpha` is spent over the looks by `spending` (Lan-DeMets'
    O'Brien-Fleming-like or Pocock-like function of the share of seeds seen), each look's interval
    taken at its own share (so their sum, and the overall error, is at most `alpha`)."""

    looks: List[List[int]] = Field(min_length=1, max_length=10)
    alpha: float = Field(default=0.05, gt=0, le=0.2)
    spending: Literal["obrien_fleming", "pocock"] = "obrien_fleming"


def spent(plan: Optional[Sequential], first: int) -> List[Tuple[int, float]]:
    """[(seeds seen, the alpha of that look)] of a plan whose first look has `first` seeds; one
    look at 0.05 without a plan. The looks' alphas add up to the plan's alpha."""
    if plan is None:
        return [(first, 0.05)]
    sizes = [first]
    for look in plan.looks:
        sizes.append(sizes[-1] + len(look))
    total = float(sizes[-1])
    out, before = [], 0.0
    for n in sizes:
        now = _spending(plan.spending, plan.alpha, n / total)
        out.append((n, now - before))
        before = now
    return out


def _spending(kind: str, alpha: float, t: float) -> float:
    """The alpha spent by information share t (0 < t <= 1); alpha itself at t = 1."""
    if t >= 1:
        return alpha
    if kind == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
    return 2 * (1 - statistics.NormalDist().cdf(z / math.sqrt(t)))


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
    # stays: reached where the metric is at or above the target at that checkpoint and every later
    # one; end: where the last checkpoint is at or above it (the time is the first crossing)
    reached: Literal["stays", "end"] = "stays"
    subject: Optional[str] = None  # the framework judged against every other (its speedup profile)
    speedup: float = Field(default=1.2, ge=1, le=100)  # the subject's claim at every target level
    sequential: Optional[Sequential] = None
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
    if a.subject is not None and a.subject not in scenario.matrix.framework:
        fail(where + ("subject",), "framework %r is not in the matrix" % a.subject)
    if a.sequential is not None:
        check_sequential(a, fail)
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


def check_sequential(a: AccuracyOptions, fail: Fail) -> None:
    """A sequential plan that cannot be met: a look's seed given twice or already among the first
    look's, a first look too small for an interval (two seeds a side), more seeds than a run takes."""
    plan = a.sequential
    assert plan is not None
    where = ("accuracy", "sequential", "looks")
    seen = set(a.seeds)
    for i, look in enumerate(plan.looks):
        if not look:
            fail(where + (i,), "a look adds one seed or more")
        again = sorted(set(look) & seen) or sorted(v for v in set(look) if look.count(v) > 1)
        if again:
            fail(where + (i,), "seed %d is already in an earlier look (or accuracy.seeds)" % again[0])
        if any(v < 0 for v in look):
            fail(where + (i,), "seeds are whole numbers from 0")
        seen |= set(look)
    if len(a.seeds) < 2:
        fail(("accuracy", "seeds"), "a sequential plan's first look needs two seeds or more (a Welch interval)")
    if len(seen) > MAX_SEEDS:
        fail(where, "the looks hold %d seeds; at most %d" % (len(seen), MAX_SEEDS))


def subject_of(a: Dict[str, Any], frameworks: List[str]) -> Optional[str]:
    """The framework a stored accuracy section judges (its `subject`, else the bundled trainer
    where it ran), or None."""
    named = a.get("subject")
    if named:
        return str(named)
    return "detbench-trainer" if "detbench-trainer" in frameworks else None


def declared_looks(a: Dict[str, Any]) -> Tuple[List[List[int]], Optional[Sequential]]:
    """(every look's seeds, the first look's first; the sequential plan or None) of a stored
    accuracy section (its document)."""
    plan = Sequential.model_validate(a["sequential"]) if a.get("sequential") else None
    return [list(a.get("seeds") or [0])] + [list(x) for x in (plan.looks if plan else [])], plan


def look_seeds(a: Any, look: int) -> List[int]:
    """The seeds of look `look` (1: accuracy.seeds; 2, 3, ...: the sequential plan's later looks) of
    an AccuracyOptions or a stored accuracy section."""
    looks, _ = declared_looks(a if isinstance(a, dict) else a.model_dump())
    if not 1 <= look <= len(looks):
        raise ValueError(
            "look %d: the scenario declares %d look%s (accuracy.seeds%s)"
            % (look, len(looks), "" if len(looks) == 1 else "s", " and accuracy.sequential.looks" * (len(looks) > 1))
        )
    return looks[look - 1]


def trial_order(cells: List[Any], seeds: List[int], seed: int) -> List[Tuple[int, Any, int]]:
    """(round, cell, seed) of every trial in the order they run: one round per seed, in the seeds'
    order, each round holding every cell once in its own shuffled order drawn from the order
    `seed` (scenario.round_orders: the speed runs' rounds)."""
    from harness.plan.scenario import round_orders

    ordered = sorted(cells, key=lambda c: c.key)
    rounds = round_orders(ordered, len(seeds), seed)
    return [(i + 1, cell, s) for i, (s, order) in enumerate(zip(seeds, rounds)) for cell in order]


def trial_places(cell_keys: List[str], seeds: List[int], seed: int) -> Dict[str, Tuple[int, int]]:
    """{trial key: (its round, its run-wide place from 1)} of the trials of these cells and seeds
    in the order `trial_order` draws from the order `seed` (the stored run's)."""
    from harness.frameworks.accuracy import trial_key
    from harness.plan.scenario import Cell

    cells = [Cell.from_key(k) for k in sorted(set(cell_keys))]
    return {trial_key(cell.key, s): (r, n) for n, (r, cell, s) in enumerate(trial_order(cells, seeds, seed), 1)}


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
OWN_ACCURACY_KEYS = ("seeds", "targets", "reference", "reached", "subject", "speedup", "sequential")


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
