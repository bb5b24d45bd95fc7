"""Turn a finished trial folder into its TrialResult: scrape, then estimate.

This is the one place the launch side (runner.py's files) meets the analysis side, so
a trial can be re-analysed from its folder at any time without running it again.
"""

import collections
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from harness import jsonlog
from harness.measure import breakdown, divergence, drawn, latency, logfigure, scrapers, stats, work
from harness.plan.fingerprint import fingerprint
from harness.plan import trialfiles
from harness.plan.trialfiles import read_trial_json
from harness.measure.records import IterationRecord, ScrapeError
from harness.measure.result import Iteration, TrialResult
from harness.measure.stats import TrialEstimate
from harness.measure.scrapers.common import clean_line, read_blocks, read_lines

TAIL_LINES = 5
EXIT_CODE = "exit code "  # a failure reason that starts with it: the program exited with an error

# where a trial's stored settings came from (a key of trials.settings_json): the DETBENCH_SETTINGS
# line its log printed, or, where the log has none, its adapter's settings(); that key, the line's
# implementation and a damaged line's description are not settings, and no report compares them
SOURCE = "settings_source"
LOGGED, DECLARED = "logged", "declared"
PROBLEM = "settings_problem"
NOT_SETTINGS = (SOURCE, jsonlog.IMPLEMENTATION, PROBLEM)


def read_times(trial_dir: str) -> List[float]:
    """The monotonic arrival time of each line of the trial's log (log.times); [] where unreadable."""
    times: List[float] = []
    try:
        with open(os.path.join(trial_dir, trialfiles.LOG_TIMES)) as f:
            for line in f:
                mono, _, _ = line.partition("\t")
                times.append(float(mono))
    except (OSError, ValueError):
        pass
    return times


def log_tail(trial_dir: str, n: int = TAIL_LINES) -> List[str]:
    """The log's last `n` lines that are not blank."""
    path = os.path.join(trial_dir, trialfiles.LOG)
    if not os.path.exists(path):
        return []
    return list(collections.deque((l for l in read_lines(path) if l.strip()), maxlen=n))


def failure_reason(record: Optional[Mapping[str, Any]], trial_dir: str) -> Optional[str]:
    """Why the trial failed, from its trial.json (None: runner.py wrote none) and folder; None: it did not."""
    if record is None:
        try:
            with open(os.path.join(trial_dir, trialfiles.RUNNER_ERR), errors="replace") as f:
                said = [l.strip() for l in f if l.strip()]
        except OSError:
            said = []
        if os.path.exists(os.path.join(trial_dir, trialfiles.RECORD)):
            return "trial.json is not a record runner.py wrote (unreadable or not an object)"
        return "runner wrote no trial.json" + (": " + said[-1][:300] if said else "")
    if record.get("error"):
        return str(record["error"])
    if record.get("timed_out"):
        start, end = _number(record.get("start_mono")), _number(record.get("end_mono"))
        return "timed out after %.0f s" % (end - start) if start is not None and end is not None else "timed out"
    if record.get("interrupted_by"):
        return "interrupted by signal %s" % record["interrupted_by"]
    if record.get("signal"):
        return "killed by signal %s" % record["signal"]
    if record.get("exit_code") not in (0, None):
        tail = log_tail(trial_dir, 1)
        return EXIT_CODE + "%s%s" % (record["exit_code"], (": " + tail[-1][:300]) if tail else "")
    return None


Settings = Tuple[Optional[Dict[str, Any]], Optional[Dict[str, str]], Optional[str]]


def logged_settings(log_path: str) -> Settings:
    """(settings, implementation, problem) of the first DETBENCH_SETTINGS line of a log:
    (None, None, None) where it has none or cannot be read, (None, None, "line N: ...") where
    the line is damaged. Streamed: only lines that hold the prefix are decoded."""
    prefix, lines = jsonlog.SETTINGS_PREFIX.encode(), 0
    try:
        for block, end in read_blocks(log_path):
            at = block.find(prefix, 0, end)
            while at >= 0:
                start = block.rfind(b"\n", 0, at) + 1
                stop = block.find(b"\n", at, end)
                stop = end if stop < 0 else stop
                number = lines + block.count(b"\n", 0, start) + 1
                at = block.find(prefix, stop, end)
                try:
                    text = clean_line(block[start:stop])
                except Exception:  # a rank prefix int() refuses: not rank 0's line
                    continue
                found = text.find(jsonlog.SETTINGS_PREFIX) if text else -1
                if text is None or found < 0:
                    continue  # another rank's line
                return _settings_object(text[found + len(jsonlog.SETTINGS_PREFIX) :], number)
            lines += block.count(b"\n", 0, end)
    except OSError:
        pass
    return None, None, None


def _settings_object(text: str, number: int) -> Settings:
    try:
        settings, implementation = jsonlog.read_settings(text)
    except ValueError as exc:
        return None, None, "log.txt line %d: %s" % (number, exc)
    if any(k in NOT_SETTINGS for k in settings):
        return (
            None,
            None,
            "log.txt line %d: the settings hold a key reserved for the store (%s)"
            % (number, ", ".join(sorted(k for k in settings if k in NOT_SETTINGS))),
        )
    return settings, implementation, None


def trial_settings(log_path: str, declared: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """A trial's settings as stored: the log's DETBENCH_SETTINGS line (the settings the framework
    really ran with, and its implementation) where it has one, else the adapter's declared
    settings; marked with their SOURCE. None where the declared settings are None (a log made
    elsewhere: what it ran with is not known, and its lines are not taken for it)."""
    if declared is None:
        return None
    settings, implementation, problem = logged_settings(log_path)
    if settings is not None:
        return dict(settings, **{SOURCE: LOGGED, jsonlog.IMPLEMENTATION: implementation})
    out = dict(declared, **{SOURCE: DECLARED})
    if problem:
        out[PROBLEM] = problem
    return out


def _number(value: object, default: Optional[float] = None) -> Optional[float]:
    """value when it is a real, finite number (not a bool), else default: trial.json may be damaged."""
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and value == value
        and abs(value) != float("inf")
    ):
        return float(value) if isinstance(value, float) else value
    return default


def analyse(
    trial_dir: str,
    scraper_name: str,
    warmup: int,
    measure: int,
    images_per_iteration: Optional[int],
    scrape_options: Optional[Mapping[str, Any]] = None,
    settings: Optional[Mapping[str, Any]] = None,
    percentiles: Optional[Sequence[float]] = None,
) -> TrialResult:
    """The TrialResult of a finished trial's folder. scrape_options go to the scraper;
    settings are the trial's normalized settings as its adapter declares them (None where they
    are not known), replaced by those its log's DETBENCH_SETTINGS line gives (trial_settings). With
    `percentiles` it is an inference trial: its records are batches, and its latency figures
    (harness.measure.latency) come from the same window as its throughput."""
    record = read_trial_json(trial_dir)
    reason = failure_reason(record, trial_dir)
    scrapers.get(scraper_name)  # an unknown name raises here, not in the try below
    log_path = os.path.join(trial_dir, trialfiles.LOG)
    times = read_times(trial_dir)
    try:  # streamed from disk, through the compiled scanner where it is built
        scraped = (
            _scrape(scraper_name, log_path, scrape_options, (warmup + 1, warmup + measure), times)
            if os.path.exists(log_path)
            else _Scraped()
        )
    except Exception as exc:  # scrapers must not raise; should one, the trial fails and the run goes on
        scraped = _Scraped()
        reason = reason or "the %s scraper failed on this log: %s: %s" % (scraper_name, type(exc).__name__, exc)
    records = scraped.records
    stop = _stop_message(record, log_path, records)
    if stop is not None and reason is not None and reason.startswith(EXIT_CODE) and not stop.within(warmup + measure):
        reason = None  # it stopped itself past the window, whose figure stands (unless the records widen it)
    if reason is None and scraped.count == 0 and scraped.fatal is None:
        reason = no_records(scraper_name, record, trial_dir) + _unreadable(scraped)
    if reason is None and scraped.fatal is not None:
        reason = "log.txt line %d: %s" % (scraped.fatal.line + 1, scraped.fatal.reason)
    figures: Dict[str, Any] = {}
    chosen: Optional[TrialEstimate] = None
    if reason is None:
        try:
            rep = stats.reported(records, warmup, measure, images_per_iteration)
            figures.update(
                throughput=rep.throughput,
                iteration_time_s=rep.iteration_time_s,
                data_time_s=rep.data_time_s,
                exact=bool(rep.exact),
                figure_kind=rep.kind,
                window=tuple(rep.window),
            )
            chosen = rep
        except stats.WindowError as exc:
            reason = str(exc) + _unreadable(scraped)
    why = _diverged(scraped.watch, chosen, stop, warmup + measure)
    if why is not None:  # the telling reason, whatever else went wrong after it
        reason, figures, chosen = why, {}, None
    if reason is None and times and chosen is not None and images_per_iteration is not None:
        try:  # from the same run as the reported figure
            mine = [r for r in records if r.run == chosen.run]
            figures["observed"] = stats.observed(mine, times, warmup, measure, images_per_iteration).throughput
        except (stats.WindowError, IndexError):
            pass
    lat = None
    if reason is None and percentiles is not None and chosen is not None:
        lat = latency.trial_latency(
            [r for r in records if r.run == chosen.run], figures["window"], percentiles, log_path, images_per_iteration
        )
    summary = record.get("telemetry") if record else None
    peaks = memory_peaks(summary)
    means = work.window_means(log_path, warmup + 1, warmup + measure, run_lines(chosen)) if reason is None else None
    data = drawn.trial_summary(log_path, warmup + 1, warmup + measure, run_lines(chosen)) if reason is None else None
    parts = None
    if reason is None:
        # over the iterations the figure it is held to covers (a framework that prints every Nth
        # iteration moves that window)
        first, last = figures.get("window") or (warmup + 1, warmup + measure)
        parts = breakdown.trial_breakdown(
            log_path,
            first,
            last,
            figures.get("iteration_time_s"),
            figures.get("data_time_s"),
            run_lines(chosen),
        )
    return TrialResult(
        status="failed" if reason else "done",
        reason=reason,
        ended=_number(record.get("end_wall")) if record else None,
        exit_code=_int(record.get("exit_code")) if record else None,
        records=scraped.count,
        scrape_errors=scraped.errors,
        peak_mem_mb=scraped.peak_mem_mb,
        fingerprint=_fingerprint(record),
        telemetry=summary if isinstance(summary, dict) and summary else None,
        work=means or None,
        drawn=data,
        settings=trial_settings(log_path, settings),
        iterations=tuple(scraped.iterations),
        latency=lat,
        breakdown=parts,
        peak_rss_mb=peaks["peak_rss_mb"],
        peak_device_mb=peaks["peak_device_mb"],
        **figures,
    )


def _unreadable(scraped: "_Scraped") -> str:
    """How many lines did not parse, and the first one's reason, where any."""
    if not scraped.errors or scraped.first_error is None:
        return ""
    return " (%d unreadable lines, first: %s)" % (scraped.errors, scraped.first_error.reason)


def no_records(scraper_name: str, record: Optional[Mapping[str, Any]], trial_dir: str) -> str:
    """Why a trial whose program ended well has no figure: its log holds no training record."""
    tail = log_tail(trial_dir, 1)
    code = _int(record.get("exit_code")) if record else None
    return "no %s training record in log.txt: the program exited%s without printing an iteration line%s" % (
        scraper_name,
        "" if code is None else " with code %d" % code,
        "; its last line: %s" % tail[-1].strip()[:300] if tail else "; the log is empty",
    )


def _stop_message(
    record: Optional[Mapping[str, Any]], log_path: str, records: Sequence[IterationRecord]
) -> Optional[divergence.Divergence]:
    """The message a framework printed as it stopped itself at a non-finite loss, where the trial
    exited with an error (divergence.STOPS, among the log's last lines)."""
    if not record or _int(record.get("exit_code")) in (0, None) or not os.path.exists(log_path):
        return None
    return divergence.stop_in(divergence.tail(log_path), [(r.line, r.iteration) for r in records])


def _diverged(
    watch: divergence.Watch,
    chosen: Optional[TrialEstimate],
    stop: Optional[divergence.Divergence],
    end: int,
) -> Optional[str]:
    """The divergence reason of a trial that diverged at or before the end of its measured window
    (iteration `end`, or the figure's last where the records widened it), else None: by the
    losses of the run the figure comes from (without a figure, of the latest run that diverged)."""
    if chosen is not None:
        end = max(end, chosen.window[1])
    found = divergence.judge(watch, chosen.run if chosen is not None else None, end, stop)
    return found.reason if found is not None else None


def _int(value: object) -> Optional[int]:
    """_number(value) where it is a whole number (an exit code), else None."""
    number = _number(value)
    return int(number) if number is not None and number == int(number) else None


def run_lines(est: Optional[TrialEstimate]) -> Optional[Tuple[int, Optional[int]]]:
    """(first, stop) 0-based: the lines of the log that belong to the run the estimate comes from,
    from its first record line to the next run's first (a line printed after a record, such as
    its DETBENCH_WORK line, belongs to that record's run); None where the log holds one run."""
    if est is None or len(est.runs) < 2:
        return None
    spans = sorted(est.runs, key=lambda s: s.first_line)
    for k, span in enumerate(spans):
        if span.run == est.run:
            after = spans[k + 1].first_line - 1 if k + 1 < len(spans) else None
            return span.first_line - 1, after
    return None


class _Scraped:
    """What ingest keeps of a scrape: the records a window's figure can use (each run's edges
    and those near the window: logfigure.Keeper), one compact row per record for the store,
    the count, the framework's memory peak, the lines that did not parse and the first fatal
    error."""

    def __init__(self, window: Optional[Tuple[int, int]] = None) -> None:
        self.keeper = logfigure.Keeper(window)
        self.iterations: List[Iteration] = []
        self.count = 0
        self.peak_mem_mb: Optional[float] = None
        self.errors = 0  # lines that did not parse
        self.first_error: Optional[ScrapeError] = None
        self.fatal: Optional[ScrapeError] = None
        self.watch = divergence.Watch()  # every record's loss, for the divergence rule
        self._records: Optional[List[IterationRecord]] = None

    @property
    def records(self) -> List[IterationRecord]:
        if self._records is None:
            self._records = self.keeper.records()
        return self._records


def _scrape(
    name: str, path: str, options: Optional[Mapping[str, Any]], window: Tuple[int, int], times: Sequence[float]
) -> _Scraped:
    """Stream the log once. A `run` among the options keeps that run's records only (and the
    errors of no run or of that one), as scrapers.scrape_path does."""
    out = _Scraped(window)
    options = dict(options or {})
    run = options.pop("run", None)
    last = None
    for item in scrapers.iter_path(name, path, **options):
        if run is not None and item.run is not None and item.run != run:
            continue
        if not isinstance(item, IterationRecord):
            out.errors += 1
            out.first_error = out.first_error or item
            if item.fatal and out.fatal is None:
                out.fatal = item
            continue
        key = (item.run, item.iteration)
        if key == last:
            continue  # another rank's copy of the record just read (stats.dedupe keeps the first)
        last = key
        out.count += 1
        out.keeper.add(item)
        out.watch.add(item)
        if item.memory_mb is not None and (out.peak_mem_mb is None or item.memory_mb > out.peak_mem_mb):
            out.peak_mem_mb = item.memory_mb
        out.iterations.append(
            (item.iteration, item.time_s, item.data_time_s, times[item.line] if item.line < len(times) else None)
        )
    return out


def _fingerprint(record: Optional[Mapping[str, Any]]) -> Optional[str]:
    try:
        return fingerprint(record.get("host")) if record else None
    except (AttributeError, TypeError, ValueError):  # host facts damaged: no fingerprint
        return None


def memory_peaks(summary: object) -> Dict[str, Optional[float]]:
    """peak_rss_mb and peak_device_mb from runner.py's telemetry summary: memory measured
    the same way for every framework, whatever it logs itself.

    peak_rss_mb: the trial's process tree, shared pages counted once (PSS) where the kernel
    gives it, else the RSS sum. peak_device_mb: device memory the tree's processes held
    (NVML), None where no GPU answered or none of the tree's processes used one."""

    def peak(name: str) -> Optional[float]:
        figure = summary.get(name) if isinstance(summary, dict) else None
        value = _number(figure.get("max")) if isinstance(figure, dict) else None
        return value if value is None or value > 0 else None

    rss = peak("tree_pss_mb")
    return {"peak_rss_mb": rss if rss is not None else peak("tree_rss_mb"), "peak_device_mb": peak("tree_device_mb")}
