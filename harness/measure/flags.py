"""Every flag a report can raise: its name, its one-line text and the rule that raises it.

A flag's name is what a cell carries (harness.report.model.Entry.flags, the exports'
`flags` column); its text is the footnote a report prints for it. Each rule is a plain
function next to its flag, over what the flag is judged on:

- a cell's repeats (harness.measure.stats.summarize): unstable, bimodal, data-bound,
  estimators-disagree;
- the figure kinds of a cell's finished trials: window-approximate;
- the work per iteration of the frameworks of one model row: unequal-work;
- what the frameworks of one model row drew from the data set (harness.measure.drawn):
  unequal-data;
- one trial's telemetry summary (trial.json "telemetry", runner.py's Sampler):
  gpu-thermal-throttle, gpu-power-throttle, gpu-telemetry-lost, cpu-oversubscribed,
  memory-pressure; a cell
  gets one when any of its finished trials has it, since one throttled repeat is enough
  to distrust the spread (harness.measure.telemetry);
- the fingerprints of a cell's repeats: mixed-hosts;
- a run's place check (harness.measure.place): place-effect, raised on every cell of the run.

FLAGS lists them, name -> Flag, in the order a cell names them.
"""

from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Mapping, Optional, Protocol, Sequence, Tuple, TypeVar, Union

from harness.measure import drawn, records, work

K = TypeVar("K")


class Row(Protocol):
    """A trial's row read by column: a store row, its StoredTrial record, or a dict."""

    def __getitem__(self, column: str) -> Any: ...


@dataclass(frozen=True)
class Flag:
    name: str
    text: str  # the one line a report prints for it
    # True where the flag is raised (unequal-work: one per column); its arguments are the flag's own
    rule: Callable[..., Union[bool, List[bool]]]


def _percent(share: float) -> str:
    return "%.0f%%" % (share * 100)


# ------------------------------------------------------------------ over a cell's repeats

UNSTABLE = "unstable"
UNSTABLE_SPREAD = 0.07  # (max - min) / min over repeats


def spread(values: Sequence[float]) -> float:
    """(max - min) / min."""
    lo = min(values)
    return (max(values) - lo) / lo if lo else float("inf")


def unstable(throughputs: Sequence[float]) -> bool:
    """More than one repeat, spread more than UNSTABLE_SPREAD apart."""
    return len(throughputs) > 1 and spread(throughputs) > UNSTABLE_SPREAD


BIMODAL = "bimodal"
BIMODAL_SIDE = 2  # values each group needs


def bimodal_groups(values: Sequence[float]) -> Optional[Tuple[List[float], List[float]]]:
    """The two groups a cell's repeats split into, (low, high) sorted, or None where they do not.

    Sorted, the values split at their largest gap that leaves at least BIMODAL_SIDE values on each
    side (the first, where two are equal). They are two groups when that gap is wider than the range
    (max - min) of either side, and wider than RESOLUTION of the median of all the values (so
    repeats that agree to within what the harness can measure are never split)."""
    xs = sorted(values)
    if len(xs) < 2 * BIMODAL_SIDE:
        return None
    gaps = [(xs[i + 1] - xs[i], i + 1) for i in range(BIMODAL_SIDE - 1, len(xs) - BIMODAL_SIDE)]
    gap, cut = max(gaps, key=lambda g: (g[0], -g[1]))
    low, high = xs[:cut], xs[cut:]
    mid = xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2.0
    if gap > low[-1] - low[0] and gap > high[-1] - high[0] and gap > RESOLUTION * abs(mid):
        return low, high
    return None


def bimodal(throughputs: Sequence[float]) -> bool:
    """The repeats fall into two groups (bimodal_groups)."""
    return bimodal_groups(throughputs) is not None


DATA_BOUND = "data-bound"
DATA_BOUND_SHARE = 0.10  # data time / iteration time
RESOLUTION = 0.01  # relative error the harness measures to; thresholds are judged past it


def data_bound(data_ms: Optional[float], iteration_ms: float) -> bool:
    """Data time (None: not logged) above DATA_BOUND_SHARE of the iteration time, past RESOLUTION."""
    return data_ms is not None and data_ms > DATA_BOUND_SHARE * iteration_ms * (1 + RESOLUTION)


ESTIMATORS_DISAGREE = "estimators-disagree"
DISAGREE = 0.05  # |reported - observed| / observed


def estimators_disagree(reported: float, observed: Optional[float]) -> bool:
    """The reported and observed medians (observed None: not measured) more than DISAGREE apart."""
    return observed is not None and abs(reported - observed) / observed > DISAGREE


# ------------------------------------------------------------------ how exact the figure is

WINDOW_APPROXIMATE = "window-approximate"
EXACT_KINDS = (records.EXACT, records.EXACT_CUMULATIVE, records.WINDOW_MEANS_FIGURE)


def window_approximate(trials: Iterable[Row]) -> bool:
    """Any of these finished trials (mappings with figure_kind and exact, like store rows) has an
    approximate figure. A trial stored before figure kinds existed is judged by its exact column."""
    return any((t["figure_kind"] not in EXACT_KINDS) if t["figure_kind"] else not t["exact"] for t in trials)


# ------------------------------------------------------------------ work per iteration, per model row

UNEQUAL_WORK = "unequal-work"
UNEQUAL_SHARE = 0.05


def unequal_keys(works: Sequence[Optional[Mapping[str, float]]]) -> List[str]:
    """The counts in which these work dicts (one per framework; None for one that logs
    none) differ by more than UNEQUAL_SHARE: (max - min) / median over the frameworks
    that log the count, where at least two do."""
    return _apart(works, list(work.LABELS))


def _apart(dicts: Sequence[Optional[Mapping[K, float]]], keys: Iterable[K]) -> List[K]:
    """The keys, of `keys` in order, in which the dicts that hold them (at least two) differ by
    more than UNEQUAL_SHARE of their median."""
    out: List[K] = []
    for key in keys:
        values = [w[key] for w in dicts if w and key in w]
        if len(values) < 2:
            continue
        mid = work.median(values)
        apart = max(values) - min(values)
        if (apart / mid if mid else (1.0 if apart else 0.0)) > UNEQUAL_SHARE:
            out.append(key)
    return out


def _columns_with(works: Sequence[Optional[Mapping[K, float]]], keys: Sequence[K]) -> List[bool]:
    return [bool(keys and w and any(k in w for k in keys)) for w in works]


def unequal_work(works: Sequence[Optional[Mapping[str, float]]]) -> List[bool]:
    """Per column of a row (its work dict or None), whether it logs a count the row's
    frameworks differ in (unequal_keys)."""
    return _columns_with(works, unequal_keys(works))


# ------------------------------------------------------------------ data drawn per trial, per model row

UNEQUAL_DATA = "unequal-data"


# flips and distinct views are random counts where each framework draws its own flips: two
# frameworks that draw alike differ in them by chance, by about the square root of the draws. Such a
# count is flagged only where the difference is also beyond chance: more than CHANCE_Z standard
# deviations of a draw-by-draw coin (p = 0.5 at most, sd sqrt(draws) / 2 for each side), so two
# fair coins over 200 draws (sd 7 flips each) are not flagged for 100 against 112 mirrored.
CHANCE_Z = 3.29  # two-sided 0.1%
RANDOM_COUNTS = ("flips", "views")


def unequal_data_keys(summaries: Sequence[Optional[Mapping[str, Mapping[str, float]]]]) -> List[Tuple[str, str]]:
    """The (scope, count) of harness.measure.drawn summaries (one per framework; None for one
    that logged no DATA lines: not observed, never a difference) in which the frameworks differ
    by more than UNEQUAL_SHARE, as unequal_keys judges them, and, for the random counts (flips and
    distinct views), by more than chance (CHANCE_Z)."""
    flat = [drawn.flat(s) for s in summaries]
    keys = _apart(flat, [(scope, key) for scope in drawn.SCOPES for key in drawn.LABELS])
    return [key for key in keys if key[1] not in RANDOM_COUNTS or _beyond_chance(flat, key)]


def _beyond_chance(flat: Sequence[Optional[Mapping[Tuple[str, str], float]]], key: Tuple[str, str]) -> bool:
    """Whether two frameworks' `key` counts differ by more than CHANCE_Z standard deviations of
    the difference of two fair coins over their draws (the same scope's `draws`)."""
    pairs = [(w[key], w.get((key[0], "draws"), 0.0)) for w in flat if w and key in w]
    for i, (a, draws_a) in enumerate(pairs):
        for b, draws_b in pairs[i + 1 :]:
            sd = 0.5 * (draws_a + draws_b) ** 0.5
            if abs(a - b) > CHANCE_Z * sd:
                return True
    return False


def unequal_data(summaries: Sequence[Optional[Mapping[str, Mapping[str, float]]]]) -> List[bool]:
    """Per column of a row (its drawn summary or None), whether it logged a count the row's
    frameworks differ in (unequal_data_keys)."""
    return _columns_with([drawn.flat(s) for s in summaries], unequal_data_keys(summaries))


# ------------------------------------------------------------------ one trial's telemetry summary
# gpu-thermal-throttle / gpu-power-throttle: a GPU reported a thermal reason (software or
# hardware thermal slowdown, or hardware slowdown, which the driver also uses for heat) or a
# power reason (software power cap, hardware power brake) in at least THROTTLE_SHARE of its
# samples. Idle, application-clock, sync-boost and display reasons are not slowdowns of a
# busy GPU and never flag.

GPU_THERMAL = "gpu-thermal-throttle"
GPU_POWER = "gpu-power-throttle"
THERMAL_REASONS = ("sw_thermal", "hw_thermal", "hw_slowdown")
POWER_REASONS = ("sw_power_cap", "hw_power_brake")
THROTTLE_SHARE = 0.05


Summary = Mapping[str, Any]  # one trial's telemetry summary (trial.json "telemetry")


def _mean(summary: Summary, name: str) -> Optional[float]:
    figure = summary.get(name)
    return figure.get("mean") if isinstance(figure, dict) else None


def throttled(gpu: Mapping[str, Any], reasons: Sequence[str]) -> bool:
    """True when any of these throttle reasons was seen in THROTTLE_SHARE of the GPU's samples."""
    samples = gpu.get("samples") or 0
    if not samples:
        return False
    # one sample can carry several reasons, so the most frequent one stands for the group
    seen = max((gpu.get("throttle") or {}).get(r, 0) for r in reasons)
    return bool(seen > 0 and seen >= THROTTLE_SHARE * samples)


def gpu_thermal_throttle(summary: Summary) -> bool:
    return any(throttled(g, THERMAL_REASONS) for g in summary.get("gpus") or [])


def gpu_power_throttle(summary: Summary) -> bool:
    return any(throttled(g, POWER_REASONS) for g in summary.get("gpus") or [])


# gpu-telemetry-lost: the host shows NVIDIA GPUs (runner.py's gpu_devices) but the trial's
# environment could not use NVML (pynvml did not import, or nvmlInit failed), so the trial has
# no GPU use, clocks, throttle reasons or device memory, and a throttled GPU could not flag.

GPU_TELEMETRY_LOST = "gpu-telemetry-lost"


def gpu_telemetry_lost(summary: Summary) -> bool:
    return bool(summary.get("gpu_telemetry_lost"))


# cpu-oversubscribed: the trial's own process tree had, on average, more than OVERSUBSCRIBED
# threads per available core ready to run (state R in /proc) while the machine's cores were
# saturated (mean utilization at least SATURATED %). Both must hold: threads that wait for the
# GIL or for I/O are not ready to run, so a Python trial with idle helper threads does not
# flag, and a single-threaded trial can never reach 1.5 ready threads per core; a busy machine
# alone (somebody else's job) does not flag either. This is the seed benchmark's story:
# 8 processes x 20 OpenMP threads on 40 cores.

CPU_OVERSUBSCRIBED = "cpu-oversubscribed"
OVERSUBSCRIBED = 1.5
SATURATED = 90.0


def cpu_oversubscribed(summary: Summary) -> bool:
    cores = summary.get("cores")
    runnable = _mean(summary, "tree_runnable")
    util = _mean(summary, "cpu_util_mean")
    if not cores or runnable is None or util is None:
        return False
    return bool(runnable > OVERSUBSCRIBED * cores and util >= SATURATED)


# memory-pressure: the machine swapped more than SWAP_MB in or out during the trial, or its
# available memory fell below LOW_MEMORY of the total.

MEMORY_PRESSURE = "memory-pressure"
SWAP_MB = 64.0
LOW_MEMORY = 0.05


def memory_pressure(summary: Summary) -> bool:
    samples = summary.get("samples") or 0
    swapped = sum((_mean(summary, k) or 0.0) * samples for k in ("swap_in_mb", "swap_out_mb"))
    if swapped > SWAP_MB:
        return True
    low = (summary.get("mem_available_mb") or {}).get("min")
    total = summary.get("memory_total_mb")
    return total is not None and bool(total) and low is not None and bool(low < LOW_MEMORY * total)


# ------------------------------------------------------------------ where a cell's repeats ran

MIXED_HOSTS = "mixed-hosts"


def mixed_hosts(fingerprints: Iterable[Optional[str]]) -> bool:
    """The repeats' host fingerprints (None: not recorded) name more than one machine."""
    return len({f for f in fingerprints if f}) > 1


# ------------------------------------------------------------------ where a trial ran within its round
# place-effect: a run of at least PLACE_ROUNDS rounds (each in its own shuffled order) whose
# places' levels span more than its cells' own spread once each trial is divided by its place's
# level, and wider than all but PLACE_P of the orders a reshuffle within each round gives
# (harness.measure.place): where a trial ran moved the figures more than the cells differ in
# themselves, and more than chance would.

PLACE_EFFECT = "place-effect"
PLACE_ROUNDS = 3
PLACE_P = 0.05


def place_effect(span: float, cell_spread: float, p: float, rounds: int) -> bool:
    """span and cell_spread as fractions, p the share of reshuffled orders spanning as wide."""
    return rounds >= PLACE_ROUNDS and span > cell_spread and p < PLACE_P


# ------------------------------------------------------------------ the list

FLAGS = {
    f.name: f
    for f in (
        Flag(
            UNSTABLE, "unstable: repeats spread more than %s ((max - min) / min)" % _percent(UNSTABLE_SPREAD), unstable
        ),
        Flag(
            BIMODAL,
            "bimodal: the repeats fall into two groups, the gap between them wider than either group's "
            "own range (each group's median is in the notes)",
            bimodal,
        ),
        Flag(
            DATA_BOUND,
            "data-bound: data time is more than %s of iteration time" % _percent(DATA_BOUND_SHARE),
            data_bound,
        ),
        Flag(
            ESTIMATORS_DISAGREE,
            "the framework's own times and the log line timestamps disagree by more than %s" % _percent(DISAGREE),
            estimators_disagree,
        ),
        Flag(
            WINDOW_APPROXIMATE,
            "approximate: the framework logs only window medians, running means that cannot "
            "be differenced, or throughput",
            window_approximate,
        ),
        Flag(
            UNEQUAL_WORK,
            "unequal work: the frameworks of this row differ by more than %s (max - min over "
            "their median) in a work count per iteration (proposals, RoIs, positives)" % _percent(UNEQUAL_SHARE),
            unequal_work,
        ),
        Flag(
            UNEQUAL_DATA,
            "unequal data: the frameworks of this row differ by more than %s (max - min over their "
            "median) in what they drew from the data set (distinct image views, flips, draws, epochs "
            "started, images per iteration; measured window or whole trial), flips and distinct views "
            "also beyond chance" % _percent(UNEQUAL_SHARE),
            unequal_data,
        ),
        Flag(
            GPU_THERMAL,
            "a GPU throttled its clocks for heat during a repeat (NVML thermal/hw slowdown)",
            gpu_thermal_throttle,
        ),
        Flag(
            GPU_POWER,
            "a GPU throttled its clocks at its power limit during a repeat (NVML power cap/brake)",
            gpu_power_throttle,
        ),
        Flag(
            GPU_TELEMETRY_LOST,
            "GPU telemetry lost: the host has GPUs, but pynvml did not import or start in the "
            "trial's environment (no GPU use, clocks, throttling or device memory)",
            gpu_telemetry_lost,
        ),
        Flag(
            CPU_OVERSUBSCRIBED,
            "CPU oversubscribed: the trial had more than %g ready threads per core on saturated cores" % OVERSUBSCRIBED,
            cpu_oversubscribed,
        ),
        Flag(
            MEMORY_PRESSURE,
            "memory pressure: the machine swapped or ran below %s available memory during a "
            "repeat" % _percent(LOW_MEMORY),
            memory_pressure,
        ),
        Flag(MIXED_HOSTS, "the repeats ran on machines with different fingerprints", mixed_hosts),
        Flag(
            PLACE_EFFECT,
            "place effect: where a trial ran within its round moved the figures of this run by more "
            "than its cells' own spread, wider than %s of reshuffled orders would (the run's place check)"
            % _percent(1 - PLACE_P),
            place_effect,
        ),
    )
}

# the flags judged on one trial's telemetry summary, in FLAGS order
TELEMETRY = tuple(
    FLAGS[name] for name in (GPU_THERMAL, GPU_POWER, GPU_TELEMETRY_LOST, CPU_OVERSUBSCRIBED, MEMORY_PRESSURE)
)


def text(name: str) -> str:
    """The line a report prints for a flag; the name itself for one it does not know."""
    flag = FLAGS.get(name)
    return flag.text if flag else name
