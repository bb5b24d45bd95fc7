"""Inference latency: the mean and the percentiles of one set of batches, and the phases.

Every figure of a trial comes from the same measured batches (the window the throughput
covers), so the mean, the percentiles and the throughput agree by construction: the
throughput is the window's images over the sum of the same batch times. A percentile is
interpolated linearly between the two closest ranks (numpy's default), and only given
where the batches support it (harness.plan.scenario.batches_needed): p99 of 50 batches
would be the slowest batch under another name, so it is None instead.
"""

import json
import math
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple, Union

from harness.measure.records import IterationRecord

from harness import jsonlog
from harness.measure import work
from harness.plan.scenario import batches_needed

MEDIAN = 50.0
PHASES = {jsonlog.PRE_S: "pre-processing", jsonlog.NET_S: "network", jsonlog.POST_S: "post-processing"}


def key(p: float) -> str:
    """The figure's name: 'p99_s', 'p99.9_s'."""
    return "p%g_s" % p


def percentile(values: Sequence[float], p: float) -> Optional[float]:
    """The p-th percentile of values (linear between closest ranks), None where too few support it."""
    v = sorted(values)
    if not v or len(v) < batches_needed(p):
        return None
    pos = (len(v) - 1) * p / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summary(times: Sequence[float], percentiles: Sequence[float]) -> Dict[str, Optional[float]]:
    """{"batches", "mean_s", "p50_s", one "pNN_s" per percentile} of one set of batch times."""
    out: Dict[str, Optional[float]] = {"batches": len(times), "mean_s": sum(times) / len(times) if times else None}
    for p in sorted(set([MEDIAN] + list(percentiles))):
        out[key(p)] = percentile(times, p)
    return out


def _phases(text: str) -> Optional[Tuple[int, Dict[str, float]]]:
    """(batch, {phase or "detections": value}) of one cleaned PHASES line, or None."""
    at = text.find(jsonlog.PHASES_PREFIX)
    if at < 0:
        return None
    try:
        obj = json.loads(text[at + len(jsonlog.PHASES_PREFIX) :])
    except (ValueError, RecursionError):
        return None
    it = obj.get(jsonlog.ITERATION) if isinstance(obj, dict) else None
    if isinstance(it, bool) or not isinstance(it, int):
        return None
    return it, {k: obj[k] for k in tuple(PHASES) + (jsonlog.DETECTIONS,) if _number(obj.get(k))}


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def phase_means(path: Union[str, Path], first: int, last: int, images: Optional[int]) -> Optional[Dict[str, float]]:
    """{"pre_s", "net_s", "post_s": mean seconds per batch, "detections_per_image"} over batches
    first..last of a log's PHASES lines (a phase no batch gave is left out), or None."""
    per_batch = work.window_lines(path, jsonlog.PHASES_PREFIX, _phases, first, last)
    if not per_batch:
        return None
    out: Dict[str, float] = {}
    for name in PHASES:
        values = [b[name] for b in per_batch.values() if name in b]
        if len(values) == len(per_batch):
            out[name] = sum(values) / len(values)
    counts = [b[jsonlog.DETECTIONS] for b in per_batch.values() if jsonlog.DETECTIONS in b]
    if counts and len(counts) == len(per_batch) and images:
        out["detections_per_image"] = sum(counts) / len(counts) / images
    return out or None


def trial_latency(
    records: Sequence[IterationRecord],
    window: Tuple[int, int],
    percentiles: Sequence[float],
    log_path: Optional[Union[str, Path]] = None,
    images: Optional[int] = None,
) -> Dict[str, Optional[float]]:
    """An inference trial's latency figures over the window (first, last) of its per-batch
    records: summary() of their times, plus phase_means() where the log has PHASES lines."""
    first, last = window
    times = [r.time_s for r in records if first <= r.iteration <= last and r.time_s is not None]
    out = summary(times, percentiles)
    if log_path is not None:
        out.update(phase_means(log_path, first, last, images) or {})
    return out
