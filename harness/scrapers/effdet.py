"""rwightman/efficientdet-pytorch train.py logs.

Line: ``Train: 3 [  50/7330 (  1%)]  Loss: 1.234567 (1.2500)  Time: 0.412s,   38.83/s
(0.420s,   38.10/s)  LR: 1.000e-02  Data: 0.012 (0.015)``, printed by local rank 0
when batch_idx % log_interval == 0 and at the last batch; batch_idx is 0-based.

Semantics: the first figure of each pair is the value of this very iteration (timm
AverageMeter.val), measured after torch.cuda.synchronize from the end of the previous
iteration (data loading included). So a record is ITERATION (span 1): time_s and
data_time_s of that iteration, images_per_s = global batch / its time, loss = its loss.
``iteration`` is global, 1-based: epoch * N + batch_idx + 1 (epochs counted from 0).
"""
import re

from harness.records import ITERATION, IterationRecord
from harness.scrapers import common

RECORD_RE = re.compile(
    r"Train: (\d+) \[ *(\d+)/(\d+) \( *\S+%\)\]  Loss: +(\S+) \( *\S+\)  "
    r"Time: (\S+)s, +(\S+)/s  \([^)\n]*\)  LR: \S+  Data: (\S+) \(")


class EffdetScraper(common.Scraper):
    key = "  Time: "
    pattern = RECORD_RE

    def from_match(self, m, index):
        iteration = int(m.group(1)) * int(m.group(3)) + int(m.group(2)) + 1
        rec = IterationRecord(iteration, index, float(m.group(5)), float(m.group(7)), 1,
                              ITERATION, float(m.group(6)), None, None, float(m.group(4)))
        return self.accept(rec)

    def unmatched(self, line, index):
        if "Train: " not in line:
            return None  # evaluation ("Test: ...") lines
        return super().unmatched(line, index)


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape, iter_scrape_path, scrape = common.entry_points(EffdetScraper)
