"""Report tables from the store's rows (harness.report.rows): per cell, the summary over its repeats."""
import copy
import dataclasses
import json
from collections import defaultdict

from harness.launch import limits
from harness.spec import catalog, platforms
from harness.spec.scenario import Cell
from harness import frameworks
from harness.measure import flags, stats, telemetry, work
from harness.report import figures
from harness.report.model import ITERATION, THROUGHPUT, Column, Detail, Entry, Table, batch_note


def cell_entries(rows, ci=True):
    """{cell key: (cell row, Entry)} for the training cells of these rows, run by run.

    ci=False leaves Detail.ci None (no bootstrap): for outputs that do not show it.
    """
    by_run = defaultdict(list)
    for c in rows.cells:
        by_run[c["run_id"]].append(c)
    out = {}
    for rid, run_cells in by_run.items():
        window = nominal_window(rows.runs[rid]["scenario_json"])
        bounds = run_limits(rows.runs[rid])
        for c in run_cells:
            if Cell.from_key(c["cell_key"]).batch:
                continue   # an inference cell: harness.report.inference tables it
            out[c["cell_key"]] = (c, entry_for(c, rows.cell_trials(c), ci, window, bounds))
    return out


def run_limits(run):
    """The run's stored limits (harness.launch.limits.for_run), {} where it has none, with each
    precision's peak raised to a higher one measured since on the same kind of machine
    (limits.best_peak)."""
    text = run["limits_json"] if "limits_json" in run.keys() else None
    value = _loads(text)
    if not isinstance(value, dict):
        return {}
    of = value.get("peak_of")
    if isinstance(of, dict):
        fingerprint, threads = of.get("fingerprint"), of.get("threads")
    else:   # stored before runs named the peak's machine: the run's host and its scenario's threads
        host = _loads(run["host_json"] if "host_json" in run.keys() else None)
        scenario = _loads(run["scenario_json"] if "scenario_json" in run.keys() else None)
        fingerprint = host.get("fingerprint") if isinstance(host, dict) else None
        env = scenario.get("env") if isinstance(scenario, dict) else None
        value_threads = env.get("OMP_NUM_THREADS") if isinstance(env, dict) else None
        threads = str(value_threads) if value_threads else "default"
    return limits.best_peak(value, fingerprint, threads)


def cell_limits(cell, bounds):
    """(flops per image, peak GFLOP/s at the cell's precision, why one is missing, the lower peak
    the run stored where a higher one replaced it) from a run's limits."""
    if not bounds:
        return None, None, None, None
    work = (bounds.get("work") or {}).get(cell["cell_key"])
    if work is None:
        return None, None, None, None      # a cell with no arithmetic to count (the calibration workload)
    flops = work.get("flops_per_image") if isinstance(work, dict) else None
    peak = bounds.get("peak") or {}
    figures = (peak.get("precisions") or {}).get(cell["precision"]) or {}
    gflops = figures.get("peak_gflops")
    stored = figures.get("stored_gflops")
    why = None
    if flops is None:
        why = "work not counted: %s" % (work.get("error") if isinstance(work, dict) else "?")
    elif gflops is None:
        why = "no measured %s peak: %s" % (cell["precision"], peak.get("error") or figures.get("skipped")
                                          or "this host's peak has no %s figure" % cell["precision"])
    return flops, gflops, why, stored


def nominal_window(scenario_json):
    """(first, last) measured iteration the run's scenario asked for, or None where unknown."""
    try:
        sc = json.loads(scenario_json)
        warmup, measure = sc["warmup"], sc["measure"]
    except (TypeError, ValueError, KeyError):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (warmup, measure)):
        return None
    return (warmup + 1, warmup + measure)


def _loads(text):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _distinct(values):
    out = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def cell_work(done):
    """{count: median over the repeats} of the finished trials' work_json, or None."""
    works = [w for w in (_loads(t["work_json"]) for t in done) if isinstance(w, dict)]
    keys = [k for k in work.LABELS if any(k in w for w in works)]
    return {k: work.median([w[k] for w in works if k in w]) for k in keys} or None


def _peak(done, column):
    values = [t[column] for t in done if t[column]]
    return max(values) if values else None


def entry_for(cell, trials, ci=True, window=None, bounds=None):
    if cell["excluded"]:
        return Entry(na=cell["excluded"])
    done = [t for t in trials if t["status"] == "done" and t["throughput"]]
    failed = [t for t in trials if t["status"] == "failed"]
    if not done:
        if failed:
            return Entry(na="all %d trials failed; first: %s" % (len(failed), failed[0]["reason"]))
        return Entry(na="not measured yet (run unfinished)")
    s = stats.summarize([t["throughput"] for t in done], cell["images_per_iteration"],
                        [t["data_time_s"] for t in done], [t["observed"] for t in done],
                        [t["iteration_time_s"] for t in done], with_ci=ci)
    raised = list(s.flags)
    if flags.window_approximate(done):
        raised.append(flags.WINDOW_APPROXIMATE)
    raised += telemetry.cell_flags([t["telemetry_json"] for t in done], [t["fingerprint"] for t in done])
    variants = _distinct(_loads(t["settings_json"]) or {} for t in done)
    windows = _distinct(tuple(w) for w in (_loads(t["window_json"]) for t in done) if isinstance(w, list))
    flops, peak, why, stored_peak = cell_limits(cell, bounds)
    detail = Detail(n=s.n, median=s.throughput, failed=len(failed), minimum=s.minimum, maximum=s.maximum, iqr=s.iqr,
                    ci=(s.ci_low, s.ci_high) if ci else None, cv=s.cv, observed=s.observed, outliers=s.outliers,
                    settings=variants[0], settings_variants=tuple(variants),
                    kinds=tuple(_distinct(t["figure_kind"] for t in done)), windows=tuple(windows),
                    nominal_window=window, work=cell_work(done), peak_rss_mb=_peak(done, "peak_rss_mb"),
                    peak_device_mb=_peak(done, "peak_device_mb"), peak_mem_mb=_peak(done, "peak_mem_mb"),
                    run_id=cell["run_id"], flops_per_image=flops, peak_gflops=peak, limit_note=why,
                    peak_stored_gflops=stored_peak)
    return Entry(throughput=s.throughput, iteration_ms=s.iteration_ms, data_ms=s.data_ms, flags=raised,
                 detail=detail)


def _title(platform, precision, gpus, nodes, platform_devices):
    base = "%s-%s" % (platform, catalog.precision_title(precision))
    if nodes > 1:
        return "%s-%dx%dcard" % (base, nodes, gpus)
    return base if gpus == platform_devices else "%s-%dcard" % (base, gpus)


def _devices(name):
    try:
        return platforms.load(name).devices
    except Exception:   # an unknown or unreadable platform file: no suffix rule to apply
        return 0


def tables(rows, ci=True):
    """One throughput table per platform x precision x GPUs x nodes (plus the single-card form).

    The two forms of a single-device group share their columns, rows and entries."""
    entries = cell_entries(rows, ci)
    groups = defaultdict(dict)
    for key, (cell, entry) in entries.items():
        gk = (cell["platform"], cell["precision"], cell["gpus"], cell["nodes"], cell["batch_per_gpu"])
        groups[gk][(cell["model"], cell["framework"])] = entry
    out = []
    for (plat, prec, gpus, nodes, batch), cells in sorted(groups.items(), key=lambda kv: _group_order(kv[0])):
        fw_order = list(frameworks.FRAMEWORKS)
        fws = sorted({fw for _, fw in cells}, key=lambda f: (fw_order.index(f) if f in fw_order else 99, f))
        models = sorted({m for m, _ in cells}, key=lambda m: (list(catalog.MODELS).index(m)
                                                             if m in catalog.MODELS else 99, m))
        columns = [Column(fw, frameworks.FRAMEWORKS[fw].title if fw in frameworks.FRAMEWORKS else fw)
                   for fw in fws]
        done = [e for e in cells.values() if e.detail]
        reps = sorted({e.detail.n for e in done})
        notes = ["Measured: %s; %s." % (batch_note(gpus, nodes, batch), "median of %s repeat%s" % (
            "/".join(map(str, reps)), "" if reps == [1] else "s") if reps else "no finished repeats")]
        notes += differing_settings(cells, models)
        notes += work_lines(cells, columns, models)
        notes += compute_lines(cells, columns, models, prec)
        cells = work_flags(cells, columns, models)
        kinds = figures.table_line(columns, cells, models)
        notes += kinds
        forced = [n for n in (platforms.forced_note(rows.runs[r]["host_json"])
                              for r in sorted({e.detail.run_id for e in done})) if n]
        forced += imported_note(rows.runs, cells)   # under both forms of the table, like a forced run
        notes += forced
        if rows.renamed:
            notes.append("Read from a store that names the bundled trainer by its old name "
                         "'simpledet'; shown as 'detbench-trainer'.")
        title = _title(plat, prec, gpus, nodes, _devices(plat))
        common = dict(platform=plat, precision=prec, gpus=gpus, nodes=nodes, batch_per_gpu=batch,
                      columns=columns, models=models, entries=cells, notes=notes)
        out.append(Table(title=title, form=THROUGHPUT, **common))
        if gpus * nodes == 1:
            single = "%s-%s-1card" % (plat, catalog.precision_title(prec))
            if single == title:
                single += " (iteration time)"
            out.append(Table(title=single, form=ITERATION, **dict(common, notes=notes[:1] + kinds + forced)))
    return out


def imported_note(runs, cells):
    """The line naming the cells whose figures come from logs `detbench import` brought in, if any
    (runs: run id -> run row)."""
    imported, names = {}, []
    for (model, fw), e in sorted(cells.items()):
        if e.detail is None:
            continue
        rid = e.detail.run_id
        if rid not in imported:
            imported[rid] = runs[rid]["origin"] == "imported"
        if imported[rid]:
            names.append("%s %s" % (fw, catalog.model_title(model)))
    if not names:
        return []
    return ["Imported from logs made elsewhere (not run by detbench; their settings are not known "
            "and not compared): %s." % ", ".join(names)]


def differing_settings(cells, models):
    """Lines naming, per model row, the normalized settings in which its frameworks differ,
    or in which the repeats of one framework differ.

    Each row is compared on its own: the settings of one model say nothing about another's.
    A key is compared where every framework of the row reports it."""
    lines = []
    for model in models:
        per_fw = {fw: e.detail.settings_variants or (e.detail.settings,)
                  for (m, fw), e in sorted(cells.items()) if m == model and e.detail and e.detail.settings}
        if not per_fw:
            continue
        keys = sorted(set.intersection(*(set().union(*variants) for variants in per_fw.values())))
        for k in keys:
            values = {fw: _distinct(json.dumps(v.get(k), sort_keys=True) for v in variants)
                      for fw, variants in per_fw.items()}
            if len({v for vs in values.values() for v in vs}) > 1:
                lines.append("Not like for like, %s: %s differs (%s)." % (
                    catalog.model_title(model), k, ", ".join(
                        "%s %s" % (fw, " / ".join(vs) + (" across repeats" if len(vs) > 1 else ""))
                        for fw, vs in sorted(values.items()))))
    return lines


def _row_works(cells, columns, model):
    row = [cells.get((model, col.key)) for col in columns]
    return row, [e.detail.work if e is not None and e.detail else None for e in row]


def work_lines(cells, columns, models):
    """Per model row, the work per iteration of each column."""
    lines = []
    for model in models:
        text = work.row_text(_row_works(cells, columns, model)[1])
        if text:
            lines.append("Work per iteration, %s (%s): %s." % (
                catalog.model_title(model), " | ".join(c.title for c in columns), text))
    return lines


def compute_lines(cells, columns, models, precision):
    """Per model row, each column's achieved TFLOP/s and share of the host's measured peak (MFU);
    one line saying why where no cell of the table has the figures."""
    lines, why, peaks = [], None, set()
    for model in models:
        row = [cells.get((model, col.key)) for col in columns]
        details = [e.detail if e is not None and e.detail else None for e in row]
        if not any(d is not None and d.mfu is not None for d in details):
            why = why or next((d.limit_note for d in details if d is not None and d.limit_note), None)
            continue
        peaks.update(d.peak_gflops for d in details if d is not None and d.mfu is not None)
        texts = ["%.3f TFLOP/s (%.0f%%)" % (d.tflops, 100 * d.mfu) if d is not None and d.mfu is not None
                 else "-" for d in details]
        lines.append("Compute, %s (%s): %s, in parentheses the share of the peak." % (
            catalog.model_title(model), " | ".join(c.title for c in columns), " | ".join(texts)))
    if lines:
        lines.append("Peak: %s GFLOP/s, this host's best %s matrix product or convolution (`detbench platform "
                     "peak`); work per image counted once on the bundled model (torch's FLOP counter)."
                     % (" / ".join("%.0f" % p for p in sorted(peaks)), catalog.precision_title(precision)))
        lowered = sorted({d.peak_stored_gflops for e in cells.values() for d in [e.detail if e else None]
                          if d is not None and d.mfu is not None and d.peak_stored_gflops})
        if lowered:
            lines.append("The run stored a lower peak (%s GFLOP/s), measured when the machine was busier; the "
                         "higher one measured since on this kind of machine, at the same thread count, is used."
                         % " / ".join("%.0f" % p for p in lowered))
        if any(e is not None and e.detail and e.detail.mfu is not None and e.detail.mfu > 1
               for e in cells.values()):
            lines.append("A share above 100% means the peak was measured low (on a busy machine, or cached from "
                         "one): measure it again on a quiet one with `detbench platform peak --refresh`.")
    elif why:
        lines.append("No compute figures: %s." % why)
    return lines


def work_flags(cells, columns, models):
    """The cells with unequal-work added to the entries of each model row whose frameworks
    differ in a work count (harness.measure.flags.unequal_work)."""
    out = dict(cells)
    for model in models:
        row, works = _row_works(cells, columns, model)
        for col, e, flagged in zip(columns, row, flags.unequal_work(works)):
            if flagged:
                out[(model, col.key)] = dataclasses.replace(e, flags=e.flags + [flags.UNEQUAL_WORK])
    return out


def _group_order(gk):
    plat, prec, gpus, nodes, batch = gk
    precs = list(catalog.PRECISIONS)
    return (plat, precs.index(prec) if prec in precs else 99, -(gpus * nodes), batch)


def with_published(measured, published):
    """Copies of the measured tables with a "(published)" column beside each framework where a
    published table matches (platform, precision, devices and form), and its notes under them.

    The two forms of a single-device group share their columns, rows and entries (tables()), so
    the columns of a published table that matches either form join both."""
    measured = copy.deepcopy(list(measured))
    for table in measured:
        for pub in published:
            if (pub.platform, pub.precision, pub.gpus, pub.nodes, pub.form) != (
                    table.platform, table.precision, table.gpus, table.nodes, table.form):
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
    return measured
