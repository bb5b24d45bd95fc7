"""What a report holds, independent of how it is rendered.

A Table is one seed-style table of Entries; a Report is everything a renderer draws, built
once from the store and the published figures by harness.report.build.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

THROUGHPUT = "throughput"  # cells like 55.5(288ms)
ITERATION = "iteration"  # cells like 313ms(0ms)
INFERENCE = "inference"  # frameworks side by side at one batch size: 12.3(81.2ms p95)

# the columns of one trial row (exports and the report's trials), in order
TRIAL_COLUMNS = (
    "trial_id",
    "run_id",
    "seq",
    "cell_key",
    "framework",
    "model",
    "precision",
    "platform",
    "gpus",
    "nodes",
    "repeat",
    "status",
    "reason",
    "throughput",
    "observed",
    "iteration_time_s",
    "data_time_s",
    "exact",
    "peak_mem_mb",
    "records",
    "scrape_errors",
    "started",
    "ended",
    "exit_code",
    "figure_kind",
    "window_json",
    "work_json",
    "peak_rss_mb",
    "peak_device_mb",
    "latency_json",
    "drawn_json",
)


@dataclass(frozen=True)
class Detail:
    """The summary behind a measured cell's figure, over its finished repeats."""

    n: int  # finished repeats
    failed: int  # failed repeats
    minimum: float  # images / s
    maximum: float
    iqr: float
    ci: Optional[Tuple[float, float]]  # 95% bootstrap CI of the median; None when not computed
    cv: float
    observed: Optional[float]  # median of the observed estimator
    outliers: int
    settings: Dict[str, object]  # normalized settings of the first repeat
    settings_variants: Tuple[Dict[str, object], ...]  # the distinct settings of the repeats
    kinds: Tuple[Optional[str], ...]  # figure kinds of the repeats (None: stored before kinds)
    windows: Tuple[Tuple[int, int], ...]  # iterations the repeats' figures cover, distinct
    nominal_window: Optional[Tuple[int, int]]  # the window the scenario asked for
    work: Optional[Dict[str, float]]  # work per iteration, median over repeats
    peak_rss_mb: Optional[float]  # highest over the repeats
    peak_device_mb: Optional[float]
    peak_mem_mb: Optional[float]  # the framework's own logged peak
    run_id: str
    median: Optional[float] = None  # images / s, the cell's figure
    flops_per_image: Optional[float] = None  # counted work of one image's training step
    peak_gflops: Optional[float] = None  # the host's measured peak at the cell's precision
    limit_note: Optional[str] = None  # why either is missing
    peak_stored_gflops: Optional[float] = None  # the lower peak the run stored, where a later one replaced it
    flops_per_iteration: Optional[float] = None  # one device's counted work per iteration, from its logged counts
    work_basis: Optional[str] = None  # "logged" counts, or "synthetic" (a run stored before work models)
    devices: int = 1  # devices the cell ran on: the peak is per device
    imported: bool = False  # its figures come from logs `detbench import` brought in
    # the kinds of the repeats whose figure is not exact (a bound over 0.1% of it, none, or
    # another window than the one asked for)
    inexact_kinds: Tuple[Optional[str], ...] = ()
    # what its repeats drew from the data set, {scope: {count: median}} (harness.measure.drawn); None: not logged
    drawn: Optional[Dict[str, Dict[str, float]]] = None

    @property
    def tflops(self) -> Optional[float]:
        """Achieved TFLOP/s: the cell's images/s (median) times its work per image, which is its
        work per iteration over its measured iteration time."""
        if self.flops_per_image is None or self.median is None:
            return None
        return self.median * self.flops_per_image / 1e12

    def _share(self, peak_gflops: Optional[float]) -> Optional[float]:
        tf = self.tflops
        return None if tf is None or not peak_gflops else tf * 1000.0 / (peak_gflops * max(self.devices, 1))

    @property
    def mfu(self) -> Optional[float]:
        """The fraction of the host's peak the cell achieved (model FLOPs utilisation)."""
        return self._share(self.peak_gflops)

    @property
    def mfu_stored(self) -> Optional[float]:
        """The share against the lower peak the run stored, where a higher one replaced it."""
        return self._share(self.peak_stored_gflops) if self.peak_stored_gflops else None


@dataclass(frozen=True)
class Entry:
    throughput: Optional[float] = None  # images / s
    iteration_ms: Optional[float] = None
    data_ms: Optional[float] = None
    na: Optional[str] = None  # reason the cell has no figure
    flags: List[str] = field(default_factory=list)  # names from harness.measure.flags
    detail: Optional[Detail] = None  # measured cells with a figure only
    latency: Optional["Latency"] = None  # inference cells only


@dataclass(frozen=True)
class Latency:
    """An inference cell's latency figures: each the median over its finished repeats of that
    figure, every repeat's figures taken over one set of measured batches."""

    batch: int
    mean_ms: Optional[float]
    percentiles: Tuple[Tuple[float, Optional[float]], ...]  # (percentile, ms); None: too few batches
    p50_ms: Optional[float]
    batches: int  # measured batches per repeat (the fewest of the repeats)
    phases_ms: Dict[str, float]  # pre_s/net_s/post_s -> median ms per batch
    detections_per_image: Optional[float]
    mean_spread_ms: Optional[Tuple[float, float]]  # lowest and highest repeat's mean latency


@dataclass(frozen=True)
class LatencyTable:
    """One framework and model on one platform and precision: a row per batch size, in the form
    of NVIDIA's EfficientDet inference tables."""

    title: str
    platform: str
    precision: str
    framework: str
    framework_title: str
    model: str
    percentiles: Tuple[float, ...]
    rows: Tuple[Tuple[int, Entry], ...]  # (batch size, entry with its Latency), by batch size
    notes: Tuple[str, ...] = ()
    source: str = "measured"


@dataclass(frozen=True)
class Column:
    key: str  # framework name (published: its key in the file)
    title: str  # heading


@dataclass(frozen=True)
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
    entries: Dict[Tuple[str, str], Entry]  # (model, column key) -> entry
    notes: List[str] = field(default_factory=list)  # lines printed under the table
    # those of the notes a terminal shows only when asked (--details): the scope, how each column
    # implements its parts, the work per iteration and the place check; files show every note
    details: List[str] = field(default_factory=list)
    source: str = "measured"


@dataclass(frozen=True)
class Run:
    id: str
    scenario: str
    backend: str
    created: float  # seconds since the epoch
    host: Optional[Dict[str, object]]  # the host facts stored with the run


@dataclass(frozen=True)
class Trace:
    """Every repeat's iteration times of one cell, for the HTML page's trace figure."""

    cell_key: str
    label: str
    # ("repeat N", its (iteration, time_s, data_time_s, arrived))
    repeats: Tuple[Tuple[str, Tuple[Tuple[Any, ...], ...]], ...]
    warmup: int
    measure: int


@dataclass(frozen=True)
class Failure:
    id: str  # trial id
    cell: str  # cell key
    reason: str


@dataclass(frozen=True)
class Report:
    """Everything a renderer draws; harness.report.build makes it."""

    platform: str
    generated: float  # seconds since the epoch, when it was built
    measured: Tuple[Table, ...]  # tables from the store
    published: Tuple[Table, ...]  # tables of the published figures named published_name
    published_name: Optional[str]
    shown: Tuple[Table, ...]  # measured tables with the matching published columns beside them
    scaling: Dict[Any, List[Any]]  # harness.report.scaling.scaling_series of the measured tables
    trials: Tuple[Dict[str, object], ...]  # one row per trial of the cells shown (TRIAL_COLUMNS), run order
    runs: Tuple[Run, ...]  # the runs those trials belong to, by id
    platform_summary: str  # one line, or why the platform has no description
    platform_spec: Optional[Dict[str, object]]  # the platform's description, None when unknown
    data_share: Tuple[Tuple[str, float, float], ...]  # (configuration, median iteration ms, median data ms)
    memory: Tuple[Tuple[str, Dict[str, Optional[float]]], ...]  # (configuration, highest peaks of its repeats)
    traces: Tuple[Trace, ...]
    failed: Tuple[Failure, ...]
    rows: str = "cells"  # which rows the CSV export holds: cells or trials
    latency: Tuple[LatencyTable, ...] = ()  # inference cells, one table per framework x model
    inference: Tuple[Table, ...] = ()  # inference cells side by side at one batch size (form INFERENCE)
    published_latency: Tuple[LatencyTable, ...] = ()  # published inference tables (figures as printed)
    published_grids: Tuple[Tuple[str, Tuple[str, ...], Tuple[Tuple[str, ...], ...], Tuple[str, ...]], ...] = ()
    breakdowns: Tuple[Any, ...] = ()  # harness.report.breakdown.CellBreakdown of each cell that has one
    breakdown_notes: Tuple[str, ...] = ()  # one line per cell whose breakdown is missing or off


def batch_note(gpus: int, nodes: int, batch_per_gpu: int) -> str:
    """'N devices, B images per device (batch N x B)': the batch line under a table."""
    devices = gpus * nodes
    where = (
        "%d node%s x %d device%s" % (nodes, "s" if nodes > 1 else "", gpus, "s" if gpus > 1 else "")
        if nodes > 1
        else "%d device%s" % (gpus, "s" if gpus > 1 else "")
    )
    return "%s, %d images per device (batch %d)" % (where, batch_per_gpu, devices * batch_per_gpu)
