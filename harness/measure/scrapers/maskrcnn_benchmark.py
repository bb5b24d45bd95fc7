"""maskrcnn-benchmark logs (engine/trainer.py do_train through MetricLogger).

Line: ``eta: 0:12:34  iter: 20  loss: 1.2 (1.3)  loss_classifier: ...  time: T (Tg)
data: D (Dg)  lr: 0.002000  max mem: 3012``, printed every 20 iterations and at the
last one. ``iter`` is already global and 1-based.

Semantics: each meter prints the MEDIAN of its last 20 values, then in parentheses the
MEAN SINCE THE START of the process (SmoothedValue.global_avg), both to 4 decimals.
time runs from the end of the previous iteration to after the optimizer step (data
loading included; the logging after it counts in the next iteration's data time). The
record keeps the two means since the start: CUMULATIVE_MEAN with span = iteration, so
two records give the exact window mean between them. A run resumed from a checkpoint
starts its meters at the checkpoint's iteration; its spans are then too long by that
iteration, which shifts a difference by that count times the change of the mean.
loss is the median of the reduced total loss; ``max mem`` is rank 0's peak allocated MB.
"""
import re

from harness.measure.records import CUMULATIVE_MEAN, IterationRecord
from harness.measure.scrapers import common

RECORD_RE = re.compile(r"iter: (\d+)  [^\n]*?time: \S+ \((\S+)\)  data: \S+ \((\S+)\)")


class MaskrcnnScraper(common.Scraper):
    key = "  data: "
    pattern = RECORD_RE
    native = "maskrcnn"

    def from_match(self, m, index):
        iteration = int(m.group(1))
        string = m.string
        start = m.start()
        loss = common.field_after(string, "  loss: ", start, m.end())
        mem = common.field_after(string, "max mem: ", m.end())
        rec = IterationRecord(
            iteration, index, float(m.group(2)), float(m.group(3)), iteration, CUMULATIVE_MEAN,
            None, None, None if mem is None else float(mem), None if loss is None else float(loss))
        return self.accept(rec)


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape, iter_scrape_path, scrape = common.entry_points(MaskrcnnScraper)
