"""mmdetection 3.x logs (mmengine LogProcessor) and the vis_data JSON scalars.

Text: ``Epoch(train)  [E][  I/N]  lr: 1.9820e-03  eta: ...  time: T  data_time: D
memory: M  loss: L  ...`` (iteration-based loops: ``Iter(train) [  I/N]  ...``).
JSON (vis_data/<timestamp>.json or scalars.json): one object per line with lr keys,
data_time, losses, time, epoch, iter (global, 1-based), memory, step.

Semantics: mmengine's IterTimerHook measures time from the end of the previous
iteration to the end of this one (data loading included). Time and data_time are
the mean over the last ``window`` iterations of a history that spans the whole run
(not reset per epoch), so a record is WINDOW_MEAN with span = min(window, iteration).
``memory`` is rank 0's peak MB since the previous log line. ``iteration`` is global,
1-based: (E - 1) * N + I for epoch-based loops.

Options:
  window: the LogProcessor window_size (mmengine default 10, mmdet 3.x configs 50).
    None (default) assumes the window equals the logging interval, as in mmdet's
    default_runtime, and takes that from the first record (first logged iteration).
"""
import json
import re

from harness.measure.records import WINDOW_MEAN, IterationRecord
from harness.measure.scrapers import common

TEXT_RE = re.compile(
    r"(?:Epoch\(train\) *\[(\d+)\]\[ *(\d+)/(\d+)\]|Iter\(train\) *\[ *(\d+)/(\d+)\])"
    r"  [^\n]*?  time: (\S+)  data_time: (\S+)  (?:memory: (\S+)  )?")


class MmengineScraper(common.Scraper):
    key = "  data_time: "
    pattern = TEXT_RE
    native = "mmengine"

    def __init__(self, window=None):
        super().__init__()
        self.window = window

    def feed(self, line, index):
        if line.lstrip().startswith("{"):
            return self.from_json(line, index)
        return super().feed(line, index)

    def fast_ok(self, chunk):
        return not common.has_json_line(chunk)

    def unmatched(self, line, index):
        if "(val)" in line or "(test)" in line:
            return None
        return super().unmatched(line, index)

    def _span(self, iteration):
        if self.window is None:
            self.window = iteration if iteration > 0 else 1
        return iteration if iteration < self.window else self.window

    def from_match(self, m, index):
        epoch, inner, length, it = m.group(1, 2, 3, 4)
        if epoch is not None:
            iteration = (int(epoch) - 1) * int(length) + int(inner)
        else:
            iteration = int(it)
        loss = common.field_after(m.string, "  loss: ", m.end() - 2)
        mem = m.group(8)
        rec = IterationRecord(
            iteration, index, float(m.group(6)), float(m.group(7)), self._span(iteration),
            WINDOW_MEAN, None, None,
            None if mem is None else float(mem),
            None if loss is None else float(loss))
        return self.accept(rec)

    def from_json(self, line, index):
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
            rec = IterationRecord(
                iteration, index, time_s, None if data is None else float(data),
                self._span(iteration), WINDOW_MEAN, None, None,
                None if mem is None else float(mem), None if loss is None else float(loss))
        except (KeyError, TypeError, ValueError):
            return common.make_error(index, "JSON train scalars lack a readable field", line)
        return self.accept(rec)


# iter_scrape(lines) streams, iter_scrape_path(path) reads a file with the fast path,
# scrape(lines) returns (records, errors)
iter_scrape, iter_scrape_path, scrape = common.entry_points(MmengineScraper)
