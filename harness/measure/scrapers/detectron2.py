"""detectron2 logs: CommonMetricPrinter text lines (three historical formats) and
metrics.json (JSONWriter).

Text, current: `` eta: 11:02:41  iter: 39  total_loss: 1.104  <losses>  time: 0.3716
last_time: 0.3690  data_time: 0.0132  last_data_time: 0.0095   lr: 0.00079922
max_mem: 3189M``; the 0.3-era and v0.6 lines lack last_time/last_data_time; the 2019
format is the same without them as well. ``iter`` is 0-based: iter 39 is the 40th
iteration. The printer runs every 20 iterations and at the last one.

Semantics (text): ``time`` is the MEAN SINCE WARMUP, printed to 4 decimals:
IterationTimer records step times only from the ``warmup_iter``-th iteration of the
process (3), so at 0-based iter k of a process that started at iteration S (0 for a
fresh run) it is the mean of 1-based iterations S + warmup_iter..k + 1 ->
CUMULATIVE_MEAN with span k + 2 - warmup_iter - S; two such records give the exact
mean between them. The step time runs from the timer's before_step to its after_step:
the other hooks' after_step (the printer, the LR scheduler, checkpoints) fall between
steps and count in no iteration. data_time is the mean of the last 20 data times (max
over workers), which SimpleTrainer puts every iteration from the first: a window mean
over min(20, k + 1 - S) iterations (data_kind WINDOW_MEAN, data_span), which the
20-iteration print period tiles. With ``prefer="last"`` and a line that has
``last_time``, the record is instead that one iteration's exact figure (last_time,
last_data_time): a sample of every 20th iteration, not the window. total_loss is the
median of the last 20.

Runs: TrainerBase.train logs ``Starting training from iteration S`` as each process
starts; it begins a run and gives S. A run whose start is not printed starts at 0 when
its first record lies within the first print period (20 iterations); otherwise its
running means have no known start, and its records are GLOBAL_MEAN (approximate).

metrics.json: one object per line, sort_keys; ``time`` and ``data_time`` are the
MEDIAN of the last 20 recorded values -> WINDOW_MEDIAN, span = min(20, k + 2 -
warmup_iter). Objects without ``time`` (evaluation results) are skipped.

Options: prefer ("global" or "last"), warmup_iter (3), window (20).
"""

import json
import re
from typing import Match, Optional, Tuple

from harness.measure.records import CUMULATIVE_MEAN, GLOBAL_MEAN, ITERATION, WINDOW_MEAN, WINDOW_MEDIAN, IterationRecord
from harness.measure.scrapers import common

RECORD_RE = re.compile(
    r"iter: (\d+)  [^\n]*? time: (\S+)  (?:last_time: (\S+)  )?(?:data_time: (\S+)  )?"
    r"(?:last_data_time: (\S+)  )?"
)


START_RE = re.compile(r"Starting training from iteration (\d+)")
PERIOD = 20  # DefaultTrainer's PeriodicWriter


class Detectron2Scraper(common.Scraper):
    key = "iter: "
    pattern = RECORD_RE
    native = "detectron2"
    banners = ("Starting training from iteration ",)

    def __init__(self, prefer: str = "global", warmup_iter: int = 3, window: int = 20) -> None:
        super().__init__()
        if prefer not in ("global", "last"):
            raise ValueError("prefer must be 'global' or 'last'")
        self.prefer_last = prefer == "last"
        self.warmup_iter = warmup_iter
        self.window = window
        self.start: Optional[int] = 0  # iterations done before this run's process started; None: not known

    def banner_start(self, line: str) -> Optional[int]:
        m = START_RE.search(line)
        return int(m.group(1)) if m else None

    def begin(self, rec: IterationRecord, start: Optional[int]) -> IterationRecord:
        if start is None:
            start = 0 if rec.iteration <= PERIOD or rec.kind == ITERATION else None
        if start != self.start:
            self.start = start
            rec = self.rebuild(rec)
        if start is None and rec.data_time_s is not None:
            # how many iterations since its start the first data window holds is not known
            rec = rec._replace(data_time_s=None, data_span=0, data_kind=None)
        self._python = start != 0  # the compiled scanner counts from iteration 0 only
        return super().begin(rec, start)

    def rebuild(self, rec: IterationRecord) -> IterationRecord:
        """The record's spans and kind for this run's start."""
        it0 = rec.iteration - 1
        if rec.kind in (CUMULATIVE_MEAN, GLOBAL_MEAN):
            span, kind = self._cumulative(it0)
            data_span = self._data_span(it0) if rec.data_time_s is not None else 0
            return rec._replace(span=span, kind=kind, data_span=data_span)
        if rec.kind == WINDOW_MEDIAN:
            return rec._replace(span=min(self.window, self._timed(it0)))
        return rec

    def feed(self, line: str, index: int) -> Optional[common.Item]:
        if line.lstrip().startswith("{"):
            return self.from_json(line, index)
        return super().feed(line, index)

    def fast_ok(self, chunk: str) -> bool:
        return super().fast_ok(chunk) and not common.has_json_line(chunk)

    def unmatched(self, line: str, index: int) -> Optional[common.Item]:
        if " time: " not in line:
            return None  # before warmup there is no time to report
        return super().unmatched(line, index)

    def _timed(self, it0: int) -> int:
        n = it0 + 2 - self.warmup_iter - (self.start or 0)
        return n if n > 1 else 1

    def _cumulative(self, it0: int) -> Tuple[int, str]:
        if self.start is None:
            return 1, GLOBAL_MEAN
        return self._timed(it0), CUMULATIVE_MEAN

    def _data_span(self, it0: int) -> int:
        n = it0 + 1 - (self.start or 0)
        return n if n < self.window else self.window

    def from_match(self, m: Match[str], index: int) -> Optional[common.Item]:
        it0 = int(m.group(1))
        string = m.string
        start = m.start()
        loss_text = common.field_after(string, "total_loss: ", start, m.end())
        mem_text = common.field_after(string, "max_mem: ", m.end())
        mem = None if mem_text is None else float(mem_text.rstrip("M"))
        loss = None if loss_text is None else float(loss_text)
        last = m.group(3)
        if self.prefer_last and last is not None:
            data = m.group(5)
            rounding = common.half_unit(last)
            if data is not None:
                rounding = max(rounding, common.half_unit(data))
            rec = IterationRecord(
                it0 + 1,
                index,
                float(last),
                None if data is None else float(data),
                1,
                ITERATION,
                None,
                None,
                mem,
                loss,
                self.run,
                rounding,
            )
        else:  # data_time (group 4) is a 20-iteration window mean, not this running mean's
            time_s, data = m.group(2, 4)
            rounding = common.half_unit(time_s)
            if data is not None:
                rounding = max(rounding, common.half_unit(data))
            span, kind = self._cumulative(it0)
            rec = IterationRecord(
                it0 + 1,
                index,
                float(time_s),
                None if data is None else float(data),
                span,
                kind,
                None,
                None,
                mem,
                loss,
                self.run,
                rounding,
                0 if data is None else self._data_span(it0),
                None if data is None else WINDOW_MEAN,
            )
        return self.accept(rec)

    def from_json(self, line: str, index: int) -> Optional[common.Item]:
        try:
            obj = json.loads(line)
        except ValueError:
            if '"iteration"' in line:
                return common.make_error(index, "broken metrics.json line", line)
            return None
        if not isinstance(obj, dict) or "time" not in obj or "iteration" not in obj:
            return None
        try:
            it0 = int(obj["iteration"])
            time_s = float(obj["time"])
            data = obj.get("data_time")
            loss = obj.get("total_loss")
            span = min(self.window, self._timed(it0))
            rec = IterationRecord(
                it0 + 1,
                index,
                time_s,
                None if data is None else float(data),
                span,
                WINDOW_MEDIAN,
                None,
                None,
                None,
                None if loss is None else float(loss),
                self.run,
                max(common.value_half_unit(obj["time"]), 0.0 if data is None else common.value_half_unit(data)),
            )
        except (TypeError, ValueError):
            return common.make_error(index, "metrics.json record lacks a readable field", line)
        return self.accept(rec)


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape, iter_scrape_path, scrape = common.entry_points(Detectron2Scraper)
