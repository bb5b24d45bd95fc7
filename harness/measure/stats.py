"""Statistics as pure functions: per-trial throughput estimators and per-cell summaries.

Throughput of a trial is images in the measured window divided by the wall time of the
window, never a mean of per-iteration rates. Two independent estimators:

- reported: from the times the framework printed (exact where it prints every iteration,
  window means, or running means that can be differenced; honest approximations for
  window medians, running means of unknown start and throughput-only logs);
- observed: from the arrival times of the log lines themselves (runner.py's clock).
"""
import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from harness.measure import flags
from harness.measure.records import (CUMULATIVE_MEAN, EXACT, EXACT_CUMULATIVE, GLOBAL_MEAN, GLOBAL_MEAN_FIGURE,
                             ITERATION, THROUGHPUT, THROUGHPUT_FIGURE, WINDOW_MEAN, WINDOW_MEDIAN_FIGURE)

OUTLIER_Z = 3.5             # modified z-score on the MAD


class WindowError(ValueError):
    """The log does not cover the measured window."""


class CounterError(WindowError):
    """The log's counters run backwards: an iteration goes back, or a running sum shrinks."""


@dataclass(frozen=True)
class TrialEstimate:
    throughput: float               # images / s
    iteration_time_s: float         # mean seconds per iteration in the window
    data_time_s: Optional[float]    # mean data seconds per iteration, None if not logged
    exact: bool                     # True when the figure adds up exact per-iteration times
    iterations: int                 # iterations the figure is based on
    window: Tuple[int, int]         # first and last iteration the figure covers
    kind: str                       # one of records.FIGURE_KINDS


def _covered(rec):
    return rec.iteration - rec.span + 1, rec.iteration


def in_window(records, warmup, measure):
    """Records whose covered iterations lie inside (warmup, warmup + measure]."""
    lo, hi = warmup + 1, warmup + measure
    out = []
    for rec in records:
        first, last = _covered(rec)
        if first >= lo and last <= hi:
            out.append(rec)
    return out


def _check_order(records):
    """Iterations must rise in log order (after dedupe: repeats of other ranks are gone)."""
    for prev, rec in zip(records, records[1:]):
        if rec.iteration <= prev.iteration:
            raise CounterError("iteration goes back from %d (log line %d) to %d (log line %d)"
                               % (prev.iteration, prev.line + 1, rec.iteration, rec.line + 1))


def _reach(records, warmup, measure):
    """The log must cover the whole window: no figure from part of it."""
    lo, hi = warmup + 1, warmup + measure
    if not records:
        raise WindowError("the log has no iteration records; the window is %d..%d" % (lo, hi))
    last = records[-1].iteration
    if last < lo:
        raise WindowError("the log never reaches the window: it reaches iteration %d, the window is %d..%d"
                          % (last, lo, hi))
    if last < hi:
        raise WindowError("the window %d..%d is larger than the log: it reaches iteration %d" % (lo, hi, last))


def reported(records, warmup, measure, images_per_iteration):
    """Throughput from the framework's own figures over the measured window.

    The records' kind at the window decides the estimator: per-iteration times and window
    means add up exactly; running means are differenced exactly (``cumulative_window``);
    window medians, running means of unknown start and throughput-only figures give an
    approximation. The estimate's ``window`` is what the figure really covers.
    """
    records = dedupe(records)
    _check_order(records)
    _reach(records, warmup, measure)
    kind = next(r.kind for r in records if r.iteration > warmup)
    records = [r for r in records if r.kind == kind]
    if kind == CUMULATIVE_MEAN:
        return cumulative_window(records, warmup, measure, images_per_iteration)
    window = in_window(records, warmup, measure)
    if not window:
        raise WindowError("no record of the log lies inside the window %d..%d (records cover %d iterations each)"
                          % (warmup + 1, warmup + measure, max(r.span for r in records)))
    edges = (min(_covered(r)[0] for r in window), max(r.iteration for r in window))
    if kind in (ITERATION, WINDOW_MEAN):
        timed = [r for r in window if r.time_s is not None]
        if not timed:
            raise WindowError("no iteration times in the window")
        iters = sum(r.span for r in timed)
        seconds = sum(r.time_s * r.span for r in timed)
        images = sum(r.images if (r.images is not None and r.span == 1) else images_per_iteration * r.span
                     for r in timed)
        data = [r for r in timed if r.data_time_s is not None]
        data_time = sum(r.data_time_s * r.span for r in data) / sum(r.span for r in data) if data else None
        return TrialEstimate(images / seconds, seconds / iters, data_time, True, iters, edges, EXACT)
    if kind == THROUGHPUT:
        rated = [r for r in window if r.images_per_s]
        if not rated:
            raise WindowError("no throughput figures in the window")
        iters = sum(r.span for r in rated)
        seconds = sum(r.span * images_per_iteration / r.images_per_s for r in rated)
        return TrialEstimate(iters * images_per_iteration / seconds, seconds / iters, None, False, iters,
                             edges, THROUGHPUT_FIGURE)
    # window medians and running means of unknown start: no exact sum exists; take the median
    times = [r.time_s for r in window if r.time_s is not None]
    if not times:
        raise WindowError("no iteration times in the window")
    t = median(times)
    datas = [r.data_time_s for r in window if r.data_time_s is not None]
    return TrialEstimate(images_per_iteration / t, t, median(datas) if datas else None, False,
                         max(r.iteration for r in window) - warmup, edges,
                         GLOBAL_MEAN_FIGURE if kind == GLOBAL_MEAN else WINDOW_MEDIAN_FIGURE)


@dataclass(frozen=True)
class _Point:
    """A record as a point of its running sum: seconds since the chain began."""
    record: object
    chain: int                 # records of one chain can be differenced
    seconds: float             # time summed over the chain up to record.iteration
    data_seconds: Optional[float]


def _chains(records):
    """Each record's place in its running sum. A record whose first covered iteration
    differs from the previous record's starts a new sum; one that starts right after the
    previous record continues the chain (a framework that restarts its meters at a logged
    iteration), any other starts a new chain that cannot be differenced with the old."""
    points = []
    chain = 0
    base = data_base = 0.0
    prev = None
    for rec in records:
        if rec.span < 1 or rec.span > rec.iteration:
            raise CounterError("log line %d: a running mean over %d iterations ending at iteration %d"
                               % (rec.line + 1, rec.span, rec.iteration))
        first = rec.iteration - rec.span + 1
        if prev is not None and first != prev.record.iteration - prev.record.span + 1:
            if first == prev.record.iteration + 1:
                base, data_base = prev.seconds, prev.data_seconds
            else:
                chain += 1
                base, data_base = 0.0, 0.0
        data = None if rec.data_time_s is None or data_base is None else data_base + rec.span * rec.data_time_s
        prev = _Point(rec, chain, base + rec.span * rec.time_s, data)
        points.append(prev)
    return points


def cumulative_window(records, warmup, measure, images_per_iteration):
    """Exact window mean from running means: (n2*g2 - n1*g1) / (n2 - n1).

    The start is the last record at or before the window's start (iteration ``warmup``),
    the end the last record at or before its end (``warmup + measure``), both of one chain
    (``_chains``). Where the chain has no record at or before the start, the start moves to
    its first record; where that leaves no later record at or before the end, the end
    moves to the next record. The estimate's window says which iterations the figure
    covers; one that spans less than half the measured iterations is refused. The data
    time is differenced the same way where the format logs it as a running mean over the
    same iterations, else None.
    """
    lo, hi = warmup + 1, warmup + measure
    timed = [r for r in records if r.time_s is not None]
    if len(timed) < 2:
        raise WindowError("the log has %d running-mean record%s with a time; an exact window mean needs two"
                          % (len(timed), "" if len(timed) == 1 else "s"))
    points = _chains(timed)
    ends = [p for p in points if p.record.iteration <= hi]
    if not ends:
        raise WindowError("the first running mean is at iteration %d, after the window %d..%d ends"
                          % (points[0].record.iteration, lo, hi))
    end = ends[-1]
    chain = [p for p in points if p.chain == end.chain]
    starts = [p for p in chain if p.record.iteration <= warmup]
    start = starts[-1] if starts else chain[0]
    if start is end:
        later = [p for p in chain if p.record.iteration > end.record.iteration]
        if not later:
            raise WindowError("only one running mean (iteration %d) lies near the window %d..%d; an "
                              "exact window mean needs two" % (end.record.iteration, lo, hi))
        end = later[0]
    between = [p for p in chain if start.record.iteration <= p.record.iteration <= end.record.iteration]
    for a, b in zip(between, between[1:]):
        if b.seconds <= a.seconds:
            raise CounterError("running sums shrink: %.6g s by iteration %d (log line %d), %.6g s by iteration "
                               "%d (log line %d)" % (a.seconds, a.record.iteration, a.record.line + 1,
                                                     b.seconds, b.record.iteration, b.record.line + 1))
    iters = end.record.iteration - start.record.iteration
    if 2 * iters < measure:
        raise WindowError("the running means nearest the window %d..%d, at iterations %d and %d, span only %d "
                          "of its %d iterations" % (lo, hi, start.record.iteration, end.record.iteration,
                                                    iters, measure))
    seconds = end.seconds - start.seconds
    data_time = None
    if start.data_seconds is not None and end.data_seconds is not None:
        # the printed rounding can take a near-zero data sum below zero; the true one is not
        data_time = max(0.0, end.data_seconds - start.data_seconds) / iters
    return TrialEstimate(iters * images_per_iteration / seconds, seconds / iters, data_time, True, iters,
                         (start.record.iteration + 1, end.record.iteration), EXACT_CUMULATIVE)


def observed(records, line_times, warmup, measure, images_per_iteration):
    """Throughput from when the log lines arrived: iterations between two lines / elapsed.

    `line_times[i]` is the monotonic time at which log line i arrived. The start anchor is
    the first record at or after the end of warmup, the end anchor the last record inside
    the window, so sparse logs (one line every N iterations) work too.
    """
    records = dedupe(records)
    lo, hi = warmup, warmup + measure
    starts = [r for r in records if r.iteration >= lo]
    ends = [r for r in records if r.iteration <= hi]
    if not starts or not ends:
        raise WindowError("no log lines bracket the window")
    a = min(starts, key=lambda r: r.iteration)
    b = max(ends, key=lambda r: r.iteration)
    if b.iteration <= a.iteration or a.iteration > lo + max(1, measure // 2):
        raise WindowError("log lines bracket too little of the window (%d..%d)" % (a.iteration, b.iteration))
    elapsed = line_times[b.line] - line_times[a.line]
    if elapsed <= 0:
        raise WindowError("log lines of iterations %d and %d arrived together" % (a.iteration, b.iteration))
    iters = b.iteration - a.iteration
    return TrialEstimate(iters * images_per_iteration / elapsed, elapsed / iters, None, True, iters,
                         (a.iteration + 1, b.iteration), EXACT)


def dedupe(records):
    """Keep the first record of each iteration (several ranks may print the same one)."""
    seen = set()
    out = []
    for r in records:
        if r.iteration not in seen:
            seen.add(r.iteration)
            out.append(r)
    return out


# ---------------------------------------------------------------- summaries over repeats

def median(values):
    v = sorted(values)
    n = len(v)
    if n == 0:
        raise ValueError("median of nothing")
    mid = n // 2
    return v[mid] if n % 2 else (v[mid - 1] + v[mid]) / 2.0


def quantile(values, q):
    """Linear interpolation between closest ranks (numpy's default method)."""
    v = sorted(values)
    if not v:
        raise ValueError("quantile of nothing")
    pos = (len(v) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def iqr(values):
    return quantile(values, 0.75) - quantile(values, 0.25)


def cv(values):
    """Coefficient of variation: sample standard deviation / mean (0 for one value)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    var = sum((x - mean) ** 2 for x in values) / (n - 1)
    return math.sqrt(var) / mean if mean else float("nan")


def bootstrap_median_ci(values, confidence=0.95, resamples=2000, seed=0):
    """Percentile bootstrap CI of the median; deterministic for a given seed."""
    import numpy as np

    n = len(values)
    if n == 1:
        return values[0], values[0]
    rng = np.random.default_rng(seed)
    samples = np.asarray(values, dtype=float)[rng.integers(0, n, size=(resamples, n))]
    meds = np.median(samples, axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(meds, [alpha, 1 - alpha])
    return float(low), float(high)


def outliers(values, threshold=OUTLIER_Z):
    """Indexes of values whose modified z-score (0.6745 (x - median) / MAD) exceeds threshold."""
    if len(values) < 3:
        return []
    med = median(values)
    mad = median([abs(x - med) for x in values])
    if mad == 0:
        return []
    return [i for i, x in enumerate(values) if abs(0.6745 * (x - med) / mad) > threshold]


@dataclass(frozen=True)
class CellSummary:
    n: int
    throughput: float            # median over repeats (reported estimator)
    minimum: float
    maximum: float
    iqr: float
    ci_low: Optional[float]      # None when summarize(with_ci=False) skipped the bootstrap
    ci_high: Optional[float]
    cv: float
    iteration_ms: float          # images per iteration / median throughput
    data_ms: Optional[float]     # median over repeats of mean data time
    observed: Optional[float]    # median over repeats (observed estimator)
    flags: List[str]             # names from harness.measure.flags
    outliers: int


def summarize(throughputs: Sequence[float], images_per_iteration: int,
              data_times_s: Sequence[Optional[float]] = (),
              observed_throughputs: Sequence[Optional[float]] = (),
              iteration_times_s: Sequence[float] = (), with_ci: bool = True) -> CellSummary:
    """The median over repeats and its spread, with the flags of harness.measure.flags judged on
    the repeats (unstable, data-bound, estimators-disagree).

    with_ci=False skips the bootstrap CI (and numpy) where no output shows it."""
    thr = list(throughputs)
    med = median(thr)
    lo, hi = bootstrap_median_ci(thr) if with_ci else (None, None)
    iteration_ms = images_per_iteration / med * 1000.0
    datas = [d for d in data_times_s if d is not None]
    data_ms = median(datas) * 1000.0 if datas else None
    obs = [o for o in observed_throughputs if o is not None]
    obs_med = median(obs) if obs else None
    iters = [t for t in iteration_times_s if t]
    iter_ref = median(iters) * 1000.0 if iters else iteration_ms
    raised = [name for name, hit in ((flags.UNSTABLE, flags.unstable(thr)),
                                      (flags.DATA_BOUND, flags.data_bound(data_ms, iter_ref)),
                                      (flags.ESTIMATORS_DISAGREE, flags.estimators_disagree(med, obs_med)))
              if hit]
    return CellSummary(len(thr), med, min(thr), max(thr), iqr(thr), lo, hi, cv(thr), iteration_ms,
                       data_ms, obs_med, raised, len(outliers(thr)))
