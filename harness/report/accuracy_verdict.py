"""The overall verdict of an accuracy run on every check its protocol declared, and its speedup profile.

The protocol (harness.report.accuracy.Protocol, from the scenario as stored before the run) names
a subject framework, the speedup it claims, the target levels of each model, the rule by which a
level counts as reached and the looks of its sequential plan. Per model, per precision of the
subject, against each other framework (the same precision where that framework ran it, else its
fp32, said so), the checks are:

  * time to target, at every declared level: the ratio of the subject's times to the rival's
    (geometric means over seeds) with its Welch interval on the logarithms at the look's level
    (1 - that look's share of alpha); PASS where the whole interval lies at or below 1/speedup.
    With a sequential plan each look whose seeds both sides trained is tried at its own share,
    and one that passes passes the check: the shares add up to alpha, so the overall error does
    too. Where the rival missed the level in some seed, that seed counts at its whole training
    time (a lower bound); where the subject missed it, FAIL; a time read off the line from the
    start, or one trained on a shared machine, is not judged;
  * final metric: the subject's mean final target metric within one seed standard deviation of
    the rival's (not judged with one seed);
  * the subject's bf16 final metric within one fp32 seed standard deviation of its fp32 one.

A model none of whose frameworks ends above its noise floor (what its untrained weights scored,
else 0) is "not judged: nothing learned"; a level no framework reached in any seed is named with
each framework's best. The overall verdict is PASS only where every check passed, FAIL naming the
failed ones, else "not judged" naming those that could not be (or the models that learned
nothing); a run stored before the protocol, or one read against targets given at report time,
gets its checks printed as exploratory, never a verdict.
"""

import math
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from harness.measure import accuracy as acc
from harness.measure import welch
from harness.report.accuracy import AccuracyReport, ModelBlock, Protocol, Row, Series, rows

PASS, FAIL, NOT_JUDGED = "PASS", "FAIL", "not judged"
TIME_TO = ": time to "  # in the name of every time-to-target check


@dataclass(frozen=True)
class Check:
    name: str  # e.g. "mask_rcnn fp32 vs torchvision fp32: time to segm_AP 0.7"
    status: str  # PASS, FAIL or not judged
    words: str


@dataclass
class Verdict:
    checks: List[Check] = field(default_factory=list)
    unreached: List[str] = field(default_factory=list)  # a declared level no framework reached
    nothing_learned: List[str] = field(default_factory=list)  # models no framework learned
    exploratory: List[str] = field(default_factory=list)  # why this is no verdict

    @property
    def status(self) -> str:
        """FAIL where a check failed; else "not judged: nothing learned" where a model learned
        nothing, "not judged" where a check could not be judged; PASS only where every check passed."""
        if any(c.status == FAIL for c in self.checks):
            return FAIL
        if self.nothing_learned:
            return "not judged: nothing learned"
        if not self.checks or any(c.status == NOT_JUDGED for c in self.checks):
            return NOT_JUDGED
        return PASS

    def headline(self) -> str:
        """One line: the overall verdict with the failed (else the unjudged) checks named."""
        status = self.status
        named = [c.name for c in self.checks if c.status == (FAIL if status == FAIL else NOT_JUDGED)]
        said = status + (" (%s)" % "; ".join(named) if named and status != PASS else "")
        if self.nothing_learned:
            joint = " " if status.endswith("nothing learned") and not named else "; nothing learned "
            said += "%s(%s)" % (joint, "; ".join(self.nothing_learned))
        if self.exploratory:
            return "exploratory, no verdict (%s): the checks read %s" % ("; ".join(self.exploratory), said)
        return said

    def unjudgeable(self) -> Optional[str]:
        """The one line saying why no time to target could be judged under the protocol (nothing
        learned, no declared level reached, no rival), or None."""
        if self.exploratory or any(c.status != NOT_JUDGED for c in self.checks if TIME_TO in c.name):
            return None
        why = self.unreached + ["nothing learned: %s" % m for m in self.nothing_learned]
        return "nothing could be judged: %s" % ("; ".join(why) or "no check applies (one framework, one seed)")


def floor(report: AccuracyReport, block: ModelBlock) -> float:
    return float((report.floors.get(block.model) or {}).get(block.metric, 0.0))


def learned(report: AccuracyReport, block: ModelBlock) -> bool:
    """Whether some framework's final target metric (any seed) ends above the model's noise floor."""
    line = floor(report, block)
    return any((p.metric(block.metric) or 0.0) > line for s in block.series for p in s.finals().values())


def unreached(block: ModelBlock, level: float) -> Optional[str]:
    """The line for a level no framework reached in any seed (each framework's best), or None."""
    table = rows(block, level)
    if any(r.reached for r in table):
        return None
    best = [
        "%s %s %s" % (s.framework, s.precision, "%.3f" % b if b is not None else "none scored")
        for s in block.series
        for b in [max((acc.best(c, block.metric) or 0.0 for c in s.curves.values()), default=None)]
    ]
    return "%s: %s %g: no framework reached it (best: %s)" % (block.model, block.metric, level, ", ".join(best))


def rival_series(block: ModelBlock, framework: str, precision: str) -> Optional[Series]:
    """The rival's series of `precision`, else its fp32 one."""
    mine = [s for s in block.series if s.framework == framework]
    return next((s for s in mine if s.precision == precision), None) or next(
        (s for s in mine if s.precision == "fp32"), None
    )


def pairs(block: ModelBlock, subject: str) -> List[Tuple[Series, Series]]:
    """(subject series, rival series) of every subject precision and every other framework."""
    out = []
    for s in block.series:
        if s.framework != subject:
            continue
        for name in dict.fromkeys(x.framework for x in block.series if x.framework != subject):
            theirs = rival_series(block, name, s.precision)
            if theirs is not None:
                out.append((s, theirs))
    return out


def _row(table: List[Row], s: Series) -> Row:
    return next(r for r in table if (r.framework, r.precision) == (s.framework, s.precision))


def looks_seen(protocol: Protocol, seeds: Sequence[int]) -> List[Tuple[Tuple[int, ...], float]]:
    """(the seeds of each look up to it, its alpha) of the looks whose every seed is in `seeds`."""
    out, upto = [], ()  # type: List[Tuple[Tuple[int, ...], float]], Tuple[int, ...]
    for look, alpha in zip(protocol.looks, protocol.alphas):
        upto = upto + tuple(look)
        if not set(upto) <= set(seeds):
            break
        out.append((upto, alpha))
    return out


def time_check(block: ModelBlock, protocol: Protocol, mine: Series, theirs: Series, level: float) -> Tuple[str, str]:
    """(status, words) of the subject's time to `level` against one rival's."""
    limit = 1 / protocol.speedup
    seeds = sorted(set(mine.curves) & set(theirs.curves))
    looks = [x for x in looks_seen(protocol, seeds) if x[0]] or [(tuple(seeds), protocol.alphas[0])]
    said = []
    status = FAIL
    for upto, alpha in looks:
        table = rows(block, level, set(upto))
        a, b = _row(table, mine), _row(table, theirs)
        if a.time_to_target is None:
            return FAIL, "the subject missed it in %d of %d seeds" % (a.seeds - a.reached, a.seeds)
        if a.from_start or b.from_start:
            return NOT_JUDGED, "reached by the first checkpoint: that time is read off the line from the start"
        shared = [x for x in (mine, theirs) if any(seed in upto for seed in x.shared)]
        if shared:
            return NOT_JUDGED, "trained on a shared machine (%s)" % ", ".join(x.framework for x in shared)
        other = b.time_to_target or b.time_bound
        if other is None:
            return FAIL, "%s has a seed with no curve" % theirs.framework
        bound = (
            ""
            if b.time_to_target is not None
            else " (the rival missed it in %d of %d seeds: a bound)"
            % (
                b.seeds - b.reached,
                b.seeds,
            )
        )
        r = welch.ratio(a.time_to_target.values, other.values, 1 - alpha)
        if r is None:
            good = a.time_to_target.mean <= other.mean * limit
            said.append(
                "%.2fx on the means (one seed on a side: no interval; limit %.2fx)%s"
                % (a.time_to_target.mean / other.mean, limit, bound)
            )
        else:
            good = r.high <= limit
            said.append(
                "%.2fx [%.2f, %.2f] over %d vs %d seeds at %.1f%% (limit %.2fx)%s"
                % (r.estimate, r.low, r.high, r.n[0], r.n[1], 100 * (1 - alpha), limit, bound)
            )
        if good:
            status = PASS
            break
    return status, "the subject's / the rival's time: " + "; ".join(said)


def final_check(block: ModelBlock, mine: Series, theirs: Series) -> Tuple[str, str]:
    a = acc.spread([v for p in mine.finals().values() for v in [p.metric(block.metric)] if v is not None])
    b = acc.spread([v for p in theirs.finals().values() for v in [p.metric(block.metric)] if v is not None])
    if a is None or b is None:
        return FAIL, "no final checkpoint scored"
    if b.std is None:
        return NOT_JUDGED, "%.3f vs %.3f (one seed: no seed spread)" % (a.mean, b.mean)
    good = abs(a.mean - b.mean) <= b.std
    return (PASS if good else FAIL), "%.3f vs %.3f +- %.3f (one seed sd)" % (a.mean, b.mean, b.std)


def judge(report: AccuracyReport) -> Verdict:
    """The overall verdict of `report` under its protocol (exploratory without one)."""
    protocol = report.protocol
    verdict = Verdict(exploratory=list(report.exploratory))
    if protocol is None:
        verdict.exploratory.insert(0, "no declared protocol: the run predates it")
        protocol = Protocol(None, 1.2, "first", 0, 1, ((),), (0.05,))
    subject = protocol.subject or "detbench-trainer"
    for block in report.models:
        if not learned(report, block):
            verdict.nothing_learned.append(
                "%s (no framework's final %s above %.3f, the untrained weights' score)"
                % (block.model, block.metric, floor(report, block))
            )
            continue
        levels = block.levels or [block.target]
        missed = {v: unreached(block, v) for v in levels}
        verdict.unreached += [u for u in missed.values() if u]
        for mine, theirs in pairs(block, subject):
            name = "%s %s vs %s %s" % (block.model, mine.precision, theirs.framework, theirs.precision)
            for level in levels:
                status, words = (
                    (NOT_JUDGED, "no framework reached it")
                    if missed[level]
                    else time_check(block, protocol, mine, theirs, level)
                )
                verdict.checks.append(Check("%s: time to %s %g" % (name, block.metric, level), status, words))
            status, words = final_check(block, mine, theirs)
            verdict.checks.append(Check("%s: final %s" % (name, block.metric), status, words))
        own = {s.precision: s for s in block.series if s.framework == subject}
        if "fp32" in own and "bf16" in own:
            status, words = final_check(block, own["bf16"], own["fp32"])
            verdict.checks.append(
                Check("%s %s bf16 vs fp32: final %s" % (block.model, subject, block.metric), status, words)
            )
    return verdict


def profile(block: ModelBlock, subject: str) -> Tuple[List[str], List[List[str]]]:
    """The speedup profile: per target level, the subject's speedup over each rival (their time to
    it over the subject's, ratio of geometric means with its Welch 95% interval), then the same
    ratio of time per iteration and of time to train, so a metric's offset shows apart from speed."""
    both = pairs(block, subject)
    head = ["%s" % block.metric] + [
        "%s %s over %s %s" % (subject, m.precision, t.framework, t.precision) for m, t in both
    ]
    body = []
    for level in block.levels or [block.target]:
        table = rows(block, level)
        cells = ["%g" % level]
        for m, t in both:
            a, b = _row(table, m), _row(table, t)
            if a.time_to_target is None:
                cells.append("subject not reached")
            elif b.time_to_target is None and b.time_bound is not None:
                cells.append(">= %s" % _ratio(b.time_bound.values, a.time_to_target.values))
            elif b.time_to_target is None:
                cells.append("-")
            else:
                cells.append(_ratio(b.time_to_target.values, a.time_to_target.values))
        body.append(cells)
    for what, value in (("time per iteration", acc.iteration_seconds), ("time to train", _train_seconds)):
        cells = [what]
        for m, t in both:
            mine = [v for v in (value(c) for c in m.curves.values() if c) if v]
            theirs = [v for v in (value(c) for c in t.curves.values() if c) if v]
            cells.append(_ratio(theirs, mine) if mine and theirs else "-")
        body.append(cells)
    return head, body


def _train_seconds(curve: List[acc.AccuracyPoint]) -> Optional[float]:
    last = acc.final(curve)
    return None if last is None else last.train_seconds


def _ratio(a: Sequence[float], b: Sequence[float]) -> str:
    """geomean(a) / geomean(b) with its Welch 95% interval where each side has two values."""
    r = welch.ratio(list(a), list(b))
    if r is None:
        return "%.2fx" % math.exp(sum(map(math.log, a)) / len(a) - sum(map(math.log, b)) / len(b))
    return "%.2fx [%.2f, %.2f]" % (r.estimate, r.low, r.high)


def lines(verdict: Verdict) -> List[str]:
    """The verdict section: every check with its words, the unreached levels, then the headline."""
    out = ["- %s: %s: %s" % (c.name, c.status, c.words) for c in verdict.checks]
    out += ["- %s" % u for u in verdict.unreached]
    return out + ([""] if out else []) + ["**Time to accuracy: %s**" % verdict.headline()]
