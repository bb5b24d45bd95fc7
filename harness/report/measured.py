"""Report tables from the store's records (harness.report.rows): per cell, the summary over its repeats.

Every stored JSON value (a run's scenario, host, limits and order; a trial's settings, telemetry,
window and work) is read from its typed record (harness.results.records), never decoded here."""

import copy
import dataclasses
import json
from collections import defaultdict
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, TypeVar

from harness.measure import compute
from harness.vocab import catalog
from harness.plan import platforms
from harness.plan.scenario import Cell
from harness import frameworks
from harness.measure import divergence, drawn, flags, place, stats, telemetry, work
from harness.measure.ingest import DECLARED, NOT_SETTINGS, PROBLEM, SOURCE
from harness.jsonlog import IMPLEMENTATION
from harness.report import figures
from harness.report.model import ITERATION, THROUGHPUT, Column, Detail, Entry, Table, batch_note
from harness.report.rows import Rows
from harness.results.records import StoredCell, StoredOrder, StoredRun, StoredTrial

# {cell key: (its cell, its Entry)}, and one table's entries: {(model, column key): Entry}
CellEntries = Dict[str, Tuple[StoredCell, Entry]]
RowCells = Dict[Tuple[str, str], Entry]
# {run id: (its place check or None, the line its tables print or None)}
Places = Dict[str, Tuple[Optional[place.PlaceCheck], Optional[str]]]
T = TypeVar("T")


def cell_entries(rows: Rows, ci: bool = True, places: Optional[Places] = None) -> CellEntries:
    """{cell key: (cell row, Entry)} for the training cells of these rows, run by run.

    ci=False leaves Detail.ci None (no bootstrap): for outputs that do not show it. places: the
    runs' place checks (place_checks; made here when not given): a run flagged for a place effect
    flags every cell of it.
    """
    places = place_checks(rows) if places is None else places
    by_run: Dict[str, List[StoredCell]] = defaultdict(list)
    for c in rows.cells:
        by_run[c["run_id"]].append(c)
    out: CellEntries = {}
    for rid, run_cells in by_run.items():
        run = rows.runs[rid]
        bounds = run_limits(run)
        for c in run_cells:
            if Cell.from_key(c["cell_key"]).batch:
                continue  # an inference cell: harness.report.inference tables it
            entry = entry_for(c, rows.cell_trials(c), ci, run.scenario.nominal_window, bounds)
            if entry.detail is not None and run.imported:
                entry = dataclasses.replace(entry, detail=dataclasses.replace(entry.detail, imported=True))
            check = places.get(rid, (None, None))[0]
            if check is not None and check.flagged and entry.detail is not None:
                entry = dataclasses.replace(entry, flags=entry.flags + [flags.PLACE_EFFECT])
            out[c["cell_key"]] = (c, entry)
    return out


def place_checks(rows: Rows) -> Places:
    """{run id: (its place check or None, the line the tables of its cells print or None)} for the
    runs of these rows (harness.measure.place): a run stored before shuffled orders, with rounds
    enough to check, gets the line saying why it cannot be checked."""
    out: Dict[str, Tuple[Optional[place.PlaceCheck], Optional[str]]] = {}
    for rid, run in rows.runs.items():
        if run.imported:
            continue
        trials = [t for (r, _), ts in rows.trials.items() if r == rid for t in ts]
        if run.order is None:
            got = place.grid(trials)
            if got is not None and got[0].shape[0] >= flags.PLACE_ROUNDS and got[0].shape[1] >= 2:
                out[rid] = (
                    None,
                    "Place in the round, run %s: not checked; its rounds ran cell by cell in a fixed "
                    "order (stored before shuffled orders), so a place effect is part of each cell's "
                    "figure." % rid,
                )
            continue
        check = place.check(trials, run.order.seed)
        out[rid] = (check, None if check is None else place_line(rid, run.order, check))
    return out


def place_line(rid: str, order: StoredOrder, check: place.PlaceCheck) -> str:
    """The line under a table for one run's place check (order: the run's StoredOrder)."""
    return (
        "Place in the round, run %s (order seed %d, %d rounds of %d trials): each finished trial's images/s "
        "over its cell's geometric mean, median by place 1-%d: %s; the places' levels span %.1f%%, the cells' "
        "own spread is %.1f%%, and %d of %d reshuffled orders span as wide: %s."
        % (
            rid,
            order.seed,
            check.rounds,
            check.places,
            check.places,
            " | ".join("-" if m is None else "%.3f" % m for m in check.medians),
            100 * check.span,
            100 * check.cell_spread,
            check.wider,
            check.draws,
            "a place effect (%s)" % flags.PLACE_EFFECT if check.flagged else "no place effect",
        )
    )


def run_limits(run: StoredRun) -> Dict[str, Any]:
    """The limits the run stored (its StoredRun's `limits`, harness.measure.compute.for_run), {}
    where it has none, with each precision's peak raised to a higher one measured since on the
    same kind of machine (compute.best_peak).

    The peak and the work models are what the run stored; the one figure this reads from this
    host's cache at report time is that higher peak, and only to raise the stored one: a peak
    is a ceiling a busy machine can only measure low, so the best figure measured since for the
    same fingerprint and thread count is the truer one. The stored peak still shows beside it
    (peak_stored_gflops, and the shares against it in compute_lines), and a cache that has no
    such figure, or that another host holds, leaves the stored limits as they are."""
    limits = run.limits
    if limits is None:
        return {}
    of = limits.get("peak_of")
    if isinstance(of, dict):
        fingerprint, threads = of.get("fingerprint"), of.get("threads")
    else:  # stored before runs named the peak's machine: the run's host and its scenario's threads
        fingerprint = run.fingerprint
        value_threads = run.scenario.env.get("OMP_NUM_THREADS")
        threads = str(value_threads) if value_threads else "default"
    return compute.best_peak(limits, fingerprint, threads) or {}


def cell_limits(
    cell: StoredCell, bounds: Optional[Mapping[str, Any]], counts: Optional[Mapping[str, float]] = None
) -> Dict[str, Any]:
    """The Detail fields of a cell's compute figure from its run's limits and `counts`, the work
    per iteration its trials logged (cell_work): flops_per_iteration and flops_per_image (the
    cell's work model multiplied out with its counts, harness.measure.work.iteration_flops; a run
    stored before work models has one figure per image, counted on a synthetic batch, used as
    stored), work_basis, peak_gflops at the cell's precision, peak_stored_gflops (the lower one
    the run stored where a higher one replaced it) and limit_note (why a figure is missing).
    {} for a cell with nothing to count (the calibration workload) or a run without limits."""
    if not bounds:
        return {}
    model = (bounds.get("work") or {}).get(cell["cell_key"])
    if model is None:
        return {}  # a cell with no arithmetic to count (the calibration workload)
    out: Dict[str, Any] = {}
    why: Optional[str] = None
    if isinstance(model, dict) and "fixed_flops" in model:
        per_iteration, why = work.iteration_flops(model, counts)
        images = model.get("images_per_device")
        if per_iteration is not None and isinstance(images, int) and images > 0:
            out = {
                "flops_per_iteration": per_iteration,
                "flops_per_image": per_iteration / images,
                "work_basis": "logged",
            }
        elif per_iteration is not None:
            why = "a damaged work model"
        why = why and "work not counted: %s" % why
    elif isinstance(model, dict) and isinstance(model.get("flops_per_image"), (int, float)):
        out = {"flops_per_image": model["flops_per_image"], "work_basis": "synthetic"}
    else:
        why = "work not counted: %s" % (model.get("error") if isinstance(model, dict) else "?")
    peak = bounds.get("peak") or {}
    figures = (peak.get("precisions") or {}).get(cell["precision"]) or {}
    out.update(peak_gflops=figures.get("peak_gflops"), peak_stored_gflops=figures.get("stored_gflops"))
    if why is None and out["peak_gflops"] is None:
        why = "no measured %s peak: %s" % (
            cell["precision"],
            peak.get("error") or figures.get("skipped") or "this host's peak has no %s figure" % cell["precision"],
        )
    out["limit_note"] = why
    return out


def _distinct(values: Iterable[T]) -> List[T]:
    out: List[T] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def cell_work(done: Iterable[StoredTrial]) -> Optional[Dict[str, float]]:
    """{count: median over the repeats} of the work per iteration the finished trials logged, or None."""
    works = [t.work for t in done if t.work is not None]
    keys = [k for k in work.LABELS if any(k in w for w in works)]
    return {k: work.median([w[k] for w in works if k in w]) for k in keys} or None


def _devices_of(cell: StoredCell) -> int:
    """Devices a cell ran on (its ranks); 1 where its row does not say."""
    try:
        return max(int(cell["gpus"]) * int(cell["nodes"]), 1)
    except (KeyError, IndexError, TypeError, ValueError):
        return 1


def _peak(done: Iterable[StoredTrial], column: str) -> Optional[float]:
    values = [t[column] for t in done if t[column]]
    return max(values) if values else None


def entry_for(
    cell: StoredCell,
    trials: Sequence[StoredTrial],
    ci: bool = True,
    window: Optional[Tuple[int, int]] = None,
    bounds: Optional[Mapping[str, Any]] = None,
) -> Entry:
    """A cell's Entry from its trials: the median over its finished repeats with its spread, flags,
    settings, work, memory and compute figures, or the reason it has none."""
    if cell["excluded"]:
        return Entry(na=cell["excluded"])
    done = [t for t in trials if t["status"] == "done" and t["throughput"]]
    failed = [t for t in trials if t["status"] == "failed"]
    diverged = [t for t in failed if divergence.diverged(t["reason"])]
    if diverged:  # a training that diverged in any repeat is not timed, whichever framework it is
        return Entry(na=divergence.in_trials(len(diverged), len(trials), diverged[0]["reason"]))
    if not done:
        if failed:
            return Entry(na="all %d trials failed; first: %s" % (len(failed), failed[0]["reason"]))
        return Entry(na="not measured yet (run unfinished)")
    s = stats.summarize(
        [t["throughput"] for t in done],
        cell["images_per_iteration"],
        [t["data_time_s"] for t in done],
        [t["observed"] for t in done],
        [t["iteration_time_s"] for t in done],
        with_ci=ci,
    )
    raised = list(s.flags)
    if flags.window_approximate(done):
        raised.append(flags.WINDOW_APPROXIMATE)
    raised += telemetry.cell_flags([t.telemetry for t in done], [t.fingerprint for t in done])
    variants = _distinct(t.settings or {} for t in done)
    windows = _distinct(t.window for t in done if t.window is not None)
    counts = cell_work(done)
    detail = Detail(
        n=s.n,
        median=s.throughput,
        failed=len(failed),
        minimum=s.minimum,
        maximum=s.maximum,
        iqr=s.iqr,
        ci=(s.ci_low, s.ci_high) if ci and s.ci_low is not None and s.ci_high is not None else None,
        cv=s.cv,
        observed=s.observed,
        outliers=s.outliers,
        settings=variants[0],
        settings_variants=tuple(variants),
        kinds=tuple(_distinct(t["figure_kind"] for t in done)),
        inexact_kinds=tuple(_distinct(t["figure_kind"] for t in done if not t["exact"])),
        windows=tuple(windows),
        nominal_window=window,
        work=counts,
        peak_rss_mb=_peak(done, "peak_rss_mb"),
        peak_device_mb=_peak(done, "peak_device_mb"),
        peak_mem_mb=_peak(done, "peak_mem_mb"),
        run_id=cell["run_id"],
        devices=_devices_of(cell),
        drawn=drawn.cell_summary([t.drawn for t in done]),
        **cell_limits(cell, bounds, counts),
    )
    return Entry(throughput=s.throughput, iteration_ms=s.iteration_ms, data_ms=s.data_ms, flags=raised, detail=detail)


def _title(platform: str, precision: str, gpus: int, nodes: int, platform_devices: Optional[int]) -> str:
    base = "%s-%s" % (platform, catalog.precision_title(precision))
    if nodes > 1:
        return "%s-%dx%dcard" % (base, nodes, gpus)
    return base if gpus == platform_devices else "%s-%dcard" % (base, gpus)


def _devices(name: str) -> Optional[int]:
    try:
        return platforms.load(name).devices
    except Exception:  # an unknown or unreadable platform file: no suffix rule to apply
        return 0


def tables(rows: Rows, ci: bool = True) -> List[Table]:
    """One throughput table per platform x precision x GPUs x nodes (plus the single-card form).

    The two forms of a single-device group share their columns, rows and entries."""
    places = place_checks(rows)
    entries = cell_entries(rows, ci, places)
    groups: Dict[Tuple[Any, ...], Dict[Tuple[str, str], Entry]] = defaultdict(dict)
    # group -> (cell row, Entry): the lines on repeats read the trials
    members: Dict[Tuple[Any, ...], List[Tuple[StoredCell, Entry]]] = defaultdict(list)
    for _key, (cell, entry) in entries.items():
        gk = (cell["platform"], cell["precision"], cell["gpus"], cell["nodes"], cell["batch_per_gpu"])
        groups[gk][(cell["model"], cell["framework"])] = entry
        members[gk].append((cell, entry))
    out = []
    for (plat, prec, gpus, nodes, batch), cells in sorted(groups.items(), key=lambda kv: _group_order(kv[0])):
        fw_order = list(frameworks.FRAMEWORKS)
        fws = sorted({fw for _, fw in cells}, key=lambda f: (fw_order.index(f) if f in fw_order else 99, f))
        models = sorted(
            {m for m, _ in cells}, key=lambda m: (list(catalog.MODELS).index(m) if m in catalog.MODELS else 99, m)
        )
        columns = [Column(fw, frameworks.FRAMEWORKS[fw].title if fw in frameworks.FRAMEWORKS else fw) for fw in fws]
        done = [e.detail for e in cells.values() if e.detail]
        reps = sorted({d.n for d in done})
        notes = [
            "Measured: %s; %s."
            % (
                batch_note(gpus, nodes, batch),
                "median of %s repeat%s" % ("/".join(map(str, reps)), "" if reps == [1] else "s")
                if reps
                else "no finished repeats",
            )
        ]
        notes += repeat_lines(members[(plat, prec, gpus, nodes, batch)], rows)
        notes += differing_settings(cells, models)
        notes += declared_lines(cells, models)
        implementation = implementation_lines(cells, columns, models)
        work = work_lines(cells, columns, models)
        drawn_notes = drawn_lines(cells, columns, models)
        place = [line for line in (places.get(r, (None, None))[1] for r in sorted({d.run_id for d in done})) if line]
        notes += implementation + work + drawn_notes + compute_lines(cells, columns, models, prec)
        notes += memory_lines(cells, columns, models) + place
        # the terminal shows these with --details only
        details = notes[:1] + implementation + work + drawn_notes + place
        cells = work_flags(cells, columns, models)
        cells = drawn_flags(cells, columns, models)
        kinds = figures.table_line(columns, cells, models)
        notes += kinds
        forced = [n for n in (platforms.forced_note(rows.runs[r].host) for r in sorted({d.run_id for d in done})) if n]
        forced += imported_note(rows.runs, cells)  # under both forms of the table, like a forced run
        forced += code_lines(rows.runs, sorted({d.run_id for d in done}))
        notes += forced
        if rows.renamed:
            notes.append(
                "Read from a store that names the bundled trainer by its old name "
                "'simpledet'; shown as 'detbench-trainer'."
            )
        title = _title(plat, prec, gpus, nodes, _devices(plat))
        common = dict(
            platform=plat,
            precision=prec,
            gpus=gpus,
            nodes=nodes,
            batch_per_gpu=batch,
            columns=columns,
            models=models,
            entries=cells,
            notes=notes,
            details=details,
        )
        out.append(Table(title=title, form=THROUGHPUT, **common))
        if gpus * nodes == 1:
            single = "%s-%s-1card" % (plat, catalog.precision_title(prec))
            if single == title:
                single += " (iteration time)"
            out.append(
                Table(title=single, form=ITERATION, **dict(common, notes=notes[:1] + kinds + forced, details=notes[:1]))
            )
    return out


def code_lines(runs: Mapping[str, StoredRun], run_ids: Sequence[str]) -> List[str]:
    """The line naming each run's detbench code (harness.plan.coderev) where the table's figures
    come from runs that ran different code (another commit, or uncommitted changes beside a clean
    checkout); nothing otherwise."""
    from harness.plan import coderev

    said = coderev.named_where_differing({r: (runs[r].host or {}).get("code") for r in run_ids})
    if not said:
        return []
    return ["Code: %s." % "; ".join("run %s ran %s" % (r, said[r]) for r in sorted(said))]


def imported_note(runs: Mapping[str, StoredRun], cells: RowCells) -> List[str]:
    """The line naming the cells whose figures come from logs `detbench import` brought in, if any
    (runs: run id -> StoredRun)."""
    imported, names = {}, []
    for (model, fw), e in sorted(cells.items()):
        if e.detail is None:
            continue
        rid = e.detail.run_id
        if rid not in imported:
            imported[rid] = runs[rid].imported
        if imported[rid]:
            names.append("%s %s" % (fw, catalog.model_title(model)))
    if not names:
        return []
    return [
        "Imported from logs made elsewhere (not run by detbench; their settings are not known "
        "and not compared): %s." % ", ".join(names)
    ]


def settings_differences(per_fw: Mapping[str, Sequence[Mapping[str, Any]]]) -> List[Tuple[str, str]]:
    """[(key, "fw value, fw value / value across repeats, ...")] of the normalized settings in
    which frameworks differ, or in which the variants of one framework differ (per_fw: framework ->
    the settings its trials logged). A key is compared where every framework reports it."""
    if not per_fw:
        return []
    keys = sorted(
        set.intersection(*(set().union(*variants) for variants in per_fw.values())) - set(NOT_SETTINGS)
    )  # where they came from and how they ran: not settings
    out = []
    for k in keys:
        values = {
            fw: _distinct(json.dumps(v.get(k), sort_keys=True) for v in variants) for fw, variants in per_fw.items()
        }
        if len({v for vs in values.values() for v in vs}) > 1:
            out.append(
                (
                    k,
                    ", ".join(
                        "%s %s" % (fw, " / ".join(vs) + (" across repeats" if len(vs) > 1 else ""))
                        for fw, vs in sorted(values.items())
                    ),
                )
            )
    return out


def unshared_settings(per_fw: Mapping[str, Sequence[Mapping[str, Any]]]) -> List[Tuple[str, List[str]]]:
    """[(key, the frameworks that logged it)] of the normalized settings that some frameworks
    logged and others did not: settings_differences cannot compare them, and a reader must not
    take the silence for equality. Only where two or more frameworks logged settings."""
    if len(per_fw) < 2:
        return []
    logged: Dict[str, Set[str]] = {fw: set().union(*variants) - set(NOT_SETTINGS) for fw, variants in per_fw.items()}
    sets = list(logged.values())
    some, every = set().union(*sets), sets[0].intersection(*sets[1:])
    return [(k, sorted(fw for fw, keys in logged.items() if k in keys)) for k in sorted(some - every)]


def unshared_lines(title: str, per_fw: Mapping[str, Sequence[Mapping[str, Any]]]) -> List[str]:
    return [
        "Not compared, %s: %s, logged by %s only." % (title, k, ", ".join(fws)) for k, fws in unshared_settings(per_fw)
    ]


def differing_settings(cells: RowCells, models: Sequence[str]) -> List[str]:
    """Lines naming, per model row, the normalized settings in which its frameworks differ,
    or in which the repeats of one framework differ.

    Each row is compared on its own: the settings of one model say nothing about another's."""
    lines = []
    for model in models:
        per_fw = {
            fw: e.detail.settings_variants or (e.detail.settings,)
            for (m, fw), e in sorted(cells.items())
            if m == model and e.detail and e.detail.settings
        }
        lines += [
            "Not like for like, %s: %s differs (%s)." % (catalog.model_title(model), k, said)
            for k, said in settings_differences(per_fw)
        ]
        lines += unshared_lines(catalog.model_title(model), per_fw)
    return lines


# an implementation part's words in the report, in the order the line gives them
IMPLEMENTATION_WORDS = (
    ("roi_align", "RoIAlign"),
    ("batch_norm", "BN"),
    ("optimizer", "optimizer"),
    ("mask_logits", "mask logits"),
    ("mask_paste", "mask paste"),
    ("mask_targets", "mask targets"),
    ("memory_format", "layout"),
    ("training_code", "training code"),
)


def implementation_lines(cells: RowCells, columns: Sequence[Column], models: Sequence[str]) -> List[str]:
    """Per model row, how each column's framework ran the parts that decide its speed, from the
    implementation its DETBENCH_SETTINGS line gave ('-' where its log has no such line)."""
    lines = []
    for model in models:
        texts = []
        for col in columns:
            e = cells.get((model, col.key))
            impl = (e.detail.settings or {}).get(IMPLEMENTATION) if e is not None and e.detail else None
            texts.append(
                "; ".join(
                    "%s %s" % (word, impl[key])
                    for key, word in IMPLEMENTATION_WORDS
                    if isinstance(impl, dict) and impl.get(key)
                )
                or "-"
            )
        if any(t != "-" for t in texts):
            lines.append(
                "Implementation, %s (%s): %s."
                % (catalog.model_title(model), " | ".join(c.title for c in columns), " | ".join(texts))
            )
    return lines


def declared_lines(cells: RowCells, models: Sequence[str]) -> List[str]:
    """Per model row, the frameworks whose compared settings are what their adapter declares,
    not what ran: their logs print no DETBENCH_SETTINGS line (or a damaged one, named)."""
    lines = []
    for model in models:
        declared = {
            fw: e.detail.settings
            for (m, fw), e in sorted(cells.items())
            if m == model and e.detail and (e.detail.settings or {}).get(SOURCE) == DECLARED
        }
        if declared:
            problems = ["%s %s" % (fw, s[PROBLEM]) for fw, s in sorted(declared.items()) if s.get(PROBLEM)]
            lines.append(
                "Settings as declared, not as run, %s: %s (no usable DETBENCH_SETTINGS line in the log%s)."
                % (
                    catalog.model_title(model),
                    ", ".join(sorted(declared)),
                    "; " + "; ".join(problems) if problems else "",
                )
            )
    return lines


def _row_works(
    cells: RowCells, columns: Sequence[Column], model: str
) -> Tuple[List[Optional[Entry]], List[Optional[Dict[str, float]]]]:
    row = [cells.get((model, col.key)) for col in columns]
    return row, [e.detail.work if e is not None and e.detail else None for e in row]


def work_lines(cells: RowCells, columns: Sequence[Column], models: Sequence[str]) -> List[str]:
    """Per model row, the work per iteration of each column."""
    lines = []
    for model in models:
        text = work.row_text(_row_works(cells, columns, model)[1])
        if text:
            lines.append(
                "Work per iteration, %s (%s): %s."
                % (catalog.model_title(model), " | ".join(c.title for c in columns), text)
            )
    return lines


def memory_lines(cells: RowCells, columns: Sequence[Column], models: Sequence[str]) -> List[str]:
    """Per model row, each column's peak resident memory of its process tree and peak device memory
    (runner.py's, the highest over its repeats; '-' where it has none)."""
    lines = []
    for model in models:
        row = [cells.get((model, c.key)) for c in columns]
        details = [e.detail if e is not None and e.detail else None for e in row]
        if not any(d is not None and (d.peak_rss_mb or d.peak_device_mb) for d in details):
            continue
        texts = [
            "-"
            if d is None
            else "resident %s, device %s"
            % tuple("%.0f MiB" % v if v else "-" for v in (d.peak_rss_mb, d.peak_device_mb))
            for d in details
        ]
        lines.append(
            "Peak memory, %s (%s): %s."
            % (catalog.model_title(model), " | ".join(c.title for c in columns), " | ".join(texts))
        )
    return lines


def compute_lines(cells: RowCells, columns: Sequence[Column], models: Sequence[str], precision: str) -> List[str]:
    """Per model row, each column's achieved TFLOP/s and share of the host's measured peak (MFU),
    what the peak and the work are; where a higher peak replaced the one the run stored, the
    shares against the stored one, and whether that changes what the report says. One line
    saying why where no cell of the table has the figures."""
    lines, why, stored = [], None, []
    peaks: Set[float] = set()
    synthetic, logged = [], False
    for model in models:
        row = [cells.get((model, col.key)) for col in columns]
        details = [e.detail if e is not None and e.detail else None for e in row]
        if not any(d is not None and d.mfu is not None for d in details):
            why = why or next((d.limit_note for d in details if d is not None and d.limit_note), None)
            continue
        shown = [d if d is not None and d.mfu is not None else None for d in details]
        peaks.update(d.peak_gflops for d in shown if d is not None and d.peak_gflops is not None)
        texts = [
            "%.3f TFLOP/s (%.0f%%)" % (d.tflops, 100 * d.mfu)
            if d is not None and d.tflops is not None and d.mfu is not None
            else "-"
            for d in shown
        ]
        title = catalog.model_title(model)
        lines.append(
            "Compute, %s (%s): %s, in parentheses the share of the peak."
            % (title, " | ".join(c.title for c in columns), " | ".join(texts))
        )
        synthetic += [
            "%s %s" % (col.title, title)
            for col, d in zip(columns, shown)
            if d is not None and d.work_basis == "synthetic"
        ]
        logged = logged or any(d is not None and d.work_basis == "logged" for d in shown)
        if any(d is not None and d.mfu_stored is not None for d in shown):
            stored.append((title, [(col.title, d) for col, d in zip(columns, shown)]))
    if not lines:
        return ["No compute figures: %s." % why] if why else []
    lines.append(
        "Peak: %s GFLOP/s, this host's best %s matrix product or convolution of the detectors' shapes, "
        "each timed at least 5 times (`detbench platform peak`)."
        % (" / ".join("%.0f" % p for p in sorted(peaks)), catalog.precision_title(precision))
    )
    if logged:
        lines.append(
            "Work per iteration: each column's own, the bundled model's fixed part at this input size "
            "(backbone, FPN, RPN or RetinaNet heads) plus the box head per sampled RoI and the mask head "
            "per mask RoI (its own class's logits) times the counts that column's trials logged; matrix "
            "products and convolutions, forward and backward (torch's FLOP counter)."
        )
    if synthetic:
        lines.append(
            "Work of %s: one figure per image counted on a synthetic batch (the run was stored before "
            "work was counted from each framework's logged counts)." % ", ".join(synthetic)
        )
    if stored:
        lowered = sorted(
            {
                d.peak_stored_gflops
                for _, row in stored
                for _, d in row
                if d is not None and d.mfu_stored is not None and d.peak_stored_gflops is not None
            }
        )
        lines.append(
            "The run stored a lower peak (%s GFLOP/s), measured when the machine was busier; the higher "
            "one measured since on this kind of machine, at the same thread count, is used. Against the "
            "stored one the shares read: %s."
            % (
                " / ".join("%.0f" % p for p in lowered),
                "; ".join(
                    "%s %s"
                    % (
                        title,
                        " | ".join(
                            "%.0f%%" % (100 * d.mfu_stored) if d is not None and d.mfu_stored is not None else "-"
                            for _, d in row
                        ),
                    )
                    for title, row in stored
                ),
            )
        )
        flips = [
            "%s %s (%.0f%% against the stored peak, %.0f%% against the one used)"
            % (col, title, 100 * d.mfu_stored, 100 * d.mfu)
            for title, row in stored
            for col, d in row
            if d is not None and d.mfu_stored is not None and d.mfu is not None and (d.mfu_stored > 1) != (d.mfu > 1)
        ]
        if flips:
            lines.append(
                "Which peak is used changes what this report says of %s: a share above 100%% says the "
                "peak was measured low, and only one of the two peaks gives one." % "; ".join(flips)
            )
    if any(e is not None and e.detail and e.detail.mfu is not None and e.detail.mfu > 1 for e in cells.values()):
        lines.append(
            "A share above 100% means the peak was measured low (on a busy machine, or cached from "
            "one): measure it again on a quiet one with `detbench platform peak --refresh`."
        )
    return lines


def _figures(rows: Rows, cell: StoredCell) -> List[float]:
    return [t["throughput"] for t in rows.cell_trials(cell) if t["status"] == "done" and t["throughput"]]


def repeat_lines(pairs: Sequence[Tuple[StoredCell, Entry]], rows: Rows) -> List[str]:
    """For (cell row, Entry) pairs of one table: with adaptive repeats, how many each cell got and
    which did not reach the target (the relative half-width of the 95% interval of its median,
    harness.measure.stats.relative_half_width); each bimodal cell's two groups with their medians."""
    lines = []
    by_run = defaultdict(list)
    for cell, entry in pairs:
        if entry.detail is not None:
            by_run[cell["run_id"]].append((cell, entry))
    for rid, got in sorted(by_run.items()):
        target = rows.runs[rid].scenario.document.get("repeats")
        if not isinstance(target, dict) or not isinstance(target.get("half_width"), (int, float)):
            continue
        counts, missed = [], []
        for cell, entry in sorted(got, key=lambda p: p[0]["cell_key"]):
            label = "%s %s" % (cell["model"], cell["framework"])
            counts.append("%s %d" % (label, entry.detail.n if entry.detail else 0))
            half = stats.relative_half_width(_figures(rows, cell))
            if half is None or half > target["half_width"]:
                missed.append(
                    "%s (%s)"
                    % (label, "too few repeats for an interval" if half is None else "+-%.2f%%" % (half * 100))
                )
        lines.append(
            "Repeats (run %s, adaptive: %s to %s rounds until the 95%% interval of each median is within "
            "+-%g%%): %s. %s"
            % (
                rid,
                target.get("min"),
                target.get("max"),
                target["half_width"] * 100,
                ", ".join(counts),
                "Did not reach +-%g%%: %s." % (target["half_width"] * 100, ", ".join(missed))
                if missed
                else "Every cell reached it.",
            )
        )
    for cell, entry in sorted(pairs, key=lambda p: p[0]["cell_key"]):
        if flags.BIMODAL not in entry.flags:
            continue
        groups = flags.bimodal_groups(_figures(rows, cell))
        if groups:
            lines.append(
                "Bimodal %s %s: two groups of repeats, median %s images/s (%d repeats) and %s images/s "
                "(%d repeats)."
                % (
                    cell["model"],
                    cell["framework"],
                    _images(stats.median(groups[0])),
                    len(groups[0]),
                    _images(stats.median(groups[1])),
                    len(groups[1]),
                )
            )
    return lines


def _images(value: float) -> str:
    return "%.4g" % value if value < 1000 else "%.0f" % value


def work_flags(cells: RowCells, columns: Sequence[Column], models: Sequence[str]) -> RowCells:
    """The cells with unequal-work added to the entries of each model row whose frameworks
    differ in a work count (harness.measure.flags.unequal_work)."""
    out = dict(cells)
    for model in models:
        row, works = _row_works(cells, columns, model)
        for col, e, flagged in zip(columns, row, flags.unequal_work(works)):
            if flagged and e is not None:
                out[(model, col.key)] = dataclasses.replace(e, flags=e.flags + [flags.UNEQUAL_WORK])
    return out


def _row_drawn(cells: RowCells, columns: Sequence[Column], model: str) -> List[Optional[Dict[str, Dict[str, float]]]]:
    row = [cells.get((model, col.key)) for col in columns]
    return [e.detail.drawn if e is not None and e.detail else None for e in row]


def drawn_lines(cells: RowCells, columns: Sequence[Column], models: Sequence[str]) -> List[str]:
    """Per model row, what each column's trials drew from the data set (its DETBENCH_DATA lines;
    '-' for a column that logged none: not observed)."""
    lines = []
    for model in models:
        text = drawn.row_text(_row_drawn(cells, columns, model))
        if text:
            lines.append(
                "Data drawn per trial, %s (%s): %s."
                % (catalog.model_title(model), " | ".join(c.title for c in columns), text)
            )
    return lines


def drawn_flags(cells: RowCells, columns: Sequence[Column], models: Sequence[str]) -> RowCells:
    """The cells with unequal-data added to the entries of each model row whose frameworks
    differ in what they drew from the data set (harness.measure.flags.unequal_data)."""
    out = dict(cells)
    for model in models:
        row = [cells.get((model, col.key)) for col in columns]
        for col, e, flagged in zip(columns, row, flags.unequal_data(_row_drawn(cells, columns, model))):
            if flagged and e is not None:
                out[(model, col.key)] = dataclasses.replace(e, flags=e.flags + [flags.UNEQUAL_DATA])
    return out


def _group_order(gk: Tuple[str, str, int, int, int]) -> Tuple[str, int, int, int]:
    plat, prec, gpus, nodes, batch = gk
    precs = list(catalog.PRECISIONS)
    return (plat, precs.index(prec) if prec in precs else 99, -(gpus * nodes), batch)


def with_published(measured: Iterable[Table], published: Sequence[Table]) -> List[Table]:
    """Copies of the measured tables with a "(published)" column beside each framework where a
    published table matches (platform, precision, devices and form), and its notes under them.

    The two forms of a single-device group share their columns, rows and entries (tables()), so
    the columns of a published table that matches either form join both."""
    shown = copy.deepcopy(list(measured))
    for table in shown:
        for pub in published:
            if (pub.platform, pub.precision, pub.gpus, pub.nodes, pub.form) != (
                table.platform,
                table.precision,
                table.gpus,
                table.nodes,
                table.form,
            ):
                continue
            for col in pub.columns:
                key = "published:" + col.key
                table.columns.append(Column(key, "%s (published)" % col.title))
                for model in pub.models:
                    if (model, col.key) in pub.entries:
                        table.entries[(model, key)] = pub.entries[(model, col.key)]
                        if model not in table.models:
                            table.models.append(model)
            table.notes.extend(pub.notes)
    return shown
