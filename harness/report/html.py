"""A Report as HTML: the seed-style tables plus the paper's figures, in one self-contained file.

Tables are the same Table/Entry objects the Markdown renderer draws (cell text comes from
harness.report.markdown.cell_text); figures come from harness.report.plots as base64 PNG.
Everything user- or log-supplied goes through jinja2 with autoescape on.
"""

import base64
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import jinja2

from harness import __version__, frameworks
from harness.vocab import catalog
from harness.measure import flags, work
from harness.report import breakdown, figures, markdown, plots
from harness.report.digits import figure
from harness.report.model import ITERATION, THROUGHPUT, Entry, LatencyTable, Report, Run, Table, Trace
from harness.report.scaling import Layout, ScalingPoint, SeriesKey

TEMPLATES = Path(__file__).resolve().parent / "templates"


View = Dict[str, Any]  # what the template draws of one part of the page


def environment() -> Any:
    """The Jinja environment of the page's templates: autoescaped, undefined names an error."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def image(fig: Any) -> str:
    """A figure as a PNG data URL."""
    return "data:image/png;base64," + base64.b64encode(plots.png_bytes(fig)).decode("ascii")


# ------------------------------------------------------------------ tables
def table_view(table: Table) -> View:
    """What the template needs to draw one table: header, rows of cells, footnotes, chart."""
    notes: List[str] = []

    def mark(text: str) -> int:
        if text not in notes:
            notes.append(text)
        return notes.index(text) + 1

    percentile = markdown.table_percentile(table)
    rows: List[View] = []
    for model in table.models:
        cells: List[Dict[str, Any]] = []
        for col in table.columns:
            entry = table.entries.get((model, col.key))
            text = markdown.cell_text(entry, table.form, percentile)
            cell: Dict[str, Any] = {
                "text": text,
                "marks": [],
                "tip": "",
                "mfu": "",
                "published": col.key.startswith("published:") or table.source == "published",
                "na": entry is not None and (entry.na is not None or text == "NA"),
            }
            if entry is not None and entry.na:
                cell["marks"].append({"n": mark("NA: " + entry.na), "flag": "na"})
            elif entry is not None:
                cell["marks"] += [{"n": mark(flags.text(f)), "flag": f} for f in entry.flags]
                cell["tip"] = detail_text(entry, col.key)
                if (
                    entry.detail is not None
                    and entry.detail.mfu is not None
                    and entry.detail.tflops is not None
                    and table.form != ITERATION
                ):
                    cell["mfu"] = "%.3f TFLOP/s, %.0f%% of peak" % (entry.detail.tflops, 100 * entry.detail.mfu)
            cells.append(cell)
        rows.append({"model": catalog.model_title(model), "cells": cells})
    return {
        "title": table.title,
        "form": table.form,
        "intro": markdown.INTRO[table.form].replace("**", ""),
        "columns": [c.title for c in table.columns],
        "rows": rows,
        "footnotes": list(enumerate(notes, 1)),
        "notes": list(table.notes),
        "source": table.source,
    }


def detail_text(entry: Entry, column: str = "") -> str:
    """The tooltip of a cell: its repeats, spread, settings and figures in words."""
    d = entry.detail
    if d is None:
        return ""
    parts = ["n=%s" % d.n]
    if d.ci:
        parts.append("95%% CI %s-%s" % (figure(d.ci[0]), figure(d.ci[1])))
    if d.minimum is not None:
        parts.append("min %s max %s" % (figure(d.minimum), figure(d.maximum)))
    if d.cv is not None:
        parts.append("CV %.2f%%" % (d.cv * 100))
    if d.observed:
        parts.append("observed %s img/s" % figure(d.observed))
    if d.failed:
        parts.append("%d failed" % d.failed)
    if d.kinds:
        parts.append("figure: %s" % figures.column_text(column, [d]))
    if d.work:
        parts.append("work per iteration: %s" % work.row_text([d.work]))
    if d.mfu is not None:
        parts.append(
            "compute %.3f TFLOP/s, %.1f%% of the host's %.0f GFLOP/s peak"
            % (d.tflops or 0.0, 100 * d.mfu, d.peak_gflops or 0.0)
            + (
                " (measured since; the run stored %.0f, against which the share is %.1f%%)"
                % (d.peak_stored_gflops or 0.0, 100 * d.mfu_stored)
                if d.mfu_stored is not None
                else ""
            )
        )
    elif d.limit_note:
        parts.append("no compute figure (%s)" % d.limit_note)
    for peak, what in ((d.peak_device_mb, "device"), (d.peak_rss_mb, "resident"), (d.peak_mem_mb, "logged")):
        if peak:
            parts.append("peak %s memory %.0f MiB" % (what, peak))
    return "; ".join(parts)


# ------------------------------------------------------------------ figures
def scaling_view(
    series: Mapping[SeriesKey, Sequence[Tuple[Layout, ScalingPoint]]],
) -> Dict[str, Dict[str, Dict[int, float]]]:
    """{title: {label: {devices: efficiency}}} from harness.report.scaling.scaling_series, one chart
    per platform and per-device batch."""
    out: Dict[str, Dict[str, Dict[int, float]]] = defaultdict(dict)
    for key, points in series.items():
        effs = {p.devices: p.efficiency for _, p in points if p.efficiency is not None}
        if len(effs) > 1:
            label = "%s %s %s" % (key.framework, catalog.model_title(key.model), catalog.precision_title(key.precision))
            out["%s, %d images per device" % (key.platform, key.batch_per_gpu)][label] = effs
    return dict(out)


def table_groups(tables: Iterable[Table]) -> List[Dict[str, Any]]:
    """Tables grouped by platform and precision, each group with one grouped bar chart."""
    groups: List[Dict[str, Any]] = []
    for t in tables:
        key = (t.platform, t.precision, t.source)
        if not groups or groups[-1]["key"] != key:
            groups.append(
                {
                    "key": key,
                    "title": "%s %s" % (t.platform, catalog.precision_title(t.precision)),
                    "tables": [],
                    "source": t.source,
                    "chart": None,
                }
            )
        groups[-1]["tables"].append(t)
    for g in groups:
        bars = [t for t in g["tables"] if t.form == THROUGHPUT]
        if any(e.throughput for t in bars for e in t.entries.values() if e is not None):
            merged, labels = plots.merge_for_chart(bars, "Throughput, %s" % g["title"])
            g["chart"] = image(plots.throughput_bars(merged, labels))
        g["tables"] = [table_view(t) for t in g["tables"]]
    return groups


def traces_view(traces: Iterable[Trace]) -> List[View]:
    """Each traced cell's iteration-time chart with its window."""
    return [
        {
            "title": t.cell_key,
            "image": image(plots.iteration_trace(t.label, t.repeats, t.warmup, t.measure)),
            "window": "iterations %d-%d measured, %d warmup" % (t.warmup + 1, t.warmup + t.measure, t.warmup),
        }
        for t in traces
    ]


MEMORY_CHARTS = (
    (
        "peak_device_mb",
        "Peak device memory of the trial's processes",
        "Device memory the trial's processes held on all GPUs (NVML, per process, summed each sample), "
        "highest over the repeats.",
    ),
    (
        "peak_rss_mb",
        "Peak resident memory of the trial's process tree",
        "Resident memory of the trial's whole process tree (loader workers and launcher children "
        "included; shared pages counted once where the kernel reports PSS), highest over the repeats.",
    ),
)


def memory_series(
    rows: Iterable[Tuple[str, Mapping[str, Optional[float]]]],
) -> List[Tuple[str, str, List[Tuple[str, Any, Any]]]]:
    """[(title, intro, [(label, measured MiB, logged MiB or None)])] from Report.memory (rows of
    (configuration, {peak_device_mb, peak_rss_mb, peak_mem_mb})): one chart per measurement
    taken (device memory where a GPU was used, resident memory always), the same for every
    framework; the framework's own logged peak beside the first chart's bars."""
    series: List[Tuple[str, str, List[Tuple[str, Any, Any]]]] = []
    for key, title, intro in MEMORY_CHARTS:
        items = [(label, peaks[key], None if series else peaks["peak_mem_mb"]) for label, peaks in rows if peaks[key]]
        if items:
            series.append((title, intro, items))
    return series


def memory_charts(rows: Iterable[Tuple[str, Mapping[str, Optional[float]]]]) -> List[View]:
    """The memory charts of memory_series."""
    return [
        {
            "title": title,
            "intro": intro,
            "image": image(plots.peak_memory_chart(items, title, measured_label="measured by detbench")),
        }
        for title, intro, items in memory_series(rows)
    ]


def runs_view(runs: Iterable[Run]) -> List[View]:
    """Each run's id, scenario, backend, start and host facts."""
    return [
        {
            "id": r.id,
            "scenario": r.scenario,
            "backend": r.backend,
            "created": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created)),
            "host": flatten(r.host or {}),
        }
        for r in runs
    ]


def flatten(obj: object, prefix: str = "") -> List[Tuple[str, str]]:
    """Nested dicts as (dotted key, value text) pairs, skipping empty values."""
    pairs: List[Tuple[str, str]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            pairs += flatten(v, "%s%s." % (prefix, k))
    elif obj not in (None, "", [], {}):
        pairs.append((prefix.rstrip("."), obj if isinstance(obj, str) else json.dumps(obj)))
    return pairs


def pins_view(tables: Iterable[Table]) -> List[View]:
    """The pins and figure kind of each measured framework."""
    fws = sorted(
        {fw for t in tables if t.source == "measured" for (_, fw) in t.entries if not fw.startswith("published:")}
    )
    out: List[View] = []
    for fw in fws:
        spec = frameworks.FRAMEWORKS.get(fw)
        pins = ", ".join("%s@%s" % kv for kv in sorted(spec.pins.items())) if spec and spec.pins else ""
        out.append({"framework": fw, "pins": pins or "(none recorded)", "figures": spec.figures if spec else ""})
    return out


# ------------------------------------------------------------------ inference
def latency_table_view(table: LatencyTable) -> View:
    """One LatencyTable as the template draws it: the seed's six columns, a row per batch size."""
    heads = ["Batch size", "Throughput Avg", "Latency Avg (ms)"] + ["Latency %g%% (ms)" % p for p in table.percentiles]
    rows: List[View] = []
    as_given = table.source == "published"
    number = markdown.printed if as_given else markdown.ms
    for batch, entry in table.rows:
        lat = entry.latency
        if entry.na is not None or lat is None:
            rows.append({"cells": [str(batch)] + ["NA"] * (len(heads) - 1), "tip": entry.na or "no latency figures"})
            continue
        thr = (
            markdown.printed(entry.throughput)
            if as_given
            else "NA"
            if entry.throughput is None
            else figure(entry.throughput)
        )
        rows.append(
            {
                "cells": [str(batch), thr, number(lat.mean_ms)] + [number(v) for _, v in lat.percentiles],
                "tip": detail_text(entry, table.framework),
            }
        )
    return {"title": table.title, "heads": heads, "rows": rows, "notes": list(table.notes)}


def latency_curves(tables: Iterable[LatencyTable]) -> List[View]:
    """One latency-throughput chart per platform x precision x model: a line per framework."""
    groups: Dict[Tuple[str, ...], Dict[str, Any]] = defaultdict(dict)
    for t in tables:
        points = [
            (b, e.throughput, e.latency.mean_ms)
            for b, e in t.rows
            if e.latency is not None and e.throughput and e.latency.mean_ms
        ]
        if points:
            groups[(t.platform, catalog.precision_title(t.precision), catalog.model_title(t.model))][
                t.framework_title
            ] = points
    return [
        {
            "title": "%s %s %s" % key,
            "image": image(
                plots.latency_throughput_curve(series, "Latency (average) against throughput, %s %s %s" % key)
            ),
        }
        for key, series in sorted(groups.items())
    ]


def latency_histograms(tables: Iterable[LatencyTable], traces: Iterable[Trace]) -> List[View]:
    """A histogram per inference cell whose batches were read: every repeat's measured batches,
    with the cell's average and percentiles marked."""
    by_key = {t.cell_key: t for t in traces}
    out: List[View] = []
    for table in tables:
        for batch, entry in table.rows:
            lat = entry.latency
            trace = next(
                (
                    tr
                    for key, tr in by_key.items()
                    if key.startswith("%s/%s/%s/%s/" % (table.framework, table.model, table.precision, table.platform))
                    and key.endswith("/b%d" % batch)
                ),
                None,
            )
            if lat is None or trace is None:
                continue
            first, last = trace.warmup + 1, trace.warmup + trace.measure
            times = [
                p[1] * 1000 for _, points in trace.repeats for p in points if p[1] is not None and first <= p[0] <= last
            ]
            if not times:
                continue
            marks = [("average", v) for v in (lat.mean_ms,) if v is not None] + [
                ("%g%%" % p, v) for p, v in lat.percentiles if v is not None
            ]
            title = "%s, batch %d" % (table.title, batch)
            out.append({"title": title, "image": image(plots.latency_histogram(title, times, marks))})
    return out


def inference_view(report: Report) -> Optional[View]:
    """The inference part of the page, or None where the report has none."""
    if not (report.latency or report.published_latency or report.published_grids):
        return None
    return {
        "side": [table_view(t) for t in report.inference],
        "tables": [latency_table_view(t) for t in report.latency + report.published_latency],
        "grids": [
            {"title": title, "heads": list(heads), "rows": [list(r) for r in rows], "notes": list(notes)}
            for title, heads, rows, notes in report.published_grids
        ],
        "curves": latency_curves(report.latency),
        "histograms": latency_histograms(report.latency, report.traces),
    }


# ------------------------------------------------------------------ the page
def render(report: Report) -> str:
    """The whole page; published tables that match no measured one get their own groups."""
    matched = {(t.platform, t.precision, t.gpus, t.nodes, t.form) for t in report.measured}
    unmatched = [
        t
        for t in report.published
        if (t.platform, t.precision, t.gpus, t.nodes, t.form) not in matched or not report.measured
    ]
    context = {
        "platform": report.platform,
        "version": __version__,
        "published_name": report.published_name,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(report.generated)),
        "platform_info": {
            "summary": report.platform_summary,
            "spec": flatten(report.platform_spec) if report.platform_spec is not None else [],
        },
        "groups": table_groups(report.shown),
        "published_groups": table_groups(unmatched),
        "scaling": [
            {"title": title, "image": image(plots.scaling_chart(lines, "Scaling efficiency, " + title))}
            for title, lines in sorted(scaling_view(report.scaling).items())
        ],
        "runs": runs_view(report.runs),
        "pins": pins_view(report.measured),
        "flags": sorted((name, flag.text) for name, flag in flags.FLAGS.items()),
        "iteration_form": ITERATION,
        "memory": memory_charts(report.memory),
        "share": image(plots.data_share_chart(report.data_share)) if report.data_share else None,
        "traces": traces_view(report.traces),
        "failed": report.failed,
        "inference": inference_view(report),
        "breakdown": breakdown_view(report),
        "breakdown_intro": breakdown.INTRO,
        "breakdown_notes": report.breakdown_notes,
    }
    return str(environment().get_template("report.html.j2").render(**context))


def breakdown_view(report: Report) -> List[View]:
    """Per model and precision, a stacked bar per framework of its step's phases, and each
    framework's table of them (harness.report.breakdown)."""
    groups: Dict[Tuple[str, str], List[Any]] = {}
    for b in report.breakdowns:
        groups.setdefault((b.model, b.precision), []).append(b)
    out: List[View] = []
    for (model, precision), cells in groups.items():
        title = "Step breakdown, %s %s" % (catalog.model_title(model), catalog.precision_title(precision))
        items = [(b.framework, [(r.phase, r.seconds * 1000.0) for r in b.phases]) for b in cells]
        tables = [
            {
                "title": b.title,
                "cell": b.cell_key,
                "rows": [
                    (
                        r.phase,
                        figure(r.seconds * 1000.0),
                        "%.1f%%" % (100.0 * r.share_of_step),
                        "-" if r.share_of_peak is None else "%.0f%%" % (100.0 * r.share_of_peak),
                    )
                    for r in b.phases + b.counted
                ],
            }
            for b in cells
        ]
        out.append({"title": title, "image": image(plots.step_breakdown_bars(items, title)), "tables": tables})
    return out
