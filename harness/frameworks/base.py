"""What every framework adapter declares."""
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

# WORKDIR, the trial's working directory inside its folder, is runner.py's: a framework that
# writes next to itself, or reads datasets/ relative to where it runs, does so there
from harness.errors import UserError
from runner import WORKDIR

# where a framework can run
RUNS_HERE = "runs here"
NEEDS_GPU = "needs a GPU"
CONTAINER_ONLY = "container only"

# in an argv item: the trial's own folder (absolute), filled in by every launcher just before
# the start (harness/plan/trialfiles.py), so one argv serves every repeat of a cell
TRIAL_DIR = "{trial_dir}"


@dataclass(frozen=True)
class Link:
    """A symbolic link a launcher makes in the trial's working directory, to an absolute path
    (a scenario's dataset file or folder, which every launcher makes readable at its own path)."""
    target: str


# the interpreter of the pinned env inside the images built on detbench's local base
IMAGE_VENV = "/opt/env/bin/python"


@dataclass(frozen=True)
class ImageRecipe:
    """A container image a framework's trials can run in: the folder dockerfiles/<name>/ (a
    Dockerfile pinned by digest and commit) and how `detbench image build` builds it."""
    name: str
    python: str                    # the interpreter in the image that runs runner.py and the trial
    # its requirements.txt's wheels are downloaded on the host for the local base's CPython and
    # served to the build (never a layer of the image)
    wheels: bool = False
    local_base: bool = False       # FROM the base `detbench image base` makes, unless told otherwise
    # requirements.txt names whose index offers only an sdist: their wheels are built on the host
    # (pure Python only: a py3-none-any wheel, the same for any CPython 3)
    build_here: Tuple[str, ...] = ()
    # FROM the image of this other recipe as built here (its ID from the lock), unless told otherwise:
    # its layers are shared, and a change of it rebuilds this one (the ID is in the build key)
    base_recipe: Optional[str] = None
    # the wheels `detbench env build` compiled for the framework's own pinned env (mmdetection:
    # mmcv) are served with the downloaded ones, never downloaded
    host_wheels: bool = False


# the scraper of every inference trial's log: each driver prints one DETBENCH_ITER line per batch
INFERENCE_SCRAPER = "detbench-jsonl"


@dataclass(frozen=True)
class TrialContext:
    """Everything an adapter needs to build one trial's command line."""
    framework: str
    model: str
    precision: str
    gpus: int
    nodes: int
    batch_per_gpu: int
    input_size: Tuple[int, int]
    iterations: int             # warmup + measured
    data: Optional[dict]        # None for synthetic, else {"annotations": .., "images": ..}
    extra_args: Tuple[str, ...] = ()
    options: Dict[str, object] = field(default_factory=dict)  # framework-specific scenario options
    python: str = sys.executable
    seed: int = 0
    # how the launchers of a multi-node trial meet. None: the adapter's own way. "static": a
    # scheduler starts one launcher per node and sets PET_MASTER_ADDR, PET_MASTER_PORT and
    # PET_NODE_RANK on each (torchrun reads PET_<OPTION>); the adapter adds --rdzv-backend static,
    # so node 0 (whose folder holds the trial's log) is always the node of global rank 0
    rendezvous: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)   # the scenario's env: every framework's process gets it
    weights: Optional[str] = None   # the scenario's weights file for this model (absolute), None: random init
    # an inference trial (scenario `mode: inference`): the post-processing every framework is
    # set to ({"score_threshold", "nms_threshold", "detections_per_image"}); None: a training trial.
    # batch_per_gpu is then the cell's batch size and iterations its warmup + measured batches
    inference: Optional[Dict[str, object]] = None


def unknown_option(flags: FrozenSet[str], args: Sequence[str]) -> Optional[Tuple[int, str]]:
    """(index, name) of the first of `args` that names an option not among `flags`, read as argparse
    reads a command line: '--name=value' by its name, a long option by an unambiguous prefix,
    '-xVALUE' by '-x'; a value (no leading dash, or a negative number) and all after '--' pass."""
    for index, arg in enumerate(args):
        if arg == "--":
            return None
        if not arg.startswith("-") or arg == "-" or _is_number(arg):
            continue
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg
        if name in flags or (not arg.startswith("--") and arg[:2] in flags):
            continue
        if arg.startswith("--") and sum(1 for f in flags if f.startswith(name)) == 1:
            continue
        return index, name
    return None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Framework:
    name: str
    title: str                                   # column heading in tables
    scraper: str                                 # key of harness.measure.scrapers.SCRAPERS
    models: FrozenSet[str]
    precisions: FrozenSet[str]
    status: str                                  # RUNS_HERE, NEEDS_GPU or CONTAINER_ONLY
    why: str                                     # one line: why that status
    figures: str                                 # what its logged times mean
    command: Callable[[TrialContext], List[str]]
    settings: Callable[[TrialContext], dict]     # normalized settings for like-for-like checks
    pins: Dict[str, str] = field(default_factory=dict)
    scrape_options: Dict[str, object] = field(default_factory=dict)   # passed to the scraper
    env: Optional[object] = None        # harness.vocab.pins.EnvSpec when it runs in its own pinned venv
    # files the trial needs in its folder, {name: text} (derived configs of frameworks that take
    # their batch, devices, precision or iteration count only from a config file); every launcher
    # writes them there before the start, and the argv names them as TRIAL_DIR + "/" + name
    files: Optional[Callable[[TrialContext], Dict[str, str]]] = None
    # where the framework's own config looks for its data, relative to its working directory
    # ({"datasets/coco/train2014": scenario path}, e.g. maskrcnn-benchmark's paths_catalog): links
    # to the scenario's files, made under WORKDIR in the trial folder before the start
    links: Optional[Callable[[TrialContext], Dict[str, str]]] = None

    # inference (scenario `mode: inference`): the argv of an inference trial, built from a
    # TrialContext whose `inference` is set; None where the framework has no inference path
    infer: Optional[Callable[[TrialContext], List[str]]] = None
    infer_models: FrozenSet[str] = frozenset()
    infer_precisions: FrozenSet[str] = frozenset()
    infer_why: str = ""                 # one line: what its inference path runs (or why it has none)
    infer_settings: Optional[Callable[[TrialContext], dict]] = None   # normalized settings of an inference trial

    # the container images it has recipes for: its trials run in the first unless the scenario's
    # docker.images names another (harness/launch/images.py builds them)
    images: Tuple[ImageRecipe, ...] = ()
    # the options its training program takes on its command line (its argparse parser's option
    # strings; tests hold them to the parser): an extra_args option outside them is refused before
    # anything runs. None: not known here, left to the program
    flags: Optional[FrozenSet[str]] = None
    # what else it checks of extra_args before anything runs (the bundled trainer: its --set keys):
    # args -> (index of the argument at fault, why) or None
    check_extra: Optional[Callable[[Sequence[str]], Optional[Tuple[int, str]]]] = None

    def extra_args_problem(self, args: Sequence[str]) -> Optional[Tuple[int, str]]:
        """(index, why) of the first of a training trial's extra_args its program would refuse, where
        that is known here; None where none is."""
        if self.flags is not None:
            found = unknown_option(self.flags, args)
            if found is not None:
                return found[0], "%s is not an option of its training program (its options: %s)" % (
                    found[1], " ".join(sorted(self.flags)))
        return self.check_extra(args) if self.check_extra is not None else None

    def trial_files(self, ctx):
        """What a launcher writes into the trial folder: {name: text} of the derived files and
        {WORKDIR/path: Link} of the data links."""
        out = dict(self.files(ctx)) if self.files is not None else {}
        if self.links is not None:
            out.update({WORKDIR + "/" + rel: Link(target) for rel, target in self.links(ctx).items()})
        return out

    def supports(self, model: str, precision: str) -> bool:
        return model in self.models and precision in self.precisions

    def argv(self, ctx):
        """The trial's command line: its inference driver's for an inference context. Extra
        arguments that would make the framework download a file at start are refused."""
        from harness.frameworks.initial import no_downloads
        no_downloads(self.name, ctx.extra_args)
        bad = self.extra_args_problem(ctx.extra_args) if ctx.inference is None else None
        if bad is not None:
            raise UserError("%s: extra_args: %s" % (self.name, bad[1]))
        return self.infer(ctx) if ctx.inference is not None else self.command(ctx)

    def trial_settings(self, ctx):
        return self.infer_settings(ctx) if ctx.inference is not None else self.settings(ctx)

    def reading(self, ctx):
        """(scraper, its options) for the trial's log: inference drivers all print DETBENCH_ITER lines."""
        if ctx.inference is not None:
            return INFERENCE_SCRAPER, {}
        return self.scraper, dict(self.scrape_options)

    def infer_supports(self, model: str, precision: str) -> bool:
        return self.infer is not None and model in self.infer_models and precision in self.infer_precisions


def infer_args(ctx):
    """The flags every inference driver takes, in one order, from an inference TrialContext:
    what each batch holds, how many batches run (warmup included), the input, the precision
    and the post-processing. A driver adds its own (its config, the device) around them."""
    post = ctx.inference or {}
    argv = ["--model", ctx.model, "--batch-size", str(ctx.batch_per_gpu), "--batches", str(ctx.iterations),
            "--input-size", "%dx%d" % tuple(ctx.input_size), "--precision", ctx.precision,
            "--seed", str(ctx.seed),
            "--score-threshold", repr(float(post.get("score_threshold", 0.05))),
            "--nms-threshold", repr(float(post.get("nms_threshold", 0.5))),
            "--detections", str(int(post.get("detections_per_image", 100)))]
    if ctx.weights:
        argv += ["--weights", ctx.weights]
    if ctx.data:
        argv += ["--data", ctx.data["annotations"], "--images", ctx.data["images"]]
    return argv
