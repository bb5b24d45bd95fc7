"""What every generated log is made of: the truth (runs of known per-iteration times), the
parameters a generator draws, the run plan (crashes and resumes), the times themselves,
and the log text with the line numbers of its records.

A generator draws every choice through a Chooser, so the same description drives both a
seeded random generator (the benchmark) and hypothesis (the property tests, which then
shrink a failing log to a small one).
"""
import datetime
import math
import random
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import numpy as np


# ------------------------------------------------------------------ choices

class Chooser:
    """Draws named choices; subclasses decide how."""

    def integer(self, name, lo, hi):
        raise NotImplementedError

    def choice(self, name, options):
        return options[self.integer(name, 0, len(options) - 1)]

    def chance(self, name, percent):
        """True with probability percent/100 (a draw of 0, where hypothesis shrinks to, is False)."""
        return self.integer(name, 0, 99) >= 100 - percent

    def log_integer(self, name, lo, hi):
        """An integer spread evenly in log scale over [lo, hi]."""
        steps = 64
        k = self.integer(name, 0, steps)
        return int(round(math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * k / steps)))

    def weighted(self, name, options):
        """One of the (value, weight) pairs' values, by integer weights."""
        total = sum(w for _, w in options)
        k = self.integer(name, 0, total - 1)
        for value, weight in options:
            if k < weight:
                return value
            k -= weight
        raise AssertionError("unreachable")


class RandomChooser(Chooser):
    def __init__(self, rng):
        self.rng = rng

    def integer(self, name, lo, hi):
        return self.rng.randint(lo, hi)


class FixedChooser(Chooser):
    """Named choices fixed (`values`: a number for integer and log_integer, the option itself
    for choice and weighted), every other drawn from a seeded random generator: one log of a
    case a test names, such as a given logging period, epoch length or batch."""

    def __init__(self, values, seed=0):
        self.values = dict(values)
        self.rng = random.Random(seed)

    def integer(self, name, lo, hi):
        return self.values[name] if name in self.values else self.rng.randint(lo, hi)

    def log_integer(self, name, lo, hi):
        return self.values[name] if name in self.values else super().log_integer(name, lo, hi)

    def choice(self, name, options):
        return self.values[name] if name in self.values else super().choice(name, options)

    def weighted(self, name, options):
        return self.values[name] if name in self.values else super().weighted(name, options)


# ------------------------------------------------------------------ truth

@dataclass
class Run:
    """One run inside a log: a start banner, then iterations first..last in the log's own
    numbering, each with its true time and data time (seconds, as the framework's timer
    measures them)."""
    index: int                       # 1-based, in log order
    first: int                       # first iteration of the run
    times: np.ndarray
    data: np.ndarray
    timed_first: int = 0             # first iteration the framework times (0: first)
    records: List[int] = field(default_factory=list)        # iteration of each record line
    record_lines: List[int] = field(default_factory=list)   # its 1-based line number
    resumed_from: Optional[int] = None                       # checkpoint iteration, if resumed
    spans: List[Tuple[int, int]] = field(default_factory=list)   # (first, last) iterations each record covers

    @property
    def last(self):
        return self.first + len(self.times) - 1

    def covered(self):
        """The stretches of iterations the records' figures reach, merged: [(first, last), ...]."""
        out = []
        for a, b in sorted(self.spans):
            if out and a <= out[-1][1] + 1:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
        return out

    def covers(self, lo, hi):
        return self.first <= lo and hi <= self.last


@dataclass
class Fault:
    """Record lines a framework does not write like that: a duplicated or swapped line, or one
    whose bytes a crash left unwritten (NULs; 1-based line numbers). `benign` marks a repeat
    the framework itself prints, or a lost line the log's truth no longer counts on."""
    kind: str
    lines: Tuple[int, int]
    benign: bool = False


@dataclass
class Log:
    fmt: str                                 # the --format name
    variant: str                             # what was modelled, in words
    lines: List[str]
    runs: List[Run]
    images_per_iteration: Optional[int]      # what a user gives --images-per-iteration
    epoch_length: Optional[int] = None       # iterations per epoch of epoch-based runs
    needs_epoch_length: bool = False         # records beyond epoch 1 cannot be placed from the log alone
    faults: List[Fault] = field(default_factory=list)
    framework: Optional[str] = None          # a --framework whose scraper reads this log as written
    params: dict = field(default_factory=dict)

    def text(self):
        return "\n".join(self.lines) + "\n"

    def write(self, path):
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(self.text())
        return path

    def run(self, index):
        return self.runs[index - 1]

    def mean(self, run, lo, hi):
        """True mean iteration and data time of iterations lo..hi of run (1-based index)."""
        r = self.run(run)
        a, b = lo - r.first, hi - r.first + 1
        t = math.fsum(r.times[a:b].tolist()) / (b - a)
        d = math.fsum(r.data[a:b].tolist()) / (b - a)
        return t, d


# ------------------------------------------------------------------ run plans

@dataclass
class Segment:
    start: int      # iterations done before the run (its first iteration is start + 1)
    end: int        # last iteration the run completes


def plan_runs(choose, total, unit):
    """Runs of one training of `total` iterations: each but the last crashes somewhere and the
    next resumes from the last checkpoint before the crash (a multiple of `unit`: the
    checkpoint period or the epoch length), or from scratch; so counters go back."""
    n_runs = choose.weighted("runs", [(1, 55), (2, 30), (3, 15)])
    if total < 2 * unit + 2:
        n_runs = 1
    segments = []
    start = 0
    for k in range(n_runs - 1):
        room = total - start
        if room < unit + 2:
            break
        crash = start + 1 + choose.integer("crash%d" % k, unit, room - 1) if room - 1 >= unit else total
        crash = min(crash, total - 1)
        segments.append(Segment(start, crash))
        how = choose.weighted("resume%d" % k, [("checkpoint", 80), ("scratch", 10), ("at-crash", 10)])
        if how == "scratch":
            start = 0
        elif how == "at-crash" and crash % unit == 0:
            start = crash
        else:
            start = (crash // unit) * unit
    segments.append(Segment(start, total))
    return segments


# ------------------------------------------------------------------ times

def iteration_times(rng, n, base, data_share):
    """n (time, data time) pairs in seconds: a lognormal step around `base`, data waits with
    occasional stalls (included in the time), a slow start, rare spikes and a drift, so a
    figure over the wrong iterations is visibly off."""
    sigma = rng.uniform(0.02, 0.3)
    step = base * rng.lognormal(0.0, sigma, n)
    if n > 10:
        kind = rng.integers(0, 3)
        if kind == 1:        # linear drift
            step *= np.linspace(1.0, rng.uniform(0.7, 1.4), n)
        elif kind == 2:      # a step change somewhere (another job arrives)
            at = int(rng.integers(1, n))
            step[at:] *= rng.uniform(0.6, 1.6)
    hit = rng.random(n) < rng.uniform(0.0, 0.03)
    step[hit] *= rng.uniform(1.5, 6.0, int(hit.sum()))
    data = base * data_share * rng.lognormal(0.0, 0.5, n)
    stall = rng.random(n) < rng.uniform(0.0, 0.03)
    data[stall] += base * rng.uniform(0.5, 4.0, int(stall.sum()))
    k = min(n, int(rng.integers(1, 6)))
    step[:k] *= rng.uniform(2.0, 10.0, k)
    return step + data, data


def base_time(choose):
    """A typical iteration time: 20 ms to 2.5 s, log-uniform."""
    return choose.log_integer("base_ms", 20, 2500) / 1000.0


# ------------------------------------------------------------------ clock and text helpers

class Clock:
    """Wall-clock time of the log lines, advanced by the iterations' times."""

    def __init__(self, choose):
        day = choose.integer("day", 0, 3000)
        seconds = choose.integer("sec", 0, 86399)
        self.start = datetime.datetime(2018, 1, 1) + datetime.timedelta(days=day, seconds=seconds)
        self.seconds = 0.0
        self._cached = (None, "")

    def advance(self, seconds):
        self.seconds += seconds

    @property
    def t(self):
        return self.start + datetime.timedelta(seconds=float(self.seconds))

    def fmt(self, pattern):
        key = (pattern, int(self.seconds))
        if self._cached[0] != key:
            self._cached = (key, self.t.strftime(pattern))
        return self._cached[1]

    def stamp(self):
        """'%Y-%m-%d %H:%M:%S,mmm' (Python logging's asctime)."""
        t = self.t
        return "%s,%03d" % (t.strftime("%Y-%m-%d %H:%M:%S"), t.microsecond // 1000)


def hms(seconds):
    return str(datetime.timedelta(seconds=int(max(0.0, seconds))))


class Writer:
    """Collects log lines and the line numbers of records."""

    def __init__(self):
        self.lines = []

    def add(self, text):
        """Add one or more lines (text may hold newlines); return the 1-based number of the last."""
        self.lines.extend(text.split("\n"))
        return len(self.lines)

    def record(self, run, iteration, text, first=None):
        """Add a record line of `run` for `iteration`; its figures cover first..iteration (the
        iterations of a window mean, or of a running mean since its start)."""
        line = self.add(text)
        run.records.append(iteration)
        run.record_lines.append(line)
        run.spans.append((iteration if first is None else first, iteration))
        return line


class Ranks:
    """The processes of a multi-node training that print records: every node's local rank 0
    (a training script that logs where ``local_rank == 0``), their output merged into one log.
    ``labels`` are srun --label's prefixes (the global rank of each, "0: ", "4: "), or None:
    the lines carry no prefix and nothing tells the processes apart."""

    def __init__(self, choose, rng, share=(85, 15)):
        self.nodes = choose.weighted("nodes", [(1, share[0]), (2, share[1])])
        per_node = choose.choice("gpus_per_node", [2, 4, 8]) if self.nodes > 1 else 1
        self.labels = None
        if self.nodes > 1 and choose.chance("labelled", 50):
            self.labels = ["%d: " % (k * per_node) for k in range(self.nodes)]
        self.rng = rng
        self.others = set()        # 1-based numbers of the lines the other nodes printed

    @property
    def state(self):
        """What the log's params say of its processes: one, labelled or unlabelled."""
        return "one" if self.nodes == 1 else "labelled" if self.labels else "unlabelled"

    def times(self, t, d):
        """Another node's times of the same iterations: close to rank 0's, never the same."""
        jitter = self.rng.uniform(0.97, 1.03, len(t))
        return t * jitter, d * jitter

    def add(self, writer, text):
        """Add a line another node printed (its record beside rank 0's, or its banner)."""
        last = writer.add(text)
        self.others.update(range(last - text.count("\n"), last + 1))

    def label(self, writer):
        """Prefix every line with its process's srun label, where the log has labels."""
        if self.labels is None:
            return
        zero, other = self.labels[0], self.labels[-1]
        writer.lines = [(other if k in self.others else zero) + line for k, line in enumerate(writer.lines, 1)]


def seeded(choose):
    """A numpy generator seeded by a drawn seed (the bulk of the numbers)."""
    return np.random.default_rng(choose.integer("seed", 0, 2 ** 31 - 1))


def py_random(choose):
    return random.Random(choose.integer("textseed", 0, 2 ** 31 - 1))


def inject_faults(choose, writer, runs):
    """Rarely, a record line seen twice or two record lines swapped (a log pasted together by
    hand, or two processes writing one file), or a record line whose bytes are NULs (a block
    of the file never written: its record is gone from the truth). Returns the faults."""
    faults = []
    what = choose.weighted("fault", [(None, 90), ("twice", 4), ("swapped", 4), ("nul", 2)])
    lines = sorted(l for r in runs for l in r.record_lines)
    if what is None or len(lines) < 3:
        return faults
    k = choose.integer("fault_at", 0, len(lines) - 2)
    a, b = lines[k], lines[k + 1]
    if what == "nul":
        a = b if a == 1 else a  # a file that begins with a NUL byte is no text log: another case
        writer.lines[a - 1] = "\0" * max(1, len(writer.lines[a - 1]))
        for r in runs:
            if a in r.record_lines:
                k = r.record_lines.index(a)
                del r.records[k], r.record_lines[k], r.spans[k]
        faults.append(Fault("nul", (a, a), benign=True))
        return faults
    if what == "twice":
        # the copy goes right after the original: every later line moves down by one
        writer.lines.insert(a, writer.lines[a - 1])
        for r in runs:
            r.record_lines = [l + 1 if l > a else l for l in r.record_lines]
        faults.append(Fault("twice", (a, a + 1)))
    else:
        writer.lines[a - 1], writer.lines[b - 1] = writer.lines[b - 1], writer.lines[a - 1]
        for r in runs:
            r.record_lines = [b if l == a else a if l == b else l for l in r.record_lines]
        faults.append(Fault("swapped", (a, b)))
    return faults


def prefix(x):
    """Prefix sums with a leading 0 (a list of floats): sum of x[a:b] is p[b] - p[a]."""
    return np.concatenate(([0.0], np.cumsum(x, dtype=np.float64))).tolist()


def merge_unmarked(runs, starts):
    """Truth for a log whose runs carry no start banner: a run that resumes past the previous
    run's last record cannot be told apart from it, so the two are one run whose times are the
    earlier run's up to the resume point, then the later run's. `starts[k]` is run k's resume
    point (iterations done before it)."""
    merged = [runs[0]]
    for run, start in zip(runs[1:], starts[1:]):
        prev = merged[-1]
        if prev.records and run.records and run.records[0] > prev.records[-1]:
            keep = start - prev.first + 1
            prev.times = np.concatenate((prev.times[:keep], run.times))
            prev.data = np.concatenate((prev.data[:keep], run.data))
            prev.records += run.records
            prev.record_lines += run.record_lines
            prev.spans += run.spans
        else:
            merged.append(run)
    for k, run in enumerate(merged, 1):
        run.index = k
    return merged


def epoch_length(choose, period, name="epoch_len", longest=20000):
    """Iterations per epoch, 2 to 20,000 (log-uniform); mostly at least one logging period."""
    hi = max(3, min(20000, longest))
    lo = 2 if choose.chance("short_epoch", 10) else max(2, min(period, hi - 1))
    return choose.log_integer(name, lo, hi)


def budget(max_iters, max_records, period):
    """The longest training to draw: max_iters, or fewer where more than max_records records
    (one every `period` iterations) would not fit."""
    return max_iters if max_records is None else max(3 * period, min(max_iters, max_records * period))


def new_run(rng, runs, seg, base, share, first=None, timed_from=None):
    """The next run of a log (appended to `runs`): the iterations of `seg` with their times, a
    later run a little faster or slower than the first (so a figure that mixes runs shows), data
    waits up to `share` of an iteration; `first` is its first iteration in the log's numbering."""
    t, d = iteration_times(rng, seg.end - seg.start, base * (rng.uniform(0.7, 1.3) if runs else 1.0),
                           rng.uniform(0.01, share))
    first = seg.start + 1 if first is None else first
    run = Run(len(runs) + 1, first, t, d, timed_first=timed_from or 0, resumed_from=seg.start or None)
    runs.append(run)
    return run
