"""tensorpack logs: the epoch-end throughput of its ThroughputTracker callback.

Lines (tensorpack's logger on stdout, ``[MMDD HH:MM:SS @file.py:N] message``, the head in
ANSI green): after each epoch the trainer logs ``Epoch 3 (global_step 30) finished,
time:5.21 seconds.`` (train/base.py), then the ScalarPrinter monitor prints every scalar
of the epoch, one per line and sorted by name, as ``name: value`` with 5 significant
digits (callbacks/monitor.py), among them ``Throughput (samples/sec): 12.345`` when the
training script adds ThroughputTracker(samples_per_step=...), as examples/FasterRCNN's
train.py does (samples_per_step = its GPU count: one image per GPU and step).

Semantics: ThroughputTracker (callbacks/prof.py) divides the steps since its previous
trigger (one epoch's steps_per_epoch) by the seconds its timer ran, and the timer runs only
between its own before_epoch and after_epoch hooks: the epoch's steps with the per-step
callbacks and the waits for the input queue, plus the before/after-epoch hooks of the
callbacks registered between it and the step loop; the epoch-end triggers (checkpoints,
summaries, this printing) fall outside. So a record is THROUGHPUT over one whole epoch:
images/s (all GPUs) with span = steps_per_epoch and iteration = the epoch's last global
step, n * steps_per_epoch for the n-th throughput line of a run that starts at epoch 1
from global step 0 (train.py's defaults; a run resumed from a checkpoint is not placed).
The number carries 5 significant digits, so the epoch's time is known to 5e-5 relatively;
no iteration or data time is printed.

The epoch lines are read only to check the placing: ``Epoch N (global_step G)`` with G !=
N * steps_per_epoch is a ScrapeError that names the steps_per_epoch the log implies, and
changes no record. ``Throughput (steps/sec)`` lines (a tracker without samples_per_step)
give no images/s and are not read.

Options: steps_per_epoch (500, the FasterRCNN example's TRAIN.STEPS_PER_EPOCH).
"""
import re

from harness.measure.records import THROUGHPUT, IterationRecord
from harness.measure.scrapers import common

THROUGHPUT_KEY = "Throughput (samples/sec): "
RECORD_RE = re.compile(r"\] Throughput \(samples/sec\): ([^\s,]+)[ \t]*$", re.M)
EPOCH_RE = re.compile(r"\] Epoch (\d+) \(global_step (\d+)\) finished, time:")
EPOCH_KEY = ") finished, time:"


class TensorpackScraper(common.Scraper):
    key = THROUGHPUT_KEY
    pattern = RECORD_RE

    def __init__(self, steps_per_epoch=500):
        super().__init__()
        self.steps_per_epoch = int(steps_per_epoch)
        if self.steps_per_epoch < 1:
            raise ValueError("steps_per_epoch must be at least 1")
        self.epochs = 0        # throughput lines seen, read or not: one per epoch

    def feed(self, line, index):
        if EPOCH_KEY in line:
            return self.check_epoch(line, index)
        return super().feed(line, index)

    def fast_ok(self, chunk):
        return EPOCH_KEY not in chunk

    def check_epoch(self, line, index):
        m = EPOCH_RE.search(line)
        if m is None:
            return None
        epoch, step = int(m.group(1)), int(m.group(2))
        if step == epoch * self.steps_per_epoch:
            return None
        implied = " (the log implies %d)" % (step // epoch) if epoch > 0 and step % epoch == 0 else ""
        return common.make_error(index, "epoch %d ended at global step %d, not at epoch x steps_per_epoch %d%s"
                                 % (epoch, step, self.steps_per_epoch, implied), line)

    def unmatched(self, line, index):
        self.epochs += 1
        return super().unmatched(line, index)

    def from_match(self, m, index):
        self.epochs += 1
        value = float(m.group(1))
        rec = IterationRecord(self.epochs * self.steps_per_epoch, index, None, None, self.steps_per_epoch,
                              THROUGHPUT, value)
        return self.accept(rec)


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape, iter_scrape_path, scrape = common.entry_points(TensorpackScraper)
