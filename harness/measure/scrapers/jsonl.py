"""detbench's own log format: `DETBENCH_ITER {json}` lines (bundled trainer, calibration).

Times are printed in full (rounding 0). Behind a launcher's rank prefix only rank 0's lines
are read. The `DETBENCH_META` line a workload prints as it
starts, or an iteration that goes back, begins a run (harness.measure.scrapers.common).
"""

import json
import math
from typing import Any, Iterable, Iterator, List, Optional, Tuple

from harness import jsonlog
from harness.measure.records import ITERATION, IterationRecord, ScrapeError
from harness.measure.scrapers import common

_PREFIX = jsonlog.ITER_PREFIX


class _Runs(common.Scraper):
    """The run bookkeeping of common.Scraper for the DETBENCH_ITER lines."""

    banners = (jsonlog.META_PREFIX,)


def _num(value: Any) -> Optional[float]:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _loss(value: Any) -> Optional[float]:
    """The loss as printed, nan and inf kept: a diverged training's (JSON's NaN, Infinity)."""
    return None if value is None else float(value)


def iter_scrape(lines: Iterable[str], **_options: Any) -> Iterator[common.Item]:
    """Yield an IterationRecord or a ScrapeError for every ITER line (and a fatal error
    where a record is seen twice with other figures or out of order)."""
    runs = _Runs()
    for index, line in enumerate(lines):
        start = line.find(_PREFIX)
        if start > 0 and line[0] in "[0123456789" and common.RANK_RE.match(line):
            cleaned = common.clean_line(line)  # a launcher's rank prefix: rank 0's line, or another's
            if cleaned is None:
                continue
            line = cleaned
            start = line.find(_PREFIX)
        if start < 0:
            if jsonlog.META_PREFIX in line:
                runs.banner(line, index)
            continue
        body = line[start + len(_PREFIX) :]
        try:
            obj = json.loads(body)
            rec = IterationRecord(
                iteration=int(obj[jsonlog.ITERATION]),
                line=index,
                time_s=_num(obj[jsonlog.TIME_S]),
                data_time_s=_num(obj.get(jsonlog.DATA_TIME_S)),
                kind=ITERATION,
                images=obj.get(jsonlog.IMAGES),
                memory_mb=_num(obj.get(jsonlog.PEAK_MEM_MB)),
                loss=_loss(obj.get(jsonlog.LOSS)),
                run=runs.run,
            )
        # OverflowError: an iteration of 1e400; RecursionError: JSON nested thousands deep
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as exc:
            yield ScrapeError(index, "unreadable %s line: %s" % (_PREFIX.strip(), exc), line[:200])
            continue
        out = runs.accept(rec)
        if out is not None:
            yield out


def scrape(lines: Iterable[str], **options: Any) -> Tuple[List[IterationRecord], List[ScrapeError]]:
    return common.collect(iter_scrape(lines, **options))
