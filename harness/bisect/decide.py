"""How a bisect step is judged: pure functions over per-trial figures, and the error budget of
the whole search.

Every test a search makes (the endpoints against each other, each candidate, each check of a
culprit) draws its level from one `Ledger`, whose levels sum to at most the rule's alpha; within
a test each look (one per round, from `min_trials` per side on, so at most max_trials -
min_trials + 1 of them) draws an equal part of the test's level, the last look at the cap what
is left. A wrong verdict at a look needs a one-sided Mann-Whitney p at or below that look's
level, so (by the union bound, whatever the dependence between looks and tests) the chance that
any verdict of the search is wrong in the direction its test guards is at most alpha.

- Two revisions against each other (the endpoints, a culprit and its parent, ...) are judged as
  `compare --sequential` judges a candidate (results/sequential.look): a regression needs a
  drop of at least the threshold and p at or below the look's level; none needs the change
  shown to lie within the threshold both ways, or the ratio's bootstrap interval inside it.
- A candidate between two ends is "bad" when it is worse than the good end and its median lies
  nearer the bad end's (on a log scale), "good" when it is better than the bad end and nearer
  the good one; faster than the good end or slower than the bad end, beyond the threshold and
  the level, is non-monotone evidence and named.
- A test that reaches the cap (`max_trials` of the side it adds to) undecided stays undecided.
"""
import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from harness.measure import stats
from harness.results import compare, sequential, significance

REGRESSION, NONE, UNDECIDED = "regression", "no regression", "undecided"
IMPROVEMENT = "improvement"
BAD, GOOD = "bad", "good"
ALPHA = 0.05      # the whole search's error budget, by default


@dataclass(frozen=True)
class Judge:
    rule: compare.Rule = compare.Rule(alpha=ALPHA)
    min_trials: int = 5          # per side before anything is decided
    max_trials: int = 15         # per revision and test: the cap, after which the test is undecided

    @property
    def looks(self) -> int:
        """The most looks one test can make: a round adds a trial to each side."""
        return self.max_trials - self.min_trials + 1

    def check(self):
        self.rule.check()
        if self.min_trials < 2 or self.max_trials < self.min_trials:
            raise ValueError("need 2 <= min_trials <= max_trials")


class Ledger:
    """The search's alpha, handed to its tests: `planned` equal shares, and one more share that
    any further test (a search that skipped revisions, or found a second step) takes half of,
    then half of what is left, ... so the levels handed out never sum past alpha."""

    def __init__(self, alpha: float, planned: int):
        self.share = alpha / (max(planned, 1) + 1)
        self.planned = max(planned, 1)
        self.used = 0

    def take(self) -> float:
        self.used += 1
        if self.used <= self.planned:
            return self.share
        return self.share / 2 ** (self.used - self.planned)


class Test:
    """The looks of one test at `level`, at most `looks` of them: `next(final)` is the next look's
    level, an equal part of the test's level, and the last look (at the cap) takes what is left."""

    def __init__(self, level: float, looks: int):
        self.level = level
        self.left = level
        self.part = level / max(looks, 1)
        self.looks = 0

    def next(self, final: bool) -> float:
        self.looks += 1
        out = self.left if final else min(self.part, self.left)
        self.left -= out
        return out


def planned_tests(revisions: int) -> int:
    """The tests a search of `revisions` (both ends included) plans for: the endpoints, the
    candidates of a binary search, and three checks of its culprit."""
    return 1 + max(0, math.ceil(math.log2(max(revisions - 1, 1)))) + 3


@dataclass(frozen=True)
class Ratio:
    """median(other) / median(base) of the metric, with its bootstrap interval."""
    ratio: float
    low: float
    high: float

    def text(self):
        return "%.3f [%.3f, %.3f]" % (self.ratio, self.low, self.high)

    @property
    def parity(self):
        return self.low <= 1.0 <= self.high


def ratio(base: Sequence[float], other: Sequence[float], seed: int = 0) -> Ratio:
    r = stats.median(list(other)) / stats.median(list(base))
    low, high = significance.bootstrap_ratio_ci(list(base), list(other), seed=seed)
    return Ratio(r, low, high)


def p_worse(judge: Judge, base: Sequence[float], other: Sequence[float]) -> float:
    """One-sided Mann-Whitney p that `other` is worse than `base` (lower throughput, higher latency)."""
    if judge.rule.latency:
        return significance.mann_whitney_u(other, base, significance.GREATER).p
    return significance.mann_whitney_u(base, other, significance.GREATER).p


def ready(judge: Judge, *sides: Sequence[float]) -> bool:
    return min(len(s) for s in sides) >= judge.min_trials


def pair(judge: Judge, base: Sequence[float], other: Sequence[float], level: float) -> Tuple[str, Ratio]:
    """REGRESSION, IMPROVEMENT, NONE or UNDECIDED for `other` against `base` at one look of
    `level`. NONE: the change shown within the threshold both ways, or the bootstrap interval of
    the ratio lying inside it (a missed slowdown is the error this risks, never a false one)."""
    verdict = sequential.look(list(base), list(other), judge.rule, level).verdict
    r = ratio(base, other)
    if verdict == compare.REGRESSION:
        return REGRESSION, r
    if verdict == compare.IMPROVEMENT:
        return IMPROVEMENT, r
    t = judge.rule.threshold
    inside = r.high < 1.0 + t if judge.rule.latency else r.low > 1.0 - t
    if verdict == compare.UNCHANGED or inside:
        return NONE, r
    return UNDECIDED, r


def worse_by(judge: Judge, r: float) -> float:
    """How much worse a ratio other/base is, as a fraction (negative: better)."""
    return r - 1.0 if judge.rule.latency else 1.0 - r


def candidate(judge: Judge, good: Sequence[float], cand: Sequence[float], bad: Sequence[float],
              level: float) -> Tuple[str, Ratio, Optional[str]]:
    """(BAD, GOOD or UNDECIDED, the candidate's ratio to the good end, non-monotone evidence in
    words or None) at one look of `level`."""
    r = ratio(good, cand)
    to_bad = stats.median(list(bad)) / stats.median(list(good))
    nearer_bad = abs(math.log(r.ratio) - math.log(to_bad)) < abs(math.log(r.ratio))
    t = judge.rule.threshold
    odd = None
    if worse_by(judge, r.ratio) <= -t and p_worse(judge, cand, good) <= level:
        odd = "faster than the good end"
    elif (worse_by(judge, stats.median(list(cand)) / stats.median(list(bad))) >= t
          and p_worse(judge, bad, cand) <= level):
        odd = "slower than the bad end"
    if p_worse(judge, good, cand) <= level and nearer_bad:
        return BAD, r, odd
    if p_worse(judge, cand, bad) <= level and not nearer_bad:
        return GOOD, r, odd
    return UNDECIDED, r, odd
