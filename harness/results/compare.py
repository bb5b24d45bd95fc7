"""Baseline against candidate: one verdict per cell, and the exit code of a CI gate.

A regression needs an effect AND evidence (METHODOLOGY.md): the candidate's median
throughput is at least `threshold` below the baseline's, and a one-sided Mann-Whitney U
test on the per-repeat throughputs gives p < alpha. Inference cells can be judged on a
latency figure instead (`metric`: "mean" or a percentile such as "p95"), where higher is
worse: a regression is then a median latency at least `threshold` above the baseline's. One
of the two alone is a "possible regression": reported, never failing. An improvement is the mirror image. Cells whose
settings or host hardware differ are "not comparable" and name the keys that differ; a
changed instruction set names each extension that changed ("avx512_bf16: baseline no,
candidate yes"), and a host record that lists no instruction set (an fp1 fingerprint) is
never taken for the same machine as one that does.
"""

import re
from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from harness.results import significance
from harness.measure import stats
from harness.errors import UserError

REGRESSION = "regression"
POSSIBLE = "possible regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
MISSING_BASELINE = "missing in baseline"
MISSING_CANDIDATE = "missing in candidate"
NOT_COMPARABLE = "not comparable"
VERDICTS = (REGRESSION, POSSIBLE, IMPROVEMENT, UNCHANGED, MISSING_BASELINE, MISSING_CANDIDATE, NOT_COMPARABLE)

ESTIMATORS = {"reported": "throughput", "observed": "observed"}
SENTINEL = "calibrate"  # a framework whose true speed never changes (scenarios/nightly.yaml)
# host fingerprint keys that change what a throughput means; others (os, driver, memory)
# are reported as notes but do not block a comparison
HOST_KEYS = ("cpu.model", "cpu.sockets", "cpu.cores", "cpu.threads", "gpus.model", "gpus.count", "gpus.memory_gb")
HOST_NOTE_KEYS = ("memory_gb", "os", "software.driver", "software.cuda", "software.cudnn", "software.nccl")


THROUGHPUT = "throughput"
LATENCY_METRIC = re.compile(r"^(mean|p(?:[1-9][0-9]?(?:\.[0-9]+)?|0\.[0-9]*[1-9]))$")


@dataclass(frozen=True)
class Rule:
    threshold: float = 0.05
    alpha: float = 0.01
    estimator: str = "reported"
    ignore_settings: Tuple[str, ...] = ()
    strict: bool = False  # also fail on cells missing from the candidate or not comparable
    metric: str = THROUGHPUT  # or an inference latency: "mean", "p95", "p99", ...

    @property
    def latency(self) -> bool:
        """Whether the rule judges a latency (lower is better) rather than throughput."""
        return self.metric != THROUGHPUT

    def metric_text(self) -> str:
        """What the rule judges, in words ("reported throughput", "99% latency")."""
        if not self.latency:
            return "%s throughput" % self.estimator
        return "mean latency" if self.metric == "mean" else "%s%% latency" % self.metric[1:]

    def check(self) -> None:
        """UserError naming the first option out of its range."""
        if not 0 < self.threshold < 1:
            raise UserError("--threshold must lie between 0 and 1 (a fraction: 0.05 is 5%%), got %g" % self.threshold)
        if not 0 < self.alpha < 1:
            raise UserError("--alpha must lie between 0 and 1, got %g" % self.alpha)
        if self.estimator not in ESTIMATORS:
            raise UserError("--estimator must be one of %s" % ", ".join(ESTIMATORS))
        if self.metric != THROUGHPUT and not LATENCY_METRIC.match(self.metric):
            raise UserError(
                "--metric is throughput, mean or a latency percentile such as p95 "
                "(between 0 and 100), got %r" % self.metric
            )
        if self.metric != THROUGHPUT and self.estimator != "reported":
            raise UserError(
                "--estimator observed judges throughput only; a latency --metric reads each batch's own time"
            )


@dataclass
class CellResult:
    key: str
    verdict: str
    baseline: List[float] = field(default_factory=list)
    candidate: List[float] = field(default_factory=list)
    baseline_median: Optional[float] = None
    candidate_median: Optional[float] = None
    ratio: Optional[float] = None
    ci: Optional[Tuple[float, float]] = None
    p_drop: Optional[float] = None  # one-sided p: the candidate is worse (slower)
    p_gain: Optional[float] = None  # one-sided p: the candidate is better (faster)
    notes: List[str] = field(default_factory=list)
    ignored: List[str] = field(default_factory=list)  # settings that differ but were ignored as asked
    lower_is_better: bool = False  # a latency metric: a ratio above 1 is a slowdown

    @property
    def p(self) -> Optional[float]:
        """The p-value of the direction the medians moved."""
        if self.ratio is None:
            return None
        worse = self.ratio > 1 if self.lower_is_better else self.ratio < 1
        return self.p_drop if worse else self.p_gain


@dataclass
class Comparison:
    baseline_run: str
    candidate_run: str
    rule: Rule
    cells: List[CellResult]
    notes: List[str] = field(default_factory=list)

    def count(self, verdict: str) -> int:
        """How many cells got this verdict."""
        return sum(1 for c in self.cells if c.verdict == verdict)

    @property
    def regressed(self) -> bool:
        """Whether any cell regressed."""
        return self.count(REGRESSION) > 0

    def exit_code(self, strict: Optional[bool] = None) -> int:
        """1 where a cell regressed (or, strict, is missing or not comparable), else 0."""
        strict = self.rule.strict if strict is None else strict
        if self.regressed:
            return 1
        if strict and any(c.verdict in (MISSING_CANDIDATE, NOT_COMPARABLE) for c in self.cells):
            return 1
        return 0


# ------------------------------------------------------------------ the decision rule

Decision = Tuple[str, float, float, float, float, float]  # verdict, medians, ratio, p_drop, p_gain
Side = Mapping[str, Any]  # one side of a comparison, as harness.results.baseline writes it


def decide(baseline: Sequence[float], candidate: Sequence[float], rule: Rule) -> Decision:
    """Verdict for two samples of per-repeat figures: throughputs (higher is better), or, with a
    latency metric, latencies in ms (lower is better). The ratio is candidate / baseline either way."""
    b_med, c_med = stats.median(baseline), stats.median(candidate)
    ratio = c_med / b_med
    worse, better = (candidate, baseline) if rule.latency else (baseline, candidate)
    p_drop = significance.mann_whitney_u(worse, better, significance.GREATER).p
    p_gain = significance.mann_whitney_u(better, worse, significance.GREATER).p
    change = ratio - 1.0 if rule.latency else 1.0 - ratio  # > 0: the candidate is worse by this fraction
    big_drop = change >= rule.threshold
    big_gain = -change >= rule.threshold
    if big_drop and p_drop < rule.alpha:
        verdict = REGRESSION
    elif big_drop or p_drop < rule.alpha:
        verdict = POSSIBLE
    elif big_gain and p_gain < rule.alpha:
        verdict = IMPROVEMENT
    else:
        verdict = UNCHANGED
    return verdict, b_med, c_med, ratio, p_drop, p_gain


def _values(cell: Mapping[str, Any], rule: Rule) -> List[float]:
    """The per-repeat figures the rule judges in one side's cell."""
    if rule.latency:
        return list(cell.get("latency_ms", {}).get(rule.metric, []))
    return list(cell.get(ESTIMATORS[rule.estimator], []))


def compare_cell(
    key: str,
    base_cell: Optional[Mapping[str, Any]],
    cand_cell: Optional[Mapping[str, Any]],
    rule: Rule,
    host_diff: Sequence[str],
) -> CellResult:
    """The verdict of one cell (either side None: missing there), with its notes."""
    if base_cell is None or cand_cell is None:
        present = cand_cell if base_cell is None else base_cell
        verdict = MISSING_BASELINE if base_cell is None else MISSING_CANDIDATE
        return CellResult(
            key,
            verdict,
            notes=[
                "only the %s has this cell (%d repeats)"
                % ("candidate" if base_cell is None else "baseline", len(_values(present or {}, rule)))
            ],
        )
    differ = settings_diff(base_cell.get("settings", {}), cand_cell.get("settings", {}))
    ignored = [k for k in differ if k in rule.ignore_settings]
    blocking = [k for k in differ if k not in rule.ignore_settings]
    b, c = _values(base_cell, rule), _values(cand_cell, rule)
    result = CellResult(key, UNCHANGED, baseline=b, candidate=c, ignored=ignored, lower_is_better=rule.latency)
    if ignored:
        result.notes.append(
            "settings differ but ignored as asked: " + _diff_text(ignored, base_cell["settings"], cand_cell["settings"])
        )
    if blocking or host_diff:
        result.verdict = NOT_COMPARABLE
        if blocking:
            result.notes.append(
                "settings differ: " + _diff_text(blocking, base_cell["settings"], cand_cell["settings"])
            )
        if host_diff:
            result.notes.append("host differs: " + "; ".join(host_diff))
    for side, cell, values in (("baseline", base_cell, b), ("candidate", cand_cell, c)):
        if cell.get("failed"):
            result.notes.append("%s: %d failed trials" % (side, cell["failed"]))
        if cell.get("unfinished"):
            result.notes.append("%s: %d trials never finished (resume the run?)" % (side, cell["unfinished"]))
        if not values:
            result.verdict = MISSING_BASELINE if side == "baseline" else MISSING_CANDIDATE
            result.notes.append(
                "%s has no finished repeats (%s)"
                % (
                    side,
                    "%s: not an inference cell, or too few batches for it" % rule.metric_text()
                    if rule.latency
                    else "%s estimator" % rule.estimator,
                )
            )
    if result.verdict in (MISSING_BASELINE, MISSING_CANDIDATE):
        return result
    verdict, result.baseline_median, result.candidate_median, result.ratio, result.p_drop, result.p_gain = decide(
        b, c, rule
    )
    result.ci = significance.bootstrap_ratio_ci(b, c)
    if result.verdict != NOT_COMPARABLE:
        result.verdict = verdict
    if significance.smallest_p(len(b), len(c)) >= rule.alpha:
        result.notes.append("%d vs %d repeats can never give p < %g; run more repeats" % (len(b), len(c), rule.alpha))
    return result


def compare(baseline: Side, candidate: Side, rule: Rule = Rule()) -> Comparison:
    """Compare two sides (dicts from harness.results.baseline) cell by cell."""
    rule.check()
    hard, soft = host_diff(baseline.get("host", {}), candidate.get("host", {}))
    keys = sorted(set(baseline["cells"]) | set(candidate["cells"]))
    cells = [compare_cell(k, baseline["cells"].get(k), candidate["cells"].get(k), rule, hard) for k in keys]
    notes = list(baseline.get("notes", [])) + list(candidate.get("notes", []))
    notes += host_notes(baseline.get("host", {}), candidate.get("host", {}), hard)
    notes += ["host differs (not blocking): %s" % "; ".join(soft)] if soft else []
    notes += code_notes(baseline.get("host", {}), candidate.get("host", {}))
    moved = [
        c.key
        for c in cells
        if c.key.startswith(SENTINEL + "/") and c.verdict in (REGRESSION, POSSIBLE) and not c.ignored
    ]  # a sentinel slowed on purpose (its iteration_ms) says nothing
    if moved:
        notes.append(
            "the calibration sentinel %s slowed down too: its true speed is fixed, so suspect the "
            "machine or the harness before the code" % ", ".join(moved)
        )
    return Comparison(
        baseline.get("run", {}).get("id", "?"), candidate.get("run", {}).get("id", "?"), rule, cells, notes
    )


# ------------------------------------------------------------------ settings and host


def settings_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> List[str]:
    """Sorted keys whose values differ (a key present on one side only differs too)."""
    return sorted(k for k in set(a) | set(b) if a.get(k, _ABSENT) != b.get(k, _ABSENT))


_ABSENT = object()


def _show(value: object) -> str:
    return "(absent)" if value is _ABSENT else repr(value)


def _diff_text(keys: Sequence[str], a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    return ", ".join("%s %s -> %s" % (k, _show(a.get(k, _ABSENT)), _show(b.get(k, _ABSENT))) for k in keys)


def _get(tree: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree


def host_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> Tuple[List[str], List[str]]:
    """(blocking differences, other differences) between two runs' host records.

    Where both record the raw host facts, the blocking differences are those of the facts the
    machine fingerprint hashes (harness/plan/fingerprint.py: CPU and its instruction set, NUMA,
    memory, kernel, GPUs, driver, links), each instruction-set extension named with both sides;
    a record that lists no instruction set against one that does is a difference of its own
    (an fp1 fingerprint cannot show the same CPU). Older records without facts fall back to
    the platform fields in HOST_KEYS.
    """
    if not a or not b:
        return [], []
    from harness.plan import fingerprint

    fa, fb = a.get("facts"), b.get("facts")
    if isinstance(fa, dict) and isinstance(fb, dict):
        hard = fingerprint.differences(fa, fb)
    else:
        hard = ["%s %r -> %r" % (k, _get(a, k), _get(b, k)) for k in HOST_KEYS if _get(a, k) != _get(b, k)]
        listed = [isinstance(f, dict) and fingerprint.records_isa(f) for f in (fa, fb)]
        if any(listed):
            hard.append("the %s's host record %s" % ("candidate" if listed[0] else "baseline", fingerprint.NO_ISA))
    soft = ["%s %r -> %r" % (k, _get(a, k), _get(b, k)) for k in HOST_NOTE_KEYS if _get(a, k) != _get(b, k)]
    for name, host in (("baseline", a), ("candidate", b)):
        if host.get("forced"):
            soft.append("the %s run was forced on a host that is not %s" % (name, ", ".join(sorted(host["forced"]))))
    return hard, soft


def host_notes(a: Mapping[str, Any], b: Mapping[str, Any], hard: Sequence[str]) -> List[str]:
    """The comparison's notes on its two machines: that they differ (with both fingerprints), or
    that neither record can show which instruction set its CPU had."""
    if not a or not b:
        return []
    from harness.plan import fingerprint

    prints = [h.get("fingerprint") or "no fingerprint" for h in (a, b)]
    if hard:
        unproven = all(fingerprint.NO_ISA in line for line in hard)
        return [
            "not comparable: the runs %s (baseline %s, candidate %s), so no cell's speed is judged"
            % (
                ("may not have run on the same kind of machine" if unproven else "ran on different machines",)
                + tuple(prints)
            )
        ]
    if not any(isinstance(h.get("facts"), dict) and fingerprint.records_isa(h["facts"]) for h in (a, b)):
        known = sorted({h["fingerprint"] for h in (a, b) if h.get("fingerprint")})
        return [
            "neither run's host record lists the CPU's instruction set%s: the same CPU model name can "
            "hide different instruction sets; save a new baseline to have it checked"
            % (" (%s)" % ", ".join(known) if known else "")
        ]
    return []


def code_notes(a: Mapping[str, Any], b: Mapping[str, Any]) -> List[str]:
    """The comparison's note on the detbench code its two runs ran (harness.plan.coderev), where
    both recorded it and it differs (another commit, or uncommitted changes on one side)."""
    from harness.plan import coderev

    said = coderev.named_where_differing({"baseline": (a or {}).get("code"), "candidate": (b or {}).get("code")})
    if not said:
        return []
    return ["code: baseline ran %(baseline)s, candidate %(candidate)s" % said]


# --- accuracy runs (mode: accuracy): time to target and final AP ---------------------------------


@dataclass(frozen=True)
class AccuracyVerdict:
    cell: str
    verdict: str
    why: str


def compare_accuracy(
    baseline: Mapping[str, Sequence[Any]],
    candidate: Mapping[str, Sequence[Any]],
    metric: str,
    target: float,
    threshold: float = 0.05,
) -> List[AccuracyVerdict]:
    """One verdict per cell of two accuracy runs; each side maps a cell key to its seeds' curves
    (lists of harness.measure.accuracy.AccuracyPoint). A regression needs the effect and more than
    the seed spread: the candidate's mean time to target is `threshold` above the baseline's and
    above it by more than the baseline's seed standard deviation (or the candidate misses a target
    every baseline seed reached), or its mean final `metric` is below the baseline's by more than
    that standard deviation. One seed has no spread: an effect alone is then a possible regression."""
    from harness.measure import accuracy as acc

    out = []
    for cell in sorted(set(baseline) | set(candidate)):
        if cell not in candidate or cell not in baseline:
            out.append(AccuracyVerdict(cell, MISSING_CANDIDATE if cell not in candidate else MISSING_BASELINE, ""))
            continue
        sides = []
        for curves in (baseline[cell], candidate[cell]):
            hits = [acc.time_to_target(c, metric, target) for c in curves]
            finals = [f for f in (acc.final(c) for c in curves) if f is not None]
            values = [v for v in (f.metric(metric) for f in finals) if v is not None]
            sides.append(
                (
                    acc.spread([h.seconds for h in hits if h is not None]),
                    sum(h is None for h in hits),
                    acc.spread(values),
                )
            )
        (bt, bmiss, bap), (ct, cmiss, cap) = sides
        reasons, possible, better = [], [], []
        if bt is not None and not bmiss and cmiss:
            reasons.append("%d candidate seeds miss the target every baseline seed reached" % cmiss)
        elif bt is not None and ct is not None:
            slower = ct.mean > bt.mean * (1 + threshold)
            beyond = bt.std is not None and ct.mean - bt.mean > bt.std
            line = "time to target %.1f s vs %.1f s (interpolated)" % (ct.mean, bt.mean)
            if slower and beyond:
                reasons.append(line)
            elif slower:
                possible.append(line)
            if ct.mean < bt.mean / (1 + threshold) and (bt.std is None or bt.mean - ct.mean > bt.std):
                better.append(line)
        if bap is not None and cap is not None and cap.mean < bap.mean:
            line = "final %s %.3f vs %.3f" % (metric, cap.mean, bap.mean)
            if bap.std is not None and bap.mean - cap.mean > bap.std:
                reasons.append(line + " (more than one seed sd, %.3f)" % bap.std)
            elif bap.std is None and bap.mean - cap.mean > 0:
                possible.append(line + " (one seed: no spread)")
        if reasons:
            out.append(AccuracyVerdict(cell, REGRESSION, "; ".join(reasons)))
        elif possible:
            out.append(AccuracyVerdict(cell, POSSIBLE, "; ".join(possible)))
        elif better:
            out.append(AccuracyVerdict(cell, IMPROVEMENT, "; ".join(better)))
        else:
            out.append(AccuracyVerdict(cell, UNCHANGED, "time to target and final %s within the seed spread" % metric))
    return out
