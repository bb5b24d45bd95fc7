"""mmdetection 3.x logs (mmengine LogProcessor) and the vis_data JSON scalars.

Text: ``Epoch(train)  [E][  I/N]  lr: 1.9820e-03  eta: ...  time: T  data_time: D
memory: M  loss: L  ...`` (iteration-based loops: ``Iter(train) [  I/N]  ...``).
JSON (vis_data/<timestamp>.json or scalars.json): one object per line with lr keys,
data_time, losses, time, epoch, iter (global, 1-based), memory, step.

Semantics: mmengine's IterTimerHook measures time from the end of the previous
iteration to the end of this one (data loading included). Time and data_time are
the mean over the last ``window`` iterations of a history that spans the whole run
(not reset per epoch, and restored with a checkpoint), so a record is WINDOW_MEAN with
span = min(window, iteration). ``memory`` is rank 0's peak MB since the previous log
line. ``iteration`` is global, 1-based: (E - 1) * N + I for epoch-based loops. Times print
with 4 decimals in the text, in full in the JSON.

The window: the ``window`` option where given, else the LogProcessor's ``window_size`` in
the config the text log dumps as training starts (``log_processor = dict(type=
'LogProcessor', window_size=W, ...)``), else the text's logging interval (mmdet's
default_runtime and mmengine's defaults set the two equal), taken from the first record
that is not an epoch's last (the iteration less the one a resumed run starts from).
Records before the window is known, and JSON records whose window no config gives, are
means over a window the log does not state: GLOBAL_MEAN (approximate).

Runs: CheckpointHook logs ``Checkpoints will be saved to ...`` as training starts, after
``resumed epoch: E, iter: I`` where the run resumes: each begins a run. A resumed run's
history goes on from the checkpoint's, so its records whose window reaches back to
iteration I or before mix the earlier process's times with its own: they keep their place
(span from I + 1) but no time, and a figure of the run starts after them.

Options:
  window: the LogProcessor window_size (mmengine default 10, mmdet 3.x configs 50).
"""

import json
import re
from typing import Match, Optional, Tuple

from harness.measure.records import GLOBAL_MEAN, WINDOW_MEAN, IterationRecord
from harness.measure.scrapers import common

RESUMED_RE = re.compile(r"resumed epoch: \d+, iter: (\d+)")
TEXT_RE = re.compile(
    r"(?:Epoch\(train\) *\[(\d+)\]\[ *(\d+)/(\d+)\]|Iter\(train\) *\[ *(\d+)/(\d+)\])"
    r"  [^\n]*?  time: (\S+)  data_time: (\S+)  (?:memory: (\S+)  )?"
)


WINDOW_RE = re.compile(r"LogProcessor'?,[^\n]*\bwindow_size=(\d+)")
CONFIG_KEY = "window_size="


class MmengineScraper(common.Scraper):
    key = "  data_time: "
    pattern = TEXT_RE
    native = "mmengine"
    banners = ("Checkpoints will be saved to ", "resumed epoch: ")

    def __init__(self, window: Optional[int] = None) -> None:
        super().__init__()
        self.window = window
        self._given = window is not None  # the option, or the log's config, says the window
        self._start = 0  # the iteration this run resumed from
        self._mixing = False  # its records may still reach into the history it resumed
        self._resumed: Optional[int] = None  # the iteration a "resumed" line gave, until its run begins

    @property
    def _python(self) -> bool:
        # the scanner reads only with a window, and knows nothing of a resumed history
        return self._handover or self.window is None or self._mixing

    @_python.setter
    def _python(self, value: bool) -> None:
        self._handover = value

    def banner_start(self, line: str) -> Optional[int]:
        # "resumed epoch: E, iter: I" comes before CheckpointHook's line: the run starts after I
        m = RESUMED_RE.search(line)
        if m:
            self._resumed = int(m.group(1))
        return self._resumed

    def begin(self, rec: IterationRecord, start: Optional[int]) -> IterationRecord:
        self._resumed = None
        self._start = start or 0
        self._mixing = self._start > 0
        return super().begin(self._own(rec), start)

    def _own(self, rec: IterationRecord) -> IterationRecord:
        """The record as this run's: without times where its window reaches into the history
        the run resumed (iterations up to self._start, timed by an earlier process)."""
        if not self._mixing or rec.kind != WINDOW_MEAN:
            return rec
        if rec.iteration - rec.span >= self._start:
            self._mixing = False
            return rec
        return rec._replace(span=max(1, rec.iteration - self._start), time_s=None, data_time_s=None)

    def feed(self, line: str, index: int) -> Optional[common.Item]:
        if line.lstrip().startswith("{"):
            return self.from_json(line, index)
        if CONFIG_KEY in line and self.key not in line:
            m = WINDOW_RE.search(line)
            if m:  # the config the log dumps: how it was written, whatever the option said
                self.window, self._given = max(1, int(m.group(1))), True
            return None
        return super().feed(line, index)

    def fast_ok(self, chunk: str) -> bool:
        return super().fast_ok(chunk) and not common.has_json_line(chunk) and CONFIG_KEY not in chunk

    def unmatched(self, line: str, index: int) -> Optional[common.Item]:
        if "(val)" in line or "(test)" in line:
            return None
        return super().unmatched(line, index)

    def _span_kind(self, iteration: int, epoch_end: bool) -> Tuple[int, str]:
        """(span, kind) of a record, setting the window from it where nothing says it yet."""
        if self.window is None:
            if epoch_end:
                return 1, GLOBAL_MEAN
            first = iteration - self._start
            self.window = first if first > 0 else 1
        return (iteration if iteration < self.window else self.window), WINDOW_MEAN

    def from_match(self, m: Match[str], index: int) -> Optional[common.Item]:
        epoch, inner, length, it = m.group(1, 2, 3, 4)
        if epoch is not None:
            iteration = (int(epoch) - 1) * int(length) + int(inner)
        else:
            iteration = int(it)
        loss = common.field_after(m.string, "  loss: ", m.end() - 2)
        mem = m.group(8)
        time_s, data_s = m.group(6, 7)
        time_f, data_f = float(time_s), float(data_s)
        span, kind = self._span_kind(iteration, epoch is not None and inner == length)
        rec = IterationRecord(
            iteration,
            index,
            time_f,
            data_f,
            span,
            kind,
            None,
            None,
            None if mem is None else float(mem),
            None if loss is None else float(loss),
            self.run,
            max(common.half_unit(time_s), common.half_unit(data_s)),
        )
        return self.accept(self._own(rec))

    def from_json(self, line: str, index: int) -> Optional[common.Item]:
        try:
            obj = json.loads(line)
        except ValueError:
            if '"data_time"' in line:
                return common.make_error(index, "broken JSON scalars line", line)
            return None
        if not isinstance(obj, dict) or "iter" not in obj or "time" not in obj:
            return None
        if not any(isinstance(k, str) and k.endswith("lr") for k in obj):
            return None  # validation scalars carry no learning rate
        try:
            iteration = int(obj["iter"])
            time_s = float(obj["time"])
            data = obj.get("data_time")
            mem = obj.get("memory")
            loss = obj.get("loss")
            if self.window is None:  # no record of the JSON tells the window
                span, kind = 1, GLOBAL_MEAN
            else:
                span, kind = min(self.window, iteration), WINDOW_MEAN
            rec = IterationRecord(
                iteration,
                index,
                time_s,
                None if data is None else float(data),
                span,
                kind,
                None,
                None,
                None if mem is None else float(mem),
                None if loss is None else float(loss),
                self.run,
                max(common.value_half_unit(obj["time"]), 0.0 if data is None else common.value_half_unit(data)),
            )
        except (KeyError, TypeError, ValueError):
            return common.make_error(index, "JSON train scalars lack a readable field", line)
        return self.accept(self._own(rec))


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape, iter_scrape_path, scrape = common.entry_points(MmengineScraper)
