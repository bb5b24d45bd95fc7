"""A Report's cells and trials as flat rows, written as CSV or JSON.

The cell rows come from the same report tables (harness.report.measured / published) that
the Markdown renderer draws, so an export and a Markdown table can never disagree.
"""

import csv
import io
import json
import time
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Union

from harness.report import figures
from harness.report.model import ITERATION, TRIAL_COLUMNS, Entry, LatencyTable, Report, Run, Table

SCHEMA = "detbench-report"
SCHEMA_VERSION = 2  # 2: figure kind, window, work per iteration and memory measured one way

CELL_COLUMNS = (
    "source",
    "table",
    "platform",
    "precision",
    "gpus",
    "nodes",
    "batch_per_gpu",
    "model",
    "framework",
    "throughput",
    "iteration_ms",
    "data_ms",
    "data_share",
    "ci_low",
    "ci_high",
    "min",
    "max",
    "iqr",
    "cv",
    "observed",
    "n",
    "failed",
    "outliers",
    "flags",
    "na",
    "run_id",
    "imported",
    "figure_kinds",
    "figure",
    "windows",
    "work",
    "drawn",  # what the repeats drew from the data: {scope: {count: median}} (harness.measure.drawn)
    "peak_rss_mb",
    "peak_device_mb",
    "peak_mem_mb",
    # how close to the machine's limit: counted work per image, achieved TFLOP/s, the host's
    # measured peak at the cell's precision (GFLOP/s) and the achieved fraction of it
    "flops_per_image",
    "tflops",
    "peak_gflops",
    "mfu",
    "limit_note",
    # the lower peak the run stored, where a higher one measured since on the same kind of machine replaced it
    "peak_stored_gflops",
    # one device's counted work per iteration from the cell's logged counts ("logged"), or a run stored
    # before that with one figure per image counted on a synthetic batch ("synthetic"); the share
    # against the stored peak where a higher one replaced it
    "flops_per_iteration",
    "work_basis",
    "mfu_stored",
    # inference cells (batch_per_gpu is the batch size): medians over repeats, in ms
    "latency_avg_ms",
    "latency_p50_ms",
    "latency_percentiles_ms",
    "latency_batches",
    "pre_ms",
    "net_ms",
    "post_ms",
    "detections_per_image",
)

ROW_KINDS = ("cells", "trials")


def render_csv(report: Report) -> str:
    """The cell rows, or the trial rows where report.rows says so, as CSV."""
    if report.rows not in ROW_KINDS:
        raise ValueError("rows must be one of %s" % (ROW_KINDS,))
    if report.rows == "trials":
        return to_csv(report.trials, TRIAL_COLUMNS)
    rows = cell_rows(report.measured + report.published) + latency_rows(report.latency + report.published_latency)
    return to_csv(rows, CELL_COLUMNS)


def render_json(report: Report) -> str:
    """One document: the runs, the cell rows and the trial rows."""
    doc = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "platform": report.platform,
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(report.generated)),
        "runs": [run_row(r) for r in report.runs],
        "cells": (
            cell_rows(report.measured + report.published) + latency_rows(report.latency + report.published_latency)
        ),
        "trials": list(report.trials),
    }
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


Row = Dict[str, Any]  # one exported row: CELL_COLUMNS or TRIAL_COLUMNS


def cell_rows(tables: Iterable[Table]) -> List[Row]:
    """One row per (table, model, column) that holds an entry.

    A measured single-device group comes as two tables (throughput and iteration form) over
    the same entries; only the throughput form is exported so no cell appears twice.
    """
    rows: List[Row] = []
    for table in tables:
        if table.source == "measured" and table.form == ITERATION:
            continue
        for model in table.models:
            for col in table.columns:
                entry = table.entries.get((model, col.key))
                if entry is not None:
                    rows.append(cell_row(table, model, col.key, entry))
    return rows


def cell_row(table: Union[Table, "_TableFacts"], model: str, framework: str, entry: Entry) -> Row:
    """The exported row of one entry of a table."""
    d = entry.detail
    share = None
    if entry.data_ms is not None and entry.iteration_ms:
        share = entry.data_ms / entry.iteration_ms
    row = {
        "source": table.source,
        "table": table.title,
        "platform": table.platform,
        "precision": table.precision,
        "gpus": table.gpus,
        "nodes": table.nodes,
        "batch_per_gpu": table.batch_per_gpu,
        "model": model,
        "framework": framework,
        "throughput": entry.throughput,
        "iteration_ms": entry.iteration_ms,
        "data_ms": entry.data_ms,
        "data_share": share,
        "flags": list(entry.flags),
        "na": entry.na,
    }
    if d is not None:
        row.update(
            {
                "ci_low": d.ci[0] if d.ci else None,
                "ci_high": d.ci[1] if d.ci else None,
                "min": d.minimum,
                "max": d.maximum,
                "iqr": d.iqr,
                "cv": d.cv,
                "observed": d.observed,
                "n": d.n,
                "failed": d.failed,
                "outliers": d.outliers,
                "run_id": d.run_id,
                "imported": d.imported,
                "figure_kinds": list(d.kinds),
                "figure": figures.column_text(framework, [d]) if d.kinds else None,
                "windows": ["%d..%d" % tuple(w) for w in d.windows] if d.windows else None,
                "work": d.work,
                "drawn": d.drawn,
                "peak_rss_mb": d.peak_rss_mb,
                "peak_device_mb": d.peak_device_mb,
                "peak_mem_mb": d.peak_mem_mb,
                "flops_per_image": d.flops_per_image,
                "tflops": d.tflops,
                "peak_gflops": d.peak_gflops,
                "mfu": d.mfu,
                "limit_note": d.limit_note,
                "peak_stored_gflops": d.peak_stored_gflops,
                "flops_per_iteration": d.flops_per_iteration,
                "work_basis": d.work_basis,
                "mfu_stored": d.mfu_stored,
            }
        )
    return {k: row.get(k) for k in CELL_COLUMNS}


def latency_rows(tables: Iterable[LatencyTable]) -> List[Row]:
    """One row per inference cell (harness.report.model.LatencyTable rows), every batch size."""
    rows: List[Row] = []
    for table in tables:
        for batch, entry in table.rows:
            where = _TableFacts(table.source, table.title, table.platform, table.precision, 1, 1, batch)
            row = cell_row(where, table.model, table.framework, entry)
            lat = entry.latency
            if lat is not None:
                row.update(
                    {
                        "latency_avg_ms": lat.mean_ms,
                        "latency_p50_ms": lat.p50_ms,
                        "latency_percentiles_ms": {"%g" % p: v for p, v in lat.percentiles},
                        "latency_batches": lat.batches,
                        "pre_ms": lat.phases_ms.get("pre_s"),
                        "net_ms": lat.phases_ms.get("net_s"),
                        "post_ms": lat.phases_ms.get("post_s"),
                        "detections_per_image": lat.detections_per_image,
                    }
                )
            rows.append(row)
    return rows


class _TableFacts:
    """What cell_row reads of a table, for a row of a LatencyTable."""

    def __init__(
        self, source: str, title: str, platform: str, precision: str, gpus: int, nodes: int, batch_per_gpu: int
    ) -> None:
        self.source, self.title, self.platform, self.precision = source, title, platform, precision
        self.gpus, self.nodes, self.batch_per_gpu = gpus, nodes, batch_per_gpu


def run_row(run: Run) -> Row:
    """The exported row of a run."""
    return {"id": run.id, "scenario": run.scenario, "backend": run.backend, "created": run.created, "host": run.host}


def to_csv(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """The rows as CSV with a header, in `columns` order."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k)) for k in columns})
    return buf.getvalue()


def _csv_value(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ";".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, float):
        return repr(value)
    return value
