"""rwightman/efficientdet-pytorch train.py logs.

Line: ``Train: 3 [  50/7330 (  1%)]  Loss: 1.234567 (1.2500)  Time: 0.412s,   38.83/s
(0.420s,   38.10/s)  LR: 1.000e-02  Data: 0.012 (0.015)``, printed by local rank 0
when batch_idx % log_interval == 0 and at the last batch; batch_idx is 0-based.

Semantics: each pair is the value of this very iteration, then in parentheses the mean
since the epoch's first batch (timm AverageMeter: val, avg), times to 3 decimals. An
iteration's time is measured after torch.cuda.synchronize from the end of the previous
one, data loading included; the logging after it counts in no iteration. The record
keeps the means: CUMULATIVE_MEAN with span = batch_idx + 1 for time and data alike, so
two records give the exact window mean between them (within the 3-decimal rounding);
an epoch's sum continues the previous epoch's when that epoch's last batch was logged.
``iteration`` is global, 1-based: epoch * N + batch_idx + 1 (epochs counted from 0).
loss is this iteration's. train.py logs ``Scheduled epochs: N`` as each process starts: it
begins a run (a resume starts at an epoch's first batch, so the meters need nothing more).
"""

import re
from typing import Match, Optional

from harness.measure.records import CUMULATIVE_MEAN, IterationRecord
from harness.measure.scrapers import common

RECORD_RE = re.compile(
    r"Train: (\d+) \[ *(\d+)/(\d+) \( *\S+%\)\]  Loss: +(\S+) \( *\S+\)  "
    r"Time: \S+s, +\S+/s  \( *(\S+)s, +\S+/s\)  LR: \S+  Data: \S+ \((\S+)\)"
)


class EffdetScraper(common.Scraper):
    key = "  Time: "
    pattern = RECORD_RE
    banners = ("Scheduled epochs: ",)

    def from_match(self, m: Match[str], index: int) -> Optional[common.Item]:
        batch = int(m.group(2))
        iteration = int(m.group(1)) * int(m.group(3)) + batch + 1
        time_s, data = m.group(5, 6)
        rec = IterationRecord(
            iteration,
            index,
            float(time_s),
            float(data),
            batch + 1,
            CUMULATIVE_MEAN,
            None,
            None,
            None,
            float(m.group(4)),
            self.run,
            max(common.half_unit(time_s), common.half_unit(data)),
        )
        return self.accept(rec)

    def unmatched(self, line: str, index: int) -> Optional[common.Item]:
        if "Train: " not in line:
            return None  # evaluation ("Test: ...") lines
        return super().unmatched(line, index)


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape, iter_scrape_path, scrape = common.entry_points(EffdetScraper)
