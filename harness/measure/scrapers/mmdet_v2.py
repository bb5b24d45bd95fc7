"""mmdetection 2.x logs: mmcv 1.x TextLoggerHook text lines and the .log.json file.

Text: ``Epoch [E][I/N]\\tlr: ..., eta: ..., time: T, data_time: D, memory: M, <losses>``
(IterBasedRunner: ``Iter [I/N]\\t...``). JSON: one object per line with mode, epoch,
iter, lr, memory, data_time, losses, loss, time. Both kinds may be fed in one stream.

Semantics: mmcv's IterTimerHook measures ``time`` from the end of the previous
iteration to the end of this one (data loading included); LoggerHook prints the mean
of the last ``interval`` values, and the buffer is cleared at each epoch start. So a
record is WINDOW_MEAN with span = min(interval, iterations so far in the epoch)
(IterBasedRunner: so far in the run). ``memory`` is the peak allocated MB, max over
ranks. ``iteration`` is global and 1-based: (epoch - 1) * N + I.

Runs: mmcv's runner logs ``Start running, host: ...`` as it starts (mmdetection 2.x's
train tool logs ``Environment info:`` before it), and the .log.json opens with the
runner's meta line (``env_info``): each begins a run. ``time`` and ``data_time`` are
printed to 3 decimals in the text and rounded to 5 in the .log.json; each record keeps
half a unit of its last printed digit as its rounding.

Options:
  interval: the LoggerHook interval (mmdet configs: 50). None (default) takes it from
    the first record: mmcv first prints after ``interval`` iterations of an epoch.
    Pass it when the log starts mid-run (e.g. a resumed IterBasedRunner).
  iters_per_epoch: the .log.json lines lack N; needed to place JSON records of
    epochs after the first (the text log beside it prints N on every line). Without it
    those lines become ScrapeErrors.
  by_epoch: False when the JSON comes from an IterBasedRunner (iter is global). None
    (default): as the runner's meta line says (its config names the runner type), else
    global where an epoch's first record has a higher iter than the last record before it
    (an epoch-based log starts each epoch's iter at its interval).
"""

import json
import re
from typing import Match, Optional, Tuple

from harness.measure.records import WINDOW_MEAN, IterationRecord
from harness.measure.scrapers import common
from harness.measure.scrapers.common import half_unit, new_record

NUM = r"[^,\s]+"
JSON_ROUNDING = 0.5 / 10**5  # TextLoggerHook rounds the floats of its .log.json to 5 decimals
TEXT_RE = re.compile(
    r"(?:Epoch \[(\d+)\]\[(\d+)/(\d+)\]|Iter \[(\d+)/(\d+)\])\t[^\n]*?, time: ("
    + NUM
    + r"), data_time: ("
    + NUM
    + r"), (?:memory: ("
    + NUM
    + r"), )?"
    + r"(?:(?:[^\n]*, )?loss: ("
    + NUM
    + r"))?"
)


class MmcvScraper(common.Scraper):
    """mmcv TextLoggerHook lines (text and JSON); shared by mmdet v1 and v2."""

    key = "data_time: "
    pattern = TEXT_RE
    native = "mmcv"
    banners = ("Start running, host:", "Environment info:")

    def __init__(
        self, interval: Optional[int] = None, iters_per_epoch: Optional[int] = None, by_epoch: Optional[bool] = None
    ) -> None:
        super().__init__()
        self.interval = interval
        self.iters_per_epoch = iters_per_epoch
        self.by_epoch = by_epoch
        self._json_last: Optional[Tuple[int, int]] = None  # (epoch, iter) of the last JSON train record

    def feed(self, line: str, index: int) -> Optional[common.Item]:
        if line.startswith("{") or line.lstrip().startswith("{"):
            return self.from_json(line, index)
        return super().feed(line, index)

    def fast_ok(self, chunk: str) -> bool:
        return super().fast_ok(chunk) and not common.has_json_line(chunk)

    def unmatched(self, line: str, index: int) -> Optional[common.Item]:
        if "(val)" in line:
            return None
        return super().unmatched(line, index)

    def _span(self, inner: int) -> int:
        if self.interval is None:
            self.interval = inner if inner > 0 else 1
        return inner if inner < self.interval else self.interval

    def from_match(self, m: Match[str], index: int) -> Optional[common.Item]:
        epoch, inner, length, it, _, time_s, data_s, mem, loss = m.groups()
        if epoch is not None:
            inner = int(inner)
            iteration = (int(epoch) - 1) * int(length) + inner
        else:
            inner = iteration = int(it)
        interval = self.interval
        if interval is None:
            interval = self.interval = inner if inner > 0 else 1
        time_f, data_f = float(time_s), float(data_s)
        rounding = half_unit(time_s)
        other = half_unit(data_s)
        return self.accept(
            new_record(
                iteration,
                index,
                time_f,
                data_f,
                inner if inner < interval else interval,
                WINDOW_MEAN,
                None,
                None,
                None if mem is None else float(mem),
                None if loss is None else float(loss),
                self.run,
                rounding if rounding >= other else other,
            )
        )

    def from_json(self, line: str, index: int) -> Optional[common.Item]:
        try:
            obj = json.loads(line)
        except ValueError:
            if '"mode"' in line:
                return common.make_error(index, "broken JSON log line", line)
            return None
        if isinstance(obj, dict) and "env_info" in obj:
            self._banner = (index, None)  # the runner's meta line: a process starts
            config = obj.get("config")
            if self.by_epoch is None and isinstance(config, str):
                if "IterBasedRunner" in config:
                    self.by_epoch = False
                elif "EpochBasedRunner" in config:
                    self.by_epoch = True
            return None
        if not isinstance(obj, dict) or obj.get("mode") != "train" or "time" not in obj:
            return None
        try:
            epoch = int(obj.get("epoch", 1))
            inner = int(obj["iter"])
            time_s = float(obj["time"])
            data = obj.get("data_time")
            data_s = None if data is None else float(data)
            rounding = min(
                JSON_ROUNDING,
                max(common.value_half_unit(obj["time"]), 0.0 if data is None else common.value_half_unit(data)),
            )
            mem = obj.get("memory")
            loss = obj.get("loss")
            mem = None if mem is None else float(mem)
            loss = None if loss is None else float(loss)
        except (KeyError, TypeError, ValueError):
            return common.make_error(index, "JSON train record lacks a readable field", line)
        last, self._json_last = self._json_last, (epoch, inner)
        if self.by_epoch is None and last is not None and epoch > last[0] and inner > last[1]:
            self.by_epoch = False  # an iter that goes on across epochs: an IterBasedRunner's
        went_back = last is not None and (epoch, inner) <= last
        if self.by_epoch is False:
            iteration = inner
        elif self.iters_per_epoch:
            iteration = (epoch - 1) * int(self.iters_per_epoch) + inner
        elif epoch == 1:
            iteration = inner
        else:
            return self.unplaced(
                index,
                "a record after the first epoch " + common.UNPLACED + ": the .log.json does not print "
                "the epoch length (give the iterations per epoch)",
                line,
                restarted=went_back,
            )
        rec = IterationRecord(
            iteration, index, time_s, data_s, self._span(inner), WINDOW_MEAN, None, None, mem, loss, self.run, rounding
        )
        return self.accept(rec)


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape: common.IterScrape
iter_scrape_path: common.IterScrape
scrape: common.Scrape
iter_scrape, iter_scrape_path, scrape = common.entry_points(MmcvScraper)
