"""How a bisect step is judged: pure functions over per-trial figures.

The endpoints are compared as `detbench compare` compares a baseline and a candidate
(results/compare.py's rule: a regression needs a drop of at least the threshold and a one-sided
Mann-Whitney p below alpha); they show "no regression" once the bootstrap interval of the ratio
lies inside the threshold. A candidate between them is "bad" when it is worse than the good
endpoint (one-sided Mann-Whitney, p < alpha) and its median lies nearer the bad endpoint's
(on a log scale), "good" when it is better than the bad endpoint and nearer the good one;
otherwise it needs more trials, up to a cap, at which the nearer endpoint names it.
"""
import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from harness.measure import stats
from harness.results import compare, significance

REGRESSION, NONE, UNDECIDED = "regression", "no regression", "undecided"
BAD, GOOD = "bad", "good"


@dataclass(frozen=True)
class Judge:
    rule: compare.Rule = compare.Rule()
    min_trials: int = 5          # per side before anything is decided (5 against 5 can reach p = 0.004)
    max_trials: int = 15         # per candidate (and per endpoint in the first step): the cap

    def check(self):
        self.rule.check()
        if self.min_trials < 2 or self.max_trials < self.min_trials:
            raise ValueError("need 2 <= min_trials <= max_trials")


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


def endpoints(judge: Judge, good: Sequence[float], bad: Sequence[float], final: bool = False
              ) -> Tuple[str, Optional[Ratio]]:
    """REGRESSION, NONE or UNDECIDED for the two endpoints' figures (`final`: at the cap, where
    undecided reads as no regression shown)."""
    if min(len(good), len(bad)) < judge.min_trials:
        return UNDECIDED, None
    verdict = compare.decide(list(good), list(bad), judge.rule)[0]
    r = ratio(good, bad)
    if verdict == compare.REGRESSION:
        return REGRESSION, r
    t = judge.rule.threshold
    inside = r.high < 1.0 + t if judge.rule.latency else r.low > 1.0 - t
    if inside or verdict == compare.IMPROVEMENT or final:
        return NONE, r
    return UNDECIDED, r


def candidate(judge: Judge, good: Sequence[float], cand: Sequence[float], bad: Sequence[float],
              final: bool = False) -> Tuple[str, Optional[Ratio], bool]:
    """(BAD, GOOD or UNDECIDED, the candidate's ratio to the good endpoint, whether the verdict was
    forced by the cap). `final`: at the cap, the nearer endpoint decides."""
    if len(cand) < judge.min_trials:
        return UNDECIDED, None, False
    r = ratio(good, cand)
    to_bad = stats.median(list(bad)) / stats.median(list(good))
    nearer_bad = abs(math.log(r.ratio) - math.log(to_bad)) < abs(math.log(r.ratio))
    worse_than_good = p_worse(judge, good, cand) < judge.rule.alpha
    better_than_bad = p_worse(judge, cand, bad) < judge.rule.alpha
    if worse_than_good and nearer_bad:
        return BAD, r, False
    if better_than_bad and not nearer_bad:
        return GOOD, r, False
    if final:
        return (BAD if nearer_bad else GOOD), r, True
    return UNDECIDED, r, False
