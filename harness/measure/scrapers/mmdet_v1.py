"""mmdetection 1.x logs (mmcv 0.2.x TextLoggerHook): text lines and .log.json.

Text: ``Epoch [E][I/N]\\tlr: 0.00797, eta: ..., time: T, data_time: D, memory: M, ...``
(lr printed with 5 decimals; later mmcv prints it as 1.000e-02, both are read).
JSON keys: mode, epoch, iter, lr, time, data_time, memory, losses, loss.

Same timing semantics as mmdetection 2.x (see mmdet_v2): WINDOW_MEAN over the last
``interval`` iterations of the epoch, time includes data time, no CUDA sync. Losses
are rank 0's own values (not all-reduced in this era). Options as in mmdet_v2.
"""

from harness.measure.scrapers import common
from harness.measure.scrapers.mmdet_v2 import MmcvScraper


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape: common.IterScrape
iter_scrape_path: common.IterScrape
scrape: common.Scrape
iter_scrape, iter_scrape_path, scrape = common.entry_points(MmcvScraper)
