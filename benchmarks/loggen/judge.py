"""Is an answer true of the log? A figure must lie within its stated bound of the true mean of
the iterations its window names, in the run it names; `exact` only where that bound is at most
0.1% and the window is the one asked for; its window may take in at most half as many
iterations outside the one asked for as it asks; a data time beside a bounded figure has a
bound of its own; a batch the log's own figures contradict gives no figure. A refusal's
reason must be true of the log.

`judge` returns a Verdict: its `problems` are violations (a figure outside its bound, `exact`
without the bound for it, a figure that mixes runs, a refusal whose reason is false), its
`notes` what is worth counting but proves nothing wrong.
"""
import dataclasses
import re
from dataclasses import dataclass, field
from typing import List, Optional

from .interface import MISSING

KEYS = ("requested_window", "window", "iteration_time_s", "data_time_s", "throughput", "error_bound_s",
        "data_error_bound_s", "exact", "run", "runs", "kind", "format")
EXACT_SHARE = 0.001            # `exact`: the bound at most 0.1% of the figure
WIDEN_SHARE = 0.5              # iterations outside the window asked for a figure may take in, of its length
REL_SLACK = 1e-6               # float arithmetic of the frameworks (float32 means) and of the scrapers
ABS_SLACK = 1e-12


@dataclass
class Verdict:
    refused: bool
    problems: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    reason: Optional[str] = None        # the refusal's class
    ratio: Optional[float] = None       # |figure - truth| / stated bound
    error: Optional[float] = None       # |figure - truth| / truth
    exact: Optional[bool] = None

    @property
    def ok(self):
        return not self.problems


def last_record(run):
    return run.records[-1] if run.records else run.first - 1


def covers(run, lo, hi):
    """Whether the run's records reach every iteration of lo..hi."""
    return any(a <= lo and hi <= b for a, b in run.covered())


def covering(log, lo, hi, only=None):
    """Runs (1-based) whose records reach every iteration of the window."""
    return [r.index for r in log.runs if (only is None or r.index == only) and covers(r, lo, hi)]


def judge(log, req, answer, ask=None):
    """The Verdict on `answer` to `req`. With `ask` (a function of a Request, as
    interface.LibraryReader.ask), a refusal for --max-error is checked by asking again without it."""
    if answer.refused:
        return _refusal(log, req, answer, ask)
    return _figure(log, req, answer.figure)


def _figure(log, req, fig):
    v = Verdict(refused=False)
    lo, hi = req.window
    if log.params.get("ranks") == "unlabelled":
        v.problems.append("a figure from a log whose records several processes print with no rank prefix: "
                          "nothing says which of them are rank 0's")
        return v
    missing = [k for k in KEYS if k not in fig]
    if missing:
        v.problems.append("the figure lacks %s" % ", ".join(missing))
    if "requested_window" in fig and list(fig["requested_window"]) != [lo, hi]:
        v.problems.append("requested_window %s, asked %s" % (fig["requested_window"], [lo, hi]))
    # a run that died before its first record may go uncounted: number the runs as the figure does
    view = log.runs
    with_records = [r for r in log.runs if r.records]
    # a log with a misplaced record line (a line twice, two lines swapped) may be split into runs
    # where it goes back: its figures are held to the truth of whichever run holds their window
    lenient = any(not f.benign for f in log.faults)
    a, b = (int(x) for x in fig["window"])
    run = fig.get("run")
    if "runs" in fig and fig["runs"] != len(log.runs) and not lenient:
        if fig["runs"] == len(with_records):
            view = with_records
        else:
            v.problems.append("runs %s, the log holds %d" % (fig["runs"], len(log.runs)))
    if run is None or lenient:   # the run whose iterations hold the figure's window (the closest truth)
        holders = [k for k, r in enumerate(view, 1) if r.first <= a and b <= r.last]
        value = fig.get("iteration_time_s")
        if value is not None and len(holders) > 1:
            holders.sort(key=lambda k: -abs(value - log.mean(view[k - 1].index, a, b)[0]))
        run = holders[-1] if holders else None
    elif req.run is not None and run != req.run:
        v.problems.append("run %s, asked --run %d" % (run, req.run))
    elif req.run is None:
        cands = [k for k, r in enumerate(view, 1) if covers(r, lo, hi)]
        if cands and run != cands[-1]:
            v.notes.append("default run %s, not the last whose records cover the window (%d)" % (run, cands[-1]))
    if run is None or not 1 <= run <= len(view):
        v.problems.append("window %d..%d lies in no single run (runs: %s)" % (
            a, b, ", ".join("%d..%d" % (r.first, r.last) for r in log.runs)))
        return v
    r = view[run - 1]
    if not (r.first <= a <= b <= r.last):
        v.problems.append("window %d..%d is not inside run %d (%d..%d): the figure mixes runs or counts "
                          "iterations that never finished" % (a, b, run, r.first, r.last))
        return v
    if lenient and log.params.get("unplaced_records"):
        # a record line that does not print its iteration, moved or copied: it takes the place the
        # lines around it give, and nothing in the log tells the figure is another's
        v.notes.append("a misplaced record line that carries no iteration: the figure is not checked")
        return v
    if req.images_per_iteration != log.images_per_iteration:
        v.problems.append("a figure for %s images per iteration, which the log's own figures contradict (it was "
                          "written with %s)" % (req.images_per_iteration, log.images_per_iteration))
        return v
    outside = max(0, lo - a) + max(0, b - hi)
    if outside > WIDEN_SHARE * (hi - lo + 1):
        v.problems.append("window %d..%d takes in %d iterations outside the %d..%d asked for, over half of it"
                          % (a, b, outside, lo, hi))
    truth, truth_data = log.mean(r.index, a, b)
    value = fig.get("iteration_time_s")
    bound = fig.get("error_bound_s")
    v.exact = bool(fig.get("exact"))
    if value is None:
        v.problems.append("no iteration time although --images-per-iteration was given")
        return v
    err = abs(value - truth)
    slack = REL_SLACK * truth + ABS_SLACK
    v.error = err / truth
    if bound is None:
        if v.exact:
            v.problems.append("exact without an error bound")
        if not req.approximate:
            v.problems.append("a figure with no bound although --approximate was not given")
    else:
        v.ratio = err / (bound + slack)
        if err > bound + slack:
            v.problems.append("iteration time %.9g s is %.3g s from the truth %.9g s over %d..%d of run %d, "
                              "beyond its bound %.3g s" % (value, err, truth, a, b, run, bound))
    if v.exact and bound is not None:
        if bound > EXACT_SHARE * value * (1 + 1e-9):
            v.problems.append("exact with a bound of %.3g s (%.3g%% of the figure)" % (bound, 100 * bound / value))
    if v.exact:
        if [a, b] != [lo, hi]:
            v.problems.append("exact over %d..%d, asked %d..%d" % (a, b, lo, hi))
    elif bound is not None and bound <= EXACT_SHARE * value and [a, b] == [lo, hi]:
        v.notes.append("not exact although the bound allows it")
    if "exact" not in fig and err > slack:
        v.notes.append("legacy figure off by %.3g%%" % (100 * err / truth))
    data, dbound = fig.get("data_time_s"), fig.get("data_error_bound_s")
    if data is not None and dbound is None and bound is not None:
        v.problems.append("a data time with no bound beside a figure the printed digits bound: of which "
                          "iterations is it?")
    if data is not None and dbound is not None:
        if abs(data - truth_data) > dbound + REL_SLACK * truth_data + ABS_SLACK:
            v.problems.append("data time %.9g s is %.3g s from the truth %.9g s, beyond its bound %.3g s" % (
                data, abs(data - truth_data), truth_data, dbound))
    images = req.images_per_iteration or log.params.get("images")
    thr = fig.get("throughput")
    if thr is not None and images and bound is not None and bound < truth:
        t_thr = images / truth
        t_bound = images * bound / (truth * (truth - bound))
        if abs(thr - t_thr) > t_bound + REL_SLACK * t_thr:
            v.problems.append("throughput %.9g is %.3g from the truth %.9g, beyond what its bound allows" % (
                thr, abs(thr - t_thr), t_thr))
    return v


# refusal classes: (name, pattern), the first that matches names the reason
REASONS = (
    ("interface", re.compile(re.escape(MISSING))),
    ("images", re.compile(r"images per iteration")),
    ("ranks", re.compile(r"several processes")),
    ("faults", re.compile(r"twice|out of order|duplicate|repeat|seen before|swapped")),
    ("unbounded", re.compile(r"no figure the printed digits bound")),
    ("shrink", re.compile(r"shrink")),
    ("max-error", re.compile(r"max.error|cannot meet|error bound|bound of")),
    ("epoch-length", re.compile(r"iters.per.epoch|epoch length|batches.per.epoch|steps.per.epoch|place it")),
    ("mixes-runs", re.compile(r"\bruns?\b.*(mix|across|span|both|restart|resum)|(mix|across|span).*\bruns?\b")),
    ("no-run", re.compile(r"no run \d|has (only )?\d+ runs?|--run")),
    ("beyond-end", re.compile(r"ends at iteration|reaches iteration|never reaches|larger than the log|past the end|"
                              r"beyond the end|after the log")),
    ("goes-back", re.compile(r"goes back|backwards")),
    ("no-records", re.compile(r"no \S+ training record|has no iteration records|matches no known")),
    ("coverage", re.compile(r"half|span only|covers only|only \d+ of|too (short|few)|inside the window|near the "
                            r"window|needs two|running.mean record|no iteration times|no throughput")),
)


# "PATH: " in front of a refusal (the library's), or "error: PATH: " (the command line's)
LOG_PATH = re.compile(r"^(error: )?[^\s:]*/[^\s:]*: ")


def classify(message):
    """The class of a refusal's reason, read without the log's path in front: a temporary
    folder's random letters ("mix", "span", "half") must not decide it."""
    text = LOG_PATH.sub("", message).lower()
    for name, pattern in REASONS:
        if pattern.search(text):
            return name
    return "unknown"


def _refusal(log, req, answer, ask=None):
    v = Verdict(refused=True)
    msg = answer.message or ""
    v.reason = classify(msg)
    lo, hi = req.window
    if answer.exit_code is not None and answer.exit_code != 2:
        v.problems.append("refused with exit status %s, not 2" % answer.exit_code)
    if answer.exit_code is not None and len(answer.stderr) != 1:
        v.problems.append("refused with %d stderr lines, not one: %s" % (len(answer.stderr), answer.stderr[:4]))
    cover = covering(log, lo, hi, req.run)
    fault_lines = {line for f in log.faults for line in f.lines}
    cited = {int(x) for x in re.findall(r"line (\d+)", msg)} | {int(x) for x in re.findall(r":(\d+):", msg)}
    reason = v.reason
    lenient = any(not f.benign for f in log.faults)
    if reason == "interface":
        v.problems.append(msg)
    elif reason == "images":
        if req.images_per_iteration == log.images_per_iteration:
            v.problems.append("refused the images per iteration the log was written with: %s" % msg)
    elif reason == "ranks":
        if log.params.get("ranks") != "unlabelled" and _restarts_look_like_ranks(
                log, {int(x) for pair in re.findall(r"lines (\d+) and (\d+)", msg) for x in pair}):
            v.notes.append("refused as several processes: two restarts in a row each began at the iteration "
                           "just logged, after at most one new record, which is what two processes' "
                           "alternating records look like")
        elif log.params.get("ranks") != "unlabelled":
            v.problems.append("refused for records of several processes in a log whose records %s: %s" % (
                "carry rank prefixes" if log.params.get("ranks") == "labelled" else "one process prints", msg))
    elif (reason == "faults" or reason == "goes-back") and log.params.get("ranks") == "unlabelled":
        v.notes.append("refused for a record line of another process, word for word rank 0's")
    elif reason == "faults" or reason == "goes-back":
        if not log.faults:
            v.problems.append("refused for repeated or misordered records in a log that has none "
                              "(restarts start runs): %s" % msg)
        elif cited and not cited & fault_lines:
            v.problems.append("refused citing lines %s; the misplaced record lines are %s: %s" % (
                sorted(cited), sorted(fault_lines), msg))
        elif all(f.benign for f in log.faults):
            v.notes.append("refused for the framework's own repeated last line")
    elif reason == "shrink":
        if not log.faults:
            v.problems.append("running sums never shrink in this log (rounding is not a reason): %s" % msg)
    elif reason == "unbounded":
        if req.approximate:
            v.problems.append("refused as unbounded although --approximate was given: %s" % msg)
        elif ask is not None:
            again = ask(dataclasses.replace(req, approximate=True))
            fig = again.figure
            if fig is not None and fig.get("error_bound_s") is not None:
                v.problems.append("refused as unbounded, yet with --approximate the figure has a bound: %s" % msg)
    elif reason == "max-error":
        if req.max_error is None:
            v.problems.append("refused for an error bound nobody asked for: %s" % msg)
        elif ask is not None:
            again = ask(dataclasses.replace(req, max_error=None))
            fig = again.figure or {}
            bound, value = fig.get("error_bound_s"), fig.get("iteration_time_s")
            if bound is not None and value and bound <= req.max_error * value * (1 - 1e-9):
                v.problems.append("refused for --max-error %g, yet without it the figure's bound is %.3g%%: %s"
                                  % (req.max_error, 100 * bound / value, msg))
    elif reason == "epoch-length":
        if not log.needs_epoch_length:
            v.problems.append("the log places every record itself (its epoch length is in it): %s" % msg)
        elif req.iters_per_epoch is not None:
            v.problems.append("refused for the epoch length although --iters-per-epoch was given: %s" % msg)
    elif reason == "no-run":
        if (req.run is None or (req.run <= len(log.runs) and cover)) and not lenient:
            v.problems.append("refused for the run although run %s covers the window: %s" % (req.run, msg))
    elif reason in ("mixes-runs", "beyond-end"):
        if cover and not lenient:
            v.problems.append("run %d covers %d..%d with its records, yet: %s" % (cover[-1], lo, hi, msg))
        else:
            # the number a refusal names: the window must really reach past it (a run that died of an
            # exception may print one more line, for the iteration that failed)
            numbers = [int(x) for x in re.findall(r"(?:ends at|reaches) iteration (\d+)", msg)]
            ends = max(r.last + 1 for r in log.runs)
            if numbers and (max(numbers) >= hi or max(numbers) > ends):
                v.problems.append("the log's runs end at %s: %s" % (
                    ", ".join(str(last_record(r)) for r in log.runs), msg))
    elif reason == "no-records":
        if sum(len(r.records) for r in log.runs):
            v.problems.append("refused for lack of records in a log of %d records: %s" % (
                sum(len(r.records) for r in log.runs), msg))
    elif reason == "coverage":
        if cover and not _sparse(log.run(cover[-1]), lo, hi):
            v.notes.append("possibly a false refusal (records every %d iterations, window of %d): %s" % (
                _gap(log.run(cover[-1])), hi - lo + 1, msg))
    else:
        v.problems.append("refusal whose reason this judge cannot check: %s" % msg)
    return v


def _restarts_look_like_ranks(log, cited):
    """Whether the log holds two restarts in a row that each began at the iteration the run
    before had just logged, the middle run having logged at most one other record, and the
    refusal cites their lines: records two processes would print in just that order."""
    runs = [r for r in log.runs if r.records]
    for a, b, c in zip(runs, runs[1:], runs[2:]):
        if (b.records[0] == a.records[-1] and c.records[0] == b.records[-1] and len(b.records) <= 2
                and {a.record_lines[-1], b.record_lines[0], b.record_lines[-1], c.record_lines[0]} <= cited):
            return True
    return False


def _gap(run):
    recs = run.records
    return max((b - a for a, b in zip(recs, recs[1:])), default=len(run.times))


def _sparse(run, lo, hi):
    """Whether a window is small against the records around it: too little for a figure is then
    plausible."""
    return hi - lo + 1 < 3 * _gap(run) + 20
