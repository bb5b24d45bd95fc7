"""A sequential regression gate: judge a candidate's repeats as they arrive, stop once the answer is clear.

The fixed gate (harness.results.compare.decide) runs a set number of candidate repeats and
then judges them. This one looks after each candidate repeat, from the first look on
(`looks`), and stops at the first look that decides:

- regression: the median moved the worse way by at least the rule's threshold, and the
  one-sided Mann-Whitney U test (harness.results.significance) of "the candidate is worse"
  gives p at or below the look's share of alpha (a valid p-value is at or below a level with
  at most that probability);
- improvement: the mirror image;
- unchanged: the change is shown to lie within the threshold both ways: the candidate is
  tested against the baseline scaled by (1 - threshold) and by (1 + threshold) (a slowdown of
  exactly the threshold, and a speed-up of it), and both one-sided tests reject at the look's
  share of alpha. Timings scale, so a candidate that is the baseline slowed by a factor
  has the distribution of the baseline's values times that factor;
- undecided: none of these by the last look (`max_trials` candidate repeats).

Error rates. Each look k gets its own level alpha_k, and the levels sum to the rule's alpha
(alpha/2 at the first look, half the previous one at each next look, and the last look takes
what is left). An identical candidate is called a regression at some look with probability at
most sum alpha_k = alpha (the union bound, whatever the dependence between looks), and the
effect threshold makes it rarer still; a candidate slower by more than the threshold is called
unchanged with probability at most alpha the same way. The first look is the first candidate
count at which the exact test can reach alpha/2 at all (with 7 baseline repeats and alpha 0.01:
4 candidate repeats, whose smallest p is 1/330). benchmarks/sequential_gate.py measures both
rates, and the trials used, on the calibration workload.
"""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from harness.results import compare, significance

UNDECIDED = "undecided"
MAX_TRIALS = 10  # candidate repeats at most, by default
DEFAULT_RULE = compare.Rule()


@dataclass(frozen=True)
class Sequential:
    verdict: str  # compare.REGRESSION, IMPROVEMENT, UNCHANGED, or UNDECIDED
    used: int  # candidate repeats the verdict rests on
    done: bool  # final: decided, or no look is left
    ratio: Optional[float] = None  # median(candidate) / median(baseline) over the `used` repeats
    p_drop: Optional[float] = None  # one-sided p: the candidate is worse
    p_gain: Optional[float] = None  # one-sided p: the candidate is better
    p_within: Optional[float] = None  # the larger p of the two tests that the change is within the threshold
    level: Optional[float] = None  # the alpha share of the look that decided (or the last one made)


def looks(n_baseline: int, alpha: float, max_trials: int = MAX_TRIALS) -> Dict[int, float]:
    """{candidate repeats at a look: that look's level}; the levels sum to alpha. Empty when no
    count up to max_trials lets the exact test reach alpha/2 (too few baseline repeats)."""
    first = next((k for k in range(1, max_trials + 1) if significance.smallest_p(n_baseline, k) < alpha / 2), None)
    if first is None:
        return {}
    out, left = {}, alpha
    for k in range(first, max_trials + 1):
        out[k] = left if k == max_trials else left / 2
        left -= out[k]
    return out


def _mw(x: Sequence[float], y: Sequence[float]) -> float:
    """One-sided p that x tends to be larger than y."""
    return significance.mann_whitney_u(x, y, significance.GREATER).p


def look(baseline: Sequence[float], candidate: Sequence[float], rule: compare.Rule, level: float) -> Sequential:
    """The verdict at one look over all of `candidate`; UNDECIDED (not done) when nothing is shown."""
    verdict, _b, _c, ratio, p_drop, p_gain = compare.decide(baseline, candidate, rule)
    t = rule.threshold
    slower = [v * (1 + t) for v in baseline] if rule.latency else [v * (1 - t) for v in baseline]
    faster = [v * (1 - t) for v in baseline] if rule.latency else [v * (1 + t) for v in baseline]
    if rule.latency:  # lower is better: "not worse" is below the slowed baseline
        p_within = max(_mw(slower, candidate), _mw(candidate, faster))
    else:
        p_within = max(_mw(candidate, slower), _mw(faster, candidate))
    change = ratio - 1.0 if rule.latency else 1.0 - ratio
    if change >= t and p_drop <= level:
        verdict = compare.REGRESSION
    elif -change >= t and p_gain <= level:
        verdict = compare.IMPROVEMENT
    elif p_within <= level:
        verdict = compare.UNCHANGED
    else:
        verdict = UNDECIDED
    return Sequential(verdict, len(candidate), verdict != UNDECIDED, ratio, p_drop, p_gain, p_within, level)


def judge(
    baseline: Sequence[float],
    candidate: Sequence[float],
    rule: compare.Rule = DEFAULT_RULE,
    max_trials: int = MAX_TRIALS,
) -> Sequential:
    """The gate's answer for the candidate repeats so far, in the order they ran: the first look
    that decides (its `used` may be fewer than len(candidate): the rest were not needed), else
    UNDECIDED, `done` once max_trials repeats gave no answer (more repeats would not be looked at).

    A caller runs one candidate repeat at a time and calls this after each until `done`."""
    rule.check()
    if max_trials < 1:
        raise ValueError("max_trials is at least 1, got %d" % max_trials)
    base = [float(v) for v in baseline]
    cand = [float(v) for v in candidate][:max_trials]
    if not base:
        raise ValueError("the sequential gate needs baseline repeats")
    levels = looks(len(base), rule.alpha, max_trials)
    last = None
    for k, level in levels.items():
        if k > len(cand):
            break
        last = look(base, cand[:k], rule, level)
        if last.done:
            return last
    done = len(cand) >= max_trials
    if last is None:
        return Sequential(UNDECIDED, len(cand), done)
    return Sequential(UNDECIDED, len(cand), done, last.ratio, last.p_drop, last.p_gain, last.p_within, last.level)


def judge_all(
    baseline: Sequence[float],
    candidates: Sequence[float],
    rule: compare.Rule = DEFAULT_RULE,
    max_trials: int = MAX_TRIALS,
) -> List[Sequential]:
    """judge() after each candidate repeat in turn, up to the first final answer (for tables and tests)."""
    out = []
    for k in range(1, min(len(candidates), max_trials) + 1):
        out.append(judge(baseline, candidates[:k], rule, max_trials))
        if out[-1].done:
            break
    return out


def fixed_equivalent(verdict: str, ratio: Optional[float], rule: compare.Rule) -> str:
    """The sequential verdict that means what a fixed gate's verdict (compare.decide, with its
    ratio) means. A fixed "possible regression" on evidence alone (a significant change smaller
    than the threshold) never fails a gate and is what this gate calls unchanged; one on effect
    alone (a drop past the threshold without the evidence) is undecided."""
    if verdict != compare.POSSIBLE or ratio is None:
        return verdict
    change = ratio - 1.0 if rule.latency else 1.0 - ratio
    return UNDECIDED if change >= rule.threshold else compare.UNCHANGED


@dataclass(frozen=True)
class GateCell:
    key: str
    verdict: str  # a sequential verdict, or compare's missing / not comparable
    result: Optional[Sequential]  # None where the cell could not be judged
    ran: int  # candidate repeats the candidate side holds
    notes: List[str]
    first_look: Optional[int] = None  # candidate repeats the first look needs (None: no look can decide)


def gate(
    baseline_side: Dict[str, Any],
    candidate_side: Dict[str, Any],
    rule: compare.Rule = DEFAULT_RULE,
    max_trials: int = MAX_TRIALS,
) -> List[GateCell]:
    """`detbench compare --sequential`: every cell of two sides (harness.results.baseline) judged as
    the sequential gate would have judged the candidate's repeats in the order they ran; cells that
    are missing or not comparable keep compare's verdict and notes."""
    out = []
    for cell in compare.compare(baseline_side, candidate_side, rule).cells:
        if cell.verdict in (compare.MISSING_BASELINE, compare.MISSING_CANDIDATE, compare.NOT_COMPARABLE):
            out.append(GateCell(cell.key, cell.verdict, None, len(cell.candidate), list(cell.notes)))
            continue
        got = judge(cell.baseline, cell.candidate, rule, max_trials)
        first = next(iter(looks(len(cell.baseline), rule.alpha, max_trials)), None)
        out.append(GateCell(cell.key, got.verdict, got, len(cell.candidate), list(cell.notes), first))
    return out


def gate_text(cells: Sequence[GateCell], rule: compare.Rule) -> str:
    """One line per cell: its verdict and how many of the candidate's repeats it needed."""
    lines = []
    for c in cells:
        r = c.result
        if r is None:
            lines.append("%s: %s" % (c.key, c.verdict))
        elif r.ratio is None:
            lines.append(
                "%s: %s: %d candidate repeats, too few for any look (%s)"
                % (
                    c.key,
                    r.verdict,
                    c.ran,
                    "the first needs %d" % c.first_look if c.first_look else "the baseline has too few repeats for any",
                )
            )
        else:
            lines.append(
                "%s: %s after %d of %d candidate repeats (ratio %.4f; p worse %s, better %s, "
                "within +-%g%% %s; level %s)%s"
                % (
                    c.key,
                    r.verdict,
                    r.used,
                    c.ran,
                    r.ratio,
                    _p(r.p_drop),
                    _p(r.p_gain),
                    rule.threshold * 100,
                    _p(r.p_within),
                    _p(r.level),
                    "" if r.done else "; run more candidate repeats",
                )
            )
        lines += ["  " + n for n in c.notes]
    return "\n".join(lines) + "\n"


def _p(value: Optional[float]) -> str:
    return "-" if value is None else "%.2g" % value
