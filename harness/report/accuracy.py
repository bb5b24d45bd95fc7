"""The time-to-accuracy report of one accuracy run: `detbench accuracy report`.

Per model, the table of NVIDIA's EfficientDet training results in our own terms:

    Framework | Precision | Batch | BBOX mAP (AP50) | Time to train | Time to target | Speedup

with every figure the mean over the run's seeds: the final checkpoint's bbox AP and AP50 (segm
for Mask R-CNN beside them), the training wall time to the last checkpoint, the time to the
model's highest declared target (interpolated linearly between the checkpoints around the
crossing its declared rule counts;
"not reached" with the seeds that missed it, their best figure, and a lower bound on the mean
that counts a missing seed at its whole training time) and the speedup in time to target
against the scenario's reference framework of the same precision, else its fp32 (">=" or "<="
where one side is such a bound).
Then the stability table of the target metric over the seeds
(`Seed 1..N | Mean | Standard deviation`), and, in HTML, the AP-vs-time and loss-vs-iteration
curves per framework. Under the protocol the run declared (`Protocol`; a run stored before it is
labelled exploratory), the report leads with the overall verdict (harness.report.accuracy_verdict)
and adds, per model, the speedup profile over the declared target levels. Every table and figure
carries its scope: CPU kind, input size, precision, batch, threads. Published accuracy,
time-to-train and stability tables (NVIDIA's, by default) follow, printed as published and not
compared.
"""

import os
import textwrap
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from harness.measure import accuracy as acc
from harness.measure import welch
from harness.plan import accuracy as plan_accuracy
from harness.report import measured
from harness.vocab import catalog


@dataclass
class Series:
    """One framework and precision of one model: a curve and a loss curve per seed."""

    framework: str
    precision: str
    batch: int
    curves: Dict[int, List[acc.AccuracyPoint]] = field(default_factory=dict)
    losses: Dict[int, List[acc.LossPoint]] = field(default_factory=dict)
    failed: Dict[int, str] = field(default_factory=dict)
    # seeds whose trial has not finished (pending, or running when the run stopped): left out of
    # every figure, named in a note, until a resume finishes them
    unfinished: List[int] = field(default_factory=list)
    # per seed: the settings and implementation its training program logged (DETBENCH_SETTINGS)
    settings: Dict[int, Dict[str, Any]] = field(default_factory=dict)
    implementation: Dict[int, Dict[str, str]] = field(default_factory=dict)
    # per seed resumed after an interruption: (checkpoint iteration, first iteration the resumed
    # program logged, seconds from its start to it); its later times hold a second start-up
    resumed: Dict[int, List[Tuple[int, int, float]]] = field(default_factory=dict)
    # per seed the checkpoint intervals where other processes (or steal) took more than a small
    # share of a core (plan.machine_load): (from iteration, to iteration, its Load)
    shared: Dict[int, List[Tuple[int, int, Any]]] = field(default_factory=dict)
    # per seed trained again from the start (`--redo`): (when, folder its earlier files went to,
    # that training's last scored figures or its status)
    redone: Dict[int, List[Tuple[str, Optional[str], Dict[str, Any]]]] = field(default_factory=dict)
    # per seed the detbench code of each training program: (iteration it went on from, code)
    code: Dict[int, List[Tuple[int, Dict[str, Any]]]] = field(default_factory=dict)

    def trained_seeds(self) -> Set[int]:
        """Every seed of this series a run planned: finished, failed or not finished."""
        return set(self.curves) | set(self.failed) | set(self.unfinished)

    def add_seeds(self, other: "Series") -> None:
        """Take in the seeds of `other`, the same framework and precision from another run of the
        same recipe (join), each with everything stored of it; ValueError for another batch."""
        if (other.framework, other.precision) != (self.framework, self.precision) or other.batch != self.batch:
            raise ValueError(
                "%s %s batch %d cannot take the seeds of %s %s batch %d"
                % (self.framework, self.precision, self.batch, other.framework, other.precision, other.batch)
            )
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, dict):
                mine.update(theirs)
            elif isinstance(mine, list):
                mine.extend(theirs)

    def finals(self) -> Dict[int, acc.AccuracyPoint]:
        out = {}
        for seed, c in self.curves.items():
            last = acc.final(c)
            if last is not None:
                out[seed] = last
        return out


@dataclass
class ModelBlock:
    model: str
    metric: str
    target: float  # the main table's target: the highest declared level
    reference: Optional[str]
    series: List[Series]
    seeds: List[int]
    # the run's own (metric, value) where the report was asked for another target (--target)
    scenario_target: Optional[Tuple[str, float]] = None
    levels: List[float] = field(default_factory=list)  # every declared target level, lowest first
    rule: str = "first"  # which crossing counts (measure.accuracy.RULES): "first" for runs before the protocol
    # series that came from another accuracy run of the same recipe and machine (join): (that run's
    # id, framework, precision, and the seeds it added to a series of this run, () for a whole series)
    joined: List[Tuple[str, str, str, Tuple[int, ...]]] = field(default_factory=list)


@dataclass
class AccuracyReport:
    run_id: str
    scenario: str
    scope: str
    models: List[ModelBlock]
    # published accuracy, time-to-train and stability tables printed beside (published.grids of
    # kind accuracy) and the source they come from
    published: Tuple[Any, ...] = ()
    published_source: str = ""
    joined: Tuple[str, ...] = ()  # the ids of the runs whose cells joined this one's (join)
    # the protocol the run declared before it ran: None for a run stored before it (exploratory)
    protocol: Optional["Protocol"] = None
    floors: Dict[str, Dict[str, float]] = field(default_factory=dict)  # model -> metric -> untrained score
    exploratory: List[str] = field(default_factory=list)  # why some of what is shown is outside the protocol
    place: Optional[str] = None  # the place check's line (the trials' order within each seed's round)
    verdict: Optional[Any] = None  # harness.report.accuracy_verdict.Verdict, read under the protocol

    def title(self) -> str:
        return "%s (run %s%s)" % (
            self.scenario,
            self.run_id,
            "".join(", with run %s" % other for other in self.joined),
        )


@dataclass(frozen=True)
class Protocol:
    """What an accuracy run declared before it ran (its stored scenario and order)."""

    subject: Optional[str]  # the framework judged against every other
    speedup: float  # its claim at every target level
    rule: str  # which crossing counts: stays or end
    order_seed: int  # the seed each seed round's order was drawn from
    look: int  # the look of the sequential plan this run trained (1: accuracy.seeds)
    looks: Tuple[Tuple[int, ...], ...]  # every look's seeds, the first look's first
    alphas: Tuple[float, ...]  # each look's share of the overall two-sided error


PUBLISHED_NOTE = (
    "Printed as published, beside the tables above and not compared with them: another model, "
    "data set, schedule and machine."
)


def parse_target(text: str) -> Tuple[str, Tuple[str, float]]:
    """(model, (metric, value)) of a report-time target `MODEL=METRIC:VALUE`, for example
    `faster_rcnn=bbox_AP:0.5`; ValueError saying what is wrong otherwise."""
    model, eq, rest = text.partition("=")
    metric, colon, value = rest.partition(":")
    if not (eq and colon and model.strip()):
        raise ValueError("--target %r: expected MODEL=METRIC:VALUE, e.g. faster_rcnn=bbox_AP:0.5" % text)
    if metric not in acc.METRICS:
        raise ValueError("--target %r: unknown metric %r (known: %s)" % (text, metric, ", ".join(acc.METRICS)))
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not 0 < number <= 1:
        raise ValueError("--target %r: the value is an AP in (0, 1], got %r" % (text, value))
    return model.strip(), (metric, number)


def scope_of(host: Dict[str, Any], sc: Dict[str, Any], precisions: Optional[List[str]] = None) -> str:
    cpu = (host.get("cpu") or {}).get("model") or "unknown CPU"
    isa = ((host.get("facts") or {}).get("cpu") or {}).get("isa") or []
    threads = (sc.get("env") or {}).get("OMP_NUM_THREADS", "default")
    size = "x".join(str(v) for v in sc.get("input_size") or [])
    a = sc.get("accuracy") or {}
    precision = ", ".join(precisions or (sc.get("matrix") or {}).get("precision") or ["fp32"])
    schedule = "lr %s per image, warmup %s, steps %s" % (
        a.get("lr_per_image"),
        a.get("warmup_iters", 0),
        ",".join(map(str, a.get("lr_steps") or [])) or "none",
    )
    if a.get("clip_grad_norm"):
        schedule += ", gradient norm clipped at %g" % a["clip_grad_norm"]
    if set((sc.get("matrix") or {}).get("model") or []) & set(catalog.TWO_STAGE):
        schedule += ", %d sampled RoIs per image" % a.get("roi_batch_per_image", 512)
    return (
        "%s (%s), input %s, precision %s, batch %s, threads %s, ResNet-%s FPN, %s iterations (%s), val split of %s"
        % (
            cpu,
            " ".join(isa) or "no ISA facts",
            size,
            precision,
            sc.get("batch_per_gpu"),
            threads,
            a.get("depth"),
            a.get("iterations"),
            schedule,
            os.path.basename(str(a.get("data") or "").rstrip("/")),
        )
    )


def from_records(
    run: Any,
    trials: List[Dict[str, Any]],
    curves: Dict[str, List[acc.AccuracyPoint]],
    losses: Dict[str, List[acc.LossPoint]],
    settings: Optional[Dict[str, Tuple[Dict[str, Any], Dict[str, str]]]] = None,
    targets: Optional[Dict[str, Tuple[str, float]]] = None,
    resumes: Optional[Dict[str, List[Tuple[int, int, float]]]] = None,
    loads: Optional[Dict[str, List[Tuple[int, int, float, float, float]]]] = None,
    redos: Optional[Dict[str, List[Tuple[str, Optional[str], Dict[str, Any]]]]] = None,
    codes: Optional[Dict[str, List[Tuple[int, Dict[str, Any]]]]] = None,
) -> AccuracyReport:
    """The report of one accuracy run from what harness.report.build.accuracy read of the store:
    the StoredRun, its accuracy trials, and each trial's checkpoint curve and loss curve by trial key.
    `targets` ({model: (metric, value)}) reads the same curves against other targets than the
    scenario's; the report then names the run's own. `resumes` (trial key -> [(checkpoint
    iteration, first logged iteration, seconds to it)]) names the seeds resumed after an interruption;
    `loads` (trial key -> [(from, to iteration, wall s, other processes' CPU s, steal s)]) the
    checkpoint intervals a seed trained on a shared machine; `redos` (trial key -> [(when, kept
    folder, earlier figures)]) the seeds trained again from the start; `codes` (trial key -> [(iteration
    gone on from, code)]) the detbench code each training program ran."""
    from harness.plan.machine_load import Load

    sc = run.scenario.document
    host = run.host or {}
    a = sc.get("accuracy") or {}
    blocks: Dict[str, ModelBlock] = {}
    by_cell: Dict[Tuple[str, str], Series] = {}
    for trial in trials:
        fw, model, precision = str(trial["cell_key"]).split("/")[:3]
        declared, levels = plan_accuracy.target_levels(
            (a.get("targets") or {}).get(model) or {"metric": "bbox_AP50", "value": 0.5}
        )
        own = (declared, levels[-1])
        metric, value = (targets or {}).get(model, own)
        block = blocks.setdefault(
            model,
            ModelBlock(
                model,
                metric,
                float(value),
                a.get("reference"),
                [],
                # the seeds this run trained (a later look of a sequential plan trains its own)
                sorted({int(t["seed"]) for t in trials}),
                own if (metric, float(value)) != own else None,
                levels if (metric, float(value)) == own else [float(value)],
                str(a.get("reached") or "first"),
            ),
        )
        s = by_cell.get((model, trial["cell_key"]))
        if s is None:
            s = by_cell[(model, trial["cell_key"])] = Series(fw, precision, int(sc.get("batch_per_gpu") or 0))
            block.series.append(s)
        key = str(trial["trial_key"])
        seed = int(trial["seed"])
        if redos and key in redos:
            s.redone[seed] = list(redos[key])
        if trial["status"] in ("pending", "running"):
            s.unfinished.append(seed)
            continue
        if trial["status"] == "failed":
            s.failed[seed] = str(trial["reason"] or "failed")
        s.curves[seed] = curves.get(key, [])
        s.losses[seed] = acc.thin(losses.get(key, []))
        if settings and key in settings:
            s.settings[seed], s.implementation[seed] = settings[key]
        if resumes and key in resumes:
            s.resumed[seed] = list(resumes[key])
        if codes and key in codes:
            s.code[seed] = list(codes[key])
        for start, it, wall, other, steal in (loads or {}).get(key, []):
            load = Load(wall, other, steal)
            if load.shared:
                s.shared.setdefault(seed, []).append((start, it, load))
    return AccuracyReport(run.id, str(run.scenario_name), scope_of(host, sc), [blocks[m] for m in sorted(blocks)])


def join(base: AccuracyReport, other: AccuracyReport, host: Dict[str, Any], sc: Dict[str, Any]) -> None:
    """Add to `base` (whose run stored `host` and scenario `sc`) the cells of `other`, an accuracy run
    of the same recipe on the same machine (the caller checks both): each of its series goes into
    the block of its model, read against that block's target, and is named in the notes; a series
    of a cell `base` has already brings more seeds of it (Series.add_seeds). The scope names every
    precision. ValueError, saying which, for a seed both runs trained (a seed's curve comes from
    one run) or a model the base run did not train."""
    for theirs in other.models:
        block = next((b for b in base.models if b.model == theirs.model), None)
        if block is None:
            raise ValueError(
                "run %s trained %s, which run %s did not: report it on its own"
                % (other.run_id, theirs.model, base.run_id)
            )
        for s in theirs.series:
            mine = next((m for m in block.series if (m.framework, m.precision) == (s.framework, s.precision)), None)
            if mine is None:
                block.series.append(s)
                block.joined.append((other.run_id, s.framework, s.precision, ()))
                continue
            both = sorted(mine.trained_seeds() & s.trained_seeds())
            if both:
                raise ValueError(
                    "%s %s %s seed %s was trained in both run %s and run %s: a seed's curve comes from one run"
                    % (s.framework, theirs.model, s.precision, ", ".join(map(str, both)), base.run_id, other.run_id)
                )
            mine.add_seeds(s)
            block.joined.append((other.run_id, s.framework, s.precision, tuple(sorted(s.trained_seeds()))))
        block.seeds = sorted(set(block.seeds) | set(theirs.seeds))
    base.joined += (other.run_id,)
    precisions = list((sc.get("matrix") or {}).get("precision") or ["fp32"])
    precisions += [j[2] for b in base.models for j in b.joined if j[2] not in precisions]
    base.scope = scope_of(host, sc, list(dict.fromkeys(precisions)))


# --- figures -------------------------------------------------------------------------------------


@dataclass
class Row:
    framework: str
    precision: str
    batch: int
    ap: Optional[acc.Spread]
    ap50: Optional[acc.Spread]
    segm: Optional[acc.Spread]  # segm AP and AP50 of a model with masks (None without)
    segm50: Optional[acc.Spread]
    time_to_train: Optional[acc.Spread]
    time_to_target: Optional[acc.Spread]
    reached: int
    seeds: int
    speedup: Optional[float]
    # where some seed missed the target: per seed its crossing or, for a miss, its training
    # time to its last checkpoint, whose mean is a lower bound on the mean time to target
    time_bound: Optional[acc.Spread] = None
    best_missed: Optional[float] = None  # the best target metric any missing seed reached
    speedup_bound: str = ""  # ">=" or "<=" where the speedup is a bound, not a figure
    from_start: int = 0  # seeds that reached the target by their first checkpoint (Crossing.from_start)


def rows(block: ModelBlock, target: Optional[float] = None, seeds: Optional[Set[int]] = None) -> List[Row]:
    """The main table's rows at `target` (default the block's), over `seeds` (default every seed)."""
    out = []
    level = block.target if target is None else target
    for s in block.series:
        if seeds is not None:
            s = Series(s.framework, s.precision, s.batch, {k: v for k, v in s.curves.items() if k in seeds})
        finals = s.finals()
        curves = [c for c in s.curves.values() if c]
        crossings = [acc.time_to_target(c, block.metric, level, block.rule) for c in curves]
        # per seed its crossing's time or, where it never reaches the target, its training time to
        # its last checkpoint: a lower bound on the time it would take (censored, as survival data is)
        bounds = [
            x.seconds if x else max(c, key=lambda p: p.iteration).train_seconds for c, x in zip(curves, crossings)
        ]
        reached = [x.seconds for x in crossings if x is not None]
        best_of_misses = [acc.best(c, block.metric) for c, x in zip(curves, crossings) if x is None]
        missed = [v for v in best_of_misses if v is not None]
        out.append(
            Row(
                s.framework,
                s.precision,
                s.batch,
                acc.spread([p.bbox_AP for p in finals.values()]),
                acc.spread([p.bbox_AP50 for p in finals.values()]),
                acc.spread([p.segm_AP for p in finals.values() if p.segm_AP is not None]),
                acc.spread([p.segm_AP50 for p in finals.values() if p.segm_AP50 is not None]),
                acc.spread([p.train_seconds for p in finals.values()]),
                acc.spread(reached) if len(reached) == len(s.curves) and reached else None,
                len(reached),
                len(s.curves),
                None,
                acc.spread(bounds) if len(reached) < len(s.curves) == len(curves) else None,
                max(missed) if missed else None,
                from_start=sum(1 for x in crossings if x is not None and x.from_start),
            )
        )
    for r in out:
        ref = reference_row(block, out, r.precision)
        if ref is None:
            continue
        if ref.time_to_target and r.time_to_target:
            r.speedup = acc.speedup(ref.time_to_target.mean, r.time_to_target.mean)
        elif ref.time_bound and r.time_to_target:  # the reference's time is at least its bound
            r.speedup, r.speedup_bound = acc.speedup(ref.time_bound.mean, r.time_to_target.mean), ">="
        elif ref.time_to_target and r.time_bound:
            r.speedup, r.speedup_bound = acc.speedup(ref.time_to_target.mean, r.time_bound.mean), "<="
    return out


def _missed(r: Row, metric: str) -> str:
    """The time-to-target cell of a row some seed of which missed the target."""
    word = "not reached" if r.reached == 0 else "not reached in %d of %d seeds" % (r.seeds - r.reached, r.seeds)
    if r.best_missed is not None:
        word += " (best %s %.3f)" % (metric.replace("_", " "), r.best_missed)
    if r.time_bound is not None:
        word += ", mean >= %.1f s" % r.time_bound.mean
    return word


def _num(spread: Optional[acc.Spread], fmt: str = "%.3f") -> str:
    if spread is None:
        return "-"
    if spread.std is None:
        return fmt % spread.mean
    return (fmt + " +- " + fmt) % (spread.mean, spread.std)


def _seconds(spread: Optional[acc.Spread]) -> str:
    return "-" if spread is None else _num(spread, "%.1f") + " s"


def main_table(block: ModelBlock) -> Tuple[List[str], List[List[str]]]:
    """The seed README's table; a model with masks (any row scored segm) gets SEGM beside BBOX,
    each as mAP (AP50) means over seeds, whatever metric the target is on."""
    head = ["Framework", "Precision", "Batch", "BBOX mAP (AP50)", "Time to train", "Time to target", "Speedup"]
    table = rows(block)
    masks = any(r.segm is not None for r in table)
    if masks:
        head.insert(4, "SEGM mAP (AP50)")
    body = []
    for r in table:
        cells = [
            r.framework,
            r.precision,
            str(r.batch),
            "-" if r.ap is None else "%s (%s)" % (_num(r.ap), _num(r.ap50)),
        ]
        if masks:
            cells.append("-" if r.segm is None else "%s (%s)" % (_num(r.segm), _num(r.segm50)))
        ttt = _seconds(r.time_to_target) if r.time_to_target else _missed(r, block.metric)
        if r.from_start:
            ttt += " (%d of %d seeds by the first checkpoint)" % (r.from_start, r.seeds)
        cells += [
            _seconds(r.time_to_train),
            ttt,
            "-" if r.speedup is None else "%s%.2fx" % (r.speedup_bound, r.speedup),
        ]
        body.append(cells)
    return head, body


def stability_table(block: ModelBlock) -> Tuple[List[str], List[List[str]]]:
    seeds = block.seeds
    head = (
        ["Framework", "Precision"] + ["Seed %d" % (i + 1) for i in range(len(seeds))] + ["Mean", "Standard deviation"]
    )
    body = []
    for s in block.series:
        finals = s.finals()
        values = [finals[seed].metric(block.metric) if seed in finals else None for seed in seeds]
        sp = acc.spread([v for v in values if v is not None])
        body.append(
            [s.framework, s.precision]
            + ["-" if v is None else "%.3f" % v for v in values]
            + ["-" if sp is None else "%.3f" % sp.mean, "-" if sp is None or sp.std is None else "%.3f" % sp.std]
        )
    return head, body


def reference_row(block: ModelBlock, table: List[Row], precision: str = "fp32") -> Optional[Row]:
    """The row a row of `precision` takes its speedup against: the reference framework's row of that
    precision where it ran it, else its fp32 row, else its first."""
    named = [r for r in table if r.framework == block.reference]
    return (
        next((r for r in named if r.precision == precision), None)
        or next((r for r in named if r.precision == "fp32"), None)
        or next(iter(named), None)
    )


def speedup_bounds(block: ModelBlock) -> List[str]:
    """Per row but the reference's own, where both it and the reference reached the target in two
    seeds or more (every seed): its speedup as welch.ratio of the reference's times to this one's."""
    table = rows(block)
    out = []
    for r in table:
        ref = reference_row(block, table, r.precision)
        if ref is None or ref.time_to_target is None or r is ref or r.time_to_target is None:
            continue
        x = welch.ratio(ref.time_to_target.values, r.time_to_target.values)
        if x is not None:
            out.append(
                "%s %s %.2fx [%.2f, %.2f]%s"
                % (r.framework, r.precision, x.estimate, x.low, x.high, ", parity" if x.holds(1.0) else "")
            )
    return out


RULE_WORDS = {
    "first": "that reaches it first (no rule was declared)",
    "stays": "after which the metric stays at or above it at every later checkpoint",
    "end": "that reaches it first, counted where the last checkpoint is at or above it",
}


def notes(block: ModelBlock) -> List[str]:
    ref = block.reference or "none named"
    out = [
        "Target: %s >= %g%s. Time to target is interpolated linearly between the two checkpoints around the "
        "crossing %s (the AP between checkpoints is not measured); time to train runs to the last "
        "checkpoint; both are training wall time, evaluation excluded; mean +- sample standard deviation "
        "over seeds. Speedup: reference framework's time to target / this one's, of the same precision where "
        "it ran it, else its fp32 (reference: %s)."
        % (
            block.metric,
            block.target,
            ""
            if len(block.levels) < 2
            else " (the highest of the declared levels %s)" % ", ".join("%g" % v for v in block.levels),
            RULE_WORDS.get(block.rule, block.rule),
            ref,
        )
    ]
    if block.scenario_target:
        out.append("The target was given at report time; the run's scenario set %s >= %g." % block.scenario_target)
    bounds = speedup_bounds(block)
    if bounds:
        out.append(
            "Speedup with its bound: the reference's time to target / this one's as a ratio of geometric means "
            'over seeds, with Welch\'s 95%% interval on the logarithms ("parity" where it holds 1x): %s.'
            % "; ".join(bounds)
        )
    for run_id in dict.fromkeys(j[0] for j in block.joined):
        cells = [
            "%s %s%s" % (fw, p, " seed %s" % ", ".join(map(str, seeds)) if seeds else "")
            for r, fw, p, seeds in block.joined
            if r == run_id
        ]
        more = any(seeds for r, _, _, seeds in block.joined if r == run_id)
        out.append(
            "From accuracy run %s, trained with this run's recipe (data, weights, schedule, input, batch, threads) "
            "on the same machine and joined to this report: %s%s. Its seeds trained at other hours than this "
            "run's, as this run's seeds did one after another."
            % (run_id, ", ".join(cells), " (more seeds of this run's cells)" if more else "")
        )
    early = [
        "%s %s in %d of %d seeds" % (r.framework, r.precision, r.from_start, r.seeds)
        for r in rows(block)
        if r.from_start
    ]
    if early:
        out.append(
            "Reached by the first checkpoint (%s): there the time to target is read off the straight line from "
            "the start (0 s, AP 0) to that checkpoint, an assumption, not a crossing between two scored "
            "checkpoints; a higher target or an earlier first checkpoint (accuracy.eval_every) measures it."
            % "; ".join(early)
        )
    unfinished = [
        "%s %s seed %s" % (s.framework, s.precision, ", ".join(str(x) for x in sorted(s.unfinished)))
        for s in block.series
        if s.unfinished
    ]
    if unfinished:
        out.append(
            "Not finished: %s. Every figure is over the finished seeds; `detbench accuracy run --resume` goes on "
            "with the rest." % "; ".join(unfinished)
        )
    resumed = [
        "%s %s seed %d after iteration %d (%.1f s from the resumed program's start to its first logged iteration, %d)"
        % (s.framework, s.precision, seed, it, startup, first)
        for s in block.series
        for seed, points in sorted(s.resumed.items())
        if seed in s.curves
        for it, first, startup in points
    ]
    shared = [
        "%s %s seed %d, iterations %d to %d: %s" % (s.framework, s.precision, seed, start, it, load.describe())
        for s in block.series
        for seed, spans in sorted(s.shared.items())
        if seed in s.curves
        for start, it, load in spans
    ]
    if shared:
        out.append(
            "Trained on a shared machine: %s. Times over those iterations are longer than a quiet machine's, by "
            "an amount no figure here can say; train the seed again on a quiet machine for a figure to compare "
            "(`detbench accuracy run --resume RUN --redo TRIAL`)." % "; ".join(shared)
        )
    if resumed:
        out.append(
            "Resumed from a checkpoint: %s. The times of the later checkpoints hold one more start-up of the "
            "training program than an uninterrupted seed's, less than the seconds given (they also hold the "
            "iterations up to the first logged one); the iterations the interruption lost after the checkpoint "
            "are not counted." % "; ".join(resumed)
        )
    redone = [
        "%s %s seed %d at %s (%s)" % (s.framework, s.precision, seed, _to_second(when), _earlier(previous, kept))
        for s in block.series
        for seed, redos in sorted(s.redone.items())
        for when, kept, previous in redos
    ]
    if redone:
        out.append(
            "Trained again from the start: %s. Every figure here is the last training's; the earlier one's "
            "figures are given only in this note." % "; ".join(redone)
        )
    for s in block.series:
        for seed, why in sorted(s.failed.items()):
            out.append("%s %s seed %d failed: %s" % (s.framework, s.precision, seed, why))
    return out + code_notes(block) + settings_notes(block) + implementation_notes(block)


def _to_second(when: str) -> str:
    """A stored time (to the microsecond) as the report prints it: to the second."""
    head, dot, rest = when.partition(".")
    return head + rest.lstrip("0123456789") if dot else when


def code_notes(block: ModelBlock) -> List[str]:
    """The detbench code each training program of the model's finished seeds ran
    (harness.plan.coderev), named where they did not all run the same (another commit, or
    uncommitted changes beside a clean checkout); nothing where they did."""
    from harness.plan import coderev

    trainings = [
        (s, seed, it, code)
        for s in block.series
        for seed, programs in sorted(s.code.items())
        if seed in s.curves
        for it, code in programs
    ]
    said = coderev.named_where_differing({i: t[3] for i, t in enumerate(trainings)})
    if not said:
        return []
    return [
        "Trained with %d revisions of detbench's code, so its figures may not compare: %s."
        % (
            len(set(said.values())),
            "; ".join(
                "%s %s seed %d %s %s"
                % (s.framework, s.precision, seed, "from the start" if it == 0 else "from iteration %d" % it, said[i])
                for i, (s, seed, it, _) in enumerate(trainings)
                if i in said
            ),
        )
    ]


def _earlier(previous: Dict[str, Any], kept: Optional[str]) -> str:
    """What a redone seed's earlier training had reached, and where its files went."""
    if previous.get("iteration") is not None:
        said = "earlier training's last scored checkpoint: iteration %d at %.1f s, bbox AP %.3f (AP50 %.3f)" % (
            previous["iteration"],
            previous["train_seconds"],
            previous["bbox_AP"],
            previous["bbox_AP50"],
        )
        if previous.get("segm_AP") is not None:
            said += ", segm AP %.3f (AP50 %.3f)" % (previous["segm_AP"], previous["segm_AP50"] or 0.0)
    else:
        said = "earlier training %s%s, nothing scored" % (
            previous.get("status") or "stopped",
            ": %s" % previous["reason"] if previous.get("reason") else "",
        )
    return said + ("; its files kept as %s" % os.path.basename(kept) if kept else "")


def settings_notes(block: ModelBlock) -> List[str]:
    """Per precision, the settings (as each framework's training program logged them) in which
    the frameworks differ, or the seeds of one framework differ; a line saying which frameworks
    logged none, since nothing of theirs could be compared."""
    out = []
    for precision in sorted({s.precision for s in block.series}):
        same = [s for s in block.series if s.precision == precision]
        per_fw = {s.framework: list(s.settings.values()) for s in same if s.settings}
        if len(per_fw) > 1 or any(len(v) > 1 for v in per_fw.values()):
            out += [
                "Not like for like, %s %s: %s differs (%s)." % (_title(block.model), precision, k, said)
                for k, said in measured.settings_differences(per_fw)
            ]
            out += measured.unshared_lines("%s %s" % (_title(block.model), precision), per_fw)
        silent = sorted(s.framework for s in same if not s.settings)
        if silent and len(same) > 1:
            out.append(
                "%s %s: no settings line from %s: its settings are not compared."
                % (_title(block.model), precision, ", ".join(silent))
            )
    return out


def implementation_notes(block: ModelBlock) -> List[str]:
    """How each framework ran the parts that decide its speed (and pasted Mask R-CNN's masks): each
    part as the first seed whose line names it says, with any seed whose line says otherwise."""
    out = []
    for s in block.series:
        parts = []
        for part, word in measured.IMPLEMENTATION_WORDS:
            said = [
                (seed, s.implementation[seed][part])
                for seed in sorted(s.implementation)
                if (s.implementation[seed] or {}).get(part)
            ]
            if said:
                others = ["seed %d: %s" % (seed, how) for seed, how in said[1:] if how != said[0][1]]
                parts.append("%s: %s%s" % (word, said[0][1], " (%s)" % "; ".join(others) if others else ""))
        if parts:
            out.append("Implementation, %s %s: %s." % (s.framework, s.precision, "; ".join(parts)))
    return out


def _title(model: str) -> str:
    return str(catalog.MODELS.get(model) or model)


def protocol_line(report: AccuracyReport) -> str:
    """What the run declared before it ran, or that it declared nothing."""
    p = report.protocol
    if p is None:
        return (
            "No declared protocol: exploratory. The run predates it (its trials ran in a fixed order, its "
            "targets and reached rule were not declared under it, no noise floor was measured); its figures "
            "are shown, its checks are no verdict."
        )
    looks = "; ".join(
        "look %d: seeds %s (alpha %.4f)" % (i + 1, ",".join(map(str, seeds)), alpha)
        for i, (seeds, alpha) in enumerate(zip(p.looks, p.alphas))
    )
    return (
        "Protocol declared before the run: subject %s, claim %.2fx at every target level; a level counts as "
        "reached %s; %s; each seed's round ran in the order drawn from seed %d%s."
        % (
            p.subject or "none",
            p.speedup,
            "where the metric stays at or above it at every later checkpoint"
            if p.rule == "stays"
            else "where the last checkpoint is at or above it",
            looks,
            p.order_seed,
            "" if p.look == 1 else " (this run trained look %d)" % p.look,
        )
    )


def profile_sections(report: AccuracyReport, block: ModelBlock) -> List[Tuple[str, Tuple[List[str], List[List[str]]]]]:
    """The speedup profile of the block's subject, where it has a rival."""
    from harness.report import accuracy_verdict

    subject = (report.protocol.subject if report.protocol else None) or "detbench-trainer"
    if not accuracy_verdict.pairs(block, subject):
        return []
    return [
        (
            "%s: speedup profile of %s over each rival (their time / its time; Welch 95%%)"
            % (_title(block.model), subject),
            accuracy_verdict.profile(block, subject),
        )
    ]


def floor_note(report: AccuracyReport, block: ModelBlock) -> List[str]:
    figures = report.floors.get(block.model)
    if not figures:
        return ["Noise floor: not measured for this run (an untrained detector is taken to score 0)."]
    return [
        "Noise floor: the untrained shared weights score %s on the val split (iteration 0, the shared "
        "COCOeval); a target at or below it was refused, and a model no framework ends above it is not judged."
        % ", ".join("%s %.3f" % (k, v) for k, v in sorted(figures.items()))
    ]


def render_markdown(report: AccuracyReport) -> str:
    from harness.report import accuracy_verdict

    lines = ["# Time to accuracy: %s" % report.title(), ""]
    if report.verdict is not None:
        lines += ["**Time to accuracy: %s**" % report.verdict.headline(), ""]
    lines += ["Scope: %s" % report.scope, "", protocol_line(report), ""]
    for block in report.models:
        sections = [
            ("%s: time to %s %g" % (_title(block.model), block.metric, block.target), main_table(block)),
            ("%s: stability of final %s over seeds" % (_title(block.model), block.metric), stability_table(block)),
        ] + profile_sections(report, block)
        for title, (head, body) in sections:
            lines += ["## " + title, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in body]
            lines.append("")
        lines += ["- " + n for n in notes(block) + floor_note(report, block)] + [""]
    lines += ["- " + n for n in ([report.place] if report.place else []) + report.exploratory]
    if report.verdict is not None:
        lines += ["", "## Verdict", ""] + accuracy_verdict.lines(report.verdict) + [""]
    if report.published:
        from harness.report.markdown import grid_text

        lines += ["## Published: %s" % report.published_source, "", PUBLISHED_NOTE, ""]
        lines += [grid_text(*g) for g in report.published]
    return "\n".join(lines)


def _curves(
    block: ModelBlock,
    scope: str,
    what: str,
    xlabel: str,
    ylabel: str,
    points: Callable[[Series], Dict[int, List[Tuple[float, float]]]],
    start: Optional[Tuple[float, float]] = None,
    **style: Any,
) -> Any:
    """One line per framework, precision and seed (one legend entry per framework and precision);
    with `start`, each line is joined to that point by a thin dotted, unmarked one (a point assumed,
    not measured)."""
    from harness.report import plots

    fig = plots._figure(3.0)
    ax = fig.add_subplot(1, 1, 1)
    for i, s in enumerate(block.series):
        color = plots.PALETTE[i % len(plots.PALETTE)]
        for n, (_seed, pts) in enumerate(sorted(points(s).items())):
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                color=color,
                label="%s %s" % (s.framework, s.precision) if n == 0 else None,
                **style,
            )
            if start is not None and pts:
                ax.plot([start[0], pts[0][0]], [start[1], pts[0][1]], color=color, linestyle=":", linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    # the scope wrapped to the plot's width: one long line would widen the image past the page
    ax.set_title("%s: %s\n%s" % (_title(block.model), what, textwrap.fill(scope, 100)), fontsize=8)
    plots._style(ax)
    return fig, ax


def scored_points(curve: List[acc.AccuracyPoint], metric: str) -> List[Tuple[float, float]]:
    """(training seconds, metric) of the checkpoints that scored `metric`; one that did not is left
    out, not drawn at 0."""
    return [(p.train_seconds, v) for p in curve for v in [p.metric(metric)] if v is not None]


def ap_time_figure(block: ModelBlock, scope: str) -> Any:
    def points(s: Series) -> Dict[int, List[Tuple[float, float]]]:
        return {seed: scored_points(curve, block.metric) for seed, curve in s.curves.items()}

    # from the assumed start (0 s, AP 0) of time_to_target, which was not scored
    fig, ax = _curves(
        block,
        scope,
        "%s vs time" % block.metric,
        "training wall time, s (eval excluded)",
        block.metric,
        points,
        start=(0.0, 0.0),
        linewidth=1.2,
        marker="o",
        markersize=3,
    )
    ax.axhline(block.target, color="#888888", linestyle="--", linewidth=0.8, label="target")
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def loss_figure(block: ModelBlock, scope: str) -> Any:
    def points(s: Series) -> Dict[int, List[Tuple[float, float]]]:
        return {seed: [(float(p.iteration), p.loss) for p in losses] for seed, losses in s.losses.items()}

    fig, ax = _curves(block, scope, "loss vs iteration", "iteration", "training loss", points, linewidth=0.8, alpha=0.8)
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Time to accuracy: {{ r.scenario }}</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child{text-align:left}
.scope{color:#555}img{max-width:100%;height:auto}</style></head><body>
<h1>Time to accuracy: {{ r.title() }}</h1>
{% if headline %}<p><strong>Time to accuracy: {{ headline }}</strong></p>{% endif %}
<p class="scope">Scope: {{ r.scope }}</p>
<p>{{ protocol }}</p>
{% for b in blocks %}
<h2>{{ b.title }}</h2>
{% for t in b.tables %}<h3>{{ t.title }}</h3><p class="scope">{{ r.scope }}</p>
<table><tr>{% for h in t.head %}<th>{{ h }}</th>{% endfor %}</tr>
{% for row in t.body %}<tr>{% for c in row %}<td>{{ c }}</td>{% endfor %}</tr>{% endfor %}</table>
{% endfor %}
<ul>{% for n in b.notes %}<li>{{ n }}</li>{% endfor %}</ul>
{% for img in b.images %}<p><img alt="{{ img.alt }}" src="{{ img.src }}"></p>{% endfor %}
{% endfor %}
<ul>{% for n in tail %}<li>{{ n }}</li>{% endfor %}</ul>
{% if checks %}<h2>Verdict</h2><ul>{% for n in checks %}<li>{{ n }}</li>{% endfor %}</ul>{% endif %}
{% if r.published %}<h2>Published: {{ r.published_source }}</h2><p>{{ published_note }}</p>
{% for title, head, body, gnotes in r.published %}<h3>{{ title }}</h3>
<table><tr>{% for h in head %}<th>{{ h }}</th>{% endfor %}</tr>
{% for row in body %}<tr>{% for c in row %}<td>{{ c }}</td>{% endfor %}</tr>{% endfor %}</table>
<ul>{% for n in gnotes %}<li>{{ n }}</li>{% endfor %}</ul>
{% endfor %}{% endif %}
</body></html>
"""


def render_html(report: AccuracyReport, figures: bool = True) -> str:
    import jinja2

    from harness.report import html as html_report

    blocks = []
    for block in report.models:
        images = []
        if figures:
            images = [
                {"alt": "%s vs time" % block.metric, "src": html_report.image(ap_time_figure(block, report.scope))},
                {"alt": "loss vs iteration", "src": html_report.image(loss_figure(block, report.scope))},
            ]
        head, body = main_table(block)
        shead, sbody = stability_table(block)
        blocks.append(
            {
                "title": _title(block.model),
                "notes": notes(block) + floor_note(report, block),
                "images": images,
                "tables": [
                    {"title": "Time to %s %g" % (block.metric, block.target), "head": head, "body": body},
                    {"title": "Stability of final %s over seeds" % block.metric, "head": shead, "body": sbody},
                ]
                + [{"title": t, "head": h, "body": b} for t, (h, b) in profile_sections(report, block)],
            }
        )
    from harness.report import accuracy_verdict

    verdict = report.verdict
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return str(
        env.from_string(_PAGE).render(
            r=report,
            blocks=blocks,
            published_note=PUBLISHED_NOTE,
            headline=verdict.headline() if verdict else "",
            protocol=protocol_line(report),
            tail=([report.place] if report.place else []) + report.exploratory,
            checks=[x[2:] for x in accuracy_verdict.lines(verdict) if x.startswith("- ")] if verdict else [],
        )
    )


def by_cell(block: Optional[ModelBlock]) -> Dict[str, List[List[acc.AccuracyPoint]]]:
    if block is None:
        return {}
    return {"%s/%s/%s" % (s.framework, block.model, s.precision): list(s.curves.values()) for s in block.series}
