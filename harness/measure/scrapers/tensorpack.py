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
summaries, this printing) fall outside. So a record is
THROUGHPUT over one whole epoch: images/s (all GPUs) with span = the epoch's steps and
iteration = the epoch's last global step. Both come from the log itself: a throughput
line is placed at the global step of the ``Epoch N (global_step G) finished`` line before
it, and the epoch's steps are G less the previous epoch's G (the first epoch of a run:
G / N, as tensorpack counts N x steps_per_epoch steps by epoch N). Only a log without
epoch lines is placed by counting: the n-th throughput line of a run at n x
steps_per_epoch. The number carries 5 significant digits, so the epoch's time is known
to 5e-5 relatively (a window of whole epochs gets that bound on its mean iteration time
where the images per step are given); no iteration or data time is printed. The epoch
line's own time (humanize_time_delta: 3 significant digits of seconds under a minute,
whole seconds, truncated, above) divided by the epoch's steps is the record's time_s: no
figure of the window (the main loop's timer also runs the epoch's hooks), but with the
images/s it tells the images per step the log itself implies.

A global step that goes back (a run resumed from an older checkpoint, or started anew)
begins a run, as does the ``Argv:`` line the logger prints as a process starts.
``Throughput (steps/sec)`` lines (a tracker without samples_per_step) give no images/s
and are not read.

Options: steps_per_epoch (500, the FasterRCNN example's TRAIN.STEPS_PER_EPOCH), used only
where the log prints no epoch lines.
"""

import re
from typing import List, Match, Optional, Tuple

from harness.measure.records import THROUGHPUT, IterationRecord
from harness.measure.scrapers import common

THROUGHPUT_KEY = "Throughput (samples/sec): "
RECORD_RE = re.compile(r"\] Throughput \(samples/sec\): ([^\s,]+)[ \t]*$", re.M)
EPOCH_RE = re.compile(r"\] Epoch (\d+) \(global_step (\d+)\) finished, time:(.*?)\.?\s*$")
# one part of humanize_time_delta's text: "1 day", "2 hours", "3 minutes", "4.5 seconds"
PART_RE = re.compile(r"([0-9.]+(?:e[+-]?\d+)?) (day|hour|minute|second)s?\b")
UNIT_S = {"day": 86400.0, "hour": 3600.0, "minute": 60.0, "second": 1.0}
EPOCH_KEY = ") finished, time:"
MONITOR = "@monitor.py:"  # the ScalarPrinter's lines: the epoch's scalars, the throughput among them
# what tensorpack prints once an epoch's scalars are done: the next epoch, its end, another
# throughput, a process starting
NEXT = ("] Start Epoch ", EPOCH_KEY, THROUGHPUT_KEY, "] Argv: ")
LOSS_RE = re.compile(r"\] total_cost: (\S+)[ \t]*$")


class TensorpackScraper(common.Scraper):
    key = THROUGHPUT_KEY
    pattern = RECORD_RE
    banners = ("] Argv: ",)

    def __init__(self, steps_per_epoch: int = 500) -> None:
        super().__init__()
        self.steps_per_epoch = int(steps_per_epoch)
        if self.steps_per_epoch < 1:
            raise ValueError("steps_per_epoch must be at least 1")
        self.epochs = 0  # throughput lines of the run seen, read or not: one per epoch
        # (global step, steps, seconds or None) of the epoch line the next throughput belongs to
        self.epoch: Optional[Tuple[int, int, Optional[float]]] = None
        self.epoch_step: Optional[int] = None  # the global step of the run's last epoch line
        self._counted = False  # the last record was placed by counting
        # the epoch's record, held while the scalars printed after it go on: its loss is among them
        self._held: Optional[IterationRecord] = None

    def take(self, line: str, index: int) -> common.Fed:
        held = self._held
        if held is None:
            return self.feed(line, index)
        if not any(mark in line for mark in NEXT):  # the epoch's scalars go on, other output between
            m = LOSS_RE.search(line) if MONITOR in line and held.loss is None else None
            if m is not None:
                self._held = held._replace(loss=_number(m.group(1)))
            return None
        self._held = None
        out, rest = self.accept(held), self.feed(line, index)
        return rest if out is None else out if rest is None else [out, rest]

    def feed(self, line: str, index: int) -> Optional[common.Item]:
        if EPOCH_KEY in line:
            self.read_epoch(line, index)
            return None
        return super().feed(line, index)

    def finish(self) -> List[common.Item]:
        held, self._held = self._held, None
        out = self.accept(held) if held is not None else None
        return [] if out is None else [out]

    def fast_ok(self, chunk: str) -> bool:
        return False  # every line through feed: a record waits for its epoch's loss

    def read_epoch(self, line: str, index: int) -> None:
        """Note an epoch line: the global step and steps of the epoch the next throughput belongs to."""
        m = EPOCH_RE.search(line)
        if m is None:
            return None
        epoch, step = int(m.group(1)), int(m.group(2))
        prev = self.epoch_step
        if prev is not None and step <= prev:
            prev = None  # the step went back: the record that follows begins a run
        if prev is not None:
            steps = step - prev
        elif epoch > 0 and step > 0 and step % epoch == 0:
            steps = step // epoch
        else:
            steps = self.steps_per_epoch
        self.epoch = (step, steps, _seconds(m.group(3)))
        self.epoch_step = step
        return None

    def begin(self, rec: IterationRecord, start: Optional[int]) -> IterationRecord:
        if self.run > 1 and self._counted:  # placed by counting: count this run from its start
            self.epochs = 1
            rec = rec._replace(iteration=self.steps_per_epoch)
        return super().begin(rec, start)

    def unmatched(self, line: str, index: int) -> Optional[common.Item]:
        self.epochs += 1
        self.epoch = None
        return super().unmatched(line, index)

    def from_match(self, m: Match[str], index: int) -> Optional[common.Item]:
        self.epochs += 1
        value = m.group(1)
        self._counted = self.epoch is None
        seconds: Optional[float] = None
        if self.epoch is not None:
            iteration, span, seconds = self.epoch
            self.epoch = None
        else:
            iteration, span = self.epochs * self.steps_per_epoch, self.steps_per_epoch
        rec = IterationRecord(
            iteration,
            index,
            None if seconds is None else seconds / span,
            None,
            span,
            THROUGHPUT,
            float(value),
            None,
            None,
            None,
            self.run,
            common.half_unit(value),
        )
        self._held = rec  # taken in once the epoch's scalars, total_cost among them, are read
        return None


def _number(text: str) -> Optional[float]:
    try:
        return float(text)
    except ValueError:
        return None


def _seconds(text: str) -> Optional[float]:
    """The seconds of humanize_time_delta's text ("2 minutes 29 seconds", "8.3 seconds"), or None."""
    parts = PART_RE.findall(text)
    if not parts or PART_RE.sub("", text).strip():
        return None
    return sum(float(value) * UNIT_S[unit] for value, unit in parts)


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape, iter_scrape_path, scrape = common.entry_points(TensorpackScraper)
