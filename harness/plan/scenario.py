"""Scenario files: typed, strict, and expanded into the cells of a benchmark matrix.

A scenario names a matrix over framework x model x precision x platform x gpus x nodes
plus the settings every cell shares. Loading it either returns a valid Scenario or
raises UserError pointing at the file, line and field that is wrong.

Where trials run is the launch stage's business: its backends, and the scenario section
each one takes (named after the backend), reach `load` as an argument (`backends`: name ->
launcher), so this stage describes a run without knowing any backend.
"""

import functools
import itertools
import math
import os
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Dict, Final, List, Literal, Mapping, Optional, Sequence, Tuple, Union

from pydantic import Discriminator, Field, Tag, ValidationError, ValidationInfo, create_model, field_validator

from harness.vocab import catalog, names
from harness.plan import platforms, yamlfile
from harness import frameworks, jsonlog
from harness.errors import UserError, located
from harness.frameworks.base import TrialContext
from harness.plan.strict import Strict
from harness.plan.accuracy import AccuracyOptions

MATRIX_AXES = ("framework", "model", "precision", "platform", "gpus", "nodes")
TRAIN: Final = "train"
INFERENCE: Final = "inference"
# keys that belong to one mode only: set in a scenario of the other mode, they are an error
TRAINING_ONLY = ("batch_per_gpu",)
INFERENCE_ONLY = ("batch_sizes", "percentiles", "postprocess")
MAX_COUNT = 4096  # devices, nodes and images per device: beyond this a count is a typo
MAX_REPEATS = 1000
MAX_TRIALS = 100_000
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Matrix(Strict):
    framework: List[str] = Field(min_length=1)
    model: List[str] = Field(min_length=1)
    precision: List[str] = Field(default=["fp32"], min_length=1)
    platform: List[str] = Field(default=[platforms.LOCAL], min_length=1)
    gpus: List[int] = Field(default=[1], min_length=1)
    nodes: List[int] = Field(default=[1], min_length=1)

    @field_validator("gpus", "nodes")
    @classmethod
    def _positive(cls, values: List[int]) -> List[int]:
        for v in values:
            if v < 1:
                raise ValueError("must be at least 1, got %d" % v)
            if v > MAX_COUNT:
                raise ValueError("must be at most %d, got %d" % (MAX_COUNT, v))
        return values


class Exclude(Strict):
    reason: str = Field(min_length=1)
    framework: Optional[str] = None
    model: Optional[str] = None
    precision: Optional[str] = None
    platform: Optional[str] = None
    gpus: Optional[int] = None
    nodes: Optional[int] = None
    batch: Optional[int] = None  # inference: one of batch_sizes

    def matches(self, cell: "Cell") -> bool:
        """Whether this rule excludes `cell`: every axis it names has the cell's value."""
        return all(
            getattr(self, axis) is None or getattr(self, axis) == getattr(cell, axis)
            for axis in MATRIX_AXES + ("batch",)
        )


class CocoData(Strict):
    annotations: str
    images: str


class CalibrateOptions(Strict):
    iteration_ms: float = Field(default=50.0, gt=0)
    data_ms: float = Field(default=5.0, ge=0)
    lines_per_iteration: int = Field(default=0, ge=0)
    busy_threads: int = Field(default=0, ge=0)
    hold_mb: int = Field(default=0, ge=0)  # resident memory held through the trial
    # inference: every tail_every-th batch takes tail_ms instead of iteration_ms (a known tail);
    # data_ms is then each batch's pre-processing and post_ms its post-processing
    tail_ms: float = Field(default=0.0, ge=0)
    tail_every: int = Field(default=0, ge=0)
    post_ms: float = Field(default=0.0, ge=0)

    @field_validator("data_ms")
    @classmethod
    def _within_iteration(cls, value: float, info: ValidationInfo) -> float:
        if value > info.data.get("iteration_ms", value):
            raise ValueError(
                "the data wait is part of the iteration: at most iteration_ms (%g)" % info.data["iteration_ms"]
            )
        return value

    @field_validator("post_ms")
    @classmethod
    def _post_within_batch(cls, value: float, info: ValidationInfo) -> float:
        shortest = (
            min(t for t in (info.data.get("iteration_ms"), info.data.get("tail_ms") or None) if t is not None)
            if info.data.get("iteration_ms") is not None
            else None
        )
        if shortest is not None and value + info.data.get("data_ms", 0.0) > shortest:
            raise ValueError(
                "pre- and post-processing (data_ms + post_ms) are part of every batch: "
                "at most %g ms together" % shortest
            )
        return value


class PostProcess(Strict):
    """What every framework's inference keeps of its raw detections (mode: inference)."""

    score_threshold: float = Field(default=0.05, ge=0, lt=1)
    nms_threshold: float = Field(default=0.5, gt=0, le=1)
    detections_per_image: int = Field(default=100, ge=1, le=10_000)


def batches_needed(percentile: float) -> int:
    """Measured batches a percentile needs before at least one batch lies above it: p99 needs
    100, p95 20, p90 10, p50 2. Fewer, and the figure would be the slowest batch renamed."""
    return math.ceil(round(100.0 / (100.0 - percentile), 9))


class Order(Strict):
    """The order of the trials within each round: shuffled, every round drawing its own order from
    one random stream seeded with `seed` (left out, `detbench run` draws a seed and stores it with
    the run); `--resume` keeps the order stored."""

    seed: Optional[int] = Field(default=None, ge=0, le=2**63 - 1)


ADAPTIVE_MIN = 6  # the fewest repeats whose order statistics give a 95% interval of the median
# (harness.measure.stats.median_interval: 1 - 2 / 2**6 >= 0.95)


class AdaptiveRepeats(Strict):
    """`repeats: {min: 6, max: 15, half_width: 0.02}`: `min` interleaved rounds, then one more whole
    round at a time until every cell's 95% interval of its median lies within +-half_width of the
    median (relative), or `max` rounds are done (harness.run.next_round)."""

    min: int = Field(le=MAX_REPEATS)
    max: int = Field(le=MAX_REPEATS)
    half_width: float = Field(gt=0, lt=1)

    @field_validator("min")
    @classmethod
    def _enough_for_an_interval(cls, value: int) -> int:
        if value < ADAPTIVE_MIN:
            raise ValueError(
                "must be at least %d, the fewest repeats that give a 95%% interval of the median "
                "(its smallest and largest), got %d" % (ADAPTIVE_MIN, value)
            )
        return value

    @field_validator("max")
    @classmethod
    def _max_not_below_min(cls, value: int, info: ValidationInfo) -> int:
        if "min" in info.data and value < info.data["min"]:
            raise ValueError("must be at least min (%d), got %d" % (info.data["min"], value))
        return value


def _repeats_form(value: object) -> str:
    return "<adaptive>" if isinstance(value, (dict, AdaptiveRepeats)) else "<count>"


# a fixed count of rounds, or the adaptive form; the branch tags in <> are dropped from error paths
Repeats = Annotated[
    Union[
        Annotated[Annotated[int, Field(ge=1, le=MAX_REPEATS)], Tag("<count>")],
        Annotated[AdaptiveRepeats, Tag("<adaptive>")],
    ],
    Discriminator(_repeats_form),
]


def max_rounds(repeats: Union[int, AdaptiveRepeats]) -> int:
    """The most rounds a run of `repeats` (a count or AdaptiveRepeats) can take."""
    return repeats.max if isinstance(repeats, AdaptiveRepeats) else repeats


def first_rounds(repeats: Union[int, AdaptiveRepeats]) -> int:
    """The rounds a run of `repeats` plans at its start: all of them, or the adaptive `min`."""
    return repeats.min if isinstance(repeats, AdaptiveRepeats) else repeats


class Scenario(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    # train: warmup/measure count iterations of batch_per_gpu images per device; inference:
    # they count batches of each of batch_sizes (a matrix axis), timed to post-processed detections
    # accuracy: every framework trains to a target (harness/plan/accuracy.py, the accuracy: section)
    mode: Literal["train", "inference", "accuracy"] = TRAIN
    batch_sizes: List[int] = []
    percentiles: List[float] = [90.0, 95.0, 99.0]
    postprocess: PostProcess = PostProcess()
    backend: str = "local"  # a name in the launch stage's LAUNCHERS
    matrix: Matrix
    batch_per_gpu: int = Field(default=2, ge=1, le=MAX_COUNT)
    input_size: List[int] = Field(default=[800, 1333], min_length=2, max_length=2)
    data: Union[CocoData, str] = "synthetic"
    warmup: int = Field(default=20, ge=0)
    measure: int = Field(default=100, ge=1)
    repeats: Repeats = 7
    timeout_s: float = Field(default=3600.0, gt=0)
    seed: int = 0
    order: Order = Order()
    env: Dict[str, str] = {}
    weights: Dict[str, str] = {}  # model -> initial weights file every framework of its cells loads
    extra_args: Dict[str, List[str]] = {}
    calibrate: CalibrateOptions = CalibrateOptions()
    options: Dict[str, Dict[str, Union[str, int, float, bool]]] = {}
    exclude: List[Exclude] = []
    accuracy: Optional[AccuracyOptions] = None
    # every trial also prints where its step's time goes (DETBENCH_BREAKDOWN, harness/drivers/breakdown.py)
    breakdown: bool = False

    @field_validator("batch_sizes")
    @classmethod
    def _batch_sizes(cls, values: List[int]) -> List[int]:
        for v in values:
            if not 1 <= v <= MAX_COUNT:
                raise ValueError("batch sizes are whole numbers from 1 to %d, got %d" % (MAX_COUNT, v))
        if len(set(values)) != len(values):
            raise ValueError("lists a batch size twice")
        return values

    @field_validator("percentiles")
    @classmethod
    def _percentiles(cls, values: List[float]) -> List[float]:
        for v in values:
            if not 0 < v < 100:
                raise ValueError("percentiles lie strictly between 0 and 100, got %g" % v)
        if len(set(values)) != len(values):
            raise ValueError("lists a percentile twice")
        return sorted(values)

    @field_validator("input_size")
    @classmethod
    def _size(cls, values: List[int]) -> List[int]:
        if min(values) < 32 or max(values) > 32768:
            raise ValueError("both sides must be between 32 and 32768 pixels")
        return values

    @field_validator("data")
    @classmethod
    def _data(cls, value: Union["CocoData", str]) -> Union["CocoData", str]:
        if isinstance(value, str) and value != "synthetic":
            raise ValueError("data is 'synthetic' or {annotations: FILE, images: DIR}")
        return value

    @property
    def iterations(self) -> int:
        return self.warmup + self.measure

    @property
    def inference(self) -> bool:
        return self.mode == INFERENCE

    def framework_options(self, framework: str) -> Dict[str, Any]:
        """The options a framework's cells run with (the calibration workload's own section for it)."""
        if framework == "calibrate":
            return self.calibrate.model_dump()
        return dict(self.options.get(framework, {}))


@dataclass(frozen=True, order=True)
class Cell:
    framework: str
    model: str
    precision: str
    platform: str
    gpus: int
    nodes: int
    batch: int = 0  # an inference cell's batch size; 0 in training (the scenario's batch_per_gpu)

    @property
    def key(self) -> str:
        key = "/".join(str(getattr(self, axis)) for axis in MATRIX_AXES)
        return key + "/b%d" % self.batch if self.batch else key

    @classmethod
    def from_key(cls, key: str) -> "Cell":
        """The cell a key names (the inverse of `key`)."""
        parts = key.split("/")
        batch = int(parts.pop()[1:]) if len(parts) == len(MATRIX_AXES) + 1 else 0
        f, m, p, pl, g, n = parts
        return cls(f, m, p, pl, int(g), int(n), batch)


@dataclass(frozen=True)
class PlannedCell:
    cell: Cell
    excluded: Optional[str] = None  # reason, rendered as NA


def model_for(backends: Optional[Mapping[str, Any]] = None) -> type[Scenario]:
    """The Scenario model with one optional section per backend that takes options, named after
    it and typed by its launcher's `options` model (`backends`: name -> launcher)."""
    sections = tuple(
        sorted((name, launcher.options) for name, launcher in (backends or {}).items() if launcher.options is not None)
    )
    return _model_with(sections)


@functools.lru_cache(maxsize=None)
def _model_with(sections: Tuple[Tuple[str, Any], ...]) -> type[Scenario]:
    if not sections:
        return Scenario
    fields: Dict[str, Any] = {name: (Optional[options], None) for name, options in sections}
    model: type[Scenario] = create_model("Scenario", __base__=Scenario, **fields)
    return model


def load(path: Union[str, Path], backends: Optional[Mapping[str, Any]] = None) -> Scenario:
    """A valid scenario from `path`, or UserError at its line. With `backends` (the launch
    stage's LAUNCHERS) the backend name and each backend's section are checked too."""
    path = Path(path)
    data, positions = yamlfile.load(path)
    if not isinstance(data, dict):
        raise UserError(located(path, 1, None, "a scenario is a mapping of settings"))
    try:
        scenario = model_for(backends).model_validate(data)
    except ValidationError as exc:
        raise yamlfile.validation_error(path, positions, exc) from None
    check(scenario, path, positions, backends)
    return scenario


def check(
    scenario: Scenario,
    path: Union[str, Path],
    positions: yamlfile.Positions,
    backends: Optional[Mapping[str, Any]] = None,
) -> None:
    """Cross-field checks pydantic cannot do alone; raise UserError at the offending line."""

    def fail(where: Sequence[Union[str, int]], message: str) -> None:
        raise UserError(located(path, yamlfile.line_of(positions, where), ".".join(map(str, where)), message))

    if backends is not None:
        if scenario.backend not in backends:
            fail(("backend",), "unknown backend %r (known: %s)" % (scenario.backend, ", ".join(backends)))
        for launcher in backends.values():
            launcher.check(scenario, fail)
    _check_mode(scenario, fail)
    from harness.plan import accuracy

    accuracy.check_keys(scenario, fail)
    known = {
        "framework": sorted(frameworks.FRAMEWORKS),
        "model": sorted(catalog.MODELS),
        "precision": sorted(catalog.PRECISIONS),
        "platform": platforms.known_names(),
    }
    for axis, valid in known.items():
        for i, value in enumerate(getattr(scenario.matrix, axis)):
            if value not in valid:
                fail(
                    ("matrix", axis, i),
                    "unknown %s %r (known: %s)%s"
                    % (axis, value, ", ".join(valid), names.hint(value) if axis == "framework" else ""),
                )
    for axis in MATRIX_AXES:
        values = getattr(scenario.matrix, axis)
        if len(set(values)) != len(values):
            fail(("matrix", axis), "lists a value twice")
    for name in list(scenario.extra_args) + list(scenario.options):
        section = "extra_args" if name in scenario.extra_args else "options"
        if name not in frameworks.FRAMEWORKS:
            fail((section, name), "unknown framework %r%s" % (name, names.hint(name)))
    _check_command_values(scenario, fail)
    if scenario.warmup + scenario.measure > 1_000_000:
        fail(("measure",), "warmup + measure must stay below 1,000,000 iterations")
    if isinstance(scenario.data, CocoData):
        if not Path(scenario.data.annotations).is_file():
            fail(("data", "annotations"), "no such file: %s" % scenario.data.annotations)
        if not Path(scenario.data.images).is_dir():
            fail(("data", "images"), "no such directory: %s" % scenario.data.images)
    _check_weights(scenario, fail)
    sizes = [len(getattr(scenario.matrix, axis)) for axis in MATRIX_AXES]
    if math.prod(sizes) > MAX_TRIALS:
        fail(("matrix",), "%s cells is more than %d" % (" x ".join(map(str, sizes)), MAX_TRIALS))
    cells = [p.cell for p in plan(scenario.model_copy(update={"exclude": []}))]
    for i, rule in enumerate(scenario.exclude):
        if not any(rule.matches(c) for c in cells):
            fail(("exclude", i), "matches no cell of the matrix")
    planned = plan(scenario)
    if not any(p.excluded is None for p in planned):
        fail(("matrix",), "every cell is excluded: nothing to run")
    if scenario.mode == accuracy.ACCURACY:
        accuracy.check(scenario, planned, fail)
        return
    for p in planned:
        fw = frameworks.FRAMEWORKS[p.cell.framework]
        if p.excluded is not None:
            continue
        if scenario.inference and fw.infer is None:
            fail(
                ("matrix", "framework", scenario.matrix.framework.index(fw.name)),
                "%s has no inference path%s" % (fw.name, ": " + fw.infer_why if fw.infer_why else ""),
            )
        runs = fw.infer_supports if scenario.inference else fw.supports
        if not runs(p.cell.model, p.cell.precision):
            models = fw.infer_models if scenario.inference else fw.models
            axis = "model" if p.cell.model not in models else "precision"
            index = getattr(scenario.matrix, axis).index(getattr(p.cell, axis))
            fail(
                ("matrix", axis, index),
                "%s cannot run %s %s%s; exclude that cell with a reason"
                % (fw.name, p.cell.model, p.cell.precision, " inference" if scenario.inference else ""),
            )
    runnable = [p.cell for p in planned if p.excluded is None]
    rounds = max_rounds(scenario.repeats)
    if len(runnable) * rounds > MAX_TRIALS:
        fail(
            ("repeats", "max") if isinstance(scenario.repeats, AdaptiveRepeats) else ("repeats",),
            "%d cells x %d repeats is more than %d trials" % (len(runnable), rounds, MAX_TRIALS),
        )
    _check_commands(scenario, runnable, fail)


Fail = Callable[[Sequence[Union[str, int]], str], None]  # raises the UserError at a field's line


def _check_mode(scenario: Scenario, fail: Fail) -> None:
    """Keys of the other mode are an error (set in the file, not defaulted), as are the inference
    settings a scenario cannot honour: a percentile needs enough measured batches above it."""
    given = scenario.model_fields_set
    if scenario.breakdown and scenario.mode != TRAIN:
        fail(("breakdown",), "the step breakdown is for training speed runs (mode: train)")
    if scenario.inference:
        for key in TRAINING_ONLY:
            if key in given:
                fail((key,), "a training key: an inference scenario sets batch_sizes instead")
        if not scenario.batch_sizes:
            fail(
                ("batch_sizes",) if "batch_sizes" in given else ("mode",),
                "an inference scenario lists its batch sizes, e.g. batch_sizes: [1, 2, 4, 8]",
            )
        for axis in ("gpus", "nodes"):
            values = getattr(scenario.matrix, axis)
            if values != [1]:
                fail(("matrix", axis), "inference trials run on one device: %s must be [1]" % axis)
        for i, p in enumerate(scenario.percentiles):
            if batches_needed(p) > scenario.measure:
                fail(
                    ("percentiles", i),
                    "the %g%% latency needs at least %d measured batches; measure is %d"
                    % (p, batches_needed(p), scenario.measure),
                )
    else:
        for key in INFERENCE_ONLY:
            if key in given:
                fail((key,), "an inference key: set mode: inference to use it")
        for i, rule in enumerate(scenario.exclude):
            if rule.batch is not None:
                fail(("exclude", i, "batch"), "an inference key: set mode: inference to use it")


def _check_weights(scenario: Scenario, fail: Fail) -> None:
    """One file per model (`detbench weights make`), checked against that model's layout."""
    from harness.plan import weights

    for model, path in scenario.weights.items():
        if model not in weights.MODELS:
            fail(("weights", model), "no shared weights layout for %r (known: %s)" % (model, ", ".join(weights.MODELS)))
        if model not in scenario.matrix.model:
            fail(("weights", model), "model %r is not in the matrix" % model)
        if not Path(path).is_file():
            fail(("weights", model), "no such file: %s" % path)
        problem = weights.problem(model, path)
        if problem:
            fail(("weights", model), problem)
    for framework, options in scenario.options.items():  # a rival's own weights file (options.<fw>.weights)
        own = options.get("weights") if isinstance(options, dict) else None
        if isinstance(own, str) and os.path.isabs(own) and not Path(own).is_file():
            fail(("options", framework, "weights"), "no such file: %s" % own)


def _check_command_values(scenario: Scenario, fail: Fail) -> None:
    """Values that become environment variables or argv items: names a process can take, no NUL."""
    from runner import SECRET

    for name, value in scenario.env.items():
        if not ENV_NAME.fullmatch(name):
            fail(("env", name), "not an environment variable name (letters, digits and _)")
        if SECRET.search(name):
            fail(
                ("env", name),
                "looks like a secret: scenarios are stored with the results; "
                "set it in the environment detbench runs in instead",
            )
        if "\0" in value:
            fail(("env", name), "contains a NUL character")
    for name, args in scenario.extra_args.items():
        for i, arg in enumerate(args):
            if "\0" in arg:
                fail(("extra_args", name, i), "contains a NUL character")
    if "calibrate" in scenario.options:
        fail(("options", "calibrate"), "the calibration workload takes its settings from the calibrate: section")
    for name, opts in scenario.options.items():
        for key, option in opts.items():
            if "\0" in key or isinstance(option, str) and "\0" in option:
                fail(("options", name, key), "contains a NUL character")


def _check_commands(scenario: Scenario, cells: Sequence[Cell], fail: Fail) -> None:
    """Build every runnable cell's command once: what an adapter refuses fails here, at its line."""
    from harness.frameworks.initial import no_downloads

    for name, args in scenario.extra_args.items():
        try:
            no_downloads(name, args)
        except UserError as exc:
            fail(("extra_args", name), str(exc))
        fw = frameworks.FRAMEWORKS.get(name)
        bad = fw.extra_args_problem(args) if fw is not None and not scenario.inference else None
        if bad is not None:  # an option its own program does not take: refused before anything runs
            fail(("extra_args", name, bad[0]), "%s: %s" % (name, bad[1]))
    for cell in cells:
        fw = frameworks.FRAMEWORKS[cell.framework]
        choices: Tuple[Optional[Dict[str, Any]], ...] = ({}, scenario.options.get(cell.framework))
        for opts in choices:
            if opts is None:
                continue
            sc = scenario if opts else scenario.model_copy(update={"options": {}})
            try:
                ctx = context(sc, cell)
                fw.argv(ctx)
                fw.trial_settings(ctx)
                fw.trial_files(ctx)
            except (UserError, ValueError, TypeError) as exc:
                where = (
                    ("options", cell.framework)
                    if opts
                    else ("matrix", "framework", scenario.matrix.framework.index(cell.framework))
                )
                fail(where, "%s: %s" % (cell.key, exc))


def plan(scenario: Scenario) -> List[PlannedCell]:
    """Every cell of the matrix in a stable order, with its exclusion reason if any. An inference
    scenario's batch sizes are the last axis: one cell per batch size."""
    batches = scenario.batch_sizes if scenario.inference else [0]
    out: List[PlannedCell] = []
    for combo in itertools.product(*(getattr(scenario.matrix, axis) for axis in MATRIX_AXES)):
        for batch in batches:
            framework, model, precision, platform, gpus, nodes = combo
            cell = Cell(framework, model, precision, platform, gpus, nodes, batch)
            reason = next((rule.reason for rule in scenario.exclude if rule.matches(cell)), None)
            out.append(PlannedCell(cell, reason))
    return out


def round_orders(cells: Sequence[Cell], rounds: int, seed: Optional[int]) -> List[List[Cell]]:
    """The cells in the order each round runs them: `rounds` lists, each a permutation of `cells`
    drawn in turn from one random stream seeded with `seed` (the same seed, the same orders)."""
    rng = random.Random(seed)
    out: List[List[Cell]] = []
    for _ in range(rounds):
        order = list(cells)
        rng.shuffle(order)
        out.append(order)
    return out


def batch_per_device(sc: Scenario, cell: Cell) -> int:
    """Images in one device's batch: the inference cell's batch size, else batch_per_gpu."""
    return cell.batch or sc.batch_per_gpu


def images_per_iteration(sc: Scenario, cell: Cell) -> int:
    """Images in one iteration over every device of the cell."""
    return batch_per_device(sc, cell) * cell.gpus * cell.nodes


def trial_env(sc: Scenario, cell: Cell) -> Dict[str, str]:
    """The environment a cell's trials run with: the scenario's, and with `breakdown: true` the
    variable that asks the program for its step breakdown (harness/drivers/breakdown.py)."""
    env = dict(sc.env)
    if sc.breakdown:
        env[jsonlog.BREAKDOWN_ENV] = "%s/%s" % (cell.framework, cell.model)
    return env


def context(sc: Scenario, cell: Cell, python: str = sys.executable, rendezvous: Optional[Any] = None) -> TrialContext:
    """The TrialContext a framework's adapter builds the trial of `cell` from."""
    data = None
    if isinstance(sc.data, CocoData):
        # trials run from the checkout's root: paths the scenario gave relative to the caller's folder
        data = {"annotations": os.path.abspath(sc.data.annotations), "images": os.path.abspath(sc.data.images)}
    return TrialContext(
        framework=cell.framework,
        model=cell.model,
        precision=cell.precision,
        gpus=cell.gpus,
        nodes=cell.nodes,
        batch_per_gpu=batch_per_device(sc, cell),
        input_size=(sc.input_size[0], sc.input_size[1]),
        iterations=sc.iterations,
        data=data,
        extra_args=tuple(sc.extra_args.get(cell.framework, ())),
        options=sc.framework_options(cell.framework),
        python=python,
        seed=sc.seed,
        rendezvous=rendezvous,
        env=trial_env(sc, cell),
        weights=os.path.abspath(sc.weights[cell.model]) if cell.model in sc.weights else None,
        inference=sc.postprocess.model_dump() if sc.inference else None,
    )


def loads_text(text: str, name: str = "<scenario>", backends: Optional[Mapping[str, Any]] = None) -> Scenario:
    """Validate a scenario given as text (tests, generated scenarios)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text, encoding="utf-8")
        return load(path, backends)
