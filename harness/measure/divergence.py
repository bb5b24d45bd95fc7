"""Whether a trial's training diverged, read from the framework's own log alike for every framework.

A training diverged where a loss it logged is not finite (nan, inf) or exceeds FACTOR times the
median of the first BASELINE losses its run logged (an explosion; until the run has logged that
many, the median of those before it, so an explosion among the first is caught too; a median of
0 or less sets no limit). Frameworks that stop themselves at a non-finite loss print a message
instead of a record (STOPS: detectron2's FloatingPointError, torchvision's reference and
Detectron's "Loss is ...", the bundled trainer's error line); that message counts as a
divergence at the iteration it names, else at the iteration after the last record before it.

A trial that diverged at or before the end of its measured window fails with the reason; a
divergence after the window's end leaves its figure, which no diverged iteration entered.
"""

import collections
import math
import re
import statistics
from dataclasses import dataclass
from typing import Deque, Dict, Iterable, List, Optional, Pattern, Tuple

from harness.measure.records import IterationRecord
from harness.measure.scrapers.common import PathLike, read_lines

FACTOR = 100.0  # a loss above FACTOR x the run's first logged losses' median has exploded
BASELINE = 5  # the first logged losses of a run whose median is that reference

PREFIX = "diverged: "  # every divergence reason starts with it (the report's NA reads it)

# A framework's own message as it stops at a non-finite loss: (pattern, its loss group, its
# iteration group, what that group counts from): the iteration it names is 0-based in
# detectron2 (storage.iter), 1-based in the bundled trainer's line.
STOPS: Tuple[Tuple[Pattern[str], Optional[int], Optional[int], int], ...] = (
    # detectron2 engine/train_loop.py (SimpleTrainer._write_metrics)
    (re.compile(r"FloatingPointError: Loss became infinite or NaN at iteration=(\d+)!"), None, 1, 1),
    # detectron2 structures/boxes.py: proposals no longer finite, before the loss is
    (re.compile(r"AssertionError: Box tensor contains infinite or NaN!"), None, None, 0),
    # torchvision references/detection engine.py (train_one_epoch), then sys.exit(1)
    (re.compile(r"^Loss is (\S+), stopping training"), 1, None, 0),
    # Detectron (Caffe2) utils/train.py: handle_critical_error
    (re.compile(r"\bLoss is NaN\b"), None, None, 0),
    # the bundled trainer (harness/trainer/engine.py NonFiniteLoss), exit 3
    (re.compile(r"\bloss is (\S+) \(not finite\) at iteration (\d+)"), 1, 2, 0),
)

RECENT = 64  # records a Watch remembers the lines of
TAIL_LINES = 400  # a stop message is among the last lines a stopped framework prints (its traceback after)


@dataclass(frozen=True)
class Divergence:
    """Where a training diverged: the iteration (None where its message names none and no record
    came before it), the loss (nan where the message does not print it), the 0-based log line,
    and why it counts."""

    iteration: Optional[int]
    loss: float
    line: int
    why: str  # "not finite", "above 100 x ..." or the framework's stop message
    after: bool = False  # the iteration is the first one after the last record (the message names none)

    @property
    def reason(self) -> str:
        """The failure reason of a trial: what diverged, and where in its log.txt."""
        return "%s; log.txt line %d)" % (self.what[:-1], self.line + 1)

    @property
    def what(self) -> str:
        """What diverged, where and why, without the log's line."""
        where = (
            "after iteration %d" % (self.iteration - 1)
            if self.after and self.iteration is not None
            else "at iteration %d" % self.iteration
            if self.iteration is not None
            else "before the first logged iteration"
        )
        return "%sloss %s %s (%s)" % (PREFIX, _shown(self.loss), where, self.why)

    def within(self, end: int) -> bool:
        """Whether it happened at or before iteration `end` (the measured window's last)."""
        return self.iteration is None or self.iteration <= end


def _shown(loss: float) -> str:
    return repr(loss) if math.isfinite(loss) else str(loss)


def diverged(reason: Optional[str]) -> bool:
    """Whether a trial's failure reason is a divergence."""
    return bool(reason) and str(reason).startswith(PREFIX)


def in_trials(count: int, total: int, first: str) -> str:
    """A cell's NA text: how many of its trials diverged, and the first one's reason."""
    return "%s (%d of %d trials): %s" % (PREFIX[:-2], count, total, first[len(PREFIX) :])


class Watch:
    """Records fed in log order: the first divergence of each run, by the losses they carry."""

    def __init__(self, factor: float = FACTOR, baseline: int = BASELINE) -> None:
        self.factor = factor
        self.baseline = baseline
        self._first: Dict[int, List[float]] = {}
        self.found: Dict[int, Divergence] = {}
        # (line, iteration) of the last records: where a stop message naming no iteration falls
        self.recent: Deque[Tuple[int, int]] = collections.deque(maxlen=RECENT)

    def add(self, rec: IterationRecord) -> None:
        self.recent.append((rec.line, rec.iteration))
        loss = rec.loss
        if loss is None or rec.run in self.found:
            return
        if not math.isfinite(loss):
            self.found[rec.run] = Divergence(rec.iteration, loss, rec.line, "not finite")
            return
        first = self._first.setdefault(rec.run, [])
        ref = statistics.median(first) if first else 0.0
        if ref > 0 and loss > self.factor * ref:
            why = "above %g x %.4g, the median of the run's first %d logged losses" % (self.factor, ref, len(first))
            self.found[rec.run] = Divergence(rec.iteration, loss, rec.line, why)
        elif len(first) < self.baseline:
            first.append(loss)

    def first(self, run: Optional[int] = None) -> Optional[Divergence]:
        """The divergence of `run` (None: of the latest run that has one)."""
        if run is not None:
            return self.found.get(run)
        return self.found[max(self.found)] if self.found else None


def judge(watch: Watch, run: Optional[int], end: int, stop: Optional[Divergence]) -> Optional[Divergence]:
    """The divergence that fails a trial whose measured window ends at iteration `end`: the first
    of `run` (None: of the latest run that has one) by its losses, else the framework's stop
    message, where it happened at or before `end`; None where there is none."""
    for seen in (watch.first(run), stop):
        if seen is not None and seen.within(end):
            return seen
    return None


def stop_in(lines: Iterable[Tuple[int, str]], records: Iterable[Tuple[int, int]]) -> Optional[Divergence]:
    """The first stop message among (0-based index, text) lines, placed after the last of the
    records, (line, iteration) pairs, that comes before it where the message names no iteration."""
    before = sorted(records, reverse=True)
    for index, text in lines:
        for pattern, loss_group, iter_group, base in STOPS:
            m = pattern.search(text)
            if m is None:
                continue
            loss = _loss(m.group(loss_group)) if loss_group else math.nan
            if iter_group:
                return Divergence(int(m.group(iter_group)) + base, loss, index, text.strip()[:200])
            last = next((it for line, it in before if line < index), None)
            return Divergence(None if last is None else last + 1, loss, index, text.strip()[:200], after=True)
    return None


def _loss(text: str) -> float:
    try:
        return float(text.rstrip(",.!"))
    except ValueError:
        return math.nan


def tail(path: PathLike, lines: int = TAIL_LINES) -> List[Tuple[int, str]]:
    """The last `lines` lines of a log with their 0-based indexes, streamed."""
    return list(collections.deque(enumerate(read_lines(path)), maxlen=lines))
