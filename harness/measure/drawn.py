"""What a trial drew from its data set, read from its DETBENCH_DATA lines.

Two frameworks that run the same detector for the same iterations can still train on
different data: one mirrors each image always or never while another redraws the flip at
each draw, one samples with replacement while another goes through the data set once per
epoch. A framework that can prints one line per iteration (harness.jsonlog.data_line: the
images of the batch, each with whether its own augmentation mirrored it, and the loader's
epoch). A trial's summary counts, over the measured window and over the whole trial:

- views: distinct (image, mirrored) pairs drawn;
- flips: draws that were mirrored;
- draws: images drawn (with repeats);
- epochs: epochs the loader started (an iteration whose epoch differs from the one logged
  before it, or the trial's first logged iteration);
- images_per_iteration: draws over the iterations that logged a line.

A log without DATA lines (an older log, an imported one, a framework that cannot say) has no
summary: not observed, which is no difference from anything (harness.measure.flags,
unequal-data, compares only the frameworks that logged one).
"""

from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

from harness.jsonlog import DATA_PREFIX, read_data
from harness.measure.scrapers.common import PathLike
from harness.measure.work import median, number, window_lines

# the counts of a summary, in the order and with the words the report uses
LABELS = {
    "views": "distinct views",
    "flips": "flips",
    "draws": "draws",
    "epochs": "epochs started",
    "images_per_iteration": "images per iteration",
}
# the spans a summary covers
SCOPES = {"window": "measured window", "trial": "whole trial"}

Batch = Tuple[Optional[int], List[Tuple[int, bool]]]  # (epoch or None, [(image id, mirrored)])
_LAST = 10**18  # every iteration a log can number


def parse(text: str) -> Optional[Tuple[int, Batch]]:
    """(iteration, (epoch, views)) of one cleaned log line, or None when it is no DATA line."""
    at = text.find(DATA_PREFIX)
    if at < 0:
        return None
    try:
        iteration, epoch, views = read_data(text[at + len(DATA_PREFIX) :])
    except ValueError:
        return None
    return iteration, (epoch, views)


def summarize(batches: Mapping[int, Batch], first: int, last: int) -> Optional[Dict[str, float]]:
    """The counts (LABELS) over iterations first..last of {iteration: (epoch, views)}, the whole
    trial's batches (the epoch logged before `first` decides whether the window's first
    iteration starts an epoch); None when no iteration in first..last logged a line."""
    order = sorted(batches)
    inside = [i for i in order if first <= i <= last]
    if not inside:
        return None
    before = [i for i in order if i < first]
    previous = batches[before[-1]][0] if before else None
    started = bool(not before)  # the trial's first logged iteration starts its epoch
    epochs = 0
    views: Set[Tuple[int, bool]] = set()
    flips = draws = 0
    for i in inside:
        epoch, drawn = batches[i]
        if epoch is not None and (started or epoch != previous):
            epochs += 1
        started = False
        previous = epoch
        views.update(drawn)
        flips += sum(1 for _, mirrored in drawn if mirrored)
        draws += len(drawn)
    out: Dict[str, float] = {
        "views": float(len(views)),
        "flips": float(flips),
        "draws": float(draws),
        "images_per_iteration": draws / len(inside),
    }
    if any(batches[i][0] is not None for i in inside):
        out["epochs"] = float(epochs)
    return out


def trial_summary(
    path: PathLike, first: int, last: int, lines: Optional[Tuple[int, Optional[int]]] = None
) -> Optional[Dict[str, Dict[str, float]]]:
    """{"window": counts over first..last, "trial": counts over every logged iteration} of a
    log's DATA lines (of the lines `lines` only, where given: the run the figure comes from),
    or None when the log holds none (not observed)."""
    batches = window_lines(path, DATA_PREFIX, parse, 1, _LAST, lines)
    if not batches:
        return None
    out: Dict[str, Dict[str, float]] = {}
    window = summarize(batches, first, last)
    if window is not None:
        out["window"] = window
    whole = summarize(batches, min(batches), max(batches))
    if whole is not None:
        out["trial"] = whole
    return out or None


def flat(summary: Optional[Mapping[str, Mapping[str, float]]]) -> Optional[Dict[Tuple[str, str], float]]:
    """{(scope, count): value} of a summary, or None."""
    if not summary:
        return None
    return {(scope, key): float(v) for scope, counts in summary.items() for key, v in counts.items()} or None


def cell_summary(
    summaries: Sequence[Optional[Mapping[str, Mapping[str, float]]]],
) -> Optional[Dict[str, Dict[str, float]]]:
    """{scope: {count: median over the repeats that logged it}} of a cell's trials, or None."""
    out: Dict[str, Dict[str, float]] = {}
    for scope in SCOPES:
        for key in LABELS:
            values = [s[scope][key] for s in summaries if s and key in s.get(scope, {})]
            if values:
                out.setdefault(scope, {})[key] = median(values)
    return out or None


def row_text(summaries: Sequence[Optional[Mapping[str, Mapping[str, float]]]]) -> str:
    """'measured window: distinct views 16 | 9; ...; whole trial: ...' for one row (one summary or
    None per column, in column order); '' when no column logged DATA lines."""
    parts: List[str] = []
    for scope, scope_label in SCOPES.items():
        counts = []
        for key, label in LABELS.items():
            if any(s and key in s.get(scope, {}) for s in summaries):
                counts.append(
                    "%s %s"
                    % (
                        label,
                        " | ".join(number(s[scope][key]) if s and key in s.get(scope, {}) else "-" for s in summaries),
                    )
                )
        if counts:
            parts.append("%s: %s" % (scope_label, "; ".join(counts)))
    return "; ".join(parts)
