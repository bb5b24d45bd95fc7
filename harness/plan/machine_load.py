"""What else used the machine while a training program ran: CPU time of other processes and
time the hypervisor took (steal), between marks (an accuracy trial's checkpoints).

A time-to-accuracy figure is training wall time, so anything else running on the machine
lengthens it: on a 2-core VM, a process at the idle scheduling class on the core a trial
left free slowed mmdetection's iterations by a quarter. `LoadMeter.mark()` reads, without a
sampling thread:

- the machine's busy CPU time (user, nice and system of /proc/stat's `cpu` line) and steal;
- the CPU time of the training program's process tree: every live process of its tree or
  session, each with the CPU time of its children it has waited for (utime + stime + cutime +
  cstime), so a data-loader worker that ended between two marks still counts;
- this process's own CPU time (the launcher reading the program's output).

Other processes' CPU = busy - tree - own, over the interval. A worker that was orphaned and
ended between two marks is counted as other (its time went to init), which can only make an
interval look shared, never quiet. Linux only; elsewhere `mark()` returns None.
"""

import os
import resource
import time
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from runner import tree_pids

CLOCK_TICKS = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
# an interval where other processes or steal took more than this share of one core is named
SHARED_SHARE = 0.05


@dataclass(frozen=True)
class Load:
    """One interval between two marks: its wall seconds, the CPU seconds other processes used
    and the seconds the hypervisor stole from this machine's CPUs."""

    wall_seconds: float
    other_cpu_seconds: float
    steal_seconds: float

    @property
    def shared(self) -> bool:
        """Others (or steal) took more than SHARED_SHARE of one core over the interval."""
        limit = SHARED_SHARE * self.wall_seconds
        return self.wall_seconds > 0 and (self.other_cpu_seconds > limit or self.steal_seconds > limit)

    def describe(self) -> str:
        parts = [
            "other processes used %.1f s of CPU in %.1f s (%.0f%% of a core)"
            % (self.other_cpu_seconds, self.wall_seconds, 100.0 * self.other_cpu_seconds / self.wall_seconds)
        ]
        if self.steal_seconds > SHARED_SHARE * self.wall_seconds:
            parts.append("the hypervisor took %.1f s (steal)" % self.steal_seconds)
        return ", ".join(parts)


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("ascii", "replace")
    except OSError:
        return ""


def host_cpu() -> Optional[Tuple[float, float]]:
    """(busy, steal) CPU seconds of the whole machine since boot, from /proc/stat; None where
    there is no such file."""
    for line in _read("/proc/stat").splitlines():
        if line.startswith("cpu "):
            v = [int(x) for x in line.split()[1:]]
            steal = v[7] if len(v) > 7 else 0
            return (v[0] + v[1] + v[2]) / CLOCK_TICKS, steal / CLOCK_TICKS
    return None


def _stat(pid: int) -> Optional[Tuple[int, int, float]]:
    """(ppid, session, CPU seconds with waited-for children) of a process, None when gone."""
    text = _read("/proc/%d/stat" % pid)
    fields = text[text.rfind(")") + 2 :].split()  # from field 3 (state): the name may hold anything
    try:
        return int(fields[1]), int(fields[3]), sum(int(x) for x in fields[11:15]) / CLOCK_TICKS
    except (IndexError, ValueError):
        return None


def tree_cpu(root: int) -> float:
    """CPU seconds of `root`'s live process tree (runner.tree_pids: its descendants and session),
    each process with its waited-for children; 0 when root is gone."""
    procs: Dict[int, Tuple[int, int, float]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                procs[int(name)] = st
    return sum(procs[pid][2] for pid in tree_pids(procs, root))


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class LoadMeter:
    """Marks over a training program's life: each `mark()` gives the Load since the last one."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.last = self._now()

    def _now(self) -> Optional[Tuple[float, float, float, float, float]]:
        host = host_cpu()
        if host is None:
            return None
        return time.monotonic(), host[0], host[1], tree_cpu(self.pid), own_cpu()

    def mark(self) -> Optional[Load]:
        now = self._now()
        if now is None or self.last is None:
            return None
        (t0, busy0, steal0, tree0, own0), (t1, busy1, steal1, tree1, own1) = self.last, now
        self.last = now
        other = (busy1 - busy0) - (tree1 - tree0) - (own1 - own0)
        return Load(round(t1 - t0, 3), round(max(other, 0.0), 3), round(steal1 - steal0, 3))
