"""NVIDIA dllogger output of the DeepLearningExamples EfficientDet trainers.

Two line shapes: the StdOutBackend ``DLL <datetime> - <step> name : value unit ...``
and the JSONStreamBackend ``DLLL {"timestamp": ..., "step": ..., "data": {...}}``.
Both print the floats in full (Python's repr), so nothing is lost to rounding.

PyTorch train.py (step = (epoch, steps_per_epoch, batch_idx), printed every
log_interval batches and at the last one): train_batch_time is the mean since a
start: batch 0 of the epoch, until batch_idx 10 resets the meter before adding that
batch's time; from then on it is the mean of batches 10..batch_idx -> CUMULATIVE_MEAN
with span = batch_idx - 9 (or batch_idx + 1 before the reset). Two records of one
epoch give the exact mean between them; a new epoch, whose batches 0..9 no record
after the reset covers, starts a new running sum. train_data_time is the mean since
batch 0 of the epoch: the same iterations as the time before the reset, and after it a
running mean of its own (data_kind CUMULATIVE_MEAN, data_span = batch_idx + 1), which
covers an epoch's batches 0..9 too. The throughput figure is a mean of per-iteration
rates and is not read. ``iteration`` = epoch * steps_per_epoch + batch_idx + 1.

TF2 time_log.txt (step "PARAMETER", data {"Latency": "0.21 seconds", "fps": ...,
"steps": [a, b]}): fps = images per second (all ranks) over steps a+1..b, measured
from the start of the first batch of the window -> THROUGHPUT with span = b - a,
iteration = b; time_s = Latency / span (Latency is rounded to 10 ms).

Epoch summaries (step (epoch,)) and run summaries (step ()) are skipped. The PARAMETER
lines a trainer logs as it starts (its arguments: no fps) begin a run.
"""

import json
import re
from typing import Any, Dict, Iterable, List, Optional

from harness.measure.records import CUMULATIVE_MEAN, THROUGHPUT, IterationRecord
from harness.measure.scrapers import common

STEP_RE = re.compile(r"^DLL \S+ \S+ - (\(\d+, \d+, \d+\)|PARAMETER) (.*)$")
METRIC_RE = re.compile(r"(\w+) : (\([^)]*\)|\[[^\]]*\]|\S+)(?: seconds)?")
RESET_BATCH = 10
STARTED = object()  # what a PARAMETER line without fps gives: a trainer's arguments


def _train_record(step: Iterable[Any], data: Dict[str, Any], index: int) -> Optional[IterationRecord]:
    epoch, steps_per_epoch, batch = (int(x) for x in step)
    if "train_batch_time" not in data:
        return None
    reset = batch >= RESET_BATCH
    span = batch - RESET_BATCH + 1 if reset else batch + 1
    data_time = data.get("train_data_time")  # since batch 0: after the reset, other iterations
    loss = data.get("train_loss")
    rounding = common.value_half_unit(data["train_batch_time"])
    if data_time is not None:
        rounding = max(rounding, common.value_half_unit(data_time))
    return IterationRecord(
        epoch * steps_per_epoch + batch + 1,
        index,
        float(data["train_batch_time"]),
        None if data_time is None else float(data_time),
        span,
        CUMULATIVE_MEAN,
        loss=None if loss is None else float(loss),
        rounding=rounding,
        data_span=batch + 1 if reset and data_time is not None else 0,
        data_kind=CUMULATIVE_MEAN if reset and data_time is not None else None,
    )


def _fps_record(data: Dict[str, Any], index: int) -> Optional[IterationRecord]:
    if "fps" not in data or "steps" not in data:
        return None
    first, last = (int(x) for x in data["steps"])
    span = last - first
    if span <= 0:
        raise ValueError("empty step window")
    latency = data.get("Latency")
    time_s = None
    if latency is not None:
        time_s = float(str(latency).split()[0]) / span
    return IterationRecord(
        last, index, time_s, None, span, THROUGHPUT, float(data["fps"]), rounding=common.value_half_unit(data["fps"])
    )


def _tuple(text: str) -> List[str]:
    return [x.strip() for x in text.strip("()[]").split(",") if x.strip()]


class DlloggerScraper(common.Scraper):
    key = "DLL"

    def feed(self, line: str, index: int) -> Optional[common.Item]:
        start = line.find("DLL")
        if start < 0:
            return None
        line = line[start:]
        try:
            if line.startswith("DLLL "):
                rec = self.from_json(line[5:], index)
            elif line.startswith("DLL "):
                rec = self.from_stdout(line, index)
            else:
                return None
        except (KeyError, TypeError, ValueError) as exc:
            return common.make_error(index, "unreadable dllogger record: %s" % exc, line)
        if rec is None:
            return None
        if not isinstance(rec, IterationRecord):  # a trainer's arguments: a process starts
            self._banner = (index, None)
            return None
        if rec.run != self.run:
            rec = rec._replace(run=self.run)
        return self.accept(rec)

    def from_json(self, text: str, index: int) -> object:
        """A record, STARTED (a trainer's arguments) or None."""
        obj = json.loads(text)
        if not isinstance(obj, dict) or obj.get("type", "LOG") != "LOG":
            return None
        step, data = obj.get("step"), obj.get("data")
        if not isinstance(data, dict):
            return None
        if isinstance(step, list) and len(step) == 3:
            return _train_record(step, data, index)
        if step == "PARAMETER":
            return _fps_record(data, index) or STARTED
        return None

    def from_stdout(self, line: str, index: int) -> object:
        """A record, STARTED (a trainer's arguments) or None."""
        m = STEP_RE.match(line)
        if m is None:
            return None
        data = {k: v for k, v in METRIC_RE.findall(m.group(2))}
        if m.group(1) == "PARAMETER":
            if "steps" in data:
                data["steps"] = _tuple(data["steps"])
            return _fps_record(data, index) or STARTED
        return _train_record(_tuple(m.group(1)), data, index)


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape, iter_scrape_path, scrape = common.entry_points(DlloggerScraper)
