"""What the results store holds, read back as typed frozen records.

The store (harness.results.store) keeps runs, their planned cells, their trials and each
trial's iteration records in SQLite, with the structured values (the scenario, the host, the
limits, the order, and per trial the argv, settings, telemetry, window, work, latency and breakdown) as
JSON text. Every such column is decoded here, once, into the field of its record:

    StoredRun        a run: its scenario (StoredScenario; `validated(backends)` gives the whole
                     Scenario a resume runs), host, limits, order (StoredOrder)
    StoredCell       a planned cell of a run, with its run's start time
    StoredTrial      a trial; `result()` gives back the TrialResult that was stored for it
    StoredIteration  one iteration record of a trial (a named tuple)

A column a store of an older schema lacks reads as empty (None), and a column that cannot be
decoded, or holds another shape than its field, reads as empty too: a damaged value never
stops a report. Records are built from a row by column name (`run_of`, `cell_of`,
`trial_of`, `iteration_of`), from a sqlite3.Row or any mapping, so a column added later is
simply not read.

Each record also answers `record["column"]` and `record.keys()` with the row exactly as
stored (a framework stored under its old name already renamed): the plain columns read as
they did from a sqlite3.Row, for readers of plain columns such as the place check
(harness.measure.place) and the trial rows of the exports, which carry the stored text.
"""

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

if TYPE_CHECKING:
    from harness.measure.result import TrialResult
    from harness.plan.scenario import Scenario

TRAIN = "train"
INFERENCE = "inference"
MEASURED = "measured"  # runs.origin of a run `detbench run` made (and of every run before origins)
IMPORTED = "imported"  # runs.origin of a run `detbench import` made from logs
STATUSES = ("pending", "running", "done", "failed")


# ------------------------------------------------------------------ decoding, one column at a time


def _decode(text: Any) -> Any:
    """A JSON column's value; None for NULL, empty text or text that is not JSON."""
    if text is None or text == "":
        return None
    if not isinstance(text, (str, bytes)):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _mapping(text: Any) -> Optional[Dict[str, Any]]:
    value = _decode(text)
    return value if isinstance(value, dict) else None


def _integer(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def _stored(columns: Mapping[str, Any], name: str) -> Any:
    """A NOT NULL column's value, as stored (None where a partial row leaves it out)."""
    return columns.get(name)


def _columns(row: Any) -> Dict[str, Any]:
    """A row (sqlite3.Row or mapping) as {column: value}."""
    if isinstance(row, Mapping):
        return dict(row)
    return {k: row[k] for k in row.keys()}


class _Row:
    """The row as stored, by column name, beside a record's typed fields."""

    columns: Mapping[str, Any]

    def __getitem__(self, column: str) -> Any:
        return self.columns[column]

    def keys(self) -> Tuple[str, ...]:
        return tuple(self.columns)

    def get(self, column: str, default: Any = None) -> Any:
        return self.columns.get(column, default)


# ------------------------------------------------------------------ the scenario a run stored


@dataclass(frozen=True)
class StoredScenario:
    """The scenario as a run stored it (runs.scenario_json), read leniently: the fields the
    readers of a store use, each None (or empty) where the stored scenario lacks it or holds
    another type. `document` is the whole stored mapping ({} where it is not one)."""

    name: Optional[str] = None
    mode: str = TRAIN
    warmup: Optional[int] = None  # iterations (batches) before the window
    measure: Optional[int] = None  # iterations (batches) in the window
    repeats: Optional[int] = None
    batch_per_gpu: Optional[int] = None
    batch_sizes: Tuple[int, ...] = ()  # inference
    input_size: Optional[Tuple[int, int]] = None
    percentiles: Tuple[float, ...] = ()  # inference: the latency percentiles it asked for
    env: Dict[str, Any] = field(default_factory=dict)
    extra_args: Dict[str, List[str]] = field(default_factory=dict)  # framework -> arguments, as stored
    document: Dict[str, Any] = field(default_factory=dict, repr=False)
    text: Optional[str] = field(default=None, repr=False, compare=False)  # the column as stored

    @property
    def nominal_window(self) -> Optional[Tuple[int, int]]:
        """(first, last) measured iteration the scenario asked for, or None where unknown."""
        if self.warmup is None or self.measure is None:
            return None
        return (self.warmup + 1, self.warmup + self.measure)

    def validated(self, backends: Mapping[str, Any]) -> "Scenario":
        """The whole Scenario (harness.plan.scenario, each backend's section typed by its launcher
        in `backends`, name -> launcher: harness.launch.LAUNCHERS) validated again from the stored
        text, strictly, as `detbench run --resume` runs it: pydantic's ValidationError where the
        stored scenario is not one this version can run."""
        from harness.plan import scenario as scenario_mod

        return scenario_mod.model_for(backends).model_validate_json(self.text if self.text is not None else "null")


def scenario(text: Any) -> StoredScenario:
    """The one decoder of runs.scenario_json."""
    doc = _mapping(text)
    if doc is None:
        return StoredScenario(text=_text(text))
    try:
        percentiles = tuple(float(p) for p in doc.get("percentiles", ()))
    except (TypeError, ValueError):
        percentiles = ()
    sizes = doc.get("batch_sizes")
    size = doc.get("input_size")
    env, extra = doc.get("env"), doc.get("extra_args")
    return StoredScenario(
        name=_text(doc.get("name")),
        mode=INFERENCE if doc.get("mode") == INFERENCE else TRAIN,
        warmup=_integer(doc.get("warmup")),
        measure=_integer(doc.get("measure")),
        repeats=_integer(doc.get("repeats")),
        batch_per_gpu=_integer(doc.get("batch_per_gpu")),
        batch_sizes=tuple(b for b in sizes if _integer(b) is not None) if isinstance(sizes, list) else (),
        input_size=(
            tuple(size)
            if isinstance(size, list) and len(size) == 2 and all(_integer(v) is not None for v in size)
            else None
        ),
        percentiles=percentiles,
        env=env if isinstance(env, dict) else {},
        extra_args=extra if isinstance(extra, dict) else {},
        document=doc,
        text=text,
    )


@dataclass(frozen=True)
class StoredOrder:
    """How each round of a run was ordered (runs.order_json): shuffled from `seed`, which
    `detbench run` drew itself where `drawn`."""

    seed: int
    drawn: bool = False
    look: int = 1  # an accuracy run: the look of its scenario's sequential plan whose seeds it trained


def order(text: Any) -> Optional[StoredOrder]:
    doc = _mapping(text)
    if doc is None or _integer(doc.get("seed")) is None:
        return None
    return StoredOrder(seed=doc["seed"], drawn=doc.get("drawn") is True, look=_integer(doc.get("look")) or 1)


# ------------------------------------------------------------------ runs, cells, trials, iterations


@dataclass(frozen=True)
class StoredRun(_Row):
    id: str
    scenario_name: str  # runs.scenario: the scenario's name
    scenario: StoredScenario
    backend: str
    created: float  # wall clock, seconds since the epoch
    scenario_path: Optional[str] = None
    host: Optional[Dict[str, Any]] = None  # the host record (harness.plan.platforms.host_record)
    origin: str = MEASURED
    limits: Optional[Dict[str, Any]] = None  # peak and work models (harness.measure.compute), as stored
    order: Optional[StoredOrder] = None  # None: a run stored before shuffled orders
    columns: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def imported(self) -> bool:
        return self.origin == IMPORTED

    @property
    def fingerprint(self) -> Optional[str]:
        return _text(self.host.get("fingerprint")) if self.host else None


def run_of(row: Any) -> StoredRun:
    c = _columns(row)
    return StoredRun(
        id=c["id"],
        scenario_name=_stored(c, "scenario"),
        scenario=scenario(c.get("scenario_json")),
        backend=_stored(c, "backend"),
        created=_stored(c, "created"),
        scenario_path=c.get("scenario_path"),
        host=_mapping(c.get("host_json")),
        origin=_text(c.get("origin")) or MEASURED,
        limits=_mapping(c.get("limits_json")),
        order=order(c.get("order_json")),
        columns=c,
    )


@dataclass(frozen=True)
class StoredCell(_Row):
    run_id: str
    cell_key: str
    framework: str
    model: str
    precision: str
    platform: str
    gpus: int
    nodes: int
    batch_per_gpu: int  # an inference cell's batch size
    images_per_iteration: int
    excluded: Optional[str] = None  # why the cell was not run (NA), or None
    created: Optional[float] = None  # when its run started, where the row carries it
    columns: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def batch(self) -> int:
        """The batch size of an inference cell (its key's last part), 0 for a training cell."""
        from harness.plan.scenario import Cell

        return int(Cell.from_key(self.cell_key).batch)


def cell_of(row: Any) -> StoredCell:
    c = _columns(row)
    return StoredCell(
        run_id=c["run_id"],
        cell_key=c["cell_key"],
        framework=_stored(c, "framework"),
        model=_stored(c, "model"),
        precision=_stored(c, "precision"),
        platform=_stored(c, "platform"),
        gpus=_stored(c, "gpus"),
        nodes=_stored(c, "nodes"),
        batch_per_gpu=_stored(c, "batch_per_gpu"),
        images_per_iteration=_stored(c, "images_per_iteration"),
        excluded=c.get("excluded"),
        created=c.get("created"),
        columns=c,
    )


@dataclass(frozen=True)
class StoredTrial(_Row):
    id: str
    run_id: str
    seq: int  # its place in the run's order
    cell_key: str
    repeat: int
    status: str  # one of STATUSES
    reason: Optional[str] = None
    started: Optional[float] = None
    ended: Optional[float] = None
    exit_code: Optional[int] = None
    argv: Optional[Tuple[str, ...]] = None
    settings: Optional[Dict[str, Any]] = None
    throughput: Optional[float] = None  # images/s, the framework's own times (reported)
    observed: Optional[float] = None  # images/s from the log lines' arrival times
    iteration_time_s: Optional[float] = None
    data_time_s: Optional[float] = None
    exact: Optional[bool] = None
    peak_mem_mb: Optional[float] = None
    records: Optional[int] = None
    scrape_errors: Optional[int] = None
    fingerprint: Optional[str] = None
    telemetry: Optional[Dict[str, Any]] = None
    figure_kind: Optional[str] = None
    window: Optional[Tuple[int, int]] = None  # first and last iteration the figure covers
    work: Optional[Dict[str, float]] = None
    peak_rss_mb: Optional[float] = None
    peak_device_mb: Optional[float] = None
    latency: Optional[Dict[str, Any]] = None  # an inference trial's (harness.measure.latency)
    drawn: Optional[Dict[str, Dict[str, float]]] = None  # what it drew from the data (harness.measure.drawn)
    breakdown: Optional[Dict[str, Any]] = None  # where its step went (harness.measure.breakdown)
    columns: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def done(self) -> bool:
        return self.status == "done"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def result(self, iterations: Tuple[Any, ...] = ()) -> Optional["TrialResult"]:
        """The TrialResult (harness.measure.result) stored for this trial, with `iterations`;
        None while it is pending or running."""
        from harness.measure.result import TrialResult

        if self.status not in ("done", "failed"):
            return None
        return TrialResult(
            status=self.status,
            reason=self.reason,
            ended=self.ended,
            exit_code=self.exit_code,
            records=self.records,
            scrape_errors=self.scrape_errors,
            peak_mem_mb=self.peak_mem_mb,
            throughput=self.throughput,
            iteration_time_s=self.iteration_time_s,
            data_time_s=self.data_time_s,
            exact=self.exact,
            figure_kind=self.figure_kind,
            window=self.window,
            observed=self.observed,
            fingerprint=self.fingerprint,
            telemetry=self.telemetry,
            peak_rss_mb=self.peak_rss_mb,
            peak_device_mb=self.peak_device_mb,
            work=self.work,
            settings=self.settings,
            latency=self.latency,
            drawn=self.drawn,
            breakdown=self.breakdown,
            iterations=tuple(tuple(it) for it in iterations),
        )


def _drawn(text: Any) -> Optional[Dict[str, Dict[str, float]]]:
    """A stored drawn summary ({scope: {count: number}}); a damaged one reads as not observed."""
    value = _decode(text)
    if not isinstance(value, dict) or not all(
        isinstance(v, dict) and all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in v.values())
        for v in value.values()
    ):
        return None
    return {str(k): {str(n): float(x) for n, x in v.items()} for k, v in value.items()} or None


def _window(text: Any) -> Optional[Tuple[int, int]]:
    value = _decode(text)
    if isinstance(value, list) and len(value) == 2 and all(_integer(v) is not None for v in value):
        return (value[0], value[1])
    return None


def _argv(text: Any) -> Optional[Tuple[str, ...]]:
    value = _decode(text)
    if isinstance(value, list) and all(isinstance(a, str) for a in value):
        return tuple(value)
    return None


def trial_of(row: Any) -> StoredTrial:
    c = _columns(row)
    exact = c.get("exact")
    return StoredTrial(
        id=c["id"],
        run_id=c["run_id"],
        seq=_stored(c, "seq"),
        cell_key=_stored(c, "cell_key"),
        repeat=_stored(c, "repeat"),
        status=_stored(c, "status"),
        reason=c.get("reason"),
        started=c.get("started"),
        ended=c.get("ended"),
        exit_code=c.get("exit_code"),
        argv=_argv(c.get("argv_json")),
        settings=_mapping(c.get("settings_json")),
        throughput=c.get("throughput"),
        observed=c.get("observed"),
        iteration_time_s=c.get("iteration_time_s"),
        data_time_s=c.get("data_time_s"),
        exact=None if exact is None else bool(exact),
        peak_mem_mb=c.get("peak_mem_mb"),
        records=c.get("records"),
        scrape_errors=c.get("scrape_errors"),
        fingerprint=c.get("fingerprint"),
        telemetry=_mapping(c.get("telemetry_json")),
        figure_kind=c.get("figure_kind"),
        window=_window(c.get("window_json")),
        work=_mapping(c.get("work_json")),
        peak_rss_mb=c.get("peak_rss_mb"),
        peak_device_mb=c.get("peak_device_mb"),
        latency=_mapping(c.get("latency_json")),
        drawn=_drawn(c.get("drawn_json")),
        breakdown=_mapping(c.get("breakdown_json")),
        columns=c,
    )


class StoredIteration(NamedTuple):
    """One iteration record of a trial, as the store keeps it (harness.measure.result.Iteration)."""

    iteration: int
    time_s: Optional[float]
    data_time_s: Optional[float]
    arrived: Optional[float]  # monotonic arrival time of its log line, None without log.times


def iteration_of(row: Any) -> StoredIteration:
    c = _columns(row)
    return StoredIteration(c["iteration"], c.get("time_s"), c.get("data_time_s"), c.get("arrived"))
