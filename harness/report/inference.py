"""Inference cells as report tables: one per framework x model with a row per batch size (the
form of NVIDIA's EfficientDet inference tables), and the frameworks side by side at one batch.

Every figure of a cell is the median over its finished repeats of that figure; each repeat's
mean, percentiles and throughput come from the same measured batches (harness.measure.latency).
"""

from collections import defaultdict
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from harness import frameworks
from harness.vocab import catalog
from harness.plan.scenario import Cell
from harness.measure import latency as latency_mod
from harness.measure import stats
from harness.report import measured
from harness.report.model import INFERENCE, Column, Entry, Latency, LatencyTable, Table
from harness.report.measured import CellEntries, RowCells
from harness.report.rows import Rows
from harness.results.records import StoredCell, StoredRun, StoredTrial

PHASE_WORDS = {"pre_s": "pre-processing", "net_s": "network", "post_s": "post-processing"}


def is_inference(cell_row: StoredCell) -> bool:
    """Whether the cell is an inference cell (its key ends in its batch size)."""
    return Cell.from_key(cell_row["cell_key"]).batch > 0


def cell_latency(cell: StoredCell, trials: Iterable[StoredTrial], percentiles: Sequence[float]) -> Optional[Latency]:
    """The Latency of a cell's finished trials, or None when none has latency figures."""
    figures = [t.latency for t in trials if t.status == "done" and t.throughput and t.latency is not None]
    figures = [f for f in figures if f.get("mean_s") is not None]
    if not figures:
        return None

    def med_ms(name: str) -> Optional[float]:
        values = [f[name] for f in figures if f.get(name) is not None]
        # a percentile some repeat could not support is not given for the cell
        return stats.median(values) * 1000.0 if values and len(values) == len(figures) else None

    means = [f["mean_s"] * 1000.0 for f in figures]
    phases = {k: med_ms(k) for k in PHASE_WORDS}
    dets = [f["detections_per_image"] for f in figures if f.get("detections_per_image") is not None]
    return Latency(
        batch=Cell.from_key(cell["cell_key"]).batch,
        mean_ms=stats.median(means),
        percentiles=tuple((p, med_ms(latency_mod.key(p))) for p in percentiles),
        p50_ms=med_ms(latency_mod.key(latency_mod.MEDIAN)),
        batches=min(int(f.get("batches") or 0) for f in figures),
        phases_ms={k: v for k, v in phases.items() if v is not None},
        detections_per_image=stats.median(dets) if dets else None,
        mean_spread_ms=(min(means), max(means)),
    )


def entries(rows: Rows, ci: bool = True) -> CellEntries:
    """{cell key: (cell row, Entry with its Latency)} of the inference cells of these rows."""
    out: CellEntries = {}
    for c in rows.cells:
        if not is_inference(c):
            continue
        run = rows.runs[c["run_id"]]
        trials = rows.cell_trials(c)
        entry = measured.entry_for(c, trials, ci, run.scenario.nominal_window, measured.run_limits(run))
        if entry.detail is not None:
            entry = Entry(
                throughput=entry.throughput,
                iteration_ms=entry.iteration_ms,
                data_ms=entry.data_ms,
                flags=entry.flags,
                detail=entry.detail,
                latency=cell_latency(c, trials, run.scenario.percentiles),
            )
        out[c["cell_key"]] = (c, entry)
    return out


def _framework_title(name: str) -> str:
    fw = frameworks.FRAMEWORKS.get(name)
    return fw.title if fw else name


def _fw_order(name: str) -> Tuple[int, str]:
    order = list(frameworks.FRAMEWORKS)
    return (order.index(name) if name in order else 99, name)


def _model_order(name: str) -> Tuple[int, str]:
    return (list(catalog.MODELS).index(name) if name in catalog.MODELS else 99, name)


def latency_tables(cell_entries: CellEntries, runs: Mapping[str, StoredRun]) -> List[LatencyTable]:
    """One LatencyTable per platform x precision x framework x model, rows by batch size."""
    groups: Dict[Tuple[str, str, str, str], List[Tuple[StoredCell, Entry]]] = defaultdict(list)
    for cell, entry in cell_entries.values():
        groups[(cell["platform"], cell["precision"], cell["framework"], cell["model"])].append((cell, entry))
    out: List[LatencyTable] = []
    for (plat, prec, fw, model), members in sorted(
        groups.items(),
        key=lambda kv: (
            kv[0][0],
            list(catalog.PRECISIONS).index(kv[0][1]) if kv[0][1] in catalog.PRECISIONS else 99,
            _model_order(kv[0][3]),
            _fw_order(kv[0][2]),
        ),
    ):
        members.sort(key=lambda ce: Cell.from_key(ce[0]["cell_key"]).batch)
        percentiles = runs[members[0][0]["run_id"]].scenario.percentiles
        rows = tuple((Cell.from_key(c["cell_key"]).batch, e) for c, e in members)
        title = "%s-%s: %s %s inference" % (
            plat,
            catalog.precision_title(prec),
            _framework_title(fw),
            catalog.model_title(model),
        )
        out.append(
            LatencyTable(
                title=title,
                platform=plat,
                precision=prec,
                framework=fw,
                framework_title=_framework_title(fw),
                model=model,
                percentiles=percentiles,
                rows=rows,
                notes=tuple(table_notes(rows)),
            )
        )
    return out


def table_notes(rows: Sequence[Tuple[int, Entry]]) -> List[str]:
    """What the figures are: repeats and batches behind them, and where each batch's time went."""
    done = [(b, e.latency, e.detail) for b, e in rows if e.latency is not None and e.detail is not None]
    if not done:
        return []
    reps = sorted({d.n for _, _, d in done})
    batches = sorted({lat.batches for _, lat, _ in done})
    notes = [
        "Median over %s repeat%s of each figure; every repeat's latency average and percentiles "
        "over the same %s measured batches, its throughput their images over their summed time."
        % ("/".join(map(str, reps)), "" if reps == [1] else "s", "/".join(map(str, batches)))
    ]
    parts = []
    for key, word in PHASE_WORDS.items():
        if all(key in lat.phases_ms for _, lat, _ in done):
            parts.append("%s %s" % (word, " / ".join("%.1f" % lat.phases_ms[key] for _, lat, _ in done)))
    if parts:
        notes.append("Per batch (ms, batch %s): %s." % ("/".join(str(b) for b, _, _ in done), "; ".join(parts)))
    dets = [lat.detections_per_image for _, lat, _ in done]
    if all(d is not None for d in dets):
        notes.append("Detections kept per image: %s." % " / ".join("%.1f" % d for d in dets if d is not None))
    if all(d.mfu is not None for _, _, d in done):
        notes.append(
            "Compute: %s TFLOP/s, %s of the %.0f GFLOP/s peak."
            % (
                " / ".join("%.3f" % d.tflops for _, _, d in done if d.tflops is not None),
                " / ".join("%.0f%%" % (100 * d.mfu) for _, _, d in done if d.mfu is not None),
                done[0][2].peak_gflops or 0.0,
            )
        )
    else:
        why = next((d.limit_note for _, _, d in done if d.limit_note), None)
        if why:
            notes.append("No compute figures: %s." % why)
    return notes


def choose_batch(cell_entries: CellEntries, batch: Optional[int] = None) -> Optional[int]:
    """The batch size the side-by-side tables compare at: `batch`, else the largest one every
    framework measured (per platform and precision, the largest shared by all its cells)."""
    if batch is not None:
        return batch
    per_fw: Dict[str, Set[int]] = defaultdict(set)
    for cell, entry in cell_entries.values():
        if entry.latency is not None:
            per_fw[cell["framework"]].add(Cell.from_key(cell["cell_key"]).batch)
    shared = set.intersection(*per_fw.values()) if per_fw else set()
    return max(shared) if shared else None


def side_by_side(cell_entries: CellEntries, batch: Optional[int] = None) -> List[Table]:
    """Tables of form INFERENCE: per platform x precision, models by frameworks at one batch size,
    with the settings that differ between a row's frameworks named under the table."""
    batch = choose_batch(cell_entries, batch)
    if batch is None:
        return []
    groups: Dict[Tuple[Any, ...], Dict[Tuple[str, str], Entry]] = defaultdict(dict)
    for cell, entry in cell_entries.values():
        if Cell.from_key(cell["cell_key"]).batch == batch:
            groups[(cell["platform"], cell["precision"])][(cell["model"], cell["framework"])] = entry
    out: List[Table] = []
    for (plat, prec), cells in sorted(groups.items()):
        fws = sorted({fw for _, fw in cells}, key=_fw_order)
        models = sorted({m for m, _ in cells}, key=_model_order)
        columns = [Column(fw, _framework_title(fw)) for fw in fws]
        pcts = sorted({p for e in cells.values() if e.latency for p, v in e.latency.percentiles if v is not None})
        shown = shown_percentile(pcts)
        notes = [
            "Measured: batch %d on one device; images/s, and the %s latency in parentheses."
            % (batch, "%g%%" % shown if shown else "average")
        ]
        notes += measured.differing_settings(cells, models)
        cells, lines = detection_lines(cells, columns, models)
        notes += lines
        notes += measured.compute_lines(cells, columns, models, prec)
        out.append(
            Table(
                title="%s-%s inference, batch %d" % (plat, catalog.precision_title(prec), batch),
                platform=plat,
                precision=prec,
                gpus=1,
                nodes=1,
                batch_per_gpu=batch,
                form=INFERENCE,
                columns=columns,
                models=models,
                entries=cells,
                notes=notes,
            )
        )
    return out


def detection_lines(cells: RowCells, columns: Sequence[Column], models: Sequence[str]) -> Tuple[RowCells, List[str]]:
    """Per model row, the detections each framework kept per image: post-processing's work. Where
    they differ by more than flags.UNEQUAL_SHARE, the row's cells get the unequal-work flag and
    the line says how to make them equal."""
    import dataclasses
    from harness.measure import flags

    out: RowCells = dict(cells)
    lines: List[str] = []
    for model in models:
        row = [(col, cells.get((model, col.key))) for col in columns]
        counts = [
            (col, e.latency.detections_per_image)
            for col, e in row
            if e is not None and e.latency is not None and e.latency.detections_per_image is not None
        ]
        if len(counts) < 2:
            continue
        values = [v for _, v in counts]
        mid, apart = stats.median(values), max(values) - min(values)
        unequal = (apart / mid if mid else (1.0 if apart else 0.0)) > flags.UNEQUAL_SHARE
        text = "Detections kept per image, %s (%s): %s." % (
            catalog.model_title(model),
            " | ".join(c.title for c, _ in counts),
            " | ".join("%.1f" % v for v in values),
        )
        if unequal:
            text += (
                " Not the same post-processing work: start every framework from one weights file "
                "(`weights:`, detbench weights make)."
            )
            for col, _ in counts:
                e = out[(model, col.key)]
                out[(model, col.key)] = dataclasses.replace(e, flags=e.flags + [flags.UNEQUAL_WORK])
        lines.append(text)
    return out, lines


def shown_percentile(percentiles: Sequence[float]) -> Optional[float]:
    """The percentile the side-by-side cells show: 95 where measured, else the highest."""
    if 95.0 in percentiles:
        return 95.0
    return max(percentiles) if percentiles else None


def latency_ms(entry: Entry, percentile: Optional[float]) -> Optional[float]:
    """The entry's latency at `percentile` in ms (its average for None), or None."""
    lat = entry.latency
    if lat is None:
        return None
    if percentile is None:
        return lat.mean_ms
    return dict(lat.percentiles).get(percentile)
