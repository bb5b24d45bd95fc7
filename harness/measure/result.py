"""TrialResult: one analysed trial, from ingest to the store and the progress line."""

import json
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

STATUSES = ("done", "failed")

# One scraped record as the store keeps it: (iteration, time_s, data_time_s, arrived), where
# arrived is the monotonic arrival time of its log line (None without log.times).
Iteration = Tuple[int, Optional[float], Optional[float], Optional[float]]


@dataclass(frozen=True)
class TrialResult:
    """What a finished trial's folder says; None where the trial gave no such figure."""

    status: str  # "done" or "failed"
    reason: Optional[str] = None  # why it failed
    ended: Optional[float] = None  # wall clock at its end (trial.json end_wall)
    exit_code: Optional[int] = None
    records: Optional[int] = None  # iteration records scraped from the log
    scrape_errors: Optional[int] = None  # log lines the scraper could not read
    peak_mem_mb: Optional[float] = None  # the framework's own memory figure, its peak
    throughput: Optional[float] = None  # images/s, the framework's own times (reported)
    iteration_time_s: Optional[float] = None
    data_time_s: Optional[float] = None
    exact: Optional[bool] = None
    figure_kind: Optional[str] = None  # one of records.FIGURE_KINDS
    window: Optional[Tuple[int, int]] = None  # first and last iteration the figure covers
    observed: Optional[float] = None  # images/s from the log lines' arrival times
    fingerprint: Optional[str] = None  # of the host facts in trial.json
    telemetry: Optional[Dict[str, Any]] = None  # runner.py's telemetry summary
    peak_rss_mb: Optional[float] = None  # the process tree's, from the telemetry
    peak_device_mb: Optional[float] = None
    work: Optional[Dict[str, float]] = None  # mean work per iteration over the window
    # what it drew from the data set, {"window": {...}, "trial": {...}} (harness.measure.drawn); None: not logged
    drawn: Optional[Dict[str, Dict[str, float]]] = None
    settings: Optional[Dict[str, Any]] = None  # the framework's normalized settings; None: not known
    latency: Optional[Dict[str, Any]] = None  # an inference trial's: harness.measure.latency.trial_latency
    breakdown: Optional[Dict[str, Any]] = None  # where its step went: harness.measure.breakdown.trial_breakdown
    iterations: Tuple[Iteration, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError("status must be one of %s, got %r" % (", ".join(STATUSES), self.status))

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def columns(self) -> Dict[str, Any]:
        """Column -> value of the store's trials row (schema 5); the iterations have their own table."""
        return {
            "status": self.status,
            "reason": self.reason,
            "ended": self.ended,
            "exit_code": self.exit_code,
            "records": self.records,
            "scrape_errors": self.scrape_errors,
            "peak_mem_mb": self.peak_mem_mb,
            "throughput": self.throughput,
            "iteration_time_s": self.iteration_time_s,
            "data_time_s": self.data_time_s,
            "exact": None if self.exact is None else int(self.exact),
            "figure_kind": self.figure_kind,
            "window_json": None if self.window is None else json.dumps(list(self.window)),
            "observed": self.observed,
            "fingerprint": self.fingerprint,
            "telemetry_json": _json(self.telemetry),
            "peak_rss_mb": self.peak_rss_mb,
            "peak_device_mb": self.peak_device_mb,
            "work_json": _json(self.work),
            "settings_json": _json(self.settings),
            "latency_json": _json(self.latency),
            "drawn_json": _json(self.drawn),
            "breakdown_json": _json(self.breakdown),
        }


def _json(value: Any) -> Optional[str]:
    return None if value is None else json.dumps(value, sort_keys=True)
