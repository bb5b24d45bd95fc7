"""Work done per iteration: read from a trial's DETBENCH_WORK lines, compared across columns.

Two frameworks that train the same detector for the same number of iterations can still
do different work: more proposals kept, more RoIs sampled, more positives for the mask
head. A framework that can prints one line per iteration (harness.jsonlog.work_line);
a trial's figure is the mean of each count over the measured window, and the report
flags a row whose frameworks differ in any count (harness.measure.flags, unequal-work).

The same means give each cell its counted work (`iteration_flops`): the fixed part of its
work model plus each count times the FLOPs one unit of it costs (harness.measure.compute).
"""

import json
import math
import re
from typing import Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple, TypeVar

from harness.measure.scrapers.common import PathLike

from harness.jsonlog import ITERATION, WORK_PREFIX
from harness.measure.scrapers.common import clean_line, read_blocks

# the counts a WORK line may carry, in the order and with the words the report uses
LABELS = {
    "proposals": "proposals",
    "sampled_rois": "sampled RoIs",
    "positive_rois": "positive RoIs",
    "mask_rois": "mask RoIs",
    "positive_anchors": "positive anchors",
}

T = TypeVar("T")
_ITERATION_RE = re.compile(rb'"%s":\s*(\d{1,18})\b' % ITERATION.encode())


def _count(value: object) -> Optional[float]:
    """value when it is a finite, non-negative number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def parse(text: str) -> Optional[Tuple[int, Dict[str, float]]]:
    """(iteration, {key: count}) of one cleaned log line, or None when it is no WORK line."""
    at = text.find(WORK_PREFIX)
    if at < 0:
        return None
    try:
        obj = json.loads(text[at + len(WORK_PREFIX) :])
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    it = obj.get(ITERATION)
    if isinstance(it, bool) or not isinstance(it, int):
        return None
    counts = {k: _count(obj[k]) for k in LABELS if k in obj}
    return it, {k: v for k, v in counts.items() if v is not None}


def window_lines(
    path: PathLike,
    prefix: str,
    parse: Callable[[str], Optional[Tuple[int, T]]],
    first: int,
    last: int,
    lines: Optional[Tuple[int, Optional[int]]] = None,
) -> Optional[Dict[int, T]]:
    """{iteration: parse(line)} for the lines of a log holding `prefix` whose iteration lies in
    first..last (an iteration printed twice counts once: its last line), or None when the file
    cannot be read. `parse(text)` returns (iteration, value) or None for a line it refuses.
    With `lines` (a, b), only the lines a..b-1 (0-based; b None: to the end) are read: the lines
    of one run of a log that holds several."""
    raw_prefix = prefix.encode()
    per_iteration: Dict[int, T] = {}
    base = 0  # the index of the block's first line
    try:
        for block, end in read_blocks(path):
            at = block.find(raw_prefix, 0, end)
            counted, line = 0, base
            while at >= 0:  # only the lines that hold the prefix are cut out and decoded
                start = block.rfind(b"\n", 0, at) + 1
                stop = block.find(b"\n", at, end)
                stop = end if stop < 0 else stop
                raw = block[start:stop]
                at = block.find(raw_prefix, stop, end)
                if lines is not None:
                    line += block.count(b"\n", counted, start)
                    counted = start
                    if line < lines[0] or (lines[1] is not None and line >= lines[1]):
                        continue  # another run's line
                seen = _ITERATION_RE.search(raw)
                if seen is not None and not first <= int(seen.group(1)) <= last:
                    continue  # outside the window: not worth decoding
                try:
                    text = clean_line(raw)
                except Exception:  # a rank prefix int() refuses: not rank 0's line
                    continue
                got = parse(text) if text else None
                if got is not None and first <= got[0] <= last:
                    per_iteration[got[0]] = got[1]
            base += block.count(b"\n", 0, end) if lines is not None else 0
    except OSError:
        return None
    return per_iteration


def window_means(
    path: PathLike, first: int, last: int, lines: Optional[Tuple[int, Optional[int]]] = None
) -> Optional[Dict[str, float]]:
    """{key: mean per iteration} over iterations first..last of a log's WORK lines (of the
    lines `lines` only, where given: window_lines), or None when the window holds none."""
    per_iteration = window_lines(path, WORK_PREFIX, parse, first, last, lines)
    if not per_iteration:
        return None
    means: Dict[str, float] = {}
    for key in LABELS:
        values = [c[key] for c in per_iteration.values() if key in c]
        if values:
            means[key] = sum(values) / len(values)
    return means or None


def iteration_flops(model: object, counts: Optional[Mapping[str, float]]) -> Tuple[Optional[float], Optional[str]]:
    """(FLOPs of one iteration on one device, None), or (None, why), from a cell's stored work
    model (harness.trainer.flops: {"fixed_flops", "unit_flops", "images_per_device"}) and the
    mean work counts its trials logged (rank 0's batch, which is what the model was counted
    for). A count whose unit costs nothing need not be logged; one that costs work must be."""
    if not isinstance(model, dict) or _count(model.get("fixed_flops")) is None:
        return None, "no work model to count with"
    units = model.get("unit_flops") or {}
    if not isinstance(units, dict) or any(_count(v) is None for v in units.values()):
        return None, "a damaged work model"
    counts = counts or {}
    missing = [k for k in sorted(units) if units[k] and _count(counts.get(k)) is None]
    if missing:
        return None, "the trials logged no %s (DETBENCH_WORK), which the work depends on" % " or ".join(
            LABELS.get(k, k) for k in missing
        )
    return model["fixed_flops"] + sum(cost * counts[k] for k, cost in units.items() if cost), None


def median(values: Iterable[float]) -> float:
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2.0


def number(value: float) -> str:
    return "%.0f" % value if abs(value) >= 100 or value == int(value) else "%.1f" % value


def row_text(works: Sequence[Optional[Mapping[str, float]]]) -> str:
    """'proposals 4000 | 4000 | 4000; sampled RoIs 1024 | 1024 | 1024' for one row (one
    work dict or None per column, in column order); '' when no column logged work."""
    parts: list[str] = []
    for key, label in LABELS.items():
        if any(w and key in w for w in works):
            parts.append("%s %s" % (label, " | ".join(number(w[key]) if w and key in w else "-" for w in works)))
    return "; ".join(parts)
