"""SimpleDet (MXNet) logs: the Speedometer batch-end callback.

New (since late 2019): ``Epoch[0] Batch [20]\\tIter: 20/87960\\tLr: 0.00693\\tSpeed:
28.71 samples/sec\\tTrain-RpnAcc=0.981232,\\t...``; old: ``Epoch[0] Batch [20]\\tSpeed:
28.71 samples/sec\\tTrain-...`` (``Iter[E] Batch [B]`` when there is no metric).

Semantics: Speed = frequent * batch_size / wall time since the previous print, i.e.
images per second of THIS worker over the last ``frequent`` batches (the batch size is
that of one worker's local GPUs). No iteration or data time is printed. So a record is
THROUGHPUT with span = frequent and images_per_s per worker. Batch numbers are 0-based
and printed when B % frequent == 0 (B > 0). ``iteration`` is 1-based: Iter + 1 in the new
format; in the old one epoch * batches_per_epoch + B + 1. Every worker logs; lines are
deduplicated by iteration (the first wins): a record of an iteration among the last
WORKER_LAG ones logged is another worker's, and one that goes back further begins a run,
as does the ``total iter N`` line detection_train.py logs as each process starts (whose
``Iter`` counts from 0 again). Speed carries 2 decimals, so a window the records tile has a
bound on its time (stats); once a second worker's line is seen, the records that follow are
whichever worker's came first and carry none.

Options:
  frequent: log frequency (configs: 10). None (default) takes the first record's B.
  batches_per_epoch: needed to place old-format records of epochs after epoch 0 (the
    log does not print it); without it those lines become ScrapeErrors.
"""

import collections
import re
from typing import Deque, List, Match, Optional

from harness.measure.records import THROUGHPUT, IterationRecord
from harness.measure.scrapers import common

RECORD_RE = re.compile(
    r"(?:Epoch|Iter)\[(\d+)\] Batch \[(\d+)\]\t(?:Iter: (\d+)/\d+\tLr: \S+\t)?"
    r"Speed: (\S+) samples/s"
)


# a metric after "Train-": name=value,
METRIC_RE = re.compile(r"(\w+)=([^,\s]+)")

WORKER_LAG = 64  # records: how far behind rank 0 another worker's line may come


class SpeedometerScraper(common.Scraper):
    key = "Speed: "
    pattern = RECORD_RE
    banners = ("total iter ",)  # detection_train.py, rank 0, as each process starts

    def __init__(self, frequent: Optional[int] = None, batches_per_epoch: Optional[int] = None) -> None:
        super().__init__()
        self.frequent = frequent
        self.batches_per_epoch = batches_per_epoch
        self._recent: Deque[int] = collections.deque(maxlen=WORKER_LAG)
        self.workers = False  # another worker's lines were seen

    def accept(self, rec: IterationRecord) -> Optional[common.Item]:
        if self._banner is not None:
            self._recent.clear()  # a process starts: its iterations count anew
        elif rec.iteration in self._recent:
            self.workers = True
            return None  # another worker's line of an iteration already read
        if self.workers:  # the records are of whichever worker printed first: no bound from the digits
            rec = rec._replace(rounding=float("inf"))
        elif self._last is not None and rec.iteration < self._last.iteration:
            self._recent.clear()
        out = super().accept(rec)
        if out is not None and out.__class__ is not common.ScrapeError:
            self._recent.append(rec.iteration)
        return out

    def from_match(self, m: Match[str], index: int) -> Optional[common.Item]:
        epoch = int(m.group(1))
        batch = int(m.group(2))
        if self.frequent is None:
            self.frequent = batch if batch > 0 else 1
        total = m.group(3)
        if total is not None:
            iteration = int(total) + 1
        elif self.batches_per_epoch:
            iteration = epoch * int(self.batches_per_epoch) + batch + 1
        elif epoch == 0:
            iteration = batch + 1
        else:
            return self.unplaced(
                index,
                "a record after the first epoch " + common.UNPLACED + ": the log does not print the "
                "epoch length (give the iterations per epoch)",
                _line_of(m),
            )
        rec = IterationRecord(
            iteration,
            index,
            None,
            None,
            self.frequent,
            THROUGHPUT,
            float(m.group(4)),
            None,
            None,
            _loss(m),
            self.run,
            common.half_unit(m.group(4)),
        )
        return self.accept(rec)


def _loss(m: Match[str]) -> Optional[float]:
    """The sum of the line's loss metrics (every metric after Speed but the accuracies: RpnL1,
    RcnnL1, the focal losses), each a running mean over the epoch: nan once one is; None where
    the line prints none."""
    text = m.string
    end = text.find("\n", m.end())
    losses: List[float] = []
    for name, value in METRIC_RE.findall(text[m.end() : end if end >= 0 else len(text)]):
        if "Acc" not in name:
            try:
                losses.append(float(value))
            except ValueError:
                continue
    return sum(losses) if losses else None


def _line_of(m: Match[str]) -> str:
    text = m.string
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    return text[start : end if end >= 0 else len(text)]


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape, iter_scrape_path, scrape = common.entry_points(SpeedometerScraper)
