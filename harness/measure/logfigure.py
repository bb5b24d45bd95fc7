"""A log in, a figure out: read a training log and give its measured-window figure.

`detbench scrape` and `detbench import` both go through here, and the figure is the one
harness/measure/ingest.py gives a trial of the same log (stats.dedupe, then stats.reported).
How a log is read: by a framework's own scraper and options (`--framework`), by a format
with its defaults (`--format`), or by the format its own lines show (detection); the epoch
length comes from the log where its lines print it, from `--iters-per-epoch` where they do
not (and, for mmdetection's .log.json, from the text log beside it).

The figure says which run of the log it comes from, the window it covers beside the one
asked for, and the bound on its error that the printed digits imply (stats.reported).
What a user should know of a figure that is not what was asked (another window, several
runs, lines that did not parse) comes as notes: one line each, printed only on success.
"""

import bisect
import collections
import dataclasses
import json
import operator
import os
import re
from dataclasses import dataclass, field
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from harness import frameworks
from harness.measure import scrapers, stats
from harness.errors import UserError
from harness.measure import records as rec_kinds
from harness.measure.records import IterationRecord, ScrapeError
from harness.measure.scrapers import mmdet_v3
from harness.measure.scrapers.common import PathLike

NOISE_LISTED = 3  # parse errors named in a note or a refusal; the rest are counted
_ITERATION = operator.attrgetter("iteration")
SOURCES = ("detected", "named", "framework")  # how a log's format was chosen (Figure.format_source)
# the epoch length an mmdetection text log prints on every line: Epoch [E][I/N]
_EPOCH_LINE_RE = re.compile(r"\bEpoch \[\d+\]\[\d+/(\d+)\]")


@dataclass(frozen=True)
class Reading:
    """How one log is read: the scraper, its options, and why that one."""

    scraper: str
    options: Dict[str, object] = field(default_factory=dict)
    how: str = ""  # "framework F", "--format", "detected"
    source: str = "detected"  # one of SOURCES
    notes: Tuple[str, ...] = ()
    # the options of a framework's reading that a log not made by detbench need not follow
    # (detbench's drivers log with their own interval and window): figures read so have no bound
    assumed: Tuple[str, ...] = ()


def reading(
    log: PathLike, framework: Optional[str] = None, fmt: Optional[str] = None, iters_per_epoch: Optional[int] = None
) -> Reading:
    """The Reading of `log`: --format wins (with the format's defaults), then --framework
    (its scraper and the options detbench runs it with), else the format the log's lines show.
    iters_per_epoch sets the epoch length of a format whose lines do not always print it."""
    if iters_per_epoch is not None and iters_per_epoch < 1:
        raise UserError("--iters-per-epoch must be at least 1 (got %d)" % iters_per_epoch)
    if fmt is not None:
        if fmt not in scrapers.SCRAPERS:
            raise UserError(
                "unknown format %r (known: %s; see detbench scrape --list-formats)"
                % (fmt, ", ".join(sorted(scrapers.SCRAPERS)))
            )
        how = Reading(fmt, {}, "--format", "named")
    elif framework is not None:
        fw = frameworks.get(framework)
        assumed = tuple(k for k in sorted(fw.scrape_options) if k not in scrapers.EPOCH_OPTIONS.values())
        if assumed and _made_by_detbench(log):
            assumed = ()
        how = Reading(fw.scraper, dict(fw.scrape_options), "framework %s" % fw.name, "framework", assumed=assumed)
    else:
        found = _detect(log)
        if len(found) != 1:
            raise UserError(
                "%s: %s; name it with --format NAME (detbench scrape --list-formats lists them)"
                % (log, "matches no known log format" if not found else "mixes the formats %s" % " and ".join(found))
            )
        how = Reading(found[0], {}, "detected", "detected")
    return _with_geometry(log, how, iters_per_epoch)


def _made_by_detbench(log: PathLike) -> bool:
    """Whether the log's first lines hold the lines detbench's drivers print (DETBENCH_...)."""
    try:
        for k, line in enumerate(scrapers.common.read_lines(log)):
            if "DETBENCH_" in line:
                return True
            if k >= scrapers.DETECT_LINES:
                break
    except OSError:
        pass
    return False


def _with_geometry(log: PathLike, how: Reading, iters_per_epoch: Optional[int]) -> Reading:
    """The reading with the window and epoch length the log, the files beside it or the user give."""
    if how.scraper == "mmdet-v3":
        how = _with_window_beside(log, how)
    option = scrapers.EPOCH_OPTIONS.get(how.scraper)
    if option is None:
        return how
    if iters_per_epoch is not None:
        return dataclasses.replace(how, options=dict(how.options, **{option: iters_per_epoch}))
    if how.scraper in ("mmdet-v1", "mmdet-v2") and not how.options.get(option):
        beside, length = _epoch_length_beside(log)
        if length is not None:
            note = "%s: %d iterations per epoch, from the text log beside it (%s)" % (log, length, beside)
            return dataclasses.replace(how, options=dict(how.options, **{option: length}), notes=how.notes + (note,))
    return how


def _epoch_length_beside(log: PathLike) -> Tuple[Optional[str], Optional[int]]:
    """(path, N) of the text log that mmdetection writes beside its .log.json, where one is
    there and prints its epoch length; else (None, None)."""
    path = str(log)
    if not path.endswith(".json"):
        return None, None
    beside = path[: -len(".json")]
    if not os.path.isfile(beside):
        return None, None
    try:
        for k, line in enumerate(scrapers.common.read_lines(beside)):
            m = _EPOCH_LINE_RE.search(line)
            if m:
                return beside, int(m.group(1))
            if k >= scrapers.DETECT_LINES:
                break
    except OSError:
        pass
    return None, None


def _with_window_beside(log: PathLike, how: Reading) -> Reading:
    """mmdetection 3.x's vis_data JSON with the window its text log's config gives: the text
    log sits two folders up (work_dir/<timestamp>/<timestamp>.log beside vis_data/)."""
    path = os.path.abspath(str(log))
    folder = os.path.dirname(path)
    if not path.endswith(".json") or os.path.basename(folder) != "vis_data":
        return how
    run_dir = os.path.dirname(folder)
    beside = os.path.join(run_dir, os.path.basename(run_dir) + ".log")
    if not os.path.isfile(beside):
        return how
    try:
        for k, line in enumerate(scrapers.common.read_lines(beside)):
            m = mmdet_v3.WINDOW_RE.search(line)
            if m:
                note = "%s: a window of %s iterations, from the config of the text log beside it (%s)" % (
                    log,
                    m.group(1),
                    beside,
                )
                return dataclasses.replace(
                    how, options=dict(how.options, window=int(m.group(1))), notes=how.notes + (note,)
                )
            if k >= scrapers.DETECT_LINES:
                break
    except OSError:
        pass
    return how


def _detect(log: PathLike) -> List[str]:
    problems: scrapers.common.Problems = []
    try:
        found = scrapers.detect(log, problems=problems)
    except OSError as exc:
        raise UserError("%s: cannot read: %s" % (log, exc.strerror)) from None
    stops = [p for p in problems if p[1] != scrapers.common.NUL_SKIPPED]
    if stops and not found:
        line, reason = stops[0]
        raise UserError("%s:%d: %s" % (log, line + 1, reason))
    if problems and not found:
        raise UserError(
            "%s: matches no known log format (%d lines skipped for a NUL byte, the first line %d)"
            % (log, len(problems), problems[0][0] + 1)
        )
    return found


class Records(List[IterationRecord]):
    """The iteration records of a log, as `read` gives them: a list that also knows how the
    log was read (`how`) and the lines that did not parse (`errors`)."""

    how: Optional[Reading] = None
    errors: Sequence[ScrapeError] = ()


class Noise(List[ScrapeError]):
    """The lines of a log that did not parse: the first ERRORS_KEPT of them, and of all of
    them the count, each reason's count and first line, and the last run one belongs to."""

    ERRORS_KEPT = 1000

    def __init__(self, errors: Iterable[ScrapeError] = ()) -> None:
        super().__init__()
        self.total = 0
        self.groups: Dict[str, List[int]] = {}  # reason -> [count, first line]
        self.last_run = 0
        for e in errors:
            self.add(e)

    def add(self, e: ScrapeError) -> None:
        """Count one line that did not parse (and keep it among the first ERRORS_KEPT)."""
        self.total += 1
        self.groups.setdefault(e.reason, [0, e.line])[0] += 1
        if e.run is not None and e.run > self.last_run:
            self.last_run = e.run
        if len(self) < self.ERRORS_KEPT:
            self.append(e)

    def unplaced(self) -> Tuple[int, Optional[int]]:
        """(count, first line) of the record lines whose iteration the log does not give."""
        hits = [(count, line) for reason, (count, line) in self.groups.items() if scrapers.common.UNPLACED in reason]
        return sum(c for c, _ in hits), min((line for _, line in hits), default=None)


HEAD = stats.RUN_EDGE  # records kept of each run's start and end where only a window's are kept


def read(
    log: PathLike, how: Reading, run: Optional[int] = None, window: Optional[Tuple[int, int]] = None
) -> Tuple[Records, Noise]:
    """(records, errors) of the log as its Reading says; errors a Noise. With `window`
    (first, last), only the records a figure of that window can use are kept (those inside
    it, two on either side, and each run's first and last HEAD): memory bounded by the
    window, not by the log. UserError where the log cannot give a true figure at all: a
    fatal error of the scrape (a record line printed twice inside a run, records out of
    order, a line too long, a file that is not text)."""
    noise = Noise()
    keep = Keeper(window)
    try:
        for item in scrapers.iter_path(how.scraper, log, **how.options):
            if isinstance(item, IterationRecord):
                if run is None or item.run == run:
                    keep.add(item)
            elif item.fatal:
                raise UserError("%s:%d: %s" % (log, item.line + 1, item.reason))
            else:
                noise.add(item)
    except OSError as exc:
        raise UserError("%s: cannot read: %s" % (log, exc.strerror)) from None
    out = Records(keep.records())
    out.how = how
    out.errors = noise
    return out, noise


class Keeper:
    """The records of a stream a window's figure can use (all of them without a window)."""

    def __init__(self, window: Optional[Tuple[int, int]]) -> None:
        self.window = window
        self.kept: List[IterationRecord] = []  # every record, or those of the finished runs
        self.run: Optional[int] = None
        self._reset()

    def _reset(self) -> None:
        self.head: List[IterationRecord] = []
        self.tail: Deque[IterationRecord] = collections.deque(maxlen=HEAD)
        self.before: Deque[IterationRecord] = collections.deque(maxlen=2)
        self.inside: List[IterationRecord] = []
        self.after: List[IterationRecord] = []

    def add(self, rec: IterationRecord) -> None:
        """Take one record of the stream (kept where a figure of the window can use it)."""
        if self.window is None:
            self.kept.append(rec)
            return
        if rec.run != self.run:
            self._flush()
            self.run = rec.run
        lo, hi = self.window
        if len(self.head) < HEAD:
            self.head.append(rec)
        self.tail.append(rec)
        if rec.iteration < lo:
            self.before.append(rec)
        elif rec.iteration <= hi:
            self.inside.append(rec)
        elif len(self.after) < 2:
            self.after.append(rec)

    def _flush(self) -> None:
        if self.window is not None and self.run is not None:
            chosen = {id(r): r for part in (self.head, self.before, self.inside, self.after, self.tail) for r in part}
            self.kept.extend(sorted(chosen.values(), key=lambda r: r.line))
        self._reset()

    def records(self) -> List[IterationRecord]:
        """The records kept, in the order they came (each run's in line order)."""
        self._flush()
        return self.kept


def noise_text(errors: Sequence[ScrapeError]) -> str:
    """'N lines did not parse (line L: reason; line M and 3 more like it: reason)': each reason
    once, with its first line, for the first NOISE_LISTED reasons."""
    if not errors:
        return ""
    noise = errors if isinstance(errors, Noise) else Noise(errors)
    groups = noise.groups
    parts = [
        "line %d%s: %s" % (line + 1, " and %d more like it" % (count - 1) if count > 1 else "", reason)
        for reason, (count, line) in list(groups.items())[:NOISE_LISTED]
    ]
    if len(groups) > NOISE_LISTED:
        parts.append("and lines of %d other kinds" % (len(groups) - NOISE_LISTED))
    return "%d line%s did not parse (%s)" % (noise.total, "" if noise.total == 1 else "s", "; ".join(parts))


def require_records(log: PathLike, how: Reading, records: Sequence[IterationRecord]) -> None:
    """UserError when the log gave no record, naming the format its lines show if another."""
    if records:
        return
    hint = ""
    if how.how != "detected":
        found = _detect(log)
        if len(found) == 1 and found[0] != how.scraper:
            hint = "; its lines are %s: read it with --format %s" % (found[0], found[0])
    errors = getattr(records, "errors", ())
    noise = "; %s" % noise_text(errors) if errors else ""
    raise UserError("%s: no %s training record in the log%s%s" % (log, how.scraper, hint, noise))


@dataclass(frozen=True)
class Figure:
    """The measured window's figure of one log, as `detbench scrape` prints it."""

    window: Tuple[int, int]
    iteration_time_s: Optional[float]
    data_time_s: Optional[float]
    throughput: Optional[float]
    exact: bool
    kind: str
    requested_window: Optional[Tuple[int, int]] = None
    error_bound_s: Optional[float] = None
    data_error_bound_s: Optional[float] = None
    run: int = 1
    runs: int = 1
    format: Optional[str] = None
    format_source: Optional[str] = None
    missing: int = 0
    notes: Tuple[str, ...] = ()

    def as_dict(self) -> Dict[str, Any]:
        """The figure as `detbench scrape --json` prints it (its notes apart)."""
        return {
            "requested_window": list(self.requested_window or self.window),
            "window": list(self.window),
            "iteration_time_s": self.iteration_time_s,
            "data_time_s": self.data_time_s,
            "throughput": self.throughput,
            "error_bound_s": self.error_bound_s,
            "data_error_bound_s": self.data_error_bound_s,
            "exact": self.exact,
            "kind": self.kind,
            "run": self.run,
            "runs": self.runs,
            "format": self.format,
            "format_source": self.format_source,
        }


def check_window(warmup: Optional[int], measure: Optional[int]) -> None:
    """UserError unless both are given, warmup at least 0 and measure at least 1."""
    if warmup is None or measure is None:
        raise UserError("give both --warmup and --measure (or neither: the records only)")
    if warmup < 0 or measure < 1:
        raise UserError("--warmup must be at least 0 and --measure at least 1 (got %d and %d)" % (warmup, measure))


def figure(
    log: PathLike,
    records: Sequence[IterationRecord],
    warmup: int,
    measure: int,
    images_per_iteration: Optional[int] = None,
    run: Optional[int] = None,
    max_error: Optional[float] = None,
    approximate: bool = False,
    images_given: Optional[str] = None,
) -> Figure:
    """The window figure of `records` read from `log`, exactly as a trial of that log gets it.

    Without images_per_iteration, a figure that would depend on it is None: the throughput
    unless the log counts the images of its window itself, the iteration time of a log that
    prints images/s only. run picks the log's run (default: the last that covers the
    window); max_error (relative) refuses a figure whose error bound is larger. A figure the
    printed digits do not bound (window medians, running means of unknown start, windows
    the records leave gaps in) is refused saying why, unless approximate is true: then it
    is given with no bound and `exact` false. Where the log's own rates and durations tell
    the images of an iteration, an images_per_iteration they contradict is refused, naming
    both (images_given: the flags that gave it, "--images-per-iteration N" by default).
    """
    how = getattr(records, "how", None)
    errors = getattr(records, "errors", ())
    check_window(warmup, measure)
    if run is not None and run < 1:
        raise UserError("--run must be at least 1 (got %d)" % run)
    if max_error is not None and not max_error > 0:
        raise UserError("--max-error must be above 0 (got %r)" % (max_error,))
    records = stats.dedupe(records)
    lo, hi = warmup + 1, warmup + measure
    _, spans = stats.run_spans(records)
    noise = errors if isinstance(errors, Noise) else Noise(errors)
    # runs whose records the log does not place count too (a banner, then records it cannot place)
    runs = max(len(spans), noise.last_run)
    if len(spans) <= 1 and run is None:
        last = max((r.iteration for r in records), default=0)
        unplaced, first = noise.unplaced()
        if last < hi and unplaced:
            raise UserError(
                "%s: the window %d..%d lies past iteration %d, the last the log places: %d record "
                "line%s cannot be placed, as the log does not print the epoch length (first: line %d); "
                "give --iters-per-epoch N"
                % (log, lo, hi, last, unplaced, "" if unplaced == 1 else "s", (first or 0) + 1)
            )
        if last < hi:
            raise UserError(
                "%s: the log ends at iteration %d; the window needs iterations %d..%d%s"
                % (log, last, lo, hi, _noise_suffix(errors))
            )
    est = _reported(log, records, warmup, measure, images_per_iteration, run, spans, errors)
    thr, it = est.throughput, est.iteration_time_s
    bound, data_bound, exact = est.error_bound_s, est.data_error_bound_s, bool(est.exact)
    assumed = how.assumed if how is not None else ()
    if assumed and est.kind in (rec_kinds.EXACT, rec_kinds.WINDOW_MEANS_FIGURE):
        bound = data_bound = None  # the spans come from detbench's settings, not from this log
        exact = False
    fig = Figure(
        (int(est.window[0]), int(est.window[1])),
        it,
        est.data_time_s,
        thr,
        exact,
        est.kind,
        (lo, hi),
        bound,
        data_bound,
        est.run,
        max(runs, 1),
        how.scraper if how else None,
        how.source if how else None,
        est.missing,
    )
    if images_per_iteration is not None:
        check_images(log, records, fig, images_per_iteration, images_given)
    if max_error is not None:
        _check_max_error(log, fig, max_error)
    if not approximate and fig.error_bound_s is None:
        raise UserError(
            "%s: the window %d..%d has no figure the printed digits bound: %s; --approximate gives "
            "it without a bound" % (log, lo, hi, _unbounded_why(fig, how, images_per_iteration, records))
        )
    return _with_notes(log, fig, records, est, how, errors)


# The formats whose throughput records also print the duration they cover, and how far the
# images per iteration the two imply may be off: (half a unit of the printed duration in
# seconds, a share of it). dllogger TF2 prints its Latency to 10 ms, from the same timer as its
# fps; tensorpack's epoch time is printed to 3 digits under a minute and in whole seconds,
# truncated, above (1/60), and its timer also runs the epoch's hooks, which its images/s timer
# does not (a quarter more).
IMPLIED_IMAGES = {"dllogger": (0.005, 0.0), "tensorpack": (0.05, 1.0 / 60 + 0.25)}


def implied_images(
    records: Sequence[IterationRecord], fig: Figure, fmt: Optional[str]
) -> Optional[Tuple[float, float, float]]:
    """(images per iteration, least, most) that the images/s and the duration of the window's
    throughput records imply together (images/s x seconds / iterations), within what their
    printing and timers allow (IMPLIED_IMAGES); None where the format or no record tells."""
    if fmt not in IMPLIED_IMAGES:
        return None
    half_unit, share = IMPLIED_IMAGES[fmt]
    total = low = high = 0.0
    iterations = 0
    for r in window_records(records, fig):
        if r.kind != rec_kinds.THROUGHPUT or not r.time_s or not r.images_per_s or r.time_s <= 0:
            continue
        seconds = r.time_s * r.span
        off = half_unit / seconds + share
        images = r.images_per_s * seconds
        rate_off = r.rounding / r.images_per_s if r.images_per_s > r.rounding else 1.0
        total += images
        low += images * max(0.0, 1 - off) * (1 - rate_off)
        high += images * (1 + off) * (1 + rate_off)
        iterations += r.span
    if not iterations:
        return None
    return total / iterations, low / iterations, high / iterations


def check_images(
    log: PathLike, records: Sequence[IterationRecord], fig: Figure, images: int, given: Optional[str] = None
) -> None:
    """UserError where the images per iteration given lie outside what the log itself implies
    (implied_images): every figure of it would be off by their ratio."""
    how = getattr(records, "how", None)
    implied = implied_images(records, fig, how.scraper if how is not None else None)
    if implied is None:
        return
    value, low, high = implied
    if low <= images <= high:
        return
    raise UserError(
        "%s: its images/s and durations over iterations %d..%d imply %.4g images per iteration "
        "(%.6g to %.6g), not the %d of %s: every figure would be %.3gx off"
        % (
            log,
            fig.window[0],
            fig.window[1],
            value,
            low,
            high,
            images,
            given or "--images-per-iteration %d" % images,
            max(value / images, images / value),
        )
    )


def _unbounded_why(
    fig: Figure, how: Optional[Reading], images_per_iteration: Optional[int], records: Sequence[IterationRecord]
) -> str:
    """Why a figure has no error bound, in a few words."""
    if fig.missing:
        return "its records leave %d iterations of %d..%d out" % (fig.missing, fig.window[0], fig.window[1])
    if fig.kind == rec_kinds.THROUGHPUT_FIGURE and images_per_iteration is None:
        return "the log prints images/s only (give --images-per-iteration N)"
    if how is not None and how.assumed and fig.kind in (rec_kinds.EXACT, rec_kinds.WINDOW_MEANS_FIGURE):
        return "it is read as detbench runs %s, which this log need not follow (--format %s reads it as written)" % (
            how.scraper,
            how.scraper,
        )
    if fig.kind in (rec_kinds.EXACT, rec_kinds.WINDOW_MEANS_FIGURE):
        return coverage_problem(records, fig) or "its records are spaced otherwise than the windows they state"
    return rec_kinds.FIGURE_TEXT.get(fig.kind, fig.kind)


def _noise_suffix(errors: Sequence[ScrapeError]) -> str:
    return " (%s)" % noise_text(errors) if errors else ""


def _reported(
    log: PathLike,
    records: Sequence[IterationRecord],
    warmup: int,
    measure: int,
    images_per_iteration: Optional[int],
    run: Optional[int],
    spans: Sequence[stats.RunSpan],
    errors: Sequence[ScrapeError],
) -> stats.TrialEstimate:
    try:
        return stats.reported(records, warmup, measure, images_per_iteration, run=run)
    except stats.WindowError as exc:
        where = ""
        if len(spans) > 1 and "run" not in str(exc):
            chosen = run if run is not None else _run_tried(spans, warmup + 1, warmup + measure)
            where = " (in run %d of the log's %d)" % (chosen, len(spans)) if chosen else ""
        raise UserError("%s: %s%s%s" % (log, exc, where, _noise_suffix(errors))) from None


def _run_tried(spans: Sequence[stats.RunSpan], lo: int, hi: int) -> Optional[int]:
    try:
        return stats.pick_run(spans, lo, hi)
    except stats.WindowError:
        return None


def _check_max_error(log: PathLike, fig: Figure, max_error: float) -> None:
    where = "%d..%d" % tuple(fig.requested_window or fig.window)
    if fig.error_bound_s is None or fig.iteration_time_s is None:
        why = (
            "its records leave %d iterations of %d..%d out" % (fig.missing, fig.window[0], fig.window[1])
            if fig.missing
            else "a %s figure has no error bound" % fig.kind
        )
        raise UserError("%s: the window %s cannot meet --max-error %g: %s" % (log, where, max_error, why))
    share = fig.error_bound_s / fig.iteration_time_s
    if share > max_error:
        raise UserError(
            "%s: the window %s cannot meet --max-error %g: the printed digits bound its figure "
            "%.6g s only to +-%.3g s (%.3g%%)"
            % (log, where, max_error, fig.iteration_time_s, fig.error_bound_s, 100 * share)
        )


def _with_notes(
    log: PathLike,
    fig: Figure,
    records: Sequence[IterationRecord],
    est: stats.TrialEstimate,
    how: Optional[Reading],
    errors: Sequence[ScrapeError],
) -> Figure:
    notes = list(how.notes if how else ())
    if how is not None and how.assumed and fig.kind in (rec_kinds.EXACT, rec_kinds.WINDOW_MEANS_FIGURE):
        notes.append(
            "%s: read as detbench runs %s (%s), which a log without detbench's own lines need not "
            "follow: the figure has no error bound; --format %s reads it as its framework's scripts write it"
            % (
                log,
                how.how.split(" ", 1)[1],
                ", ".join("%s %s" % (k, how.options[k]) for k in how.assumed),
                how.scraper,
            )
        )
    if fig.runs > 1:
        span = next(s for s in est.runs if s.run == fig.run)
        notes.append(
            "%s: the log holds %d runs (a restarted process begins each); the figure is from run %d, "
            "iterations %d..%d on lines %d..%d (--run N picks another)"
            % (log, fig.runs, fig.run, span.first, span.last, span.first_line, span.last_line)
        )
    if tuple(fig.window) != tuple(fig.requested_window or fig.window) or fig.missing:
        notes.append("%s: %s" % (log, window_text(fig, records)))
    if est.data_window is not None:
        notes.append("%s: %s" % (log, data_text(tuple(est.data_window), fig.window)))
    if errors:
        notes.append("%s: %s" % (log, noise_text(errors)))
    return Figure(**dict(fig.__dict__, notes=tuple(notes)))


def window_text(fig: Figure, records: Optional[Sequence[IterationRecord]] = None) -> str:
    """The one line that says which iterations a figure covers, where they are not the ones asked."""
    lo, hi = fig.requested_window or fig.window
    a, b = fig.window
    text = (
        "the figure covers iterations %d..%d, not the %d..%d asked for" % (a, b, lo, hi)
        if (a, b) != (lo, hi)
        else "the figure covers iterations %d..%d" % (a, b)
    )
    if fig.missing:
        text += ", less %d iterations no record covers: it is the mean of the other %d" % (
            fig.missing,
            b - a + 1 - fig.missing,
        )
    problem = coverage_problem(records, fig) if records is not None else None
    if problem:
        text += "; " + problem
    elif (a, b) != (lo, hi):
        text += " (the nearest the log's records allow)"
    return text


def data_text(data_window: Tuple[int, ...], window: Tuple[int, int]) -> str:
    """Why a figure has no data time although its log prints one: its data means do not give
    the mean of the figure's window."""
    if tuple(data_window) == tuple(window):
        return (
            "no data time: the log's data means over iterations %d..%d leave some out or count some twice, "
            "so they give no mean of the window" % tuple(window)
        )
    return (
        "no data time: the log's data means cover iterations %d..%d nearest the figure's %d..%d, and a "
        "data time of other iterations is none of its window" % (tuple(data_window) + tuple(window))
    )


def window_records(records: Sequence[IterationRecord], fig: Figure) -> List[IterationRecord]:
    """The records whose iterations lie inside the figure's window (of the figure's run)."""
    lo, hi = fig.window
    return [
        r
        for r in stats.dedupe(records)
        if getattr(r, "run", 1) == fig.run and r.iteration - r.span + 1 >= lo and r.iteration <= hi
    ]


def coverage_problem(records: Sequence[IterationRecord], fig: Figure) -> Optional[str]:
    """Why a figure summed from per-iteration or window-mean records does not count each
    iteration of its window exactly once (the log was read with another logging interval or
    window than it was written with), or None."""
    if fig.kind not in (rec_kinds.EXACT, rec_kinds.WINDOW_MEANS_FIGURE):
        return None
    run = [
        r
        for r in stats.dedupe(records)
        if getattr(r, "run", 1) == fig.run
        and r.kind in (rec_kinds.ITERATION, rec_kinds.WINDOW_MEAN)
        and r.time_s is not None
    ]
    lo, hi = fig.window
    # the records the figure was summed from, and two on either side (as stats.reported took them)
    first = bisect.bisect_right(run, lo - 1, key=_ITERATION)
    last = bisect.bisect_right(run, hi, key=_ITERATION)
    apart = stats.spaced_wider(run[max(0, first - 2) : last + 2])
    if apart is not None:
        a, b = apart
        return (
            "its records of iterations %d and %d (log lines %d and %d) lie %d iterations apart, but each "
            "stands for %d: it was written with another logging interval or window than it is read with"
            % (a.iteration, b.iteration, a.line + 1, b.line + 1, b.iteration - a.iteration, b.span)
        )
    covered = sorted(
        (r.iteration - r.span + 1, r.iteration)
        for r in window_records(records, fig)
        if r.kind in (rec_kinds.ITERATION, rec_kinds.WINDOW_MEAN) and r.time_s is not None
    )
    expect = fig.window[0]
    for first, last in covered:
        if first != expect:
            what = (
                "iterations %d..%d are in no record" % (expect, first - 1)
                if first > expect
                else "iteration %d is in two records" % first
            )
            return (
                "%s, so the log's figures do not add up to the window: it was written with another "
                "logging interval or window than it is read with" % what
            )
        expect = last + 1
    return None


# One record as the JSON object json.dumps gives its _asdict(), built by %-formatting: %r of an
# int or a finite float is its JSON text, and None and the quotes are swapped after. A record
# holding nan or inf (JSON NaN, Infinity) goes through json.dumps itself.
_RECORD_JSON = "{%s}" % ", ".join(
    '"%s": %s' % (name, '"%s"' if name == "kind" else "%r") for name in IterationRecord._fields
)


def record_lines(records: Iterable[IterationRecord]) -> Iterator[str]:
    """The JSON line of each record, as json.dumps(record._asdict()) writes it."""
    template = _RECORD_JSON
    fields = IterationRecord._fields
    for r in records:
        text = template % r
        if "nan" in text or "inf" in text:
            yield json.dumps(dict(zip(fields, r)))
            continue
        yield text.replace("None", "null").replace("'", '"')


def images_in_log(records: Sequence[IterationRecord], fig: Figure) -> List[Tuple[IterationRecord, int]]:
    """(record, images) for the window's records that count their own images (the detbench format)."""
    return [(r, r.images) for r in window_records(records, fig) if r.images is not None and r.span == 1]
