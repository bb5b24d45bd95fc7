"""A Report as Markdown: tables in the form of SimpleDet's BENCHMARK.md, then scaling efficiency."""

from typing import Any, List, Mapping, Optional, Sequence, Tuple

from harness.vocab import catalog
from harness.measure import flags
from harness.report import breakdown, inference, scaling
from harness.report.digits import figure
from harness.report.model import INFERENCE, ITERATION, THROUGHPUT, Entry, LatencyTable, Report, Table
from harness.report.published import SPEED

MARKS = "¹²³⁴⁵⁶⁷⁸⁹"

INTRO = {
    THROUGHPUT: "Throughput in **images/s**, iteration time in parentheses.",
    ITERATION: "Iteration time on a single device, **data time** in parentheses.",
    SPEED: "Throughput in **images/s** as published (no iteration time given).",
    INFERENCE: "Inference throughput in **images/s**, latency per batch in parentheses.",
}
FEATURE = {True: "✓", False: "✗"}


def render(report: Report, details: bool = True) -> str:
    """The published tables, the measured ones (with published columns beside them) and the
    scaling tables, each part under its heading. Without `details` (the terminal's default) the
    measured tables leave out their detail notes (Table.details) and the report ends saying how
    to see them."""
    parts: List[str] = []
    if report.published:
        parts.append(render_tables(report.published, "Published: %s" % report.published_name))
    if report.published_latency or report.published_grids:
        parts.append(published_extra(report))
    if report.measured:
        parts.append(render_tables(report.shown, "Measured on %s" % report.platform, details))
    if report.latency:
        parts.append(latency_text(report.latency, report.inference, report.platform))
    text = scaling_text(report.scaling)
    if text:
        parts.append(text)
    if report.breakdowns or report.breakdown_notes:
        parts.append(breakdown_text(report))
    if not details and any(t.details for t in report.shown):
        parts.append("Scope, implementation, work and place check under each table: detbench report --details.\n")
    return "\n".join(parts)


def cell_text(entry: Optional[Entry], form: str, percentile: Optional[float] = None) -> str:
    """The text of one table cell in the table's form: a measured figure to its significant
    digits (harness.report.digits), a published one as its source prints it."""
    if entry is None:
        return "-"
    if entry.na is not None:
        return "NA"
    if entry.detail is None and form in (THROUGHPUT, ITERATION):  # SimpleDet's form: 55.5(288ms), 360ms(40ms)
        rate, time = "%.1f".__mod__, "%.0f".__mod__
    else:
        rate = time = figure
    if form == INFERENCE:
        ms = inference.latency_ms(entry, percentile)
        if entry.throughput is None or ms is None:
            return "NA"
        return "%s(%sms)" % (figure(entry.throughput), figure(ms))
    if form == THROUGHPUT:
        if entry.throughput is None or entry.iteration_ms is None:
            return "NA"
        return "%s(%sms)" % (rate(entry.throughput), time(entry.iteration_ms))
    if form == SPEED:
        return "NA" if entry.throughput is None else "%g" % entry.throughput
    if entry.iteration_ms is None:
        return "NA"
    data = "?" if entry.data_ms is None else time(entry.data_ms)
    return "%sms(%sms)" % (time(entry.iteration_ms), data)


def render_table(table: Table, details: bool = True) -> str:
    """One table as Markdown: its rows, the footnotes its marks point at, a verdict per row, and
    its notes (without `details`, those not in table.details)."""
    notes: List[str] = []  # footnote texts in order of first use

    def mark(text: str) -> str:
        if text not in notes:
            notes.append(text)
        i = notes.index(text)
        return MARKS[i] if i < len(MARKS) else "[%d]" % (i + 1)

    percentile = table_percentile(table)
    lines = [
        "#### %s" % table.title,
        INTRO[table.form],
        "",
        "|model|%s|" % "|".join(c.title for c in table.columns),
        "|-----|%s|" % "|".join("-" * max(3, len(c.title)) for c in table.columns),
    ]
    for model in table.models:
        cells = []
        for col in table.columns:
            entry = table.entries.get((model, col.key))
            text = cell_text(entry, table.form, percentile)
            if entry is not None and entry.na:
                text += mark("NA: " + entry.na)
            elif entry is not None:
                text += "".join(mark(flags.text(f)) for f in entry.flags)
            cells.append(text)
        lines.append("|%s|%s|" % (catalog.model_title(model), "|".join(cells)))
    features = getattr(table, "features", None)
    if features:
        lines += [
            "",
            "|feature|%s|" % "|".join(c.title for c in table.columns),
            "|-------|%s|" % "|".join("-" * max(3, len(c.title)) for c in table.columns),
        ]
        for name, values in features.items():
            cells = [FEATURE.get(values[c.key], values[c.key]) if c.key in values else "-" for c in table.columns]
            lines.append("|%s|%s|" % (name, "|".join(cells)))
    footer = ["%s %s" % (MARKS[i] if i < len(MARKS) else "[%d]" % (i + 1), text) for i, text in enumerate(notes)]
    notes_shown = [n for n in table.notes if details or n not in table.details]
    extra = footer + verdict_lines(table) + notes_shown
    if extra:
        lines.append("")
        lines += [line + "  " if i < len(extra) - 1 else line for i, line in enumerate(extra)]
    return "\n".join(lines) + "\n"


def render_tables(tables: Sequence[Table], heading: Optional[str] = None, details: bool = True) -> str:
    """The tables under one heading."""
    parts: List[str] = []
    if heading:
        parts.append("### %s\n" % heading)
    parts += [render_table(t, details) for t in tables]
    return "\n".join(parts)


def verdict_lines(table: Table) -> List[str]:
    """Per model row of a measured throughput table, one line: the fastest measured column's
    figure and, for each other one, how many times faster it is, or that the two are level where
    their repeats' ranges overlap (no order between them holds in every repeat)."""
    if table.form != THROUGHPUT or table.source != "measured":
        return []
    lines = []
    for model in table.models:
        ranked = sorted(
            (
                (entry.throughput, entry.detail.minimum, entry.detail.maximum, col.title)
                for col in table.columns
                for entry in [table.entries.get((model, col.key))]
                if entry is not None and entry.detail is not None and entry.throughput
            ),
            key=lambda figures: -figures[0],
        )
        if not ranked:
            continue
        (best, lowest, _, leader), rest = ranked[0], ranked[1:]
        said = ["%s %s images/s" % (leader, figure(best))]
        said += [
            "level with %s (repeats overlap)" % title
            if highest >= lowest
            else "%sx %s" % (figure(best / throughput), title)
            for throughput, _, highest, title in rest
        ]
        lines.append(
            "Verdict, %s: %s%s."
            % (catalog.model_title(model), "; ".join(said), "" if rest else ", the only one measured")
        )
    return lines


def table_percentile(table: Table) -> Optional[float]:
    """The latency percentile an INFERENCE table's cells show (None: the average)."""
    if table.form != INFERENCE:
        return None
    return inference.shown_percentile(
        sorted({p for e in table.entries.values() if e.latency for p, v in e.latency.percentiles if v is not None})
    )


def ms(value: Optional[float]) -> str:
    """Milliseconds to their significant digits, NA for None."""
    return "NA" if value is None else figure(value)


def printed(value: Any) -> str:
    """A published figure exactly as its source printed it."""
    from harness.report.published import as_printed

    return "NA" if value is None else as_printed(value)


def grid_text(title: str, headings: Sequence[str], rows: Sequence[Sequence[str]], notes: Sequence[str]) -> str:
    """A published grid (NVIDIA's form) as a Markdown table with its notes."""
    lines = ["#### %s" % title, "", "| %s |" % " | ".join(headings), "|%s|" % "|".join("---" for _ in headings)]
    lines += ["| %s |" % " | ".join(row) for row in rows]
    lines += [""] + [n + "  " if i < len(notes) - 1 else n for i, n in enumerate(notes)]
    return "\n".join(lines) + "\n"


def published_extra(report: Report) -> str:
    """Published inference tables and grids (NVIDIA's form), every figure as printed."""
    heading = "### Published: %s\n" % report.published_name
    if report.published:
        heading = ""
    parts = [heading] if heading else []
    parts += [latency_table_text(t) for t in report.published_latency]
    parts += [grid_text(*g) for g in report.published_grids]
    return "\n".join(parts)


def latency_table_text(table: LatencyTable) -> str:
    """One LatencyTable in the form of NVIDIA's EfficientDet inference tables."""
    heads = ["Batch size", "Throughput Avg", "Latency Avg (ms)"] + ["Latency %g%% (ms)" % p for p in table.percentiles]
    lines = [
        "#### %s" % table.title,
        "",
        "| %s |" % " | ".join(heads),
        "|%s|" % "|".join("-" * (len(h) + 2) for h in heads),
    ]
    notes: List[str] = []
    as_given = table.source == "published"
    number = printed if as_given else ms
    for batch, entry in table.rows:
        if entry.na is not None or entry.latency is None:
            reason = entry.na or "no latency figures"
            if reason not in notes:
                notes.append(reason)
            lines.append(
                "| %d | NA%s |%s" % (batch, MARKS[notes.index(reason) % len(MARKS)], " NA |" * (len(heads) - 2))
            )
            continue
        lat = entry.latency
        shown = (
            printed(entry.throughput) if as_given else "NA" if entry.throughput is None else figure(entry.throughput)
        )
        lines.append(
            "| %d | %s | %s | %s |"
            % (batch, shown, number(lat.mean_ms), " | ".join(number(v) for _, v in lat.percentiles))
        )
    extra = ["%s NA: %s" % (MARKS[i % len(MARKS)], text) for i, text in enumerate(notes)] + list(table.notes)
    if any(v is None for _, e in table.rows if e.latency for _, v in e.latency.percentiles):
        extra.append("NA in a percentile column: too few measured batches to place it.")
    if extra:
        lines.append("")
        lines += [line + "  " if i < len(extra) - 1 else line for i, line in enumerate(extra)]
    return "\n".join(lines) + "\n"


def latency_text(tables: Sequence[LatencyTable], side_by_side: Sequence[Table], platform: str) -> str:
    """The inference part of a report: the frameworks side by side, then each one's table."""
    parts = ["### Inference on %s\n" % platform]
    parts += [render_table(t) for t in side_by_side]
    parts += [latency_table_text(t) for t in tables]
    return "\n".join(parts)


def scaling_text(series: Mapping[scaling.SeriesKey, Sequence[Tuple[scaling.Layout, scaling.ScalingPoint]]]) -> str:
    """Markdown scaling tables of harness.report.scaling.scaling_series, or "" when it is empty."""
    if not series:
        return ""
    parts = ["### Scaling efficiency\n"]
    for key, rows in series.items():
        base = scaling.baseline_devices(rows)
        lines = [
            "#### %s-%s: %s %s"
            % (key.platform, catalog.precision_title(key.precision), key.framework, catalog.model_title(key.model)),
            "Throughput on N devices / (N x throughput on %s)."
            % ("1 device" if base == 1 else "%d devices, per device" % base),
            "",
            "|devices|nodes x devices|images/s|speedup|efficiency|",
            "|-------|---------------|--------|-------|----------|",
        ]
        for layout, p in rows:
            speedup = p.efficiency * p.devices / base if p.efficiency is not None else None
            lines.append(
                "|%d|%dx%d|%s|%s|%s|"
                % (
                    p.devices,
                    layout.nodes,
                    layout.gpus,
                    figure(p.throughput),
                    "%.2fx" % speedup if speedup is not None else "NA",
                    "%.0f%%" % (100 * p.efficiency) if p.efficiency is not None else "NA",
                )
            )
        lines += ["", "%d images per device; medians over repeats." % key.batch_per_gpu]
        if base != 1:
            lines[-1] += " No single-device run: efficiency is relative to %d devices." % base
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def breakdown_text(report: Report) -> str:
    """Each cell's step breakdown as a table under its heading, then the lines naming the cells
    whose breakdown is missing or does not add up."""
    lines = ["### Where the step time goes on %s" % report.platform, "", breakdown.INTRO, ""]
    for b in report.breakdowns:
        lines += [
            "#### %s" % b.title,
            "",
            "Step %s ms, median of %d repeat%s." % (figure(b.step_s * 1000.0), b.trials, "" if b.trials == 1 else "s"),
            "",
        ]
        lines += breakdown.table_lines(b) + [""]
    lines += list(report.breakdown_notes)
    return "\n".join(lines) + "\n"
