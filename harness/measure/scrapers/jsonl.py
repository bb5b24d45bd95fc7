"""detbench's own log format: `DETBENCH_ITER {json}` lines (bundled trainer, calibration)."""
import json
import math

from harness import jsonlog
from harness.measure.records import ITERATION, IterationRecord, ScrapeError

_PREFIX = jsonlog.ITER_PREFIX


def _num(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def iter_scrape(lines, **_options):
    """Yield an IterationRecord or a ScrapeError for every ITER line."""
    for index, line in enumerate(lines):
        start = line.find(_PREFIX)
        if start < 0:
            continue
        body = line[start + len(_PREFIX):]
        try:
            obj = json.loads(body)
            yield IterationRecord(
                iteration=int(obj[jsonlog.ITERATION]), line=index,
                time_s=_num(obj[jsonlog.TIME_S]), data_time_s=_num(obj.get(jsonlog.DATA_TIME_S)),
                kind=ITERATION, images=obj.get(jsonlog.IMAGES),
                memory_mb=_num(obj.get(jsonlog.PEAK_MEM_MB)), loss=_num(obj.get(jsonlog.LOSS)))
        # OverflowError: an iteration of 1e400; RecursionError: JSON nested thousands deep
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as exc:
            yield ScrapeError(index, "unreadable %s line: %s" % (_PREFIX.strip(), exc), line[:200])


def scrape(lines, **options):
    records, errors = [], []
    for item in iter_scrape(lines, **options):
        (records if isinstance(item, IterationRecord) else errors).append(item)
    return records, errors
