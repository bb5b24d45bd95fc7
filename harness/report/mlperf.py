"""`detbench report --mlperf`: imported MLPerf Training runs, per round and benchmark.

Two tables per round and benchmark, in the seed tables' form (a heading, what the figures are,
the table, notes under it):

- the systems side by side: system, accelerator x count, nodes, framework, the round's score
  (time to train, minutes) with the spread of its results, images/s per accelerator, and the
  scaling efficiency against the same hardware's fewest nodes (score x devices at the fewest
  nodes over score x devices);
- what MLPerf does not show: per-epoch images/s per accelerator and its stability over the run
  (coefficient of variation over epochs), time before run_start (initialisation), summed
  evaluation, and the time to train spent outside training epochs.

The HTML page adds each benchmark's accuracy-vs-time curves (every result, from run_start)
with the closed division's target. Images/s come from the MLLOG stamps of each epoch and the
closed data set's images per epoch (harness.measure.mllog.epoch_rate), never from printed rates.
"""

import statistics
import textwrap
from typing import Any, Dict, List, Optional, Sequence, Tuple

from harness.measure import mllog

TITLES = {"maskrcnn": "Mask R-CNN", "ssd": "RetinaNet (ssd)"}
Run = Dict[str, Any]
Grid = Tuple[str, List[str], List[List[str]], List[str]]  # title, head, rows, notes


def _ok(run: Run) -> List[mllog.Result]:
    return [r for _, r in run["results"] if r.compliance is None]


def trial_rate(result: mllog.Result, devices: int) -> Optional[Tuple[float, float]]:
    """(images/s per device, relative bound) over every epoch of one result: images over seconds summed."""
    rates = [(e, mllog.epoch_rate(result, e, devices)) for e in result.epochs]
    known = [(e, r) for e, r in rates if r is not None]
    if not known:
        return None
    seconds = sum(e.seconds for e, _ in known)
    images = sum(r[0] * e.seconds for e, r in known)
    return images / seconds, max(r[1] for _, r in known)


def _minutes(values: Sequence[float]) -> str:
    return "%.2f" % values[0] if len(values) == 1 else "%.2f-%.2f" % (min(values), max(values))


def efficiency(runs: Sequence[Run]) -> Dict[str, float]:
    """run_id -> scaling efficiency against the same hardware's fewest nodes, where it has several node counts."""
    groups: Dict[Tuple[str, str, int, str], List[Run]] = {}
    for run in runs:
        if run["score_minutes"] is not None:
            groups.setdefault(mllog.hardware(run["platform"]), []).append(run)
    out: Dict[str, float] = {}
    for members in groups.values():
        if len({m["platform"]["nodes"] for m in members}) < 2:
            continue
        base = min(members, key=lambda m: (m["platform"]["nodes"], m["score_minutes"]))
        work = base["score_minutes"] * base["platform"]["devices"]
        for m in members:
            out[m["run_id"]] = work / (m["score_minutes"] * m["platform"]["devices"])
    return out


def systems_grid(round_name: str, benchmark: str, runs: Sequence[Run]) -> Grid:
    eff = efficiency(runs)
    head = [
        "system",
        "accelerator x count",
        "nodes",
        "framework",
        "time to train, min (results)",
        "images/s per accelerator",
        "scaling efficiency",
    ]
    rows, notes = [], []
    for run in sorted(runs, key=lambda r: (r["score_minutes"] is None, r["score_minutes"] or 0.0)):
        p = run["platform"]
        ok = _ok(run)
        rates = [x for x in (trial_rate(r, p["devices"]) for r in ok) if x is not None]
        rate = (
            "%.1f (+-%.2f%%)" % (statistics.median(x[0] for x in rates), 100 * max(x[1] for x in rates))
            if rates
            else "-"
        )
        score = "%.2f" % run["score_minutes"] if run["score_minutes"] is not None else "no score"
        spread = _minutes([r.minutes for r in ok]) if ok else "-"
        rows.append(
            [
                "%s (%s)" % (p["system"], p["submitter"]),
                "%s x %d" % (p["device"], p["devices"]),
                str(p["nodes"]),
                p["framework"],
                "%s (%s, %d)" % (score, spread, len(ok)),
                rate,
                "%.0f%%" % (100 * eff[run["run_id"]]) if run["run_id"] in eff else "-",
            ]
        )
        if run["score_minutes"] is None:
            notes.append("%s: no score: %s" % (p["system"], run["score_note"]))
        if run["scaling_factor"] != 1.0:
            notes.append("%s: the review's scaling factor %.4f is in the score" % (p["system"], run["scaling_factor"]))
        if run["division"] != "closed":
            notes.append("%s: %s division (its data set and target may differ)" % (p["system"], run["division"]))
        for name, r in run["results"]:
            if r.compliance is not None:
                notes.append("%s %s: dropped by the round's rules: %s" % (p["system"], name, r.compliance))
    notes.append(
        "Time to train: run_stop - run_start of each result; the score drops the fastest and slowest "
        "(a dropped result counts as the slowest) and averages the rest, as mlperf_logging's summarizer."
    )
    notes.append(
        "Images/s per accelerator: the closed data set's images per epoch (%s) over each epoch's seconds "
        "between its MLLOG stamps, summed over a result's epochs; median over results, with the bound of "
        "whole-millisecond stamps and one partial global batch."
        % ", ".join("%s %d" % (TITLES[b], n) for b, n in sorted(mllog.EPOCH_IMAGES.items()))
    )
    notes.append("Scaling efficiency: score x accelerators of the same hardware's fewest nodes over this run's.")
    if any(run["platform"].get("cpu_only") for run in runs):
        notes.append("A system without accelerators counts its host CPU sockets in their place.")
    return "MLPerf Training v%s: %s" % (round_name, TITLES.get(benchmark, benchmark)), head, rows, notes


def epochs_grid(round_name: str, benchmark: str, runs: Sequence[Run]) -> Grid:
    head = [
        "system",
        "epochs",
        "target met at, min",
        "images/s per accelerator per epoch: median (min-max)",
        "CV over epochs",
        "init before run_start, s",
        "evaluation, s",
        "outside training epochs",
    ]
    rows = []
    for run in sorted(runs, key=lambda r: r["platform"]["system"]):
        p = run["platform"]
        ok = _ok(run)
        per_epoch = [x[0] for r in ok for e in r.epochs for x in [mllog.epoch_rate(r, e, p["devices"])] if x]
        inits = [r.init_s for r in ok if r.init_s is not None]
        outside = [
            max(0.0, r.seconds - sum(e.seconds for e in r.epochs)) / r.seconds for r in ok if r.epochs and r.seconds > 0
        ]
        cv = statistics.pstdev(per_epoch) / statistics.mean(per_epoch) if len(per_epoch) > 1 else None
        target = mllog.targets(run["ruleset"], benchmark)
        met = [t / 60.0 for r in ok for t in [mllog.time_to_target(r.curve, target)] if t is not None]
        rows.append(
            [
                p["system"],
                "%.0f" % statistics.median(len(r.epochs) for r in ok) if ok else "-",
                "%.2f (%d of %d)" % (statistics.median(met), len(met), len(ok)) if met else "-",
                "%.1f (%.1f-%.1f)" % (statistics.median(per_epoch), min(per_epoch), max(per_epoch))
                if per_epoch
                else "-",
                "%.1f%%" % (100 * cv) if cv is not None else "-",
                "%.0f" % statistics.median(inits) if inits else "-",
                "%.0f" % statistics.median(r.eval_s for r in ok) if ok else "-",
                "%.1f%%" % (100 * statistics.median(outside)) if outside else "-",
            ]
        )
    notes = [
        "Target met at: minutes from run_start to the first evaluation at the closed division's target "
        "(%s), median over the results that met it." % _target_text(runs[0]["ruleset"] if runs else "", benchmark),
        "Medians over a system's results that pass the round's rules. Epochs are the log's epoch_start/stop "
        "pairs, else its blocks (a block of several epochs counts as one row of images/s).",
        "Outside training epochs: the share of time to train not inside an epoch (evaluation, where it does "
        "not overlap training, and whatever else ran between epochs); evaluation is the sum of eval_start "
        "to eval_stop, which may overlap training where a framework evaluates asynchronously.",
    ]
    return "MLPerf Training v%s: %s, per epoch" % (round_name, TITLES.get(benchmark, benchmark)), head, rows, notes


def _target_text(ruleset: str, benchmark: str) -> str:
    target = mllog.targets(ruleset, benchmark) if ruleset else {}
    return ", ".join("%s %g" % (m or "eval_accuracy", v) for m, v in sorted(target.items())) or "none known"


def grids(runs: Sequence[Run]) -> List[Tuple[str, str, List[Grid], List[Run]]]:
    """(round, benchmark, its grids, its runs) for each round and benchmark, in order."""
    keys = sorted({(r["round"], r["benchmark"]) for r in runs})
    out = []
    for round_name, bench in keys:
        part = [r for r in runs if r["round"] == round_name and r["benchmark"] == bench]
        out.append(
            (round_name, bench, [systems_grid(round_name, bench, part), epochs_grid(round_name, bench, part)], part)
        )
    return out


def render_markdown(runs: Sequence[Run]) -> str:
    lines: List[str] = []
    for _round, _bench, part, _runs in grids(runs):
        for title, head, body, notes in part:
            lines += ["#### " + title, "", "|" + "|".join(head) + "|", "|" + "|".join("-" * len(h) for h in head) + "|"]
            lines += ["|" + "|".join(c.replace("|", "\\|") for c in row) + "|" for row in body]
            lines += [""] + [n + "  " for n in notes] + [""]
    return "\n".join(lines)


def curve_figure(round_name: str, benchmark: str, runs: Sequence[Run]) -> Any:
    """Accuracy vs minutes since run_start, every result of every system, with the closed target."""
    from harness.report import plots

    target = mllog.targets(runs[0]["ruleset"], benchmark) if runs else {}
    metrics = sorted(target) or [""]
    fig = plots._figure(3.2 * len(metrics))
    for k, metric in enumerate(metrics):
        ax = fig.add_subplot(len(metrics), 1, k + 1)
        for i, run in enumerate(sorted(runs, key=lambda r: r["platform"]["system"])):
            color = plots.PALETTE[i % len(plots.PALETTE)]
            for n, (_name, r) in enumerate(run["results"]):
                pts = [(p.seconds / 60.0, p.accuracy[metric]) for p in r.curve if metric in p.accuracy]
                ax.plot(
                    [x for x, _ in pts],
                    [y for _, y in pts],
                    color=color,
                    linewidth=0.8,
                    marker="o",
                    markersize=2,
                    label=run["platform"]["system"] if n == 0 else None,
                )
        if metric in target:
            ax.axhline(target[metric], color="#888888", linestyle="--", linewidth=0.8, label="target")
        ax.set_xscale("log")
        ax.set_xlabel("minutes since run_start (log scale)")
        ax.set_ylabel(metric or "eval_accuracy")
        ax.set_title(
            textwrap.fill(
                "MLPerf Training v%s: %s, eval_accuracy vs time, each result"
                % (round_name, TITLES.get(benchmark, benchmark)),
                100,
            ),
            fontsize=8,
        )
        ax.legend(frameon=False, fontsize=5, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        plots._style(ax)
    return fig


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>MLPerf Training results</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child{text-align:left}
.notes{color:#555}img{max-width:100%;height:auto}</style></head><body>
<h1>MLPerf Training results</h1>
{% for b in blocks %}
{% for title, head, body, notes in b.grids %}<h2>{{ title }}</h2>
<table><tr>{% for h in head %}<th>{{ h }}</th>{% endfor %}</tr>
{% for row in body %}<tr>{% for c in row %}<td>{{ c }}</td>{% endfor %}</tr>{% endfor %}</table>
<ul class="notes">{% for n in notes %}<li>{{ n }}</li>{% endfor %}</ul>
{% endfor %}
{% if b.image %}<p><img alt="{{ b.alt }}" src="{{ b.image }}"></p>{% endif %}
{% endfor %}
</body></html>
"""


def render_html(runs: Sequence[Run], figures: bool = True) -> str:
    import jinja2

    from harness.report import html as html_report

    blocks = []
    for round_name, bench, part, members in grids(runs):
        image = html_report.image(curve_figure(round_name, bench, members)) if figures else ""
        blocks.append({"grids": part, "image": image, "alt": "eval_accuracy vs time, %s" % bench})
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return str(env.from_string(_PAGE).render(blocks=blocks))
