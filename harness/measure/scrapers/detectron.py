"""Detectron (Caffe2) logs: the ``json_stats: {...}`` lines of its training loop.

Line (detectron/utils/logging.py log_json_stats, printed to stdout with json.dumps and
sorted keys; every top-level float is first turned into a 6-decimal string): ``json_stats:
{"accuracy_cls": "0.912500", "eta": "1 day, 2:03:04", "iter": 40, "loss": "1.234567",
"loss_bbox": ..., "lr": "0.020000", "mb_qsize": 64, "mem": 9054, "time": "0.612345"}``.
``iter`` is the 0-based iteration of tools/train_net.py's loop; utils/training_stats.py
prints when iter % 20 == 0 and at the last iteration (SOLVER.MAX_ITER - 1).

Semantics: ``time`` is the iteration timer's average_time, the MEAN of every iteration
timed since the timer was last reset. utils/train.py times from before the learning-rate
update to after the net run (the net's first op dequeues the minibatch the loader threads
prepared, so a wait for data counts; the stats update, the logging and checkpoints come
after the stop and count in no iteration), and resets the timer once, right after logging
iteration start_iter + 20. So the record of 0-based iteration k is CUMULATIVE_MEAN over
1-based iterations start_iter + 1 .. k + 1 while k <= start_iter + 20, and over
start_iter + 22 .. k + 1 after the reset: the mean since the reset starts right after the
record at start_iter + 21, so the two running sums form one chain, and two records give
the exact mean between them. No data time is printed (None). ``loss`` is the median of the
last 20 total losses; ``mem`` is the peak of the GPUs' allocated memory in MB (rounded up).

Runs: tools/train_net.py logs ``Called with args:`` as each process starts; it begins a
run, as does an iteration that goes back. The first run starts at ``start_iter``; a later
one at 0 when its first record is iteration 0, and otherwise at an iteration the log does
not print: its records are then GLOBAL_MEAN (approximate). ``time`` carries 6 decimals.

Options: start_iter (0: a fresh run; a resumed run starts at its checkpoint's iteration + 1),
log_period (20, fixed in TrainingStats).
"""

import json
import re
from typing import Match, Optional

from harness.measure.records import CUMULATIVE_MEAN, GLOBAL_MEAN, IterationRecord
from harness.measure.scrapers import common

RECORD_RE = re.compile(r"json_stats: (\{[^\n]*\})")


class DetectronScraper(common.Scraper):
    key = "json_stats: "
    pattern = RECORD_RE
    banners = ("Called with args:",)

    def __init__(self, start_iter: int = 0, log_period: int = 20) -> None:
        super().__init__()
        self.log_period = int(log_period)
        self.start_iter: Optional[int] = int(start_iter)  # None: not known
        self.reset_at = self.start_iter + self.log_period

    def span(self, it0: int) -> int:
        """Iterations the running mean of 0-based iteration it0 covers."""
        if it0 <= self.reset_at:
            return it0 - (self.start_iter or 0) + 1  # asked only where the start is known
        return it0 - self.reset_at

    def begin(self, rec: IterationRecord, start: Optional[int]) -> IterationRecord:
        if self.run > 1:  # a later process: it starts at 0 only if it logs iteration 0 first
            self.start_iter = 0 if rec.iteration == 1 else None
            if self.start_iter is None:
                rec = rec._replace(span=1, kind=GLOBAL_MEAN)
            else:
                self.reset_at = self.log_period
                rec = rec._replace(span=self.span(0), kind=CUMULATIVE_MEAN)
        return super().begin(rec, start)

    def from_match(self, m: Match[str], index: int) -> Optional[common.Item]:
        try:
            stats = json.loads(m.group(1))
        except ValueError:
            return common.make_error(index, "json_stats line is not one JSON object", m.group(0))
        if not isinstance(stats, dict):
            return common.make_error(index, "json_stats line is not one JSON object", m.group(0))
        try:
            it0 = int(stats["iter"])
            time_s = float(stats["time"])
            mem = stats.get("mem")
            loss = stats.get("loss")
            mem = None if mem is None else float(mem)
            loss = None if loss is None else float(loss)
        except (KeyError, TypeError, ValueError):
            return common.make_error(index, "json_stats line lacks a readable iter or time", m.group(0))
        rounding = common.value_half_unit(stats["time"])
        if self.start_iter is None:
            return self.accept(
                IterationRecord(it0 + 1, index, time_s, None, 1, GLOBAL_MEAN, None, None, mem, loss, self.run, rounding)
            )
        span = self.span(it0)
        if span < 1 and (self._last is None or it0 + 1 > self._last.iteration):
            return common.make_error(index, "iteration %d is before start_iter %d" % (it0, self.start_iter), m.group(0))
        return self.accept(
            IterationRecord(
                it0 + 1, index, time_s, None, max(span, 1), CUMULATIVE_MEAN, None, None, mem, loss, self.run, rounding
            )
        )


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape, iter_scrape_path, scrape = common.entry_points(DetectronScraper)
