"""Progress of a run: plain lines for logs, a live status line on a terminal.

Both kinds take the same calls from harness.run.execute: start(trial, cell_key, repeat,
trial_dir) before a trial, finish(result) after it, close() when the run stops. result is
the trial's TrialResult, read by attribute (status, reason, throughput, iteration_time_s).
The plain kind writes one line per trial (`[i/N] CELL repeat R ... RESULT  [eta Ns]`),
which CI logs and tests read. The live kind redraws one status line while a trial runs (its iterations,
counted by tailing the trial's log.txt) and leaves the same line per finished trial.
"""
import os
import sys
import threading
import time

from harness.plan import trialfiles

ITER_PREFIX = b"DETBENCH_ITER "
REFRESH_S = 0.25
CLEAR = "\r\033[K"


def make(total, out=None, iterations=None):
    """The progress display for this stream: live on a terminal, plain lines otherwise."""
    out = out or sys.stdout
    isatty = getattr(out, "isatty", None)
    if isatty is not None and isatty() and os.environ.get("TERM") != "dumb":
        return LiveProgress(total, out, iterations)
    return PlainProgress(total, out)


def result_text(result):
    if result.status == "done" and result.latency:
        tail = max((k for k in result.latency if k[:1] == "p" and k[1:2].isdigit() and result.latency[k] is not None),
                   key=lambda k: float(k[1:-2]), default=None)
        return "%.2f images/s (%.1f ms/batch%s)" % (
            result.throughput, result.latency["mean_s"] * 1000,
            ", %s %.1f ms" % (tail[:-2], result.latency[tail] * 1000) if tail else "")
    if result.status == "done":
        return "%.2f images/s (%.1f ms/iter)" % (result.throughput, result.iteration_time_s * 1000)
    return "FAILED: %s" % result.reason


class PlainProgress:
    """Plain progress lines (one per trial), fit for terminals and CI logs alike."""

    def __init__(self, total, out=None):
        self.total = total
        self.out = out or sys.stdout
        self.done = 0
        self.started = time.monotonic()

    def start(self, trial, cell_key, repeat, trial_dir=None):
        self.out.write("[%d/%d] %s repeat %d ... " % (self.done + 1, self.total, cell_key, repeat))
        self.out.flush()

    def eta(self):
        elapsed = time.monotonic() - self.started
        return elapsed / self.done * (self.total - self.done) if self.done else None

    def finish(self, result):
        self.done += 1
        self.out.write("%s  [eta %ds]\n" % (result_text(result), round(self.eta())))
        self.out.flush()

    def close(self):
        pass


class LogTail:
    """Counts the lines (and DETBENCH_ITER lines) a growing log file has so far."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.lines = 0
        self.iterations = 0
        self.partial = b""

    def poll(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return self
        self.offset += len(chunk)
        data = self.partial + chunk
        *complete, self.partial = data.split(b"\n")
        self.lines += len(complete)
        self.iterations += sum(1 for line in complete if line.startswith(ITER_PREFIX))
        return self


class LiveProgress(PlainProgress):
    """A status line redrawn while each trial runs; a plain line when each trial ends."""

    def __init__(self, total, out=None, iterations=None, refresh_s=REFRESH_S):
        super().__init__(total, out)
        self.iterations = iterations
        self.refresh_s = refresh_s
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = None
        self.trial_started = None
        self.head = ""
        self.tail = None

    def start(self, trial, cell_key, repeat, trial_dir=None):
        self.head = "[%d/%d] %s repeat %d" % (self.done + 1, self.total, cell_key, repeat)
        self.trial_started = time.monotonic()
        self.tail = LogTail(os.path.join(str(trial_dir), trialfiles.LOG)) if trial_dir else None
        self.stop.clear()
        self.draw()
        self.thread = threading.Thread(target=self._loop, name="detbench-progress", daemon=True)
        self.thread.start()

    def _loop(self):
        while not self.stop.wait(self.refresh_s):
            self.draw()

    def status(self):
        """The live line: trial, cell, repeat, iterations so far, elapsed and ETA."""
        now = time.monotonic()
        parts = [self.head]
        iters = lines = 0
        if self.tail is not None:
            self.tail.poll()
            iters, lines = self.tail.iterations, self.tail.lines
        if iters and self.iterations:
            parts.append("iter %d/%d" % (iters, self.iterations))
        elif iters:
            parts.append("iter %d" % iters)
        else:
            parts.append("%d log lines" % lines)
        in_trial = now - self.trial_started
        parts.append("%.0fs" % in_trial)
        eta = self.live_eta(in_trial, iters)
        if eta is not None:
            parts.append("eta %ds" % round(eta))
        return "  ".join(parts)

    def live_eta(self, in_trial, iters):
        """Time left for the run: finished trials' mean length, else the current iteration rate."""
        left_after = self.total - self.done - 1
        if self.done:
            per_trial = (time.monotonic() - self.started - in_trial) / self.done
            return max(per_trial - in_trial, 0.0) + per_trial * left_after
        if iters and self.iterations:
            per_trial = in_trial / iters * self.iterations
            return max(per_trial - in_trial, 0.0) + per_trial * left_after
        return None

    def draw(self):
        with self.lock:
            if self.trial_started is None:
                return
            text = self.status()
            width = _columns(self.out)
            if width and len(text) >= width:
                text = text[:width - 2] + "…"
            self.out.write(CLEAR + text)
            self.out.flush()

    def _halt(self):
        self.stop.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=2)
        self.thread = None

    def finish(self, result):
        self._halt()
        with self.lock:
            self.done += 1
            self.trial_started = None
            self.out.write("%s%s ... %s  [eta %ds]\n" % (CLEAR, self.head, result_text(result), round(self.eta())))
            self.out.flush()

    def close(self):
        self._halt()
        with self.lock:
            if self.trial_started is not None:
                self.out.write(CLEAR)
                self.out.flush()
            self.trial_started = None


def _columns(out):
    try:
        return os.get_terminal_size(out.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return None
