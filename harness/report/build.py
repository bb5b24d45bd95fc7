"""One Report from the results store and the published figures.

The only module of the report stage that opens the store: harness.report.rows reads it
once, and everything a renderer draws is built here from those rows.
"""

import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from harness.errors import UserError
from harness.results.store import DB_NAME, Store
from harness.vocab import catalog
from harness.plan import platforms
from harness.report import accuracy as accuracy_mod
from harness.report import accuracy_verdict
from harness.report import breakdown, inference, measured, rows as store_rows, scaling
from harness.report import published as published_mod
from harness.report.model import TRIAL_COLUMNS, Failure, Report, Run, Table, Trace
from harness.results.records import StoredCell

MAX_TRACED_CELLS = 48
PEAKS = ("peak_device_mb", "peak_rss_mb", "peak_mem_mb")


def report(
    results_dir: Union[str, Path],
    platform: str,
    run_id: Optional[str] = None,
    published: Optional[str] = None,
    ci: bool = True,
    traces: bool = True,
    rows: str = "cells",
    batch: Optional[int] = None,
) -> Report:
    """The Report of `detbench report`: the newest run of each cell of a platform (or the cells of
    one run, "latest" for the newest), beside the published figures named `published`.

    ci=False skips the bootstrap CI, traces=False the iteration traces, for outputs that show
    neither; rows says which rows the CSV export holds; batch is the batch size inference cells are
    compared at side by side (default: the largest every framework measured). A UserError when
    there is nothing to report.
    """
    pub = published_mod.load(published) if published else None
    pub_tables = published_mod.tables(pub, platform) if pub else []
    data = store_rows.Rows()
    if (Path(results_dir) / DB_NAME).exists() or run_id:
        store = Store(results_dir, create=False)
        try:
            if run_id:
                run_id = store.read_run(run_id).id
            data = store_rows.read(store, platform, run_id, MAX_TRACED_CELLS if traces else 0)
        finally:
            store.close()
    out = from_rows(data, platform, pub_tables, published, ci=ci, rows=rows, batch=batch)
    if pub is not None:
        import dataclasses

        out = dataclasses.replace(
            out,
            published_latency=tuple(published_mod.latency_tables(pub, platform)),
            published_grids=tuple(published_mod.grids(pub, platform)),
        )
    if not (out.measured or out.published or out.latency or out.published_latency or out.published_grids):
        raise UserError("nothing to report for platform %r in %s" % (platform, results_dir))
    return out


def from_rows(
    data: store_rows.Rows,
    platform: str,
    published: Iterable[Table] = (),
    published_name: Optional[str] = None,
    ci: bool = True,
    rows: str = "cells",
    batch: Optional[int] = None,
) -> Report:
    """The Report of these store rows (harness.report.rows.Rows) and published tables."""
    tables = tuple(measured.tables(data, ci=ci))
    inference_entries = inference.entries(data, ci=ci)
    published = tuple(published)
    shown = tuple(measured.with_published(tables, published)) if published and tables else tables
    cells = [c for c in store_rows.figure_order(data.cells) if not c["excluded"]]
    summary, spec = platform_facts(platform)
    trials = trial_rows(data)
    parts, part_notes = breakdown.breakdowns(data, cells)
    return Report(
        platform=platform,
        generated=time.time(),
        measured=tables,
        published=published,
        published_name=published_name,
        shown=shown,
        scaling=scaling.scaling_series(tables),
        trials=tuple(trials),
        runs=runs(data, sorted({t["run_id"] for t in trials})),
        platform_summary=summary,
        platform_spec=spec,
        data_share=data_share(data, cells),
        memory=memory_rows(data, cells),
        traces=traces_of(data, cells),
        failed=failures(data, cells),
        rows=rows,
        latency=tuple(inference.latency_tables(inference_entries, data.runs)),
        inference=tuple(inference.side_by_side(inference_entries, batch)),
        breakdowns=parts,
        breakdown_notes=part_notes,
    )


def platform_facts(name: str) -> Tuple[str, Optional[Dict[str, Any]]]:
    """(one-line summary, description) of a platform; an unknown one gets the reason and None."""
    try:
        spec = platforms.load(name)
        return platforms.summary(spec), spec.model_dump()
    except Exception as exc:  # an unknown platform name still gets its report, with the reason
        return "%s (no platform description: %s)" % (name, exc), None


def trial_rows(data: store_rows.Rows) -> List[Dict[str, Any]]:
    """Every trial of the cells, as TRIAL_COLUMNS rows in run order: each trial's columns as the
    store holds them (its record's stored row: the JSON columns as their stored text)."""
    out: List[Dict[str, Any]] = []
    for cell in data.cells:
        for t in data.cell_trials(cell):
            row = {k: t.get(k) for k in TRIAL_COLUMNS}
            row.update(
                trial_id=t["id"],
                framework=cell["framework"],
                model=cell["model"],
                precision=cell["precision"],
                platform=cell["platform"],
                gpus=cell["gpus"],
                nodes=cell["nodes"],
            )
            out.append({k: row.get(k) for k in TRIAL_COLUMNS})
    return sorted(out, key=lambda r: (r["run_id"], r["seq"]))


def runs(data: store_rows.Rows, run_ids: Iterable[str]) -> Tuple[Run, ...]:
    """The Run of each of these run ids, in their order."""
    out: List[Run] = []
    for rid in run_ids:
        run = data.runs[rid]
        out.append(Run(id=run.id, scenario=run.scenario_name, backend=run.backend, created=run.created, host=run.host))
    return tuple(out)


# ------------------------------------------------------------------ per configuration, for the figures


def cell_label(cell: StoredCell) -> str:
    """'framework Model Precision NODESxGPUS': a configuration's label in the figures."""
    return "%s %s %s %dx%d" % (
        cell["framework"],
        catalog.model_title(cell["model"]),
        catalog.precision_title(cell["precision"]),
        cell["nodes"],
        cell["gpus"],
    )


def data_share(data: store_rows.Rows, cells: Sequence[StoredCell]) -> Tuple[Tuple[str, float, float], ...]:
    """(configuration, median iteration ms, median data ms) of the cells that logged both."""
    out: List[Tuple[str, float, float]] = []
    for cell in cells:
        done = [t for t in data.cell_trials(cell) if t["status"] == "done"]
        its = sorted(t["iteration_time_s"] for t in done if t["iteration_time_s"])
        datas = sorted(t["data_time_s"] for t in done if t["data_time_s"] is not None)
        if its and datas:
            out.append((cell_label(cell), its[len(its) // 2] * 1000, datas[len(datas) // 2] * 1000))
    return tuple(out)


def memory_rows(
    data: store_rows.Rows, cells: Sequence[StoredCell]
) -> Tuple[Tuple[str, Dict[str, Optional[float]]], ...]:
    """(configuration, {peak_device_mb, peak_rss_mb, peak_mem_mb}): the highest of each over a
    cell's finished repeats, for the cells with a device or resident figure."""
    out: List[Tuple[str, Dict[str, Optional[float]]]] = []
    for cell in cells:
        done = [t for t in data.cell_trials(cell) if t["status"] == "done"]
        peaks = {k: max([t[k] for t in done if t[k]] or [0.0]) or None for k in PEAKS}
        if peaks["peak_device_mb"] or peaks["peak_rss_mb"]:
            out.append((cell_label(cell), peaks))
    return tuple(out)


def traces_of(data: store_rows.Rows, cells: Sequence[StoredCell]) -> Tuple[Trace, ...]:
    """The iteration traces of the cells whose iterations were read (harness.report.rows.read)."""
    out: List[Trace] = []
    for cell in cells:
        repeats = tuple(
            ("repeat %d" % t["repeat"], data.iterations[t["id"]])
            for t in data.cell_trials(cell)
            if data.iterations.get(t["id"])
        )
        if repeats:
            sc = data.runs[cell["run_id"]].scenario
            out.append(Trace(cell["cell_key"], cell_label(cell), repeats, sc.warmup or 0, sc.measure or 0))
    return tuple(out)


def failures(data: store_rows.Rows, cells: Sequence[StoredCell]) -> Tuple[Failure, ...]:
    """The failed trials of these cells, with their reasons."""
    return tuple(
        Failure(t["id"], cell["cell_key"], t["reason"] or "?")
        for cell in cells
        for t in data.cell_trials(cell)
        if t["status"] == "failed"
    )


def accuracy(
    results_dir: Union[str, Path],
    run_id: str = "latest",
    targets: Optional[Dict[str, Tuple[str, float]]] = None,
    published: Optional[str] = None,
    joined: Sequence[str] = (),
) -> "accuracy_mod.AccuracyReport":
    """The time-to-accuracy report of one accuracy run of the store (`detbench accuracy report`);
    `targets` ({model: (metric, value)}) reads its curves against other targets than its scenario's;
    the accuracy tables of the published figures named `published` are printed beside. The cells of
    each run of `joined` (`--with`: a precision, framework or more seeds of a cell trained later with
    the same recipe and inputs on the same machine) join the report, read against its targets; a run
    of another recipe, machine or inputs, or one that trained a seed of this run again, is refused
    in one line."""
    pub = published_mod.load(published) if published else None
    store = Store(str(results_dir), create=False)
    tables = store.accuracy()
    if run_id == "latest":
        ids = tables.runs()
        if not ids:
            raise UserError("%s: no accuracy run in this results store (run `detbench accuracy run`)" % results_dir)
        run_id = ids[-1]
    run = store.read_run(run_id)
    report = _accuracy_of(store, run, targets)
    report.protocol = _protocol(run)
    report.floors = tables.floors(run.id)
    report.place = _place_line(store, run)
    if targets:
        report.exploratory.append(
            "targets given at report time (%s), not declared before the run"
            % ", ".join("%s=%s:%g" % (m, metric, v) for m, (metric, v) in sorted(targets.items()))
        )
    own = {b.model: (b.metric, b.target) for b in report.models}
    planned: List[Tuple[Any, List[Any], Optional[str]]] = []
    outside: List[Tuple[Any, List[Any], Optional[str]]] = []
    for other_id in joined:
        other = store.read_run(other_id)
        trials = list(tables.trials(other.id))
        _joinable(run, other, trials, (tables.inputs(run.id), tables.inputs(other.id)))
        why = _outside_plan(run, other, trials, 2 + len(planned), tables.trials(run.id))
        (outside if why else planned).append((other, trials, why))
    for n, (other, trials, why) in enumerate(planned + outside):
        if n == len(planned):  # the verdict reads the protocol's looks alone
            report.verdict = accuracy_verdict.judge(report)
        if why:
            report.exploratory.append(
                "run %s joined outside the declared plan (%s): its seeds are in the tables, "
                "not in the verdict" % (other.id, why)
            )
        theirs = {str(t["cell_key"]).split("/")[1] for t in trials}
        try:
            accuracy_mod.join(
                report,
                _accuracy_of(store, other, {m: v for m, v in own.items() if m in theirs}),
                run.host or {},
                run.scenario.document,
            )
        except ValueError as exc:
            raise UserError("--with %s: %s" % (other.id, exc)) from None
    if report.verdict is None:
        report.verdict = accuracy_verdict.judge(report)
    if pub is not None:
        report.published = tuple(published_mod.grids(pub, kind="accuracy"))
        report.published_source = pub.source
    return report


def _accuracy_of(
    store: Store, run: Any, targets: Optional[Dict[str, Tuple[str, float]]]
) -> "accuracy_mod.AccuracyReport":
    """The AccuracyReport of one stored accuracy run, its curves read against `targets` where given."""
    tables = store.accuracy()
    run_id = run.id
    trials = list(tables.trials(run_id))
    keys = [str(t["trial_key"]) for t in trials]
    models = sorted({str(t["cell_key"]).split("/")[1] for t in trials})
    unknown = sorted(set(targets or {}) - set(models))
    if unknown:
        raise UserError(
            "--target %s: accuracy run %s has no such model (its models: %s)"
            % (unknown[0], run.id, ", ".join(models) or "none")
        )
    return accuracy_mod.from_records(
        run,
        trials,
        {k: tables.curve(run_id, k) for k in keys},
        {k: tables.losses(run_id, k) for k in keys},
        tables.settings(run_id),
        targets,
        tables.resumes(run_id),
        tables.loads(run_id),
        tables.redos(run_id),
        tables.codes(run_id),
    )


def _protocol(run: Any) -> Optional["accuracy_mod.Protocol"]:
    """The protocol accuracy run `run` declared (its stored scenario and order), None for a run
    stored before accuracy runs kept their order (they predate the protocol)."""
    from harness.plan import accuracy as plan_accuracy

    if run.order is None:
        return None
    doc = run.scenario.document
    a = doc.get("accuracy") or {}
    looks, plan = plan_accuracy.declared_looks(a)
    frameworks = list((doc.get("matrix") or {}).get("framework") or [])
    return accuracy_mod.Protocol(
        plan_accuracy.subject_of(a, frameworks),
        float(a.get("speedup") or 1.2),
        str(a.get("reached") or "stays"),
        run.order.seed,
        run.order.look,
        tuple(tuple(x) for x in looks),
        tuple(alpha for _, alpha in plan_accuracy.spent(plan, len(looks[0]))),
    )


def _outside_plan(run: Any, other: Any, trials: Sequence[Any], look: int, own: Sequence[Any]) -> Optional[str]:
    """Why `other` (a joinable accuracy run, its trials `trials`) is not look `look` of the
    sequential plan `run` declared before it ran; None where it is."""
    from harness.plan import accuracy as plan_accuracy

    if run.order is None:
        return "run %s predates the protocol" % run.id
    a = run.scenario.document.get("accuracy") or {}
    if not a.get("sequential"):
        return "run %s declared no sequential plan" % run.id
    if other.order is None or other.order.look == 1:
        return "it is no look of the plan"
    b = run.scenario.document.get("accuracy") or {}
    c = other.scenario.document.get("accuracy") or {}
    if any(b.get(k) != c.get(k) for k in ("seeds", "sequential", "targets", "reached")):
        return "its scenario declares another protocol"
    if other.order.look != look:
        return "it trained look %d where look %d comes next" % (other.order.look, look)
    seeds = {int(t["seed"]) for t in trials}
    if seeds != set(plan_accuracy.look_seeds(a, look)):
        return "its seeds are not look %d's" % look
    cells = {str(t["cell_key"]) for t in trials}
    if cells != {str(t["cell_key"]) for t in own}:
        return "it trained other cells than run %s" % run.id
    return None


def _place_line(store: Store, run: Any) -> Optional[str]:
    """The place check of an accuracy run's trials in their stored order (each seed's round
    shuffled), as speed runs get: each finished trial's images/s over its whole training."""
    from harness.measure import flags, place
    from harness.plan import accuracy as plan_accuracy

    if run.order is None:
        return None
    tables = store.accuracy()
    trials = tables.trials(run.id)
    doc = run.scenario.document
    seeds = plan_accuracy.look_seeds(doc.get("accuracy") or {}, run.order.look)
    places = plan_accuracy.trial_places([str(t["cell_key"]) for t in trials], seeds, run.order.seed)
    rows = []
    for t in trials:
        key = str(t["trial_key"])
        curve = tables.curve(run.id, key)
        last = curve[-1] if curve and t["status"] == "done" else None
        rnd, seq = places.get(key, (0, 0))
        rows.append(
            dict(
                cell_key=str(t["cell_key"]),
                repeat=rnd,
                seq=seq,
                status=str(t["status"]),
                throughput=last.iteration * int(doc.get("batch_per_gpu") or 1) / last.train_seconds if last else None,
            )
        )
    check = place.check(rows, run.order.seed)
    if check is None:
        return "Place in the round, run %s (order seed %d): not checked: %d seed rounds, the check needs %d." % (
            run.id,
            run.order.seed,
            len(seeds),
            flags.PLACE_ROUNDS,
        )
    return measured.place_line(run.id, run.order, check)


def _joinable(run: Any, other: Any, trials: Sequence[Any], inputs: Tuple[Dict[str, str], Dict[str, str]]) -> None:
    """UserError (one line naming every difference) unless `other` (whose accuracy trials are
    `trials`) is another accuracy run of `run`'s recipe, started on the same machine (the
    fingerprint facts both stored) from the same inputs (`inputs`: each run's {path: SHA-256} of its
    weights files and data splits; a path both stored must have one digest)."""
    from harness.plan import accuracy as plan_accuracy
    from harness.plan import fingerprint

    why = []
    if other.id == run.id:
        why.append("it is the run being reported")
    if not trials:
        why.append("it is not an accuracy run")
    else:
        why += plan_accuracy.recipe_differences(run.scenario.document, other.scenario.document)
        first, second = ((r.host or {}).get("facts") for r in (run, other))
        if first and second:
            why += fingerprint.differences(first, second, ("run %s" % run.id, "run %s" % other.id))
        mine, theirs = inputs
        why += [
            "%s had other content when run %s started than when run %s did" % (path, other.id, run.id)
            for path in sorted(set(mine) & set(theirs))
            if mine[path] != theirs[path]
        ]
    if why:
        raise UserError("--with %s: its cells cannot join run %s's report: %s" % (other.id, run.id, "; ".join(why)))


def accuracy_comparison(
    results_dir: Union[str, Path], baseline_run: str, candidate_run: str, threshold: float = 0.05
) -> List[Any]:
    """harness.results.compare.compare_accuracy of two accuracy runs of one store, per cell (the
    candidate's target of each model; framework/model/precision, seeds pooled)."""
    from harness.results import compare

    base, cand = accuracy(results_dir, baseline_run), accuracy(results_dir, candidate_run)
    out: List[Any] = []
    for block in cand.models:
        other = next((b for b in base.models if b.model == block.model), None)
        out += compare.compare_accuracy(
            accuracy_mod.by_cell(other), accuracy_mod.by_cell(block), block.metric, block.target, threshold
        )
    return out


def mlperf_runs(results_dir: Union[str, Path], benchmark: Optional[str] = None) -> List[Dict[str, Any]]:
    """The imported MLPerf Training runs of a results folder (of one benchmark where given), for
    harness.report.mlperf to render."""
    from harness.results.mlperf_store import MlperfTables

    store = Store(results_dir, create=False)
    try:
        return MlperfTables(store).runs(benchmark)
    finally:
        store.close()
