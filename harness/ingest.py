"""Turn a finished trial folder into its row in the store: scrape, then estimate.

This is the one place the launch side (runner.py's files) meets the analysis side, so
a trial can be re-analysed from its folder at any time without running it again.
"""
import json
import os

from harness import scrapers, stats
from harness.fingerprint import fingerprint
from harness.records import IterationRecord
from harness.scrapers.common import read_lines

TAIL_LINES = 5


def read_trial_json(trial_dir):
    path = os.path.join(trial_dir, "trial.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_times(trial_dir):
    times = []
    try:
        with open(os.path.join(trial_dir, "log.times")) as f:
            for line in f:
                mono, _, _ = line.partition("\t")
                times.append(float(mono))
    except (OSError, ValueError):
        pass
    return times


def log_tail(trial_dir, n=TAIL_LINES):
    lines = list(read_lines(os.path.join(trial_dir, "log.txt"))) if os.path.exists(
        os.path.join(trial_dir, "log.txt")) else []
    return [l for l in lines if l.strip()][-n:]


def failure_reason(record, trial_dir):
    if record is None:
        try:
            with open(os.path.join(trial_dir, "runner.err"), errors="replace") as f:
                said = [l.strip() for l in f if l.strip()]
        except OSError:
            said = []
        return "runner wrote no trial.json" + (": " + said[-1][:300] if said else "")
    if record.get("error"):
        return record["error"]
    if record.get("timed_out"):
        return "timed out after %.0f s" % (record["end_mono"] - record["start_mono"])
    if record.get("interrupted_by"):
        return "interrupted by signal %d" % record["interrupted_by"]
    if record.get("signal"):
        return "killed by signal %d" % record["signal"]
    if record.get("exit_code") not in (0, None):
        tail = log_tail(trial_dir, 1)
        return "exit code %d%s" % (record["exit_code"], (": " + tail[-1][:300]) if tail else "")
    return None


def analyse(trial_dir, scraper_name, warmup, measure, images_per_iteration, scrape_options=None):
    """Return (row, iterations) for store.finish_trial; scrape_options go to the scraper."""
    record = read_trial_json(trial_dir)
    row = {"ended": record.get("end_wall") if record else None,
           "exit_code": record.get("exit_code") if record else None}
    reason = failure_reason(record, trial_dir)
    scrape = scrapers.get(scraper_name)
    log_path = os.path.join(trial_dir, "log.txt")
    records, errors = (scrape(read_lines(log_path), **(scrape_options or {}))
                       if os.path.exists(log_path) else ([], []))
    records = stats.dedupe([r for r in records if isinstance(r, IterationRecord)])
    times = read_times(trial_dir)
    row.update(records=len(records), scrape_errors=len(errors))
    mems = [r.memory_mb for r in records if r.memory_mb is not None]
    row["peak_mem_mb"] = max(mems) if mems else None
    iterations = [(r.iteration, r.time_s, r.data_time_s,
                   times[r.line] if r.line < len(times) else None) for r in records]
    if reason is None:
        try:
            rep = stats.reported(records, warmup, measure, images_per_iteration)
            row.update(throughput=rep.throughput, iteration_time_s=rep.iteration_time_s,
                       data_time_s=rep.data_time_s, exact=int(rep.exact))
        except stats.WindowError as exc:
            reason = str(exc)
            if errors:
                reason += " (%d unreadable lines, first: %s)" % (len(errors), errors[0].reason)
    if reason is None and times:
        try:
            row["observed"] = stats.observed(records, times, warmup, measure, images_per_iteration).throughput
        except (stats.WindowError, IndexError):
            row["observed"] = None
    row["status"] = "failed" if reason else "done"
    row["reason"] = reason
    row["fingerprint"] = fingerprint(record.get("host")) if record else None
    row["telemetry_json"] = json.dumps(record["telemetry"], sort_keys=True) \
        if record and record.get("telemetry") else None
    return row, iterations
