"""What a report table holds, independent of how it is rendered."""
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from harness.measure import work
from harness.report import figures

THROUGHPUT = "throughput"   # cells like 55.5(288ms)
ITERATION = "iteration"     # cells like 313ms(0ms)

FLAG_TEXT = {
    "unstable": "unstable: repeats spread more than 7% ((max - min) / min)",
    "data-bound": "data-bound: data time is more than 10% of iteration time",
    "estimators-disagree": "the framework's own times and the log line timestamps disagree by more than 5%",
    figures.APPROXIMATE: figures.APPROXIMATE_TEXT,
    work.UNEQUAL_WORK: work.UNEQUAL_TEXT,
    "gpu-thermal-throttle": "a GPU throttled its clocks for heat during a repeat (NVML thermal/hw slowdown)",
    "gpu-power-throttle": "a GPU throttled its clocks at its power limit during a repeat (NVML power cap/brake)",
    "cpu-oversubscribed": "CPU oversubscribed: the trial had more than 1.5 ready threads per core on saturated cores",
    "memory-pressure": "memory pressure: the machine swapped or ran below 5% available memory during a repeat",
    "mixed-hosts": "the repeats ran on machines with different fingerprints",
}


@dataclass
class Entry:
    throughput: Optional[float] = None     # images / s
    iteration_ms: Optional[float] = None
    data_ms: Optional[float] = None
    na: Optional[str] = None               # reason the cell has no figure
    flags: List[str] = field(default_factory=list)
    detail: Dict[str, object] = field(default_factory=dict)   # n, ci, min, max, cv, observed ...


@dataclass
class Column:
    key: str          # framework name (published: its key in the file)
    title: str        # heading


@dataclass
class Table:
    title: str
    platform: str
    precision: str
    gpus: int
    nodes: int
    batch_per_gpu: int
    form: str
    columns: List[Column]
    models: List[str]
    entries: Dict[Tuple[str, str], Entry]    # (model, column key) -> entry
    notes: List[str] = field(default_factory=list)   # lines printed under the table
    source: str = "measured"


def batch_note(gpus, nodes, batch_per_gpu):
    devices = gpus * nodes
    where = "%d node%s x %d device%s" % (nodes, "s" if nodes > 1 else "", gpus, "s" if gpus > 1 else "") \
        if nodes > 1 else "%d device%s" % (gpus, "s" if gpus > 1 else "")
    return "%s, %d images per device (batch %d)" % (where, batch_per_gpu, devices * batch_per_gpu)
