"""The report's figures, drawn with matplotlib's Agg backend.

One function per figure; each returns a matplotlib Figure (no pyplot, no global state), and
png_bytes() turns any of them into PNG bytes. The data arrive already computed: these
functions only draw.
"""

import io
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from harness.vocab import catalog  # noqa: E402
from harness.measure import flags  # noqa: E402
from harness.report.model import Table  # noqa: E402

PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD")
PUBLISHED_HATCH = "//"
WIDTH_IN = 8.0


def png_bytes(fig: Figure, dpi: int = 110) -> bytes:
    """The figure as PNG."""
    buf = io.BytesIO()
    FigureCanvasAgg(fig)
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", facecolor="white")
    return buf.getvalue()


def _figure(height: float) -> Figure:
    fig = Figure(figsize=(WIDTH_IN, height))
    FigureCanvasAgg(fig)
    return fig


def _style(ax: Any) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.grid(axis="y", color="#dddddd", linewidth=0.8)
    ax.set_axisbelow(True)


def throughput_bars(table: Table, labels: Optional[Mapping[str, str]] = None) -> Figure:
    """Grouped bars (SimpleDet paper, Figure 2): one group per model, one bar per column.

    Columns whose key starts with "published:" are hatched; a cell without a figure gets a
    zero-height bar labelled NA. Measured bars carry the 95% CI of the median as error bars.
    labels: {row key: x label} where rows are not plain model names.
    """
    fig = _figure(3.2)
    ax = fig.add_subplot(1, 1, 1)
    models, columns = table.models, table.columns
    labels = labels or {}
    n = max(len(columns), 1)
    width = 0.8 / n
    colours: Dict[str, str] = {}
    for i, col in enumerate(columns):
        base = col.key.split(":", 1)[-1]
        colour = colours.setdefault(base, PALETTE[len(colours) % len(PALETTE)])
        published = col.key.startswith("published:")
        heights: List[float] = []
        errs: List[List[float]] = [[], []]
        xs: List[float] = []
        for m, model in enumerate(models):
            entry = table.entries.get((model, col.key))
            x = m - 0.4 + width * (i + 0.5)
            value = entry.throughput if entry is not None and entry.na is None and entry.throughput else 0.0
            ci = (entry.detail.ci if entry is not None and entry.detail else None) or [value, value]
            xs.append(x)
            heights.append(value)
            errs[0].append(max(0.0, value - ci[0]) if value else 0.0)
            errs[1].append(max(0.0, ci[1] - value) if value else 0.0)
            if entry is not None and not value:
                ax.text(x, 0, "NA", ha="center", va="bottom", fontsize=8, color="#666666")
        bars = ax.bar(
            xs,
            heights,
            width * 0.92,
            label=col.title,
            color=colour,
            hatch=PUBLISHED_HATCH if published else None,
            edgecolor="white" if published else colour,
            alpha=0.75 if published else 1.0,
            yerr=None if published else errs,
            capsize=3 if not published else 0,
            error_kw={"elinewidth": 1, "ecolor": "#333333"},
        )
        for bar, value in zip(bars, heights):
            if value:
                ax.annotate(
                    "%.1f" % value,
                    (bar.get_x() + bar.get_width() / 2, value),
                    xytext=(0, 2),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels([labels.get(m, catalog.model_title(m)) for m in models], fontsize=8)
    ax.set_ylabel("images / s")
    ax.set_title(table.title)
    ax.set_xlim(-0.6, len(models) - 0.4)
    ax.margins(y=0.15)
    _style(ax)
    ax.legend(frameon=False, fontsize=8, ncol=min(n, 4), loc="upper center", bbox_to_anchor=(0.5, -0.16))
    return fig


def merge_for_chart(tables: Sequence[Table], title: str) -> Tuple[Table, Dict[str, str]]:
    """One Table over several (same platform and precision): rows are (model, device count)
    pairs, columns the union of the tables' columns. Returns (table, {row key: x label})."""
    from harness.report.model import Column, Table

    columns: List[Column] = []
    entries: Dict[Tuple[str, str], Any] = {}
    rows: List[str] = []
    labels: Dict[str, str] = {}
    several = len({t.gpus * t.nodes for t in tables}) > 1
    for t in tables:
        for col in t.columns:
            if col.key not in [c.key for c in columns]:
                columns.append(Column(col.key, col.title))
        for model in t.models:
            row = "%s@%dx%d" % (model, t.nodes, t.gpus)
            rows.append(row)
            labels[row] = catalog.model_title(model) + (
                "\n%d device%s" % (t.gpus * t.nodes, "s" if t.gpus * t.nodes > 1 else "") if several else ""
            )
            for col in t.columns:
                if (model, col.key) in t.entries:
                    entries[(row, col.key)] = t.entries[(model, col.key)]
    first = tables[0]
    merged = Table(
        title=title,
        platform=first.platform,
        precision=first.precision,
        gpus=first.gpus,
        nodes=first.nodes,
        batch_per_gpu=first.batch_per_gpu,
        form=first.form,
        columns=columns,
        models=rows,
        entries=entries,
        source=first.source,
    )
    return merged, labels


def scaling_chart(series: Mapping[str, Mapping[int, float]], title: str = "Scaling efficiency") -> Figure:
    """Lines of efficiency over device counts (SimpleDet paper, Figure 1a); series: {label: {N: eff}}
    with the efficiencies from harness.report.scaling."""
    fig = _figure(3.4)
    ax = fig.add_subplot(1, 1, 1)
    counts = sorted({n for points in series.values() for n in points})
    ax.axhline(100.0, color="#999999", linestyle="--", linewidth=1, label="linear scaling")
    for i, (label, points) in enumerate(sorted(series.items())):
        xs = sorted(points)
        ys = [points[x] * 100 for x in xs]
        ax.plot(xs, ys, marker="o", color=PALETTE[i % len(PALETTE)], label="%s (%d: %.0f%%)" % (label, xs[-1], ys[-1]))
    ax.set_xticks(counts)
    ax.set_xlabel("devices")
    ax.set_ylabel("efficiency (%)")
    top = max([100.0] + [p * 100 for pts in series.values() for p in pts.values()])
    ax.set_ylim(0, top * 1.15)
    ax.set_title(title)
    _style(ax)
    ax.set_xlim(min(counts) - 0.3, max(counts) + 0.3)
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _label_rows(ax: Any, labels: Sequence[str], xlabel: str, title: str, margin: float) -> None:
    """A horizontal bar chart's rows labelled top to bottom, its x label, margin and title."""
    ax.set_yticks(list(range(len(labels))))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.margins(x=margin)
    ax.set_title(title)
    _style(ax)
    ax.grid(axis="y", visible=False)


def peak_memory_chart(
    items: Sequence[Tuple[str, float, Optional[float]]],
    title: str = "Peak memory per configuration",
    measured_label: str = "measured",
) -> Figure:
    """Horizontal bars (SimpleDet paper, Figure 1b); items: [(label, measured MiB, logged MiB or None)].

    The measured bar is the same measurement for every framework (runner.py's telemetry);
    where the framework logs its own peak, a thinner hatched bar beside it shows that figure.
    """
    fig = _figure(0.9 + 0.45 * max(len(items), 1))
    ax = fig.add_subplot(1, 1, 1)
    ys = list(range(len(items)))
    logged = [(y, item[2]) for y, item in zip(ys, items) if item[2]]
    height = 0.38 if logged else 0.6
    measured = ax.barh(
        [y - (height / 2 if logged else 0) for y in ys],
        [item[1] for item in items],
        color=PALETTE[0],
        height=height,
        label=measured_label,
    )
    bars = list(measured)
    if logged:
        bars += list(
            ax.barh(
                [y + height / 2 for y, _ in logged],
                [v for _, v in logged],
                color=PALETTE[1],
                height=height,
                hatch=PUBLISHED_HATCH,
                edgecolor="white",
                label="the framework's own logged peak",
            )
        )
    for bar in bars:
        v = bar.get_width()
        ax.annotate(
            "%.0f MiB" % v,
            (v, bar.get_y() + bar.get_height() / 2),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
        )
    _label_rows(ax, [item[0] for item in items], "peak memory (MiB)", title, 0.15)
    ax.grid(axis="x", color="#dddddd", linewidth=0.8)
    if logged:
        ax.legend(frameon=False, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    return fig


def iteration_trace(
    title: str, traces: Sequence[Tuple[str, Sequence[Sequence[Any]]]], warmup: int, measure: int
) -> Figure:
    """Iteration time over iterations, one line per trial, the measured window shaded.

    traces: [(label, [(iteration, time_s, data_time_s), ...])]; data time is drawn dotted.
    """
    fig = _figure(2.8)
    ax = fig.add_subplot(1, 1, 1)
    ax.axvspan(warmup + 0.5, warmup + measure + 0.5, color="#e8f0e0", label="measured window")
    for i, (label, points) in enumerate(traces):
        colour = PALETTE[i % len(PALETTE)]
        its = [p[0] for p in points if p[1] is not None]
        ax.plot(its, [p[1] * 1000 for p in points if p[1] is not None], color=colour, linewidth=1.2, label=label)
        data = [(p[0], p[2] * 1000) for p in points if p[2] is not None]
        if data:
            ax.plot([d[0] for d in data], [d[1] for d in data], color=colour, linewidth=0.8, linestyle=":")
    ax.set_xlabel("iteration")
    ax.set_ylabel("ms (dotted: data)")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    ax.margins(y=0.1)
    _style(ax)
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def data_share_chart(
    items: Sequence[Tuple[str, float, float]],
    threshold: float = flags.DATA_BOUND_SHARE,
    title: str = "Data time as a share of iteration time",
) -> Figure:
    """Stacked horizontal bars: data wait and the rest; items: [(label, iteration ms, data ms)]."""
    fig = _figure(0.9 + 0.35 * max(len(items), 1))
    ax = fig.add_subplot(1, 1, 1)
    ys = range(len(items))
    shares = [(d / it * 100 if it else 0.0) for _, it, d in items]
    ax.barh(ys, shares, color=PALETTE[3], height=0.6, label="waiting for data")
    ax.barh(
        ys,
        [100 - s for s in shares],
        left=shares,
        color=PALETTE[0],
        height=0.6,
        alpha=0.35,
        label="rest of the iteration",
    )
    for y, s in zip(ys, shares):
        ax.annotate("%.1f%%" % s, (s, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    ax.axvline(
        threshold * 100,
        color="#333333",
        linestyle="--",
        linewidth=1,
        label="%s above %.0f%%" % (flags.DATA_BOUND, threshold * 100),
    )
    ax.set_yticks(list(ys))
    ax.set_yticklabels([label for label, _, _ in items], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of iteration time")
    ax.set_title(title)
    _style(ax)
    ax.grid(axis="y", visible=False)
    ax.legend(frameon=False, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3)
    return fig


def latency_throughput_curve(series: Mapping[str, Sequence[Tuple[int, float, float]]], title: str) -> Figure:
    """Latency against throughput, one line per framework, a point per batch size (labelled).

    series: {framework label: [(batch, images/s, latency ms)]}, each sorted by batch."""
    fig = _figure(3.2)
    ax = fig.add_subplot(1, 1, 1)
    for i, (label, points) in enumerate(sorted(series.items())):
        colour = PALETTE[i % len(PALETTE)]
        ax.plot(
            [p[1] for p in points],
            [p[2] for p in points],
            color=colour,
            marker="o",
            linewidth=1.4,
            markersize=4,
            label=label,
        )
        for batch, thr, ms in points:
            ax.annotate("%d" % batch, (thr, ms), xytext=(4, 3), textcoords="offset points", fontsize=7, color=colour)
    ax.set_xlabel("images/s")
    ax.set_ylabel("latency per batch, ms")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    _style(ax)
    ax.legend(frameon=False, fontsize=7, loc="upper left")
    return fig


def latency_histogram(title: str, times_ms: Sequence[float], marks: Sequence[Tuple[str, float]]) -> Figure:
    """Histogram of one cell's measured batch latencies (all repeats), with vertical lines at
    the marked figures: marks = [(label, ms)], e.g. the average and the percentiles."""
    fig = _figure(2.4)
    ax = fig.add_subplot(1, 1, 1)
    ax.hist(times_ms, bins=min(40, max(5, len(times_ms) // 4)), color=PALETTE[0], alpha=0.75)
    for i, (label, ms) in enumerate(marks):
        ax.axvline(
            ms, color=PALETTE[(i + 1) % len(PALETTE)], linestyle="--", linewidth=1, label="%s %.2f ms" % (label, ms)
        )
    ax.set_xlabel("latency per batch, ms")
    ax.set_ylabel("batches")
    ax.set_title(title, fontsize=10)
    _style(ax)
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def step_breakdown_bars(items: Sequence[Tuple[str, Sequence[Tuple[str, float]]]], title: str) -> Figure:
    """One horizontal stacked bar per configuration, its segments the phases of its step in ms
    (items: [(label, [(phase, ms), ...])]); each phase keeps its colour across the bars."""
    phases: List[str] = []
    for _label, parts in items:
        phases += [p for p, _ms in parts if p not in phases]
    colours = {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(phases)}
    fig = _figure(1.4 + 0.5 * max(len(items), 1) + 0.12 * len(phases))
    ax = fig.add_subplot(1, 1, 1)
    drawn = set()
    for y, (_label, parts) in enumerate(items):
        left = 0.0
        for i, (phase, ms) in enumerate(parts):
            ax.barh(
                y,
                ms,
                left=left,
                height=0.6,
                color=colours[phase],
                hatch="//" if i % 2 else None,
                edgecolor="white",
                linewidth=0.5,
                label=None if phase in drawn else phase,
            )
            drawn.add(phase)
            left += ms
        ax.annotate("%.0f ms" % left, (left, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    _label_rows(ax, [label for label, _parts in items], "ms per iteration", title, 0.12)
    ax.legend(frameon=False, fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=4)
    return fig
