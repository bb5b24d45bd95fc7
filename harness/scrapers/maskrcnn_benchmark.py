"""maskrcnn-benchmark logs (engine/trainer.py do_train through MetricLogger).

Line: ``eta: 0:12:34  iter: 20  loss: 1.2 (1.3)  loss_classifier: ...  time: T (Tg)
data: D (Dg)  lr: 0.002000  max mem: 3012``, printed every 20 iterations and at the
last one. ``iter`` is already global and 1-based.

Semantics: each meter prints the MEDIAN of its last 20 values, then the mean since
the start in parentheses. time runs from the end of the previous iteration to after
the optimizer step (data loading included). So a record is WINDOW_MEDIAN with
span = min(window, iteration); loss is the median of the reduced total loss.
``max mem`` is rank 0's peak allocated MB.

Options:
  window: SmoothedValue window size (20 in maskrcnn-benchmark).
"""
import re

from harness.records import WINDOW_MEDIAN, IterationRecord
from harness.scrapers import common

RECORD_RE = re.compile(r"iter: (\d+)  [^\n]*?time: (\S+) \(\S+\)  data: (\S+) \(\S+\)")


class MaskrcnnScraper(common.Scraper):
    key = "  data: "
    pattern = RECORD_RE
    native = "maskrcnn"

    def __init__(self, window=20):
        super().__init__()
        self.window = window

    def from_match(self, m, index):
        iteration = int(m.group(1))
        string = m.string
        start = m.start()
        loss = common.field_after(string, "  loss: ", start, m.end())
        mem = common.field_after(string, "max mem: ", m.end())
        window = self.window
        rec = IterationRecord(
            iteration, index, float(m.group(2)), float(m.group(3)),
            iteration if iteration < window else window, WINDOW_MEDIAN, None, None,
            None if mem is None else float(mem),
            None if loss is None else float(loss))
        return self.accept(rec)


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape, iter_scrape_path, scrape = common.entry_points(MaskrcnnScraper)
