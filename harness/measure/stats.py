"""Statistics as pure functions: per-trial throughput estimators and per-cell summaries.

Throughput of a trial is images in the measured window divided by the wall time of the
window, never a mean of per-iteration rates. Two independent estimators:

- reported: from the times the framework printed (exact where it prints every iteration,
  window means, or running means that can be differenced; honest approximations for
  window medians, running means of unknown start and throughput-only logs);
- observed: from the arrival times of the log lines themselves (runner.py's clock).

A reported figure comes from one run of its log (a log may hold a restarted process
after the first), and carries the bound on its error that the printed digits imply:
``exact`` means that bound is within EXACT_WITHIN of the figure, over the window asked for.
"""

import bisect
import dataclasses
import itertools
import math
import operator
from dataclasses import dataclass
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from harness.measure import flags
from harness.measure.records import (
    CUMULATIVE_MEAN,
    EXACT,
    EXACT_CUMULATIVE,
    GLOBAL_MEAN,
    GLOBAL_MEAN_FIGURE,
    ITERATION,
    THROUGHPUT,
    THROUGHPUT_FIGURE,
    WINDOW_MEAN,
    WINDOW_MEANS_FIGURE,
    WINDOW_MEDIAN_FIGURE,
    IterationRecord,
)

OUTLIER_Z = 3.5  # modified z-score on the MAD
_RUN = operator.attrgetter("run")
_ITERATION = operator.attrgetter("iteration")
EXACT_WITHIN = 0.001  # a figure is exact when its error bound is at most 0.1% of it
# the most iterations outside the window asked for that a figure of running means may take in
# (the nearest points of its sums lie outside it), as a share of the measured iterations; past
# it, the figure would be mostly of other iterations (warm-up ones, say): refused
WIDEN_MAX = 0.5
UNIT_ROUNDOFF = 2.0**-53  # of the float sums behind a figure

Records = Sequence[IterationRecord]


class WindowError(ValueError):
    """The log does not cover the measured window."""


class CounterError(WindowError):
    """The log's counters run backwards: an iteration goes back, or a running sum shrinks."""


@dataclass(frozen=True)
class RunSpan:
    """One run of a log: the iterations its records cover and the lines they are on (1-based)."""

    run: int
    first: int
    last: int
    first_line: int
    last_line: int

    def text(self) -> str:
        return "run %d covers iterations %d..%d (lines %d..%d)" % (
            self.run,
            self.first,
            self.last,
            self.first_line,
            self.last_line,
        )


@dataclass(frozen=True)
class TrialEstimate:
    throughput: Optional[float]  # images / s (None: images_per_iteration not given, nor counted by the log)
    iteration_time_s: Optional[float]  # mean seconds per iteration in the window (None: images/s only, and
    # images_per_iteration not given)
    data_time_s: Optional[float]  # mean data seconds per iteration, None if not logged
    exact: bool  # error_bound_s within EXACT_WITHIN of the figure, over the window asked for
    iterations: int  # iterations the figure is based on
    window: Tuple[int, int]  # first and last iteration the figure covers
    kind: str  # one of records.FIGURE_KINDS
    # the most |iteration_time_s - the true mean over `window`| can be, by the printed digits
    # (None: no bound, for approximate kinds and where records leave iterations out)
    error_bound_s: Optional[float] = None
    data_error_bound_s: Optional[float] = None
    requested: Optional[Tuple[int, int]] = None  # the window asked for
    run: int = 1  # the run of the log the figure comes from
    runs: Tuple[RunSpan, ...] = ()  # every run of the log
    missing: int = 0  # iterations of `window` no record covers: the figure is the others'
    # the iterations the log's data means cover nearest the figure's window where they are not
    # its window: data_time_s is then None (a data time of other iterations is no figure of it)
    data_window: Optional[Tuple[int, int]] = None


def _covered(rec: IterationRecord) -> Tuple[int, int]:
    return rec.iteration - rec.span + 1, rec.iteration


def in_window(records: Iterable[IterationRecord], warmup: int, measure: int) -> List[IterationRecord]:
    """Records whose covered iterations lie inside (warmup, warmup + measure]."""
    lo, hi = warmup + 1, warmup + measure
    out = []
    for rec in records:
        first, last = _covered(rec)
        if first >= lo and last <= hi:
            out.append(rec)
    return out


def _check_order(records: Records) -> None:
    """Iterations must rise in log order (after dedupe: repeats of other ranks are gone)."""
    its = [r.iteration for r in records]
    if all(map(operator.lt, its, its[1:])):
        return
    for prev, rec in zip(records, records[1:]):
        if rec.iteration <= prev.iteration:
            raise CounterError(
                "iteration goes back from %d (log line %d) to %d (log line %d)"
                % (prev.iteration, prev.line + 1, rec.iteration, rec.line + 1)
            )


def _reach(records: Records, warmup: int, measure: int) -> None:
    """The log must cover the whole window: no figure from part of it."""
    lo, hi = warmup + 1, warmup + measure
    if not records:
        raise WindowError("the log has no iteration records; the window is %d..%d" % (lo, hi))
    last = records[-1].iteration
    if last < lo:
        raise WindowError(
            "the log never reaches the window: it reaches iteration %d, the window is %d..%d" % (last, lo, hi)
        )
    if last < hi:
        raise WindowError("the window %d..%d is larger than the log: it reaches iteration %d" % (lo, hi, last))


RUN_EDGE = 8  # records at a run's start (and end) that say the iterations it covers


def run_spans(records: Records) -> Tuple[Dict[int, List[IterationRecord]], Tuple[RunSpan, ...]]:
    """{run: its records} in log order, and the RunSpan of each (from its first and last
    RUN_EDGE records: a run's records rise)."""
    by_run: Dict[int, List[IterationRecord]] = {}
    for run, group in itertools.groupby(records, key=_RUN):
        by_run.setdefault(run, []).extend(group)
    spans = tuple(
        RunSpan(
            run,
            min(r.iteration - max(r.span, 1) + 1 for r in recs[:RUN_EDGE]),
            max(r.iteration for r in recs[-RUN_EDGE:]),
            recs[0].line + 1,
            recs[-1].line + 1,
        )
        for run, recs in by_run.items()
    )
    return by_run, spans


def pick_run(spans: Sequence[RunSpan], lo: int, hi: int, run: Optional[int] = None) -> int:
    """The run a figure of lo..hi comes from: `run` where given; else the last run whose
    records cover the window; else the last that reaches its end and covers at least half
    of it (a run that starts inside the window: its figure then covers less, and says so);
    else WindowError naming each run."""
    if run is not None:
        if run not in [s.run for s in spans]:
            raise WindowError(
                "the log holds %d run%s; there is no run %d" % (len(spans), "" if len(spans) == 1 else "s", run)
            )
        return run
    if len(spans) == 1:
        return spans[0].run
    covering = [s for s in spans if s.first <= lo and s.last >= hi]
    if covering:
        return covering[-1].run
    partly = [s for s in spans if s.last >= hi and 2 * (hi - max(lo, s.first) + 1) >= hi - lo + 1]
    if partly:
        return partly[-1].run
    if all(s.first > hi for s in spans):
        raise WindowError(
            "no record of the log lies inside the window %d..%d: the records of every run begin "
            "after it (%s)" % (lo, hi, "; ".join(s.text() for s in spans))
        )
    raise WindowError(
        "no single run of the log covers the window %d..%d, and a figure never mixes runs: %s; "
        "pick one with --run N" % (lo, hi, "; ".join(s.text() for s in spans))
    )


def reported(
    records: Records, warmup: int, measure: int, images_per_iteration: Optional[int], run: Optional[int] = None
) -> TrialEstimate:
    """Throughput from the framework's own figures over the measured window.

    images_per_iteration may be None (not known): a figure that depends on it is then None.
    The figure comes from one run of the log (``run``, else the last that covers the window:
    pick_run). The records' kind at the window decides the estimator: per-iteration times
    and window means add up exactly (``window_sum``); running means are differenced exactly
    (``cumulative_window``); window medians, running means of unknown start and
    throughput-only figures give an approximation. The estimate's ``window`` is what the
    figure really covers, its ``error_bound_s`` what the printed digits allow.
    """
    records = dedupe(records)
    lo, hi = warmup + 1, warmup + measure
    by_run, spans = run_spans(records)
    chosen = pick_run(spans, lo, hi, run) if records else run or 1
    records = by_run.get(chosen, [])
    _check_order(records)
    _reach(records, warmup, measure)
    # the records near the window (they rise: _check_order) and two on either side, for the
    # running means whose points lie just outside it and the spacing of window means
    first = bisect.bisect_right(records, lo - 1, key=_ITERATION)
    last = bisect.bisect_right(records, hi, key=_ITERATION)
    kind = records[bisect.bisect_right(records, warmup, key=_ITERATION)].kind
    near = [r for r in records[max(0, first - 2) : last + 2] if r.kind == kind]
    if kind == CUMULATIVE_MEAN:
        est = cumulative_window(near, warmup, measure, images_per_iteration)
    elif kind in (ITERATION, WINDOW_MEAN):
        est = window_sum(near, warmup, measure, images_per_iteration)
    else:
        est = _approximate(near, kind, warmup, measure, images_per_iteration)
    est = dataclasses.replace(est, requested=(lo, hi), run=chosen, runs=spans)
    return dataclasses.replace(est, exact=is_exact(est))


def _rate(images_per_iteration: Optional[int], seconds_per_iteration: float) -> Optional[float]:
    """images/s, None where the images per iteration are not known."""
    return None if images_per_iteration is None else images_per_iteration / seconds_per_iteration


def is_exact(est: TrialEstimate) -> bool:
    """Within EXACT_WITHIN of the truth by its bound, over the window asked for, every iteration counted."""
    return (
        est.error_bound_s is not None
        and est.iteration_time_s is not None
        and est.iteration_time_s > 0
        and est.missing == 0
        and est.error_bound_s <= EXACT_WITHIN * est.iteration_time_s
        and (est.requested is None or tuple(est.window) == tuple(est.requested))
    )


def _approximate(
    records: Records, kind: str, warmup: int, measure: int, images_per_iteration: Optional[int]
) -> TrialEstimate:
    window = in_window(records, warmup, measure)
    if not window:
        raise WindowError(
            "no record of the log lies inside the window %d..%d (records cover %d iterations each)"
            % (warmup + 1, warmup + measure, max(r.span for r in records))
        )
    edges = (min(_covered(r)[0] for r in window), max(r.iteration for r in window))
    if kind == THROUGHPUT:
        rated = [(r.span, r.images_per_s) for r in window if r.images_per_s]
        if not rated:
            raise WindowError("no throughput figures in the window")
        iters = sum(span for span, _ in rated)
        rate = iters / sum(span / images_per_s for span, images_per_s in rated)  # images/s over the window
        bound = None
        if images_per_iteration is not None:  # the printed digits bound the time the rates imply
            got = _tile(_rate_times(window, images_per_iteration), edges[0], edges[1])
            if got is not None and got.error is not None and math.isfinite(got.error):
                bound = _per(got.error, got.iterations)
        return TrialEstimate(
            rate,
            None if images_per_iteration is None else images_per_iteration / rate,
            None,
            False,
            iters,
            edges,
            THROUGHPUT_FIGURE,
            bound,
        )
    # window medians and running means of unknown start: no exact sum exists; take the median
    times = [r.time_s for r in window if r.time_s is not None]
    if not times:
        raise WindowError("no iteration times in the window")
    t = median(times)
    datas = [r.data_time_s for r in window if r.data_time_s is not None]
    return TrialEstimate(
        _rate(images_per_iteration, t),
        t,
        median(datas) if datas else None,
        False,
        max(r.iteration for r in window) - warmup,
        edges,
        GLOBAL_MEAN_FIGURE if kind == GLOBAL_MEAN else WINDOW_MEDIAN_FIGURE,
    )


# One printed figure as the sums below use it: the mean `value` of the `span` iterations
# ending at `iteration`, off by at most `rounding`.
class _Mean(NamedTuple):
    iteration: int
    span: int
    value: float
    rounding: float
    line: int


def _times(records: Records) -> List[_Mean]:
    return [_Mean(r.iteration, r.span, r.time_s, r.rounding, r.line) for r in records if r.time_s is not None]


def _rate_times(records: Records, images_per_iteration: int) -> List[_Mean]:
    """Throughput records as the mean iteration times they imply, each with the bound its
    printed digits give: a rate v printed to within h stands for images / v seconds per
    iteration, off by at most images * h / (v * (v - h)); unbounded where h is not below v
    (or the record has no rate)."""
    out = []
    for r in records:
        v, h = r.images_per_s, r.rounding
        if not v or not v > 0:
            out.append(_Mean(r.iteration, r.span, math.nan, math.inf, r.line))
            continue
        off = images_per_iteration * h / (v * (v - h)) if h < v else math.inf
        out.append(_Mean(r.iteration, r.span, images_per_iteration / v, off, r.line))
    return out


def _datas(records: Records) -> Tuple[Optional[str], List[_Mean]]:
    """The data figures, with the span and kind each covers; (kind, means)."""
    out: List[_Mean] = []
    kind: Optional[str] = None
    for r in records:
        if r.data_time_s is None:
            continue
        kind = r.data_kind or r.kind
        out.append(_Mean(r.iteration, r.data_span or r.span, r.data_time_s, r.rounding, r.line))
    return kind, out


@dataclass(frozen=True)
class _Sum:
    seconds: float
    error: Optional[float]  # bound on |seconds - the true sum|; None: not bounded
    iterations: int  # counted (first..last less the missing ones)
    first: int
    last: int
    missing: int  # iterations of first..last no figure covers


def _tile(means: Iterable[_Mean], lo: int, hi: int) -> Optional[_Sum]:
    """The sum of the window means lying inside lo..hi, or None where none does."""
    inside = sorted(
        (m for m in means if m.iteration - m.span + 1 >= lo and m.iteration <= hi), key=lambda m: m.iteration
    )
    if not inside:
        return None
    first, last = inside[0].iteration - inside[0].span + 1, inside[-1].iteration
    seconds = error = magnitude = 0.0
    iters = missing = 0
    overlap = False
    expect = first
    for m in inside:
        start = m.iteration - m.span + 1
        if start > expect:
            missing += start - expect
        elif start < expect:
            overlap = True
        expect = max(expect, m.iteration + 1)
        seconds += m.span * m.value
        error += m.span * m.rounding
        magnitude += abs(m.span * m.value)
        iters += m.span
    error += 2 * UNIT_ROUNDOFF * len(inside) * magnitude
    return _Sum(seconds, None if overlap or missing or math.isnan(error) else error, iters, first, last, missing)


def window_sum(records: Records, warmup: int, measure: int, images_per_iteration: Optional[int]) -> TrialEstimate:
    """Per-iteration times and window means over the window, added up: every iteration once.

    The window is what the records lying inside the one asked for cover. Where they leave
    iterations out, or count one twice (a log read with another interval than it was
    written with), the figure is the mean of what they cover and has no bound."""
    lo, hi = warmup + 1, warmup + measure
    got = _tile(_times(records), lo, hi)
    if got is None:
        inside = in_window(records, warmup, measure)
        if inside:
            raise WindowError("no iteration times in the window")
        raise WindowError(
            "no record of the log lies inside the window %d..%d (records cover %d iterations each)"
            % (lo, hi, max(r.span for r in records))
        )
    inside = [r for r in in_window(records, warmup, measure) if r.time_s is not None]
    if images_per_iteration is None and any(r.images is None or r.span != 1 for r in inside):
        images = None  # the log does not count them
    else:
        per = 0 if images_per_iteration is None else images_per_iteration  # None: every record counts its own
        images = sum(r.images if (r.images is not None and r.span == 1) else per * r.span for r in inside)
    data_time, data_bound, data_window = _data_over(records, got.first, got.last, got.error is not None)
    kind = EXACT if all(r.span == 1 for r in inside) else WINDOW_MEANS_FIGURE
    bound = _per(got.error, got.iterations)
    if spaced_wider(records) is not None:  # the spans do not describe this log: no bound
        bound = data_bound = None
    return TrialEstimate(
        None if images is None else images / got.seconds,
        got.seconds / got.iterations,
        data_time,
        True,
        got.iterations,
        (got.first, got.last),
        kind,
        bound,
        data_bound,
        missing=got.missing,
        data_window=data_window,
    )


def spaced_wider(records: Records) -> Optional[Tuple[IterationRecord, IterationRecord]]:
    """(a, b) for two records of window means that lie further apart than the later one's span
    (and its iterations less than a span after the earlier), or None. A log skips fewer
    iterations than a span only where an epoch ends before its interval does; more, and the
    records say a window other than the one the log was written with (read with another
    interval or window)."""
    for a, b in zip(records, records[1:]):
        if b.iteration - b.span - a.iteration > b.span:
            return a, b
    return None


def _per(error: Optional[float], iterations: int) -> Optional[float]:
    return None if error is None else error / iterations


DataFigure = Tuple[Optional[float], Optional[float], Optional[Tuple[int, int]]]


def _data_over(records: Records, first: int, last: int, time_bounded: bool = True) -> DataFigure:
    """(mean data time, its bound, None) over first..last; None, None, None where the log
    prints none; None, None, (a, b) where its data means cover a..b nearest, not first..last
    (a format whose data meter starts elsewhere than its time meter), or, beside a time figure
    the printed digits bound (``time_bounded``), leave iterations of it out or count some twice:
    no figure of the time figure's iterations. Beside an unbounded time figure, a data time of
    the same edges has no bound either."""
    kind, means = _datas(records)
    if not means:
        return None, None, None
    if kind == CUMULATIVE_MEAN:
        got = _running_sum(_chain_points(means), first - 1, last, edges_only=False)
    elif kind in (ITERATION, WINDOW_MEAN):
        got = _tile(means, first, last)
    else:
        return None, None, None
    if got is None or got.iterations <= 0:
        return None, None, None
    if (got.first, got.last) != (first, last) or (got.error is None and time_bounded):
        return None, None, (got.first, got.last)  # other iterations, or some twice
    # the printed rounding can take a near-zero data sum below zero; the true one is not
    return max(0.0, got.seconds) / got.iterations, _per(got.error, got.iterations), None


# ------------------------------------------------------------------ running means


# A point of a running sum: the seconds summed from its chain's start to `iteration`,
# off by at most `error`. A chain's start is a point too (nothing summed yet, no error).
class _Point(NamedTuple):
    iteration: int
    seconds: float
    error: float
    magnitude: float
    chain: int
    line: int


def _chain_points(means: Sequence[_Mean]) -> List[_Point]:
    """The points of the running sums: a mean whose first iteration differs from the one
    before's begins a chain (a framework that restarts its meters), whose start point sits
    right before its first iteration. Chains must follow one another; points of one chain
    can be differenced."""
    points: List[_Point] = []
    chains: List[int] = []
    start: Optional[int] = None
    for m in means:
        if m.span < 1 or m.span > m.iteration:
            raise CounterError(
                "log line %d: a running mean over %d iterations ending at iteration %d"
                % (m.line + 1, m.span, m.iteration)
            )
        first = m.iteration - m.span + 1
        if first != start:
            if points and first - 1 < points[-1].iteration:
                raise CounterError(
                    "the running mean of log line %d starts at iteration %d, inside the one of "
                    "log line %d (up to iteration %d)" % (m.line + 1, first, points[-1].line + 1, points[-1].iteration)
                )
            start = first
            chains.append(len(points))
            points.append(_Point(first - 1, 0.0, 0.0, 0.0, len(chains) - 1, m.line))
        seconds = m.span * m.value
        points.append(_Point(m.iteration, seconds, m.span * m.rounding, abs(seconds), len(chains) - 1, m.line))
    return points


def _check_sums(points: Sequence[_Point]) -> None:
    """A running sum never shrinks by more than the rounding of its two printed means allows."""
    for a, b in zip(points, points[1:]):
        if a.chain != b.chain:
            continue
        slack = a.error + b.error + 4 * UNIT_ROUNDOFF * (a.magnitude + b.magnitude)
        if b.seconds < a.seconds - slack:
            raise CounterError(
                "running sums shrink beyond their printed rounding: %.6g s by iteration %d (log line "
                "%d), %.6g s by iteration %d (log line %d)"
                % (a.seconds, a.iteration, a.line + 1, b.seconds, b.iteration, b.line + 1)
            )


def _running_sum(points: Sequence[_Point], start: int, end: int, edges_only: bool = True) -> Optional[_Sum]:
    """The sum over start+1..end from the points (start and end are point iterations), chain by
    chain; iterations between chains are missing. None where no point sits at either edge."""
    its = {p.iteration for p in points}
    if start not in its or end not in its or end <= start:
        if edges_only:
            return None
        below = [p.iteration for p in points if p.iteration <= start]
        upto = [p.iteration for p in points if p.iteration <= end]
        if not below or not upto or upto[-1] <= below[-1]:
            return None
        start, end = below[-1], upto[-1]
    seconds = error = magnitude = 0.0
    covered = 0
    by_chain: Dict[int, List[_Point]] = {}
    for p in points:
        by_chain.setdefault(p.chain, []).append(p)
    for chain in by_chain.values():
        lo, hi = max(chain[0].iteration, start), min(chain[-1].iteration, end)
        if hi <= lo:
            continue
        a = next(p for p in chain if p.iteration == lo)
        b = next(p for p in chain if p.iteration == hi)
        seconds += b.seconds - a.seconds
        error += a.error + b.error
        magnitude += a.magnitude + b.magnitude
        covered += hi - lo
    missing = (end - start) - covered
    error += 4 * UNIT_ROUNDOFF * magnitude
    return _Sum(seconds, None if missing else error, covered, start + 1, end, missing)


def cumulative_window(
    records: Records, warmup: int, measure: int, images_per_iteration: Optional[int]
) -> TrialEstimate:
    """Exact window mean from running means: (n2*g2 - n1*g1) / (n2 - n1).

    The points are the records' running sums and each chain's start (_chain_points). The
    start is the last point at or before the window's start (iteration ``warmup``), else the
    first point; the end the last point at or before the window's end, else the next one
    after the start. Iterations between chains (a framework's meters reset after its first
    batches of an epoch) count as missing: the figure is the mean of the others, with no
    bound, unless one stretch they give whole (_gapless) holds at least half the measured
    iterations: the figure is then that stretch's. The estimate's window says which iterations
    the figure covers; one that covers less than half the measured iterations, or takes in more
    than WIDEN_MAX of them outside the window, is refused. The data time is differenced the same
    way, from the data's own running means or window means where the format logs them.
    """
    lo, hi = warmup + 1, warmup + measure
    means = _times(records)
    if not means:
        raise WindowError("the log has no running-mean record with a time")
    points = _chain_points(means)
    _check_sums(points)
    its = sorted({p.iteration for p in points})
    before = [i for i in its if i <= lo - 1]
    start = before[-1] if before else its[0]
    upto = [i for i in its if start < i <= hi]
    if upto:
        end = upto[-1]
    else:
        later = [i for i in its if i > start]
        if not later:
            raise WindowError(
                "only one running mean (iteration %d) lies near the window %d..%d; an exact window "
                "mean needs two" % (means[-1].iteration, lo, hi)
            )
        end = later[0]
    got = _running_sum(points, start, end)
    assert got is not None  # start and end are both points, end after start
    if got.missing:  # the sums leave iterations out: the longest stretch they give whole, if long enough
        whole = _gapless(points, start, end)
        if 2 * (whole[1] - whole[0]) >= measure:
            start, end = whole
            got = _running_sum(points, start, end)
            assert got is not None and not got.missing
    covered = got.iterations
    if 2 * covered < measure:
        raise WindowError(
            "the running means nearest the window %d..%d, at iterations %d and %d, span only %d "
            "of its %d iterations" % (lo, hi, start, end, covered, measure)
        )
    outside = max(0, lo - start - 1) + max(0, end - hi)
    if outside > WIDEN_MAX * measure:
        raise WindowError(
            "the running means nearest the window %d..%d, at iterations %d and %d, take in %d "
            "iterations outside it, more than half of its %d: their mean is mostly of other "
            "iterations" % (lo, hi, start, end, outside, measure)
        )
    if got.error is not None and got.seconds - got.error < 0 < got.seconds + got.error:
        # the true sum is no less than 0: the rounding leaves 0..seconds + error, whose middle is
        # the figure (printed means that difference to nothing or less are no counter going back)
        top = got.seconds + got.error
        low = max(0.0, got.seconds - got.error)
        got = dataclasses.replace(got, seconds=(low + top) / 2, error=(top - low) / 2)
    if got.seconds <= 0:
        raise CounterError(
            "the running means at iterations %d and %d add up to no time (%.6g s)" % (start, end, got.seconds)
        )
    data_time, data_bound, data_window = _data_over(records, start + 1, end, got.error is not None)
    return TrialEstimate(
        _rate(images_per_iteration, got.seconds / covered),
        got.seconds / covered,
        data_time,
        True,
        covered,
        (start + 1, end),
        EXACT_CUMULATIVE,
        _per(got.error, covered),
        data_bound,
        missing=got.missing,
        data_window=data_window,
    )


def _gapless(points: Sequence[_Point], start: int, end: int) -> Tuple[int, int]:
    """The longest stretch start'..end' inside start..end whose running sums leave no iteration
    out: one chain, or chains each of which starts where the one before ends (the first
    point of a chain sits right before its first iteration)."""
    stretches: List[List[int]] = []  # [first point, last point] of chains that follow on
    for _, group in itertools.groupby(points, key=operator.attrgetter("chain")):
        its = [p.iteration for p in group]
        if stretches and stretches[-1][1] == its[0]:
            stretches[-1][1] = its[-1]
        else:
            stretches.append([its[0], its[-1]])
    best = (start, start)
    for a, b in stretches:
        lo_point = max((p.iteration for p in points if a <= p.iteration <= b and p.iteration <= start), default=None)
        if lo_point is None:
            lo_point = min((p.iteration for p in points if a <= p.iteration <= b and p.iteration >= start), default=b)
        hi_point = max((p.iteration for p in points if lo_point <= p.iteration <= min(b, end)), default=lo_point)
        if hi_point - lo_point > best[1] - best[0]:
            best = (lo_point, hi_point)
    return best


def observed(
    records: Records, line_times: Sequence[float], warmup: int, measure: int, images_per_iteration: int
) -> TrialEstimate:
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
    return TrialEstimate(
        iters * images_per_iteration / elapsed,
        elapsed / iters,
        None,
        True,
        iters,
        (a.iteration + 1, b.iteration),
        EXACT,
    )


def dedupe(records: Records) -> Records:
    """Keep the first record of each iteration of each run (several ranks may print the same one)."""
    keys = [(r.run, r.iteration) for r in records]
    if len(set(keys)) == len(keys):
        return records
    seen = set()
    out: List[IterationRecord] = []
    for key, r in zip(keys, records):
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


# ---------------------------------------------------------------- summaries over repeats


def median(values: Iterable[float]) -> float:
    v = sorted(values)
    n = len(v)
    if n == 0:
        raise ValueError("median of nothing")
    mid = n // 2
    return v[mid] if n % 2 else (v[mid - 1] + v[mid]) / 2.0


def quantile(values: Iterable[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method)."""
    v = sorted(values)
    if not v:
        raise ValueError("quantile of nothing")
    pos = (len(v) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def iqr(values: Sequence[float]) -> float:
    return quantile(values, 0.75) - quantile(values, 0.25)


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation: sample standard deviation / mean (0 for one value)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    var = sum((x - mean) ** 2 for x in values) / (n - 1)
    return math.sqrt(var) / mean if mean else float("nan")


def bootstrap_median_ci(
    values: Sequence[float], confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> Tuple[float, float]:
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


def median_interval(values: Sequence[float], confidence: float = 0.95) -> Optional[Tuple[float, float]]:
    """Distribution-free interval of the median from two order statistics, or None when there are
    too few values for one.

    Of n independent values from one continuous distribution, the number below its median is
    Binomial(n, 1/2), so the k-th smallest and k-th largest value, [x(k), x(n+1-k)], hold the
    median between them with probability 1 - 2 P(Binomial(n, 1/2) <= k - 1), whatever the
    distribution. k is the largest for which that is at least `confidence` (the narrowest such
    interval). At 95% the first n with any k is 6 (k = 1: 1 - 2/64 = 0.969); 15 values give k = 4.
    Unlike the bootstrap (bootstrap_median_ci), the coverage holds at small n, and the interval
    needs no seed: the same values, the same interval, which is what a stopping rule wants.
    """
    xs = sorted(values)
    n = len(xs)
    k, below = 0, 0.0  # below: P(Binomial(n, 1/2) <= k - 1) for the next k
    while k < n // 2:
        below += math.comb(n, k) / 2.0**n
        if 1.0 - 2.0 * below < confidence:
            break
        k += 1
    if k == 0:
        return None
    return xs[k - 1], xs[n - k]


def relative_half_width(values: Sequence[float], confidence: float = 0.95) -> Optional[float]:
    """Half the width of median_interval over the median: 0.02 is +-2% of the figure; None when
    there are too few values for the interval."""
    interval = median_interval(values, confidence)
    if interval is None:
        return None
    med = median(values)
    return (interval[1] - interval[0]) / 2.0 / abs(med) if med else float("inf")


def outliers(values: Sequence[float], threshold: float = OUTLIER_Z) -> List[int]:
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
    throughput: float  # median over repeats (reported estimator)
    minimum: float
    maximum: float
    iqr: float
    ci_low: Optional[float]  # None when summarize(with_ci=False) skipped the bootstrap
    ci_high: Optional[float]
    cv: float
    iteration_ms: float  # images per iteration / median throughput
    data_ms: Optional[float]  # median over repeats of mean data time
    observed: Optional[float]  # median over repeats (observed estimator)
    flags: List[str]  # names from harness.measure.flags
    outliers: int


def summarize(
    throughputs: Sequence[float],
    images_per_iteration: int,
    data_times_s: Sequence[Optional[float]] = (),
    observed_throughputs: Sequence[Optional[float]] = (),
    iteration_times_s: Sequence[Optional[float]] = (),
    with_ci: bool = True,
) -> CellSummary:
    """The median over repeats and its spread, with the flags of harness.measure.flags judged on
    the repeats (unstable, bimodal, data-bound, estimators-disagree).

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
    raised = [
        name
        for name, hit in (
            (flags.UNSTABLE, flags.unstable(thr)),
            (flags.BIMODAL, flags.bimodal(thr)),
            (flags.DATA_BOUND, flags.data_bound(data_ms, iter_ref)),
            (flags.ESTIMATORS_DISAGREE, flags.estimators_disagree(med, obs_med)),
        )
        if hit
    ]
    return CellSummary(
        len(thr),
        med,
        min(thr),
        max(thr),
        iqr(thr),
        lo,
        hi,
        cv(thr),
        iteration_ms,
        data_ms,
        obs_med,
        raised,
        len(outliers(thr)),
    )
