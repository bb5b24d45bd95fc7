"""A benchmark run: plan the trials of a scenario, execute them, resume what was left.

Repeats are interleaved across cells in rounds (round 1 holds repeat 1 of every cell, round 2
repeat 2, ...) so that drift and heat do not favour whichever cell runs first, and within each
round the cells run in an order drawn from the run's order seed (B1 C1 A1, A2 C2 B2, ...) so that
no cell always takes the same place; each trial is a fresh process. Every finished
trial is committed to the store before the next one starts, so an interrupted or killed
run loses at most the trial in flight, and `--resume RUN_ID` runs exactly what is left.

With `repeats: {min, max, half_width}` a run plans `min` rounds, and once they are done adds one
whole round at a time (next_round) until every cell's 95% interval of its median is within
+-half_width of the median, or `max` rounds are done. The decision reads only the store, so a
resumed run goes on with the adaptive loop where it stopped.
"""
import os
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import List

from harness import frameworks, launch
from harness.errors import BackendDown, BackendLost, ResultsWriteError, UserError
from harness.plan import hostcpu, trialfiles
from harness.results.store import Store, new_run_id
from harness.plan import platforms
from harness.plan import scenario as scenario_mod


@dataclass(frozen=True)
class PlannedTrial:
    seq: int
    cell: scenario_mod.Cell
    repeat: int
    argv: List[str]


ORDER_SEEDS = 2 ** 31   # a drawn order seed is below this: short enough to copy into a scenario


def order_seed(sc):
    """The seed of a run's trial order: the scenario's `order: {seed: N}`, else a fresh one."""
    if sc.order.seed is not None:
        return sc.order.seed
    return random.SystemRandom().randrange(ORDER_SEEDS)


def order_record(sc, seed):
    """What the store keeps of a run's order (runs.order_json)."""
    return {"seed": seed, "drawn": sc.order.seed is None}


def schedule(sc, planned_cells, backend="local", seed=None):
    """Trials in run order: round 1 holds repeat 1 of every cell, round 2 repeat 2, ...; within
    each round the cells run in the order scenario.round_orders draws from `seed` (default
    order_seed(sc)). An adaptive run plans its first `min` rounds here (next_round adds the rest)."""
    seed = order_seed(sc) if seed is None else seed
    runnable = [p.cell for p in planned_cells if p.excluded is None]
    launcher = launch.launcher(backend)
    pythons = launcher.pythons(sc, sorted({c.framework for c in runnable}))
    argvs = {c: frameworks.FRAMEWORKS[c.framework].argv(
        scenario_mod.context(sc, c, pythons[c.framework], launcher.rendezvous)) for c in runnable}
    trials = []
    for repeat, order in enumerate(scenario_mod.round_orders(runnable, scenario_mod.first_rounds(sc.repeats),
                                                             seed), 1):
        for cell in order:
            trials.append(PlannedTrial(len(trials) + 1, cell, repeat, argvs[cell]))
    return trials


def unsettled(sc, trials):
    """Keys of the cells whose finished repeats do not yet give a 95% interval of the median within
    +-half_width of it (harness.measure.stats.relative_half_width), in run order; [] for a fixed
    count of repeats."""
    from harness.measure import stats

    target = sc.repeats
    if not isinstance(target, scenario_mod.AdaptiveRepeats):
        return []
    values = {}
    for t in trials:
        values.setdefault(t.cell_key, [])
        if t.status == "done" and t.throughput:
            values[t.cell_key].append(t.throughput)
    out = []
    for key, figures in values.items():
        half = stats.relative_half_width(figures)
        if half is None or half > target.half_width:
            out.append(key)
    return out


def next_round(sc, trials, seed):
    """An adaptive run's next round as (seq, cell_key, repeat, argv) rows to store, every cell of
    the run in the order scenario.round_orders draws for that round from `seed` (the same stream
    as the first rounds; None: the run stored no order, cells in plan order); [] when the run is
    done: a fixed count, trials still unfinished, `max` rounds done, or every cell settled."""
    if not isinstance(sc.repeats, scenario_mod.AdaptiveRepeats) or not trials:
        return []
    if any(t.status in ("pending", "running") for t in trials):
        return []
    rounds = max(t.repeat for t in trials)
    if rounds >= sc.repeats.max or not unsettled(sc, trials):
        return []
    argvs = {t.cell_key: list(t.argv or ()) for t in trials}
    cells = [p.cell for p in scenario_mod.plan(sc) if p.cell.key in argvs]
    order = cells if seed is None else scenario_mod.round_orders(cells, rounds + 1, seed)[rounds]
    seq = max(t.seq for t in trials)
    return [(seq + i, cell.key, rounds + 1, argvs[cell.key]) for i, cell in enumerate(order, 1)]


def _extend(store, run_id, sc, out):
    """Store the adaptive run's next round, if it needs one; True when it added one."""
    run = store.read_run(run_id)
    trials = store.read_trials(run_id)
    rows = next_round(sc, trials, run.order.seed if run.order is not None else None)
    if not rows:
        return False
    store.add_trials(run_id, rows)
    out.write("round %d: %d of %d cells not yet within +-%g%% (95%% interval of the median)\n"
              % (rows[0][2], len(unsettled(sc, trials)), len(rows), sc.repeats.half_width * 100))
    return True


def cell_rows(sc, planned_cells):
    return [dict(cell_key=p.cell.key, framework=p.cell.framework, model=p.cell.model,
                 precision=p.cell.precision, platform=p.cell.platform, gpus=p.cell.gpus,
                 nodes=p.cell.nodes, batch_per_gpu=scenario_mod.batch_per_device(sc, p.cell),
                 images_per_iteration=scenario_mod.images_per_iteration(sc, p.cell), excluded=p.excluded)
            for p in planned_cells]


def start(scenario_path, results_dir, backend=None, dry_run=False, out=None, force=False):
    out = out or sys.stdout
    sc = launch.load_scenario(scenario_path)
    backend = backend or sc.backend
    launcher = launch.launcher(backend)
    planned_cells = scenario_mod.plan(sc)
    if launcher.runs_here:      # cells this host cannot measure (bf16 on a CPU that only emulates it) are NA
        planned_cells = hostcpu.exclude_unmeasurable(planned_cells)
    runnable = [p.cell for p in planned_cells if p.excluded is None]
    if not runnable:
        raise UserError("%s: no cell of this scenario can be measured on this host (%s)"
                        % (scenario_path, next(p.excluded for p in planned_cells if p.excluded)))
    seed = order_seed(sc)
    trials = schedule(sc, planned_cells, backend, seed)
    # trials that run on other machines: their trial.json host facts and fingerprint tell
    host = platforms.host_record([c.platform for c in runnable] if launcher.runs_here else [],
                                 force=force or dry_run)
    if dry_run:
        out.write("# %s: %d cells, %d trials, backend %s, order seed %d\n"
                  % (sc.name, len(planned_cells), len(trials), backend, seed))
        if isinstance(sc.repeats, scenario_mod.AdaptiveRepeats):
            out.write("# adaptive repeats: the first %d rounds; then up to %d in all, a round at a time while a "
                      "cell's median is not known to +-%g%%\n" % (sc.repeats.min, sc.repeats.max,
                                                                   sc.repeats.half_width * 100))
        for name, diffs in sorted(host.get("forced", {}).items()):
            out.write("# this host is not %s: %s (a real run needs --force)\n" % (name, "; ".join(diffs)))
        for p in planned_cells:
            if p.excluded:
                out.write("# NA %s: %s\n" % (p.cell.key, p.excluded))
        shown = {}  # cell -> "key", "command": repeats share both, so quote once per cell
        for t in trials:
            if t.cell not in shown:
                shown[t.cell] = (t.cell.key, " ".join(map(_quote, t.argv)))
            key, command = shown[t.cell]
            out.write("%d %s repeat %d: %s\n" % (t.seq, key, t.repeat, command))
        launcher.dry_run(sc, trials, results_dir, out)
        return None
    launcher.preflight(sc, runnable)   # pinned envs, an engine and its images: before anything is written
    from harness.measure import compute
    bounds = compute.for_run(sc, runnable, host.get("fingerprint"), measure_peak=launcher.runs_here,
                             note=lambda line: (out.write("# %s\n" % line), out.flush()))
    store = Store(results_dir)
    run_id = new_run_id()
    store.create_run(run_id, sc.name, str(scenario_path), sc.model_dump_json(), backend, host,
                     cell_rows(sc, planned_cells),
                     [(t.seq, t.cell.key, t.repeat, t.argv) for t in trials], limits=bounds,
                     order=order_record(sc, seed))
    out.write("run %s: %d trials of %s on backend %s, order seed %d -> %s\n"
              % (run_id, len(trials), sc.name, backend, seed, results_dir))
    if isinstance(sc.repeats, scenario_mod.AdaptiveRepeats):
        out.write("# adaptive repeats: %d rounds, then more until every cell's median is known to +-%g%%, "
                  "at most %d rounds\n" % (sc.repeats.min, sc.repeats.half_width * 100, sc.repeats.max))
    for line in compute.unmeasured(bounds):
        out.write("# %s\n" % line)
    for p in planned_cells:
        if p.excluded and p.excluded.startswith(hostcpu.THIS_HOST):
            out.write("# NA %s: %s\n" % (p.cell.key, p.excluded))
    if host.get("forced"):
        out.write("FORCED: this host is not %s; the run and its reports say so\n" % ", ".join(sorted(host["forced"])))
    execute(store, run_id, out)
    return run_id


def resume(run_id, results_dir, out=None):
    out = out or sys.stdout
    store = Store(results_dir, create=False)
    run = store.read_run(run_id)
    if run.imported:
        raise UserError("run %s was imported from logs (detbench import): there is nothing to run; "
                        "import the logs again instead" % run.id)
    run_id = run.id
    execute(store, run_id, out)
    return run_id


def execute(store, run_id, out=None):
    out = out or sys.stdout
    run = store.read_run(run_id)
    sc = run.scenario.validated(launch.LAUNCHERS)
    launcher = launch.launcher(run.backend)()
    launcher.prepare(sc)
    try:
        _extend(store, run_id, sc, out)    # a resumed adaptive run stopped between rounds goes on
        if not _execute_trials(store, run_id, sc, launcher, out):
            return
        while _extend(store, run_id, sc, out):
            _execute_trials(store, run_id, sc, launcher, out)
    finally:
        launcher.cleanup()
    failed = sum(1 for t in store.trials(run_id) if t["status"] == "failed")
    out.write("run %s finished: %d trials, %d failed\n" % (run_id, len(store.trials(run_id)), failed))


def _execute_trials(store, run_id, sc, launcher, out):
    from harness.measure import ingest  # scrapers and estimators: not needed to plan or dry-run

    todo = store.unfinished_trials(run_id)
    progress = make_progress(len(todo), out, iterations=sc.iterations)
    if not todo:
        out.write("run %s has nothing left to do\n" % run_id)
        return False
    # SIGINT too: a run started from a script's background job inherits SIGINT ignored, and
    # Python then never turns it into KeyboardInterrupt; an interrupt must stop a run anyway
    del _SIGNALLED[:]
    previous = {signum: signal.signal(signum, _raise_interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    lost = None
    try:
        for trial in todo:
            cell = scenario_mod.Cell.from_key(trial["cell_key"])
            fw = frameworks.FRAMEWORKS[cell.framework]
            ctx = scenario_mod.context(sc, cell)
            trial_dir = store.trial_dir(trial["id"])
            progress.start(trial, cell.key, trial["repeat"], trial_dir)
            store.mark_running(trial["id"])
            try:
                launcher.run(trial_dir, list(trial.argv), ctx.env, sc.timeout_s, cell,
                             files=fw.trial_files(ctx))
            except KeyboardInterrupt:
                store.mark_pending(trial["id"])
                raise
            except BackendLost as exc:   # the trial in flight is failed with the reason; the rest wait
                lost = exc
            except BackendDown as exc:   # nothing of this trial ran: it waits with the rest
                store.mark_pending(trial["id"])
                out.write("not started\n")
                raise UserError("%s; %s" % (exc, _resume_hint(run_id, store, "When it is back"))) from None
            # the trial has ended: an interrupt now waits until its result is stored (checked below)
            _DEFERRING.append(True)
            try:
                scraper, scrape_options = fw.reading(ctx)
                result = ingest.analyse(str(trial_dir), scraper, sc.warmup, sc.measure,
                                        scenario_mod.images_per_iteration(sc, cell), scrape_options,
                                        settings=fw.trial_settings(ctx),
                                        percentiles=sc.percentiles if sc.inference else None)
                if result.failed:
                    _check_room(store, trial["id"])
                store.finish_trial(trial["id"], result)
                progress.finish(result)
            finally:
                del _DEFERRING[:]
            if _SIGNALLED:
                raise KeyboardInterrupt("signal %d" % _SIGNALLED[-1])
            if lost is not None:
                raise UserError("%s; %s" % (lost, _resume_hint(run_id, store, "When it is back")))
    except KeyboardInterrupt:
        out.write("\ninterrupted; %s\n" % _resume_hint(run_id, store))
        raise
    except ResultsWriteError as exc:
        out.write("\n")   # end the progress line the trial left open
        raise ResultsWriteError("%s; %s" % (exc, _resume_hint(run_id, store, "With room to write"))) from None
    finally:
        progress.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return True


LOW_ROOM = 1 << 20   # bytes: a trial that failed with less than this left may have failed for want of room


def _check_room(store, trial_id):
    """ResultsWriteError when the results folder is full: the trial failed for want of room, not
    on its own, so it goes back to pending (when even that write fits) instead of counting as failed."""
    import shutil
    try:
        free = shutil.disk_usage(str(store.root)).free
    except OSError:
        return
    if free >= LOW_ROOM:
        return
    try:
        store.mark_pending(trial_id)
    except ResultsWriteError:
        pass   # it stays `running`, which --resume runs again just the same
    raise ResultsWriteError("%s: the results folder is full (%d KiB free) and trial %s could not write "
                            "its records" % (store.root, free // 1024, trial_id))


def _resume_hint(run_id, store, when=None):
    """What every stopped run tells its user: nothing is lost, and the command that finishes it."""
    return "finished trials are kept. %s: detbench run --resume %s --results %s" % (
        when + ", continue with" if when else "Continue with", run_id, store.root)


_SIGNALLED = []   # signals a run received; checked between trials too, in case a KeyboardInterrupt
                 # was raised where Python swallows it (in a __del__ or a callback)
_DEFERRING = []   # non-empty while a finished trial's result is analysed and stored: a signal then
                  # is only recorded, and acted on once the result is in the store


def _raise_interrupt(signum, _frame):
    _SIGNALLED.append(signum)
    if not _DEFERRING:
        raise KeyboardInterrupt("signal %d" % signum)


def _quote(arg):
    import shlex
    return shlex.quote(arg)


# ---------------------------------------------------------------- progress
# Progress of a run: plain lines for logs, a live status line on a terminal. Both kinds take the
# same calls from _execute_trials: start(trial, cell_key, repeat, trial_dir) before a trial,
# finish(result) after it, close() when the run stops. result is the trial's TrialResult, read
# by attribute (status, reason, throughput, iteration_time_s). The plain kind writes one line per
# trial (`[i/N] CELL repeat R ... RESULT  [eta Ns]`), which CI logs and tests read. The live kind
# redraws one status line while a trial runs (its iterations, counted by tailing the trial's
# log.txt) and leaves the same line per finished trial.

ITER_PREFIX = b"DETBENCH_ITER "
REFRESH_S = 0.25
CLEAR = "\r\033[K"


def make_progress(total, out=None, iterations=None):
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
