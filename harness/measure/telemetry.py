"""Flags from a trial's telemetry summary (trial.json "telemetry", runner.py's Sampler).

Pure functions over the summary dicts; the thresholds, and why they are what they are:

- gpu-thermal-throttle / gpu-power-throttle: a GPU reported a thermal reason (software or
  hardware thermal slowdown, or hardware slowdown, which the driver also uses for heat)
  or a power reason (software power cap, hardware power brake) in at least THROTTLE_SHARE
  of its samples. Idle, application-clock, sync-boost and display reasons are not
  slowdowns of a busy GPU and never flag.
- cpu-oversubscribed: the trial's own process tree had, on average, more than
  OVERSUBSCRIBED threads per available core ready to run (state R in /proc) while the
  machine's cores were saturated (mean utilization at least SATURATED %). Both must hold:
  threads that wait for the GIL or for I/O are not ready to run, so a Python trial with
  idle helper threads does not flag, and a single-threaded trial can never reach 1.5
  ready threads per core; a busy machine alone (somebody else's job) does not flag either.
  This is the seed benchmark's story: 8 processes x 20 OpenMP threads on 40 cores.
- memory-pressure: the machine swapped more than SWAP_MB in or out during the trial, or
  its available memory fell below LOW_MEMORY of the total.
- mixed-hosts: the repeats of one cell ran on machines with different fingerprints.

A cell gets a flag when any of its finished trials has it: one throttled repeat is
enough to distrust the spread.
"""
import json

GPU_THERMAL = "gpu-thermal-throttle"
GPU_POWER = "gpu-power-throttle"
CPU_OVERSUBSCRIBED = "cpu-oversubscribed"
MEMORY_PRESSURE = "memory-pressure"
MIXED_HOSTS = "mixed-hosts"
ORDER = (GPU_THERMAL, GPU_POWER, CPU_OVERSUBSCRIBED, MEMORY_PRESSURE, MIXED_HOSTS)

THERMAL_REASONS = ("sw_thermal", "hw_thermal", "hw_slowdown")
POWER_REASONS = ("sw_power_cap", "hw_power_brake")
THROTTLE_SHARE = 0.05
OVERSUBSCRIBED = 1.5
SATURATED = 90.0
SWAP_MB = 64.0
LOW_MEMORY = 0.05


def _mean(summary, name):
    figure = summary.get(name)
    return figure.get("mean") if isinstance(figure, dict) else None


def throttled(gpu, reasons):
    """True when any of these throttle reasons was seen in THROTTLE_SHARE of the GPU's samples."""
    samples = gpu.get("samples") or 0
    if not samples:
        return False
    # one sample can carry several reasons, so the most frequent one stands for the group
    seen = max((gpu.get("throttle") or {}).get(r, 0) for r in reasons)
    return seen > 0 and seen >= THROTTLE_SHARE * samples


def oversubscribed(summary):
    cores = summary.get("cores")
    runnable = _mean(summary, "tree_runnable")
    util = _mean(summary, "cpu_util_mean")
    if not cores or runnable is None or util is None:
        return False
    return runnable > OVERSUBSCRIBED * cores and util >= SATURATED


def memory_pressure(summary):
    samples = summary.get("samples") or 0
    swapped = sum((_mean(summary, k) or 0.0) * samples for k in ("swap_in_mb", "swap_out_mb"))
    if swapped > SWAP_MB:
        return True
    low = (summary.get("mem_available_mb") or {}).get("min")
    total = summary.get("memory_total_mb")
    return bool(total) and low is not None and low < LOW_MEMORY * total


def trial_flags(summary):
    """Flags for one trial's telemetry summary (a dict, or None when nothing was sampled)."""
    if not summary or not summary.get("samples"):
        return []
    flags = []
    gpus = summary.get("gpus") or []
    if any(throttled(g, THERMAL_REASONS) for g in gpus):
        flags.append(GPU_THERMAL)
    if any(throttled(g, POWER_REASONS) for g in gpus):
        flags.append(GPU_POWER)
    if oversubscribed(summary):
        flags.append(CPU_OVERSUBSCRIBED)
    if memory_pressure(summary):
        flags.append(MEMORY_PRESSURE)
    return flags


def cell_flags(telemetry_jsons, fingerprints=()):
    """Flags for a cell from its trials' telemetry_json texts and fingerprints."""
    seen = set()
    for text in telemetry_jsons:
        try:
            summary = json.loads(text) if text else None
        except ValueError:
            summary = None
        seen.update(trial_flags(summary if isinstance(summary, dict) else None))
    if len({f for f in fingerprints if f}) > 1:
        seen.add(MIXED_HOSTS)
    return [f for f in ORDER if f in seen]
