"""The HTML report: the seed-style tables plus the paper's figures, in one self-contained file.

Tables are the same Table/Entry objects the Markdown renderer draws (cell text comes from
harness.report.markdown.cell_text); figures come from harness.report.plots as base64 PNG.
Everything user- or log-supplied goes through jinja2 with autoescape on.
"""
import base64
import json
import time
from collections import defaultdict
from pathlib import Path

import jinja2

from harness import __version__, frameworks
from harness.spec import catalog, platforms
from harness.measure import work
from harness.report import figures, markdown, plots, scaling
from harness.report.model import FLAG_TEXT, ITERATION, THROUGHPUT

TEMPLATES = Path(__file__).resolve().parent / "templates"
MAX_TRACED_CELLS = 48


def environment():
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def image(fig):
    return "data:image/png;base64," + base64.b64encode(plots.png_bytes(fig)).decode("ascii")


# ------------------------------------------------------------------ tables
def table_view(table):
    """What the template needs to draw one table: header, rows of cells, footnotes, chart."""
    notes = []

    def mark(text):
        if text not in notes:
            notes.append(text)
        return notes.index(text) + 1

    rows = []
    for model in table.models:
        cells = []
        for col in table.columns:
            entry = table.entries.get((model, col.key))
            cell = {"text": markdown.cell_text(entry, table.form), "marks": [], "tip": "",
                    "published": col.key.startswith("published:") or table.source == "published",
                    "na": entry is not None and (entry.na is not None or markdown.cell_text(entry, table.form) == "NA")}
            if entry is not None and entry.na:
                cell["marks"].append({"n": mark("NA: " + entry.na), "flag": "na"})
            elif entry is not None:
                cell["marks"] += [{"n": mark(FLAG_TEXT.get(f, f)), "flag": f} for f in entry.flags]
                cell["tip"] = detail_text(entry, col.key)
            cells.append(cell)
        rows.append({"model": catalog.model_title(model), "cells": cells})
    return {"title": table.title, "form": table.form, "intro": markdown.INTRO[table.form].replace("**", ""),
            "columns": [c.title for c in table.columns], "rows": rows,
            "footnotes": list(enumerate(notes, 1)), "notes": list(table.notes),
            "source": table.source}


def detail_text(entry, column=""):
    d = entry.detail
    if not d:
        return ""
    parts = ["n=%s" % d.get("n")]
    if d.get("ci"):
        parts.append("95%% CI %.2f-%.2f" % tuple(d["ci"]))
    if d.get("min") is not None:
        parts.append("min %.2f max %.2f" % (d["min"], d["max"]))
    if d.get("cv") is not None:
        parts.append("CV %.2f%%" % (d["cv"] * 100))
    if d.get("observed"):
        parts.append("observed %.2f img/s" % d["observed"])
    if d.get("failed"):
        parts.append("%d failed" % d["failed"])
    if d.get("kinds"):
        parts.append("figure: %s" % figures.column_text(column, [d]))
    if d.get("work"):
        parts.append("work per iteration: %s" % work.row_text([d["work"]]))
    for key, what in (("peak_device_mb", "device"), ("peak_rss_mb", "resident"), ("peak_mem_mb", "logged")):
        if d.get(key):
            parts.append("peak %s memory %.0f MiB" % (what, d[key]))
    return "; ".join(parts)


# ------------------------------------------------------------------ figures from the store
def scaling_view(tables):
    """{title: {label: {devices: efficiency}}} from harness.report.scaling, one chart per platform."""
    out = defaultdict(dict)
    for key, points in scaling.scaling_series(tables).items():
        effs = {p.devices: p.efficiency for _, p in points if p.efficiency is not None}
        if len(effs) > 1:
            label = "%s %s %s" % (key.framework, catalog.model_title(key.model), catalog.precision_title(key.precision))
            out["%s, %d images per device" % (key.platform, key.batch_per_gpu)][label] = effs
    return dict(out)


def table_groups(tables):
    """Tables grouped by platform and precision, each group with one grouped bar chart."""
    groups = []
    for t in tables:
        key = (t.platform, t.precision, t.source)
        if not groups or groups[-1]["key"] != key:
            groups.append({"key": key, "title": "%s %s" % (t.platform, catalog.precision_title(t.precision)),
                           "tables": [], "source": t.source, "chart": None})
        groups[-1]["tables"].append(t)
    for g in groups:
        bars = [t for t in g["tables"] if t.form == THROUGHPUT]
        if any(e.throughput for t in bars for e in t.entries.values() if e is not None):
            merged, labels = plots.merge_for_chart(bars, "Throughput, %s" % g["title"])
            g["chart"] = image(plots.throughput_bars(merged, labels))
        g["tables"] = [table_view(t) for t in g["tables"]]
    return groups


def cell_label(cell):
    return "%s %s %s %dx%d" % (cell["framework"], catalog.model_title(cell["model"]),
                               catalog.precision_title(cell["precision"]), cell["nodes"], cell["gpus"])


def store_figures(store, platform, run_id):
    """Peak memory, data share and iteration traces of the newest run of every cell."""
    cells = sorted(store.cells(platform=platform, run_id=run_id),
                   key=lambda c: (c["precision"], c["gpus"] * c["nodes"], c["model"], c["framework"]))
    share, traces, failed = [], [], []
    scenarios = {}
    for cell in cells:
        if cell["excluded"]:
            continue
        trials = store.cell_trials(cell["run_id"], cell["cell_key"])
        done = [t for t in trials if t["status"] == "done"]
        failed += [{"id": t["id"], "cell": cell["cell_key"], "reason": t["reason"] or "?"}
                   for t in trials if t["status"] == "failed"]
        its = sorted(t["iteration_time_s"] for t in done if t["iteration_time_s"])
        datas = sorted(t["data_time_s"] for t in done if t["data_time_s"] is not None)
        if its and datas:
            share.append((cell_label(cell), its[len(its) // 2] * 1000, datas[len(datas) // 2] * 1000))
        if len(traces) < MAX_TRACED_CELLS and trials:
            if cell["run_id"] not in scenarios:
                scenarios[cell["run_id"]] = json.loads(store.run(cell["run_id"])["scenario_json"])
            sc = scenarios[cell["run_id"]]
            series = [("repeat %d" % t["repeat"], [tuple(r) for r in store.iterations(t["id"])]) for t in trials]
            series = [s for s in series if s[1]]
            if series:
                traces.append({"title": cell["cell_key"], "image": image(plots.iteration_trace(
                    cell_label(cell), series, sc["warmup"], sc["measure"])),
                    "window": "iterations %d-%d measured, %d warmup" % (
                        sc["warmup"] + 1, sc["warmup"] + sc["measure"], sc["warmup"])})
    return {"memory": memory_charts(memory_rows(store, cells)),
            "share": image(plots.data_share_chart(share)) if share else None,
            "traces": traces, "failed": failed}


MEMORY_CHARTS = (
    ("peak_device_mb", "Peak device memory of the trial's processes",
     "Device memory the trial's processes held on all GPUs (NVML, per process, summed each sample), "
     "highest over the repeats."),
    ("peak_rss_mb", "Peak resident memory of the trial's process tree",
     "Resident memory of the trial's whole process tree (loader workers and launcher children "
     "included; shared pages counted once where the kernel reports PSS), highest over the repeats."),
)


def memory_rows(store, cells):
    """[(configuration label, {peak_device_mb, peak_rss_mb, peak_mem_mb})]: the highest of each
    over a cell's finished repeats, for the cells that have a measured figure."""
    rows = []
    for cell in cells:
        if cell["excluded"]:
            continue
        done = [t for t in store.cell_trials(cell["run_id"], cell["cell_key"]) if t["status"] == "done"]
        peaks = {k: max([t[k] for t in done if t[k]] or [0.0]) or None
                 for k in ("peak_device_mb", "peak_rss_mb", "peak_mem_mb")}
        if peaks["peak_device_mb"] or peaks["peak_rss_mb"]:
            rows.append((cell_label(cell), peaks))
    return rows


def memory_series(rows):
    """[(title, intro, [(label, measured MiB, logged MiB or None)])]: one chart per measurement
    taken (device memory where a GPU was used, resident memory always), the same for every
    framework; the framework's own logged peak beside the first chart's bars."""
    series = []
    for key, title, intro in MEMORY_CHARTS:
        items = [(label, peaks[key], None if series else peaks["peak_mem_mb"])
                 for label, peaks in rows if peaks[key]]
        if items:
            series.append((title, intro, items))
    return series


def memory_charts(rows):
    return [{"title": title, "intro": intro,
             "image": image(plots.peak_memory_chart(items, title, measured_label="measured by detbench"))}
            for title, intro, items in memory_series(rows)]


def runs_view(store, run_ids):
    out = []
    for rid in run_ids:
        run = store.run(rid)
        host = json.loads(run["host_json"]) if run["host_json"] else {}
        out.append({"id": run["id"], "scenario": run["scenario"], "backend": run["backend"],
                    "created": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run["created"])),
                    "host": flatten(host)})
    return out


def flatten(obj, prefix=""):
    """Nested dicts as (dotted key, value text) pairs, skipping empty values."""
    pairs = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            pairs += flatten(v, "%s%s." % (prefix, k))
    elif obj not in (None, "", [], {}):
        pairs.append((prefix.rstrip("."), obj if isinstance(obj, str) else json.dumps(obj)))
    return pairs


def platform_view(name):
    try:
        return {"summary": platforms.summary(platforms.load(name)), "spec": flatten(platforms.load(name).model_dump())}
    except Exception as exc:  # an unknown platform name still gets its report, with the reason
        return {"summary": "%s (no platform description: %s)" % (name, exc), "spec": []}


def pins_view(tables):
    fws = sorted({fw for t in tables if t.source == "measured" for (_, fw) in t.entries
                  if not fw.startswith("published:")})
    out = []
    for fw in fws:
        spec = frameworks.FRAMEWORKS.get(fw)
        pins = ", ".join("%s@%s" % kv for kv in sorted(spec.pins.items())) if spec and spec.pins else ""
        out.append({"framework": fw, "pins": pins or "(none recorded)",
                    "figures": spec.figures if spec else ""})
    return out


# ------------------------------------------------------------------ the page
def page(platform, tables, published_tables=(), published_name=None, store=None, run_id=None):
    """The report page for `detbench report --format html`; published columns join matching tables."""
    from harness.report import export, measured

    ids = sorted({t["run_id"] for t in export.trial_rows(store, platform, run_id)}) if store is not None else []
    shown = measured.with_published(tables, published_tables) if published_tables and tables else tables
    return render(platform, shown, published_tables, published_name, store, run_id, ids)


def render(platform, measured_tables, published_tables=(), published_name=None, store=None, run_id=None,
           run_ids=()):
    """The whole page as a string. measured_tables may already carry published columns."""
    matched = {(t.platform, t.precision, t.gpus, t.nodes, t.form) for t in measured_tables}
    unmatched = [t for t in published_tables
                 if (t.platform, t.precision, t.gpus, t.nodes, t.form) not in matched or not measured_tables]
    series = scaling_view(measured_tables)
    drawn = store_figures(store, platform, run_id) if store is not None else {
        "memory": [], "share": None, "traces": [], "failed": []}
    context = {
        "platform": platform, "version": __version__, "published_name": published_name,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S"), "platform_info": platform_view(platform),
        "groups": table_groups(measured_tables), "published_groups": table_groups(unmatched),
        "scaling": [{"title": title, "image": image(plots.scaling_chart(lines, "Scaling efficiency, " + title))}
                    for title, lines in sorted(series.items())],
        "runs": runs_view(store, run_ids) if store is not None else [],
        "pins": pins_view(measured_tables), "flags": sorted(FLAG_TEXT.items()),
        "iteration_form": ITERATION, **drawn,
    }
    return environment().get_template("report.html.j2").render(**context)
