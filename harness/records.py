"""What a scraper returns: iteration records and the lines it could not read."""
from dataclasses import dataclass
from typing import NamedTuple, Optional

# What a record's time figure means. Stats treat each kind honestly: only
# ITERATION and WINDOW_MEAN add up to exact window times.
ITERATION = "iteration"          # exactly this one iteration (span == 1)
WINDOW_MEAN = "window_mean"      # mean over the last `span` iterations
WINDOW_MEDIAN = "window_median"  # median over the last `span` iterations
GLOBAL_MEAN = "global_mean"      # mean since training (or warmup) began
THROUGHPUT = "throughput"        # only images/s over the last `span` iterations
KINDS = (ITERATION, WINDOW_MEAN, WINDOW_MEDIAN, GLOBAL_MEAN, THROUGHPUT)


class IterationRecord(NamedTuple):
    """One training-log record. An immutable tuple with named fields: cheap to build by
    the million (``tuple.__new__(IterationRecord, values)`` on the scrapers' fast path);
    ``_asdict()`` gives the field -> value dict."""

    iteration: int                        # 1-based number of the last iteration covered
    line: int                             # 0-based index of the log line it came from
    time_s: Optional[float] = None        # seconds per iteration, data time included
    data_time_s: Optional[float] = None   # seconds per iteration waiting for data
    span: int = 1                         # iterations the figures summarize
    kind: str = ITERATION
    images_per_s: Optional[float] = None  # formats that print throughput only
    images: Optional[int] = None          # images in the iteration (all ranks), if printed
    memory_mb: Optional[float] = None
    loss: Optional[float] = None


@dataclass(frozen=True)
class ScrapeError:
    line: int      # 0-based index of the line
    reason: str
    text: str      # the line, cut to 200 characters
