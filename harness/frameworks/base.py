"""What every framework adapter declares."""
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, List, Optional, Tuple

# where a framework can run
RUNS_HERE = "runs here"
NEEDS_GPU = "needs a GPU"
CONTAINER_ONLY = "container only"

# in an argv item: the trial's own folder (absolute), filled in by every launcher just before
# the start (harness/launch/trialfiles.py), so one argv serves every repeat of a cell
TRIAL_DIR = "{trial_dir}"


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
    env: Optional[object] = None        # harness.spec.pins.EnvSpec when it runs in its own pinned venv
    # files the trial needs in its folder, {name: text} (derived configs of frameworks that take
    # their batch, devices, precision or iteration count only from a config file); every launcher
    # writes them there before the start, and the argv names them as TRIAL_DIR + "/" + name
    files: Optional[Callable[[TrialContext], Dict[str, str]]] = None

    def trial_files(self, ctx):
        return dict(self.files(ctx)) if self.files is not None else {}

    def supports(self, model, precision):
        return model in self.models and precision in self.precisions
