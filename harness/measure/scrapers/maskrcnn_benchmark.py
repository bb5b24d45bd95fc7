"""maskrcnn-benchmark logs (engine/trainer.py do_train through MetricLogger).

Line: ``eta: 0:12:34  iter: 20  loss: 1.2 (1.3)  loss_classifier: ...  time: T (Tg)
data: D (Dg)  lr: 0.002000  max mem: 3012``, printed every 20 iterations and at the
last one. ``iter`` is already global and 1-based.

Semantics: each meter prints the MEDIAN of its last 20 values, then in parentheses the
MEAN SINCE THE START of the process (SmoothedValue.global_avg), both to 4 decimals.
time runs from the end of the previous iteration to after the optimizer step (data
loading included; the logging after it counts in the next iteration's data time). The
record keeps the two means since the start: CUMULATIVE_MEAN with span = iteration, so
two records give the exact window mean between them. loss is the median of the reduced
total loss; ``max mem`` is rank 0's peak allocated MB.

Runs: do_train logs ``Start training`` as each process starts; it begins a run. A run
resumed from a checkpoint starts its meters at the checkpoint's iteration. The Checkpointer
logs ``Loading checkpoint from <file>`` before training starts, and do_train names the
checkpoints it saves ``model_{:07d}.pth`` after their iteration: a run that loaded such a
file starts at that iteration, and one that loaded other weights (a catalog or .pkl
backbone) at 0. Where the log names no such file (``model_final.pth``, or no line at all),
a run starts at 0 when its first record lies within the first print period (20;
checkpoints come far apart), otherwise its means have no known start and its records are
GLOBAL_MEAN (approximate).
"""

import re
from typing import Match, Optional

from harness.measure.records import CUMULATIVE_MEAN, GLOBAL_MEAN, IterationRecord
from harness.measure.scrapers import common

RECORD_RE = re.compile(r"iter: (\d+)  [^\n]*?time: \S+ \((\S+)\)  data: \S+ \((\S+)\)")
PERIOD = 20  # do_train prints every 20 iterations
LOADING = "Loading checkpoint from "
SAVED_AT = re.compile(r"model_(\d{7})\.pth\s*$")  # do_train's name for the checkpoint of an iteration


class MaskrcnnScraper(common.Scraper):
    key = "  data: "
    pattern = RECORD_RE
    native = "maskrcnn"
    banners = ("Start training",)

    def __init__(self) -> None:
        super().__init__()
        self.known_start = True  # this run's meters start at iteration self.start
        self.start = 0
        self._loaded: Optional[int] = None  # the iteration the last checkpoint loaded was saved at, where it says

    def banner(self, line: str, index: int) -> Optional[common.Item]:
        at = line.find(LOADING)
        if at >= 0:
            name = line[at + len(LOADING) :].strip()
            m = SAVED_AT.search(name)
            # do_train's own checkpoint resumes at its iteration; other weights start at 0
            self._loaded = int(m.group(1)) if m else (None if name.endswith("model_final.pth") else 0)
            return None
        return super().banner(line, index)

    def banner_start(self, line: str) -> Optional[int]:
        loaded, self._loaded = self._loaded, None
        return loaded

    def fast_ok(self, chunk: str) -> bool:
        return super().fast_ok(chunk) and LOADING not in chunk

    def begin(self, rec: IterationRecord, start: Optional[int]) -> IterationRecord:
        if start is not None and rec.iteration > start:
            self.known_start, self.start = True, start
        else:
            self.known_start, self.start = rec.iteration <= PERIOD, 0
        self._python = not self.known_start or self.start != 0  # the compiled scanner counts from 0 only
        if self.known_start:
            rec = rec._replace(span=rec.iteration - self.start, kind=CUMULATIVE_MEAN)
        else:
            rec = rec._replace(span=1, kind=GLOBAL_MEAN)
        return super().begin(rec, start)

    def from_match(self, m: Match[str], index: int) -> Optional[common.Item]:
        iteration = int(m.group(1))
        string = m.string
        start = m.start()
        loss = common.field_after(string, "  loss: ", start, m.end())
        mem = common.field_after(string, "max mem: ", m.end())
        time_s, data = m.group(2, 3)
        known = self.known_start
        rec = IterationRecord(
            iteration,
            index,
            float(time_s),
            float(data),
            iteration - self.start if known else 1,
            CUMULATIVE_MEAN if known else GLOBAL_MEAN,
            None,
            None,
            None if mem is None else float(mem),
            None if loss is None else float(loss),
            self.run,
            max(common.half_unit(time_s), common.half_unit(data)),
        )
        return self.accept(rec)


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape, iter_scrape_path, scrape = common.entry_points(MaskrcnnScraper)
