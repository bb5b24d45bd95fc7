"""Cells and trials as flat rows, written as CSV or JSON.

The cell rows come from the same report tables (harness.report.measured / published) that
the Markdown renderer draws, so an export and a Markdown table can never disagree.
"""
import csv
import io
import json
import time

from harness.report import figures
from harness.report.model import ITERATION

SCHEMA = "detbench-report"
SCHEMA_VERSION = 2   # 2: figure kind, window, work per iteration and memory measured one way

CELL_COLUMNS = (
    "source", "table", "platform", "precision", "gpus", "nodes", "batch_per_gpu", "model", "framework",
    "throughput", "iteration_ms", "data_ms", "data_share", "ci_low", "ci_high", "min", "max", "iqr",
    "cv", "observed", "n", "failed", "outliers", "flags", "na", "run_id", "figure_kinds", "figure", "windows",
    "work", "peak_rss_mb", "peak_device_mb", "peak_mem_mb")

TRIAL_COLUMNS = (
    "trial_id", "run_id", "seq", "cell_key", "framework", "model", "precision", "platform", "gpus",
    "nodes", "repeat", "status", "reason", "throughput", "observed", "iteration_time_s", "data_time_s",
    "exact", "peak_mem_mb", "records", "scrape_errors", "started", "ended", "exit_code", "figure_kind",
    "window_json", "work_json", "peak_rss_mb", "peak_device_mb")

ROW_KINDS = ("cells", "trials")


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
    ci = d.get("ci") or [None, None]
    share = None
    if entry.data_ms is not None and entry.iteration_ms:
        share = entry.data_ms / entry.iteration_ms
    return {
        "source": table.source, "table": table.title, "platform": table.platform,
        "precision": table.precision, "gpus": table.gpus, "nodes": table.nodes,
        "batch_per_gpu": table.batch_per_gpu, "model": model, "framework": framework,
        "throughput": entry.throughput, "iteration_ms": entry.iteration_ms, "data_ms": entry.data_ms,
        "data_share": share, "ci_low": ci[0], "ci_high": ci[1], "min": d.get("min"), "max": d.get("max"),
        "iqr": d.get("iqr"), "cv": d.get("cv"), "observed": d.get("observed"), "n": d.get("n"),
        "failed": d.get("failed"), "outliers": d.get("outliers"), "flags": list(entry.flags),
        "na": entry.na, "run_id": d.get("run_id"), "figure_kinds": d.get("kinds"),
        "figure": figures.column_text(framework, [d]) if d.get("kinds") else None,
        "windows": ["%d..%d" % tuple(w) for w in d["windows"]] if d.get("windows") else None,
        "work": d.get("work"), "peak_rss_mb": d.get("peak_rss_mb"), "peak_device_mb": d.get("peak_device_mb"),
        "peak_mem_mb": d.get("peak_mem_mb"),
    }


def run_ids(tables):
    ids = []
    for table in tables:
        for entry in table.entries.values():
            rid = entry.detail.get("run_id")
            if rid and rid not in ids:
                ids.append(rid)
    return ids


def trial_rows(store, platform=None, run_id=None):
    """Every trial of the cells a report shows (the newest run of each cell), in run order."""
    rows = []
    for cell in store.cells(platform=platform, run_id=run_id):
        for t in store.cell_trials(cell["run_id"], cell["cell_key"]):
            row = {k: t[k] for k in t.keys() if k in TRIAL_COLUMNS}
            row.update(trial_id=t["id"], framework=cell["framework"], model=cell["model"],
                       precision=cell["precision"], platform=cell["platform"], gpus=cell["gpus"],
                       nodes=cell["nodes"])
            rows.append({k: row.get(k) for k in TRIAL_COLUMNS})
    return sorted(rows, key=lambda r: (r["run_id"], r["seq"]))


def run_rows(store, run_id_list):
    out = []
    for rid in run_id_list:
        run = store.run(rid)
        out.append({"id": run["id"], "scenario": run["scenario"], "backend": run["backend"],
                    "created": run["created"],
                    "host": json.loads(run["host_json"]) if run["host_json"] else None})
    return out


def document(fmt, platform, tables, published_tables=(), store=None, rows="cells", run_id=None):
    """The export as text: fmt "json" (cells, trials, runs) or "csv" (cells or trials, per rows)."""
    if rows not in ROW_KINDS:
        raise ValueError("rows must be one of %s" % (ROW_KINDS,))
    cells = cell_rows(list(tables) + list(published_tables))
    trials = trial_rows(store, platform, run_id) if store is not None else []
    if fmt == "json":
        runs = run_rows(store, sorted({t["run_id"] for t in trials})) if store is not None else []
        return to_json(platform, cells, trials, runs)
    if fmt == "csv":
        return to_csv(cells, CELL_COLUMNS) if rows == "cells" else to_csv(trials, TRIAL_COLUMNS)
    raise ValueError("unknown export format %r" % fmt)


def to_json(platform, cells, trials, runs):
    doc = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "platform": platform,
           "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "runs": runs, "cells": cells, "trials": trials}
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


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
