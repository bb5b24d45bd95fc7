"""Time to accuracy: the curves an accuracy trial leaves and what is read off them.

An accuracy trial (scenario `mode: accuracy`) trains one framework on the train split and
keeps a checkpoint every `eval_every` iterations; each checkpoint's val-split detections are
scored by one shared COCOeval outside the training time. What comes back per checkpoint is an
`AccuracyPoint` (iteration, training wall seconds up to it, bbox AP and AP50, segm for Mask
R-CNN) and, per logged iteration, a `LossPoint`.

`time_to_target` places the moment a curve first reaches a target by linear interpolation
between the two checkpoints around that crossing (the reports say "interpolated"): the AP
between checkpoints is not measured, so the figure is the straight line's crossing, and a
curve that never reaches the target has none. A curve already past the target at its first
checkpoint is placed on the line from the start (0 s, AP 0), an assumption the reports name
(`Crossing.from_start`). The declared rule says which crossing counts: `first` (the first
checkpoint at or above the target, as runs made before the protocol read it), `stays` (the
first after which every checkpoint stays at or above it: a blip above the target at noise
level is no crossing) or `end` (the first crossing, counted only where the last checkpoint is
at or above the target). `spread` gives the mean and sample standard
deviation over seeds (the stability table).
"""

import math
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Sequence, Tuple

METRICS = ("bbox_AP", "bbox_AP50", "segm_AP", "segm_AP50")


@dataclass(frozen=True)
class AccuracyPoint:
    """One scored checkpoint of one accuracy trial."""

    iteration: int
    train_seconds: float  # training wall time from the trial's start to this checkpoint, eval excluded
    bbox_AP: float
    bbox_AP50: float
    segm_AP: Optional[float] = None
    segm_AP50: Optional[float] = None
    eval_seconds: Optional[float] = None  # the dump and the scoring: never counted as training

    def metric(self, name: str) -> Optional[float]:
        if name not in METRICS:
            raise ValueError("unknown metric %r (known: %s)" % (name, ", ".join(METRICS)))
        value = getattr(self, name)
        return None if value is None else float(value)

    def as_json(self) -> Dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class LossPoint:
    iteration: int
    loss: float


@dataclass(frozen=True)
class Crossing:
    """Where a curve first reaches a target: `seconds` and `iteration` interpolated linearly
    between checkpoints `before` and `after` (equal when a checkpoint hits it exactly)."""

    seconds: float
    iteration: float
    before: int
    after: int

    @property
    def from_start(self) -> bool:
        """Reached by the first checkpoint: the time lies on the assumed line from the start (0 s,
        AP 0) to that checkpoint, not between two scored checkpoints."""
        return self.before == 0


RULES = ("first", "stays", "end")


def time_to_target(
    curve: Sequence[AccuracyPoint], metric: str, target: float, rule: str = "first"
) -> Optional[Crossing]:
    """The crossing of `target` by `metric` along `curve` (sorted by iteration) that `rule` counts
    (RULES), or None.

    Before the first checkpoint the curve starts at (0 s, iteration 0, AP 0): a detector of
    random weights finds nothing, so a target reached at the first checkpoint is placed on the
    line from the start to it."""
    if not 0 < target <= 1:
        raise ValueError("a target AP lies in (0, 1], got %r" % target)
    if rule not in RULES:
        raise ValueError("unknown rule %r (known: %s)" % (rule, ", ".join(RULES)))
    scored = [(p, v) for p in sorted(curve, key=lambda p: p.iteration) for v in [p.metric(metric)] if v is not None]
    if rule == "end" and (not scored or scored[-1][1] < target):
        return None
    # stays: the first checkpoint of the last stretch at or above the target (none where the last is below)
    first_of_stay = len(scored)
    while rule == "stays" and first_of_stay > 0 and scored[first_of_stay - 1][1] >= target:
        first_of_stay -= 1
    prev_it, prev_s, prev_v = 0, 0.0, 0.0
    for i, (point, value) in enumerate(scored):
        if value >= target and (rule != "stays" or i >= first_of_stay):
            if value == prev_v:
                share = 1.0
            else:
                share = (target - prev_v) / (value - prev_v)
            share = min(1.0, max(0.0, share))
            return Crossing(
                seconds=prev_s + share * (point.train_seconds - prev_s),
                iteration=prev_it + share * (point.iteration - prev_it),
                before=prev_it,
                after=point.iteration,
            )
        prev_it, prev_s, prev_v = point.iteration, point.train_seconds, value
    return None


def best(curve: Sequence[AccuracyPoint], metric: str) -> Optional[float]:
    """The highest `metric` any checkpoint of the curve scored; None where none scored it."""
    return max((v for v in (p.metric(metric) for p in curve) if v is not None), default=None)


def iteration_seconds(curve: Sequence[AccuracyPoint]) -> Optional[float]:
    """Training seconds per iteration between the first and the last checkpoint (the start-up and
    the first interval's warm-up left out); None with fewer than two checkpoints."""
    points = sorted(curve, key=lambda p: p.iteration)
    if len(points) < 2 or points[-1].iteration <= points[0].iteration:
        return None
    return (points[-1].train_seconds - points[0].train_seconds) / (points[-1].iteration - points[0].iteration)


def final(curve: Sequence[AccuracyPoint]) -> Optional[AccuracyPoint]:
    return max(curve, key=lambda p: p.iteration) if curve else None


@dataclass(frozen=True)
class Spread:
    values: Tuple[float, ...]
    mean: float
    std: Optional[float]  # sample standard deviation (n - 1); None with one value

    @property
    def n(self) -> int:
        return len(self.values)


def spread(values: Sequence[float]) -> Optional[Spread]:
    vals = tuple(float(v) for v in values if v is not None and math.isfinite(v))
    if not vals:
        return None
    mean = sum(vals) / len(vals)
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else None
    return Spread(vals, mean, std)


def speedup(reference_seconds: Optional[float], seconds: Optional[float]) -> Optional[float]:
    """How many times faster than the reference (> 1: faster); None where either is missing."""
    if not reference_seconds or not seconds:
        return None
    return reference_seconds / seconds


def thin(losses: List[LossPoint], keep: int = 400) -> List[LossPoint]:
    """At most about `keep` evenly spaced points of a loss curve, the last one always kept."""
    if len(losses) <= keep:
        return list(losses)
    step = math.ceil(len(losses) / keep)
    out = losses[::step]
    return out if out[-1] is losses[-1] else out + [losses[-1]]
