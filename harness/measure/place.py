"""Whether a trial's place within its round moved its figure: a run's place check.

The trials of each round run in an order drawn from the run's seed (harness.run.schedule), so a
cell takes different places in different rounds, and a place effect (the first trial of a round
starting on a cold machine, the last on a hot one) can be told apart from the cell's own speed.

Each finished trial's images/s is divided by its cell's geometric mean over the run: its
normalized figure. Per place within the round the check gives the median normalized figure, and
it sets the places' levels (the geometric mean of their normalized figures) against two yardsticks:

- the cells' own spread: each trial divided by its place's level, (max - min) / min over a
  cell's trials, the median over the cells;
- reshuffled orders: the order was drawn at random, so with no place effect any reshuffle of the
  places within each round is as likely as the one that ran. `p` is the share of DRAWS such
  reshuffles (drawn from the run's seed, so a report always says the same) whose levels span at
  least as wide as the run's.

harness.measure.flags.place_effect says when that is a place effect. Pure functions over trial
rows (mappings with seq, repeat, cell_key, status and throughput, like the store's).
"""

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from harness.measure import flags

DRAWS = 2000  # reshuffled orders the span is compared with
CHUNK = 1_000_000  # values per block of reshuffles held at once


@dataclass(frozen=True)
class PlaceCheck:
    rounds: int  # rounds (repeats) of the run
    places: int  # trials per round
    medians: Tuple[Optional[float], ...]  # place 1, 2, ...: median normalized figure (None: none finished)
    span: float  # (highest - lowest) / lowest of the places' levels
    cell_spread: float  # the cells' own spread once each trial is divided by its place's level
    wider: int  # reshuffled orders whose places span at least as wide
    draws: int  # reshuffled orders drawn
    p: float  # (1 + wider) / (1 + draws)
    flagged: bool  # flags.place_effect


Trial = flags.Row  # a trial's row: repeat, seq, status, throughput, cell_key
Floats = npt.NDArray[np.float64]


def grid(trials: Sequence[Trial]) -> Optional[Tuple[Floats, npt.NDArray[np.int_]]]:
    """(log normalized figures, cell index) as rounds x places arrays, NaN and -1 where a place
    has no finished trial, or None where rounds differ in length (not a run's schedule)."""
    rounds: Dict[int, List[Trial]] = {}
    for t in trials:
        rounds.setdefault(t["repeat"], []).append(t)
    if not rounds:
        return None
    orders = [sorted(ts, key=lambda t: t["seq"]) for _, ts in sorted(rounds.items())]
    width = len(orders[0])
    if any(len(o) != width for o in orders):
        return None
    done: Dict[str, List[float]] = {}
    for t in trials:
        if t["status"] == "done" and t["throughput"] and t["throughput"] > 0:
            done.setdefault(t["cell_key"], []).append(math.log(t["throughput"]))
    # a cell needs two finished trials before one of them can sit above or below its level
    level = {k: sum(v) / len(v) for k, v in done.items() if len(v) >= 2}
    cells = sorted(level)
    x = np.full((len(orders), width), np.nan)
    which = np.full((len(orders), width), -1)
    for r, order in enumerate(orders):
        for p, t in enumerate(order):
            if t["cell_key"] in level and t["status"] == "done" and t["throughput"] and t["throughput"] > 0:
                x[r, p] = math.log(t["throughput"]) - level[t["cell_key"]]
                which[r, p] = cells.index(t["cell_key"])
    return x, which


def _levels(x: Floats, axis: int) -> Floats:
    """Mean over `axis` ignoring NaN; NaN where nothing is there (no warning)."""
    present = ~np.isnan(x)
    counts = present.sum(axis=axis)
    sums = np.where(present, x, 0.0).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _span(levels: Floats, axis: int = -1) -> Any:
    """Highest less lowest level along `axis`, NaN ignored: a float, or an array of them."""
    return np.nanmax(levels, axis=axis) - np.nanmin(levels, axis=axis)


def check(trials: Sequence[Trial], seed: int, draws: int = DRAWS) -> Optional[PlaceCheck]:
    """The PlaceCheck of one run's trials (its order drawn from `seed`), or None where there is
    nothing to compare: fewer than flags.PLACE_ROUNDS rounds, fewer than two places with a
    finished trial, or rounds of different lengths."""
    got = grid(trials)
    if got is None:
        return None
    x, which = got
    rounds, width = x.shape
    levels = _levels(x, 0)
    if rounds < flags.PLACE_ROUNDS or np.sum(~np.isnan(levels)) < 2:
        return None
    span = float(_span(levels))
    medians = tuple(float(math.exp(np.median(col[~np.isnan(col)]))) if np.any(~np.isnan(col)) else None for col in x.T)
    residual = x - levels[None, :]
    spreads = [
        float(np.max(residual[which == c]) - np.min(residual[which == c]))
        for c in range(int(which.max()) + 1)
        if np.sum(which == c) >= 2
    ]
    cell_spread = math.expm1(float(np.median(spreads))) if spreads else 0.0
    rng = np.random.default_rng(seed)
    wider, left = 0, draws
    block = max(1, CHUNK // x.size)
    while left > 0:
        n = min(block, left)
        shuffled = rng.permuted(np.broadcast_to(x, (n,) + x.shape), axis=2)
        wider += int(np.sum(_span(_levels(shuffled, 1)) >= span - 1e-12))
        left -= n
    p = (1 + wider) / (1 + draws)
    span = math.expm1(span)
    return PlaceCheck(
        rounds=rounds,
        places=width,
        medians=medians,
        span=span,
        cell_spread=cell_spread,
        wider=wider,
        draws=draws,
        p=p,
        flagged=flags.place_effect(span, cell_spread, p, rounds),
    )
