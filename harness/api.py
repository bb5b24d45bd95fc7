"""A results folder from Python: its runs, cells, trials, iteration records and inference
latencies as pandas DataFrames with typed columns.

    from harness import api

    with api.open("results") as results:
        runs = results.runs()                      # one row per run, oldest first
        cells = results.cells(run="latest")        # the figure of each cell, as the report gives it
        trials = results.trials(run="latest")      # one row per trial, in run order
        its = results.iterations(run="latest")     # one row per iteration record
        lat = results.latencies()                  # one row per finished inference trial
        parts = results.breakdowns(run="latest")   # one row per phase of each trial's step breakdown

`run` is a run id, "latest" for the newest run, or None (the default) for every run. A cell's
figure is the report's: the median images/s over its finished repeats with its spread and the
95% bootstrap CI of the median, its iteration and data time in ms, through the same summary
(harness.measure.stats.summarize) the report tables use. Text columns have pandas' "string"
dtype, counts "int64" (or "Int64" where a value may be missing), figures "float64" (NaN where
missing), wall-clock times "datetime64[ns, UTC]" and yes/no columns "boolean". The typed records
behind every row are at `results.store` (harness.results.store: read_runs, read_cells,
read_trials, read_iterations).

Importing this module needs no pandas; the DataFrames do, and say so in one line.
"""
from types import ModuleType
from typing import TYPE_CHECKING, Any, Dict, Final, Iterable, List, Optional, Tuple

from harness.jsonlog import NET_S, POST_S, PRE_S
from harness.measure import divergence
from harness.measure import latency as latency_mod
from harness.measure import work
from harness.results.records import StoredCell, StoredRun, StoredTrial
from harness.results.store import Store

if TYPE_CHECKING:
    import pandas

PANDAS_MISSING = "harness.api needs pandas for its DataFrames: pip install 'pandas>=2.0'"

WORK_COUNTS = tuple(work.LABELS)    # the counts a framework logs per iteration, one float column each
PHASES = (PRE_S, NET_S, POST_S)     # an inference batch's parts, each a column in ms

TIME: Final = "datetime64[ns, UTC]"
Columns = Tuple[Tuple[str, str], ...]   # (name, pandas dtype) of each column, in order
Row = Dict[str, Any]
RUN_COLUMNS = (
    ("run_id", "string"), ("scenario", "string"), ("scenario_path", "string"), ("backend", "string"),
    ("origin", "string"), ("created", TIME), ("mode", "string"), ("warmup", "Int64"), ("measure", "Int64"),
    ("repeats", "Int64"), ("order_seed", "Int64"), ("fingerprint", "string"), ("cells", "int64"),
    ("trials", "int64"), ("done", "int64"), ("failed", "int64"))
CELL_KEY_COLUMNS = (
    ("run_id", "string"), ("cell_key", "string"), ("framework", "string"), ("model", "string"),
    ("precision", "string"), ("platform", "string"), ("gpus", "int64"), ("nodes", "int64"))
CELL_COLUMNS = CELL_KEY_COLUMNS + (
    ("batch_per_gpu", "int64"), ("batch", "int64"), ("images_per_iteration", "int64"), ("excluded", "string"),
    ("n", "int64"), ("failed", "int64"), ("throughput", "float64"), ("ci_low", "float64"),
    ("ci_high", "float64"), ("min", "float64"), ("max", "float64"), ("iqr", "float64"), ("cv", "float64"),
    ("iteration_ms", "float64"), ("data_ms", "float64"), ("observed", "float64"))
TRIAL_COLUMNS = (
    ("trial_id", "string"), ("seq", "int64")) + CELL_KEY_COLUMNS + (
    ("batch", "int64"), ("repeat", "int64"), ("status", "string"), ("reason", "string"), ("started", TIME),
    ("ended", TIME), ("exit_code", "Int64"), ("throughput", "float64"), ("observed", "float64"),
    ("iteration_time_s", "float64"), ("data_time_s", "float64"), ("exact", "boolean"),
    ("figure_kind", "string"), ("window_first", "Int64"), ("window_last", "Int64"), ("records", "Int64"),
    ("scrape_errors", "Int64"), ("peak_mem_mb", "float64"), ("peak_rss_mb", "float64"),
    ("peak_device_mb", "float64"), ("fingerprint", "string")) + tuple(
    ("work_" + name, "float64") for name in WORK_COUNTS)
ITERATION_COLUMNS = (
    ("trial_id", "string"), ("run_id", "string"), ("cell_key", "string"), ("repeat", "int64"),
    ("iteration", "int64"), ("time_s", "float64"), ("data_time_s", "float64"), ("arrived", "float64"),
    ("in_window", "boolean"))
LATENCY_COLUMNS = (
    ("trial_id", "string"),) + CELL_KEY_COLUMNS[:6] + (
    ("batch", "int64"), ("repeat", "int64"), ("batches", "Int64"), ("mean_ms", "float64"))
BREAKDOWN_COLUMNS = (
    ("trial_id", "string"),) + CELL_KEY_COLUMNS[:6] + (
    ("repeat", "int64"), ("phase", "string"), ("ms", "float64"), ("share_of_step", "float64"),
    ("step_ms", "float64"), ("hooked_step_ms", "float64"), ("iterations", "Int64"), ("mismatch", "string"),
    ("error", "string"))
LATENCY_TAIL = tuple((name[:-2] + "_ms", "float64") for name in PHASES) + (("detections_per_image", "float64"),)


def _pandas() -> ModuleType:
    try:
        import pandas
    except ImportError:
        raise ImportError(PANDAS_MISSING) from None
    return pandas


def open(results_dir: str = "results") -> "Results":   # noqa: A001 -- read as api.open(...)
    """The results folder `results_dir` (its store must exist; UserError otherwise)."""
    return Results(results_dir)


class Results:
    """One results folder, open for reading; close it, or use it in a `with` block."""

    def __init__(self, results_dir: str = "results") -> None:
        self.store = Store(results_dir, create=False)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "Results":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- records

    def run_records(self, run: Optional[str] = None) -> List[StoredRun]:
        """The StoredRuns `run` selects: one for an id or "latest", every run (oldest first) for None."""
        return self.store.read_runs() if run is None else [self.store.read_run(run)]

    # -------------------------------------------------------------- DataFrames

    def runs(self) -> "pandas.DataFrame":
        """One row per run, oldest first: where it came from, its window, order seed and host
        fingerprint, and how many cells it planned and trials it holds, finished and failed."""
        rows: List[Row] = []
        for r in self.store.read_runs():
            trials = self.store.read_trials(r.id)
            rows.append({
                "run_id": r.id, "scenario": r.scenario_name, "scenario_path": r.scenario_path,
                "backend": r.backend, "origin": r.origin, "created": r.created, "mode": r.scenario.mode,
                "warmup": r.scenario.warmup, "measure": r.scenario.measure, "repeats": r.scenario.repeats,
                "order_seed": r.order.seed if r.order else None, "fingerprint": r.fingerprint,
                "cells": len(self.store.read_cells(run_id=r.id)), "trials": len(trials),
                "done": sum(1 for t in trials if t.done), "failed": sum(1 for t in trials if t.failed)})
        return _frame(rows, RUN_COLUMNS)

    def cells(self, run: Optional[str] = None, ci: bool = True) -> "pandas.DataFrame":
        """One row per planned cell of the selected runs: its key's parts, its batch (an
        inference cell's batch size, 0 for training), why it was excluded, and its figure over
        its finished repeats (n of them; NaN where none finished or one diverged, as the report's
        NA). ci=False skips the bootstrap."""
        from harness.measure import stats

        rows: List[Row] = []
        for r in self.run_records(run):
            trials = self.store.read_trials(r.id)
            for c in self.store.read_cells(run_id=r.id):
                mine = [t for t in trials if t.cell_key == c.cell_key]
                # the finished repeats the report summarizes (harness.report.measured.entry_for)
                done = [t for t in mine if t.done and t.throughput]
                row = dict(_cell_parts(c), batch_per_gpu=c.batch_per_gpu, batch=c.batch,
                           images_per_iteration=c.images_per_iteration, excluded=c.excluded,
                           n=len(done) if not c.excluded else 0, failed=sum(1 for t in mine if t.failed))
                # a cell with a diverged repeat has no figure (the report's NA)
                if done and not c.excluded and not any(t.failed and divergence.diverged(t.reason) for t in mine):
                    s = stats.summarize([t.throughput for t in done if t.throughput], c.images_per_iteration,
                                        [t.data_time_s for t in done], [t.observed for t in done],
                                        [t.iteration_time_s for t in done], with_ci=ci)
                    row.update(throughput=s.throughput, ci_low=s.ci_low, ci_high=s.ci_high, min=s.minimum,
                               max=s.maximum, iqr=s.iqr, cv=s.cv, iteration_ms=s.iteration_ms,
                               data_ms=s.data_ms, observed=s.observed)
                rows.append(row)
        return _frame(rows, CELL_COLUMNS)

    def trials(self, run: Optional[str] = None) -> "pandas.DataFrame":
        """One row per trial of the selected runs, in run order: its cell, status, times, both
        throughput estimators, the window its figure covers, memory peaks and the work per
        iteration it logged (work_<count>, NaN where not logged)."""
        rows: List[Row] = []
        for r in self.run_records(run):
            cells = {c.cell_key: c for c in self.store.read_cells(run_id=r.id)}
            for t in self.store.read_trials(r.id):
                window = t.window or (None, None)
                work = t.work or {}
                row = dict(_cell_parts(cells.get(t.cell_key), t), trial_id=t.id, seq=t.seq,
                           batch=_batch(t.cell_key), repeat=t.repeat, status=t.status, reason=t.reason,
                           started=t.started, ended=t.ended, exit_code=t.exit_code, throughput=t.throughput,
                           observed=t.observed, iteration_time_s=t.iteration_time_s,
                           data_time_s=t.data_time_s, exact=t.exact, figure_kind=t.figure_kind,
                           window_first=window[0], window_last=window[1], records=t.records,
                           scrape_errors=t.scrape_errors, peak_mem_mb=t.peak_mem_mb, peak_rss_mb=t.peak_rss_mb,
                           peak_device_mb=t.peak_device_mb, fingerprint=t.fingerprint)
                row.update({"work_" + k: _figure(work.get(k)) for k in WORK_COUNTS})
                rows.append(row)
        return _frame(rows, TRIAL_COLUMNS)

    def iterations(self, run: Optional[str] = None) -> "pandas.DataFrame":
        """One row per iteration record of the selected runs' trials: its times in seconds, the
        monotonic arrival time of its log line (NaN without log.times) and whether it lies in the
        window the trial's figure covers (<NA> where the trial has none)."""
        rows: List[Row] = []
        for r in self.run_records(run):
            for t in self.store.read_trials(r.id):
                for it in self.store.read_iterations(t.id):
                    rows.append({"trial_id": t.id, "run_id": t.run_id, "cell_key": t.cell_key, "repeat": t.repeat,
                                 "iteration": it.iteration, "time_s": it.time_s, "data_time_s": it.data_time_s,
                                 "arrived": it.arrived,
                                 "in_window": None if t.window is None
                                 else t.window[0] <= it.iteration <= t.window[1]})
        return _frame(rows, ITERATION_COLUMNS)

    def latencies(self, run: Optional[str] = None) -> "pandas.DataFrame":
        """One row per finished inference trial of the selected runs: its batch size, the batches
        measured, the latency average and each stored percentile in ms (p50_ms, p95_ms, ...: the
        percentiles its scenario asked for, NaN where too few batches place one), each phase's
        mean per batch in ms and the detections kept per image."""
        rows: List[Row] = []
        percentiles = set()
        for r in self.run_records(run):
            for t in self.store.read_trials(r.id):
                if not (t.done and t.latency is not None):
                    continue
                fig = t.latency
                pcts: Row = {}
                for name, value in fig.items():
                    p = _percentile_of(name)
                    if p is not None:
                        percentiles.add(p)
                        pcts["p%g_ms" % p] = _ms(value)
                row = dict(_key_parts(t.cell_key), run_id=t.run_id, trial_id=t.id, batch=_batch(t.cell_key),
                           repeat=t.repeat, batches=_count(fig.get("batches")), mean_ms=_ms(fig.get("mean_s")),
                           detections_per_image=_figure(fig.get("detections_per_image")), **pcts)
                row.update({name[:-2] + "_ms": _ms(fig.get(name)) for name in PHASES})
                rows.append(row)
        columns = LATENCY_COLUMNS + tuple(("p%g_ms" % p, "float64") for p in sorted(percentiles)) + LATENCY_TAIL
        return _frame(rows, columns)

    def breakdowns(self, run: Optional[str] = None) -> "pandas.DataFrame":
        """One row per phase of each finished trial's step breakdown (harness.measure.breakdown)
        in the selected runs: the phase's mean ms per measured iteration (data: the framework's
        own data time; rest: the measured step less the phases), its share of the measured step,
        the step, the hooks' own step and why its phases miss the step, where they do; a trial
        whose program could not attach its hooks is one row with its error and no phase."""
        rows: List[Row] = []
        for r in self.run_records(run):
            for t in self.store.read_trials(r.id):
                part = t.breakdown
                if not (t.done and part):
                    continue
                base = dict(_key_parts(t.cell_key), run_id=t.run_id, trial_id=t.id, repeat=t.repeat)
                if part.get("error"):
                    rows.append(dict(base, error=str(part["error"])))
                    continue
                step = _figure(part.get("step_s"))
                for phase, seconds in (part.get("phases") or {}).items():
                    spent = _figure(seconds)
                    rows.append(dict(base, phase=phase, ms=_ms(spent), step_ms=_ms(step),
                                     share_of_step=spent / step if step and spent is not None else None,
                                     hooked_step_ms=_ms(part.get("hooked_step_s")),
                                     iterations=_count(part.get("iterations")), mismatch=part.get("mismatch")))
        return _frame(rows, BREAKDOWN_COLUMNS)


# ------------------------------------------------------------------ helpers

def _key_parts(cell_key: str) -> Row:
    """framework, model, precision, platform, gpus, nodes from a cell key."""
    from harness.plan.scenario import Cell

    cell = Cell.from_key(cell_key)
    return {"cell_key": cell_key, "framework": cell.framework, "model": cell.model, "precision": cell.precision,
            "platform": cell.platform, "gpus": cell.gpus, "nodes": cell.nodes}


def _cell_parts(cell: Optional[StoredCell], trial: Optional[StoredTrial] = None) -> Row:
    if cell is None:    # a trial whose cell row is gone: its key still names the cell
        assert trial is not None
        return dict(_key_parts(trial.cell_key), run_id=trial.run_id)
    return {"run_id": cell.run_id, "cell_key": cell.cell_key, "framework": cell.framework, "model": cell.model,
            "precision": cell.precision, "platform": cell.platform, "gpus": cell.gpus, "nodes": cell.nodes}


def _batch(cell_key: str) -> int:
    from harness.plan.scenario import Cell

    return int(Cell.from_key(cell_key).batch)


def _percentile_of(name: str) -> Optional[float]:
    """50.0 for "p50_s" (a key harness.measure.latency.key made), else None."""
    if not (name.startswith("p") and name.endswith("_s")):
        return None
    try:
        p = float(name[1:-2])
    except ValueError:
        return None
    return p if latency_mod.key(p) == name else None


def _figure(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _count(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ms(seconds: Any) -> Optional[float]:
    value = _figure(seconds)
    return None if value is None else value * 1000.0


def _frame(rows: Iterable[Row], columns: Columns) -> "pandas.DataFrame":
    """A DataFrame of `rows` (dicts) with exactly `columns` ((name, dtype) pairs), in that order."""
    _pandas()       # one line where pandas is missing
    import pandas as pd

    rows = list(rows)
    data: Dict[str, "pandas.Series[Any]"] = {}
    for name, dtype in columns:
        values = [row.get(name) for row in rows]
        if dtype == TIME:
            data[name] = pd.to_datetime(pd.Series(values, dtype="float64"), unit="s", utc=True).astype(TIME)
        else:
            data[name] = pd.Series(values, dtype=dtype)
    frame: "pandas.DataFrame" = pd.DataFrame(data, columns=[name for name, _ in columns])
    return frame

