"""A log in, a figure out: read a training log and give its measured-window figure.

`detbench scrape` and `detbench import` both go through here, and the figure is the one
harness/measure/ingest.py gives a trial of the same log (stats.dedupe, then stats.reported).
How a log is read: by a framework's own scraper and options (`--framework`), by a format
with its defaults (`--format`), or by the format its own lines show (detection).
"""
import math
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from harness import frameworks
from harness.measure import scrapers, stats
from harness.errors import UserError
from harness.measure import records as rec_kinds
from harness.measure.records import IterationRecord

# the figure kind of a window's records, for a stats.reported() that does not say it itself
_KIND_OF_RECORDS = {
    rec_kinds.ITERATION: rec_kinds.EXACT, rec_kinds.WINDOW_MEAN: rec_kinds.EXACT,
    rec_kinds.WINDOW_MEDIAN: rec_kinds.WINDOW_MEDIAN_FIGURE, rec_kinds.CUMULATIVE_MEAN: rec_kinds.GLOBAL_MEAN_FIGURE,
    rec_kinds.GLOBAL_MEAN: rec_kinds.GLOBAL_MEAN_FIGURE, rec_kinds.THROUGHPUT: rec_kinds.THROUGHPUT_FIGURE,
}


@dataclass(frozen=True)
class Reading:
    """How one log is read: the scraper, its options, and why that one."""
    scraper: str
    options: Dict[str, object] = field(default_factory=dict)
    how: str = ""          # "framework F", "--format", "detected"


def reading(log, framework=None, fmt=None):
    """The Reading of `log`: --format wins (with the format's defaults), then --framework
    (its scraper and the options detbench runs it with), else the format the log's lines show."""
    if fmt is not None:
        if fmt not in scrapers.SCRAPERS:
            raise UserError("unknown format %r (known: %s; see detbench scrape --list-formats)"
                            % (fmt, ", ".join(sorted(scrapers.SCRAPERS))))
        return Reading(fmt, {}, "--format")
    if framework is not None:
        fw = frameworks.get(framework)
        return Reading(fw.scraper, dict(fw.scrape_options), "framework %s" % fw.name)
    found = _detect(log)
    if len(found) != 1:
        raise UserError("%s: %s; name it with --format NAME (detbench scrape --list-formats lists them)"
                        % (log, "matches no known log format" if not found else
                           "mixes the formats %s" % " and ".join(found)))
    return Reading(found[0], {}, "detected")


def _detect(log):
    try:
        return scrapers.detect(log)
    except OSError as exc:
        raise UserError("%s: cannot read: %s" % (log, exc.strerror)) from None


def read(log, how):
    """(records, errors) of the log as its Reading says: records only, of every iteration line."""
    try:
        records, errors = scrapers.scrape_path(how.scraper, log, **how.options)
    except OSError as exc:
        raise UserError("%s: cannot read: %s" % (log, exc.strerror)) from None
    return [r for r in records if isinstance(r, IterationRecord)], errors


def require_records(log, how, records):
    """UserError when the log gave no record, naming the format its lines show if another."""
    if records:
        return
    hint = ""
    if how.how != "detected":
        found = _detect(log)
        if len(found) == 1 and found[0] != how.scraper:
            hint = "; its lines are %s: read it with --format %s" % (found[0], found[0])
    raise UserError("%s: no %s training record in the log%s" % (log, how.scraper, hint))


@dataclass(frozen=True)
class Figure:
    """The measured window's figure of one log, as `detbench scrape` prints it."""
    window: Tuple[int, int]
    iteration_time_s: Optional[float]
    data_time_s: Optional[float]
    throughput: Optional[float]
    exact: bool
    kind: str

    def as_dict(self):
        return {"window": list(self.window), "iteration_time_s": self.iteration_time_s,
                "data_time_s": self.data_time_s, "throughput": self.throughput,
                "exact": self.exact, "kind": self.kind}


def check_window(warmup, measure):
    if warmup is None or measure is None:
        raise UserError("give both --warmup and --measure (or neither: the records only)")
    if warmup < 0 or measure < 1:
        raise UserError("--warmup must be at least 0 and --measure at least 1 (got %d and %d)" % (warmup, measure))


def figure(log, records, warmup, measure, images_per_iteration=None):
    """The window figure of `records` read from `log`, exactly as a trial of that log gets it.

    Without images_per_iteration, a figure that would depend on it is None: the throughput
    unless the log counts the images of its window itself, the iteration time of a log that
    prints images/s only.
    """
    records = stats.dedupe(records)
    last = max((r.iteration for r in records), default=0)
    if last < warmup + measure:
        raise UserError("%s: the log ends at iteration %d; the window needs iterations %d..%d"
                        % (log, last, warmup + 1, warmup + measure))
    if images_per_iteration is not None:
        est = _reported(log, records, warmup, measure, images_per_iteration)
        return _figure(est, est.throughput, est.iteration_time_s, records, warmup, measure)
    # not knowing the images per iteration, compute with two guesses: a figure that does
    # not move between them does not depend on the unknown (the log carries what it needs)
    one = _reported(log, records, warmup, measure, 1)
    two = _reported(log, records, warmup, measure, 2)
    return _figure(one, _same(one.throughput, two.throughput), _same(one.iteration_time_s, two.iteration_time_s),
                   records, warmup, measure)


def _reported(log, records, warmup, measure, images_per_iteration):
    try:
        return stats.reported(records, warmup, measure, images_per_iteration)
    except stats.WindowError as exc:
        raise UserError("%s: %s" % (log, exc)) from None


def _same(a, b):
    return a if a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9) else None


def _figure(est, throughput, iteration_time_s, records, warmup, measure):
    window = getattr(est, "window", None)
    kind = getattr(est, "kind", None)
    if window is None or kind is None:   # a stats.reported() that does not yet say them
        inside = stats.in_window(records, warmup, measure)
        window = window or (min(r.iteration - r.span + 1 for r in inside), max(r.iteration for r in inside))
        kind = kind or _KIND_OF_RECORDS[inside[0].kind]
    return Figure((int(window[0]), int(window[1])), iteration_time_s, est.data_time_s, throughput,
                  bool(est.exact), kind)


def window_records(records, fig):
    """The records whose iterations lie inside the figure's window."""
    lo, hi = fig.window
    return [r for r in stats.dedupe(records) if r.iteration - r.span + 1 >= lo and r.iteration <= hi]


def coverage_problem(records, fig):
    """Why an exact figure's records do not cover each iteration of its window exactly once
    (the log was read with another logging interval or window than it was written with), or None."""
    if fig.kind != rec_kinds.EXACT:
        return None
    covered = sorted((r.iteration - r.span + 1, r.iteration) for r in window_records(records, fig)
                     if r.kind in (rec_kinds.ITERATION, rec_kinds.WINDOW_MEAN))
    expect = fig.window[0]
    for first, last in covered:
        if first != expect:
            what = "iterations %d..%d are in no record" % (expect, first - 1) if first > expect else \
                "iteration %d is in two records" % first
            return ("%s, so the log's figures do not add up to the window: it was written with another "
                    "logging interval or window than it is read with" % what)
        expect = last + 1
    return None


def images_in_log(records, fig):
    """(record, images) for the window's records that count their own images (the detbench format)."""
    return [(r, r.images) for r in window_records(records, fig) if r.images is not None and r.span == 1]
