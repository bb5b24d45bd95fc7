"""Build report tables from the results store: per cell, the summary over its repeats."""
import json
from collections import defaultdict

from harness import catalog, frameworks, platforms, stats, telemetry
from harness.report.model import ITERATION, THROUGHPUT, Column, Entry, Table, batch_note


def cell_entries(store, platform=None, run_id=None, ci=True):
    """{cell row: Entry} for the newest run of every cell (of one platform or run).

    ci=False leaves detail["ci"] None (no bootstrap): for outputs that do not show it.
    """
    cells = store.cells(platform=platform, run_id=run_id)
    by_run = defaultdict(list)
    for c in cells:
        by_run[c["run_id"]].append(c)
    out = {}
    for rid, run_cells in by_run.items():
        trials = defaultdict(list)
        for t in store.trials(rid):
            trials[t["cell_key"]].append(t)
        for c in run_cells:
            out[c["cell_key"]] = (c, entry_for(c, trials[c["cell_key"]], ci))
    return out


def entry_for(cell, trials, ci=True):
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
    flags = list(s.flags)
    if not all(t["exact"] for t in done):
        flags.append("window-approximate")
    flags += telemetry.cell_flags([t["telemetry_json"] for t in done], [t["fingerprint"] for t in done])
    settings = json.loads(done[0]["settings_json"]) if done[0]["settings_json"] else {}
    return Entry(throughput=s.throughput, iteration_ms=s.iteration_ms, data_ms=s.data_ms, flags=flags,
                 detail={"n": s.n, "failed": len(failed), "min": s.minimum, "max": s.maximum, "iqr": s.iqr,
                         "ci": [s.ci_low, s.ci_high] if ci else None, "cv": s.cv, "observed": s.observed,
                         "outliers": s.outliers, "settings": settings, "run_id": cell["run_id"]})


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


def tables(store, platform=None, run_id=None, ci=True):
    """One throughput table per platform x precision x GPUs x nodes (plus the single-card form)."""
    entries = cell_entries(store, platform, run_id, ci)
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
        reps = sorted({e.detail["n"] for e in done})
        notes = ["Measured: %s; %s." % (batch_note(gpus, nodes, batch), "median of %s repeat%s" % (
            "/".join(map(str, reps)), "" if reps == [1] else "s") if reps else "no finished repeats")]
        notes += differing_settings(cells)
        forced = [n for n in (platforms.forced_note(store.run(r)["host_json"])
                              for r in sorted({e.detail["run_id"] for e in done})) if n]
        notes += forced
        if store.renamed:
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
            out.append(Table(title=single, form=ITERATION, **dict(common, notes=notes[:1] + forced)))
    return out


def differing_settings(cells):
    """Lines naming the normalized settings in which the frameworks of one table differ."""
    per_fw = {}
    for (model, fw), e in cells.items():
        if e.detail.get("settings"):
            per_fw.setdefault(fw, e.detail["settings"])
    if len(per_fw) < 2:
        return []
    keys = sorted(set.intersection(*(set(s) for s in per_fw.values())))
    lines = []
    for k in keys:
        values = {fw: s.get(k) for fw, s in per_fw.items()}
        if len({json.dumps(v, sort_keys=True) for v in values.values()}) > 1:
            lines.append("Not like for like: %s differs (%s)." % (
                k, ", ".join("%s %s" % (fw, json.dumps(v)) for fw, v in sorted(values.items()))))
    return lines


def _group_order(gk):
    plat, prec, gpus, nodes, batch = gk
    precs = list(catalog.PRECISIONS)
    return (plat, precs.index(prec) if prec in precs else 99, -(gpus * nodes), batch)


def with_published(measured, published):
    """Add a "(published)" column beside each framework for tables that match a published one."""
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
            table.notes += pub.notes
    return measured
