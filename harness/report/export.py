"""A Report's cells and trials as flat rows, written as CSV or JSON.

The cell rows come from the same report tables (harness.report.measured / published) that
the Markdown renderer draws, so an export and a Markdown table can never disagree.
"""
import csv
import io
import json
import time

from harness.report import figures
from harness.report.model import ITERATION, TRIAL_COLUMNS

SCHEMA = "detbench-report"
SCHEMA_VERSION = 2   # 2: figure kind, window, work per iteration and memory measured one way

CELL_COLUMNS = (
    "source", "table", "platform", "precision", "gpus", "nodes", "batch_per_gpu", "model", "framework",
    "throughput", "iteration_ms", "data_ms", "data_share", "ci_low", "ci_high", "min", "max", "iqr",
    "cv", "observed", "n", "failed", "outliers", "flags", "na", "run_id", "figure_kinds", "figure", "windows",
    "work", "peak_rss_mb", "peak_device_mb", "peak_mem_mb")

ROW_KINDS = ("cells", "trials")


def render_csv(report):
    """The cell rows, or the trial rows where report.rows says so, as CSV."""
    if report.rows not in ROW_KINDS:
        raise ValueError("rows must be one of %s" % (ROW_KINDS,))
    if report.rows == "trials":
        return to_csv(report.trials, TRIAL_COLUMNS)
    return to_csv(cell_rows(report.measured + report.published), CELL_COLUMNS)


def render_json(report):
    """One document: the runs, the cell rows and the trial rows."""
    doc = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "platform": report.platform,
           "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(report.generated)),
           "runs": [run_row(r) for r in report.runs], "cells": cell_rows(report.measured + report.published),
           "trials": list(report.trials)}
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


def cell_rows(tables):
    """One row per (table, model, column) that holds an entry.

    A measured single-device group comes as two tables (throughput and iteration form) over
    the same entries; only the throughput form is exported so no cell appears twice.
    """
    rows = []
    for table in tables:
        if table.source == "measured" and table.form == ITERATION:
            continue
        for model in table.models:
            for col in table.columns:
                entry = table.entries.get((model, col.key))
                if entry is not None:
                    rows.append(cell_row(table, model, col.key, entry))
    return rows


def cell_row(table, model, framework, entry):
    d = entry.detail
    share = None
    if entry.data_ms is not None and entry.iteration_ms:
        share = entry.data_ms / entry.iteration_ms
    row = {
        "source": table.source, "table": table.title, "platform": table.platform,
        "precision": table.precision, "gpus": table.gpus, "nodes": table.nodes,
        "batch_per_gpu": table.batch_per_gpu, "model": model, "framework": framework,
        "throughput": entry.throughput, "iteration_ms": entry.iteration_ms, "data_ms": entry.data_ms,
        "data_share": share, "flags": list(entry.flags), "na": entry.na,
    }
    if d is not None:
        row.update({
            "ci_low": d.ci[0] if d.ci else None, "ci_high": d.ci[1] if d.ci else None,
            "min": d.minimum, "max": d.maximum, "iqr": d.iqr, "cv": d.cv, "observed": d.observed, "n": d.n,
            "failed": d.failed, "outliers": d.outliers, "run_id": d.run_id, "figure_kinds": list(d.kinds),
            "figure": figures.column_text(framework, [d]) if d.kinds else None,
            "windows": ["%d..%d" % tuple(w) for w in d.windows] if d.windows else None,
            "work": d.work, "peak_rss_mb": d.peak_rss_mb, "peak_device_mb": d.peak_device_mb,
            "peak_mem_mb": d.peak_mem_mb,
        })
    return {k: row.get(k) for k in CELL_COLUMNS}


def run_row(run):
    return {"id": run.id, "scenario": run.scenario, "backend": run.backend, "created": run.created,
            "host": run.host}


def to_csv(rows, columns):
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k)) for k in columns})
    return buf.getvalue()


def _csv_value(value):
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ";".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, float):
        return repr(value)
    return value
