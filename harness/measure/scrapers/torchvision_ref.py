"""torchvision references/detection logs (utils.MetricLogger.log_every).

Line: ``Epoch: [0]  [  20/7330]  eta: 0:33:41  lr: 0.000400  loss: 1.2345 (1.3456)
...  time: 0.2762  data: 0.0031  max mem: 2345``, printed when i % print_freq == 0
and at the last batch; i is 0-based within the epoch.

Semantics: iter_time and data_time are SmoothedValue(window 20) printed as {avg}: the
MEAN of the last 20 iterations of this epoch (a new logger each epoch); time runs from
the end of the previous iteration to the end of this one, data included. So a record
is WINDOW_MEAN with span = min(window, i + 1). Losses print median (epoch mean); loss
here is the median. ``iteration`` is global, 1-based: epoch * N + i + 1 (epochs of
equal length N, counting from epoch 0). Evaluation lines (``Test:``) are skipped.

Times print with 4 decimals. train.py prints ``Start training`` as each process starts:
it begins a run.

Options: window (20).
"""

import re
from typing import Match, Optional

from harness.measure.records import WINDOW_MEAN, IterationRecord
from harness.measure.scrapers import common

RECORD_RE = re.compile(
    r"Epoch: \[(\d+)\]  \[ *(\d+)/(\d+)\]  [^\n]*?time: (\S+)  data: (\S+)"
    r"(?:  max mem: (\d+))?"
)


class TorchvisionScraper(common.Scraper):
    key = "  data: "
    pattern = RECORD_RE
    banners = ("Start training",)

    def __init__(self, window: int = 20) -> None:
        super().__init__()
        self.window = window

    def unmatched(self, line: str, index: int) -> Optional[common.Item]:
        if "Epoch: [" not in line:
            return None  # evaluation ("Test:") or another header
        return super().unmatched(line, index)

    def from_match(self, m: Match[str], index: int) -> Optional[common.Item]:
        i = int(m.group(2))
        iteration = int(m.group(1)) * int(m.group(3)) + i + 1
        loss = common.field_after(m.string, "  loss: ", m.start(), m.end())
        mem = m.group(6)
        window = self.window
        time_s, data = m.group(4, 5)
        rec = IterationRecord(
            iteration,
            index,
            float(time_s),
            float(data),
            i + 1 if i + 1 < window else window,
            WINDOW_MEAN,
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
iter_scrape, iter_scrape_path, scrape = common.entry_points(TorchvisionScraper)
