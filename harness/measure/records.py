"""What a scraper returns: iteration records and the lines it could not read."""

from dataclasses import dataclass
from typing import NamedTuple, Optional

# What a record's time figure means. Stats treat each kind honestly: ITERATION and
# WINDOW_MEAN add up to exact window times, and two CUMULATIVE_MEAN records of one
# running sum give the exact mean of the iterations between them.
ITERATION = "iteration"  # exactly this one iteration (span == 1)
WINDOW_MEAN = "window_mean"  # mean over the last `span` iterations
WINDOW_MEDIAN = "window_median"  # median over the last `span` iterations
# Mean of the `span` iterations iteration - span + 1 .. iteration: a running mean whose
# first iteration the format's source fixes (detectron2's timer starts at its 3rd
# iteration, maskrcnn-benchmark's meters at the 1st, timm's at each epoch's 1st).
# Records sharing that first iteration are one running sum; a sum that restarts right
# after the previous record continues it. data_time_s is a running mean over the same
# iterations, or None where the format's data figure covers other iterations.
CUMULATIVE_MEAN = "cumulative_mean"
# A mean whose first iteration the log does not tell (span 1 by convention): a running mean
# of a process resumed from where its log does not say, or a window mean of a window no
# line of the log gives. It cannot be differenced or added up, so its figure is an
# approximation.
GLOBAL_MEAN = "global_mean"
THROUGHPUT = "throughput"  # only images/s over the last `span` iterations
KINDS = (ITERATION, WINDOW_MEAN, WINDOW_MEDIAN, CUMULATIVE_MEAN, GLOBAL_MEAN, THROUGHPUT)

# How exact a trial's reported figure is (stats.TrialEstimate.kind), and its phrase in reports.
EXACT = "exact"  # every iteration's own time summed (records of one iteration each)
EXACT_CUMULATIVE = "exact-cumulative"  # (n2*g2 - n1*g1) / (n2 - n1) from two running means
WINDOW_MEDIAN_FIGURE = "window-median"  # medians of windows
GLOBAL_MEAN_FIGURE = "global-mean"  # running means that cannot be differenced
THROUGHPUT_FIGURE = "throughput"  # images/s only
# the logged means of windows of several iterations, added up: every iteration counts once,
# but each mean is printed to a few digits, so how exact it is depends on the figure's bound
WINDOW_MEANS_FIGURE = "window-means"
FIGURE_KINDS = (
    EXACT,
    EXACT_CUMULATIVE,
    WINDOW_MEANS_FIGURE,
    WINDOW_MEDIAN_FIGURE,
    GLOBAL_MEAN_FIGURE,
    THROUGHPUT_FIGURE,
)
FIGURE_TEXT = {
    EXACT: "exact: every iteration's own time",
    EXACT_CUMULATIVE: "exact: window mean from two running means",
    WINDOW_MEANS_FIGURE: "sum of the logged window means (within their printed rounding)",
    WINDOW_MEDIAN_FIGURE: "approximate: median of windows",
    GLOBAL_MEAN_FIGURE: "approximate: means since an iteration the log does not tell",
    THROUGHPUT_FIGURE: "approximate: images/s only",
}


class IterationRecord(NamedTuple):
    """One training-log record. An immutable tuple with named fields: cheap to build by
    the million (``tuple.__new__(IterationRecord, values)`` on the scrapers' fast path);
    ``_asdict()`` gives the field -> value dict."""

    iteration: int  # 1-based number of the last iteration covered
    line: int  # 0-based index of the log line it came from
    time_s: Optional[float] = None  # seconds per iteration, data time included
    data_time_s: Optional[float] = None  # seconds per iteration waiting for data
    span: int = 1  # iterations the figures summarize
    kind: str = ITERATION
    images_per_s: Optional[float] = None  # formats that print throughput only
    images: Optional[int] = None  # images in the iteration (all ranks), if printed
    memory_mb: Optional[float] = None
    loss: Optional[float] = None
    run: int = 1  # which run of the log (1-based): a restart begins the next
    # half a unit of the last digit printed of time_s and data_time_s (of images_per_s in a
    # throughput record): the most the printed figure can be off; 0.0 where printed in full
    rounding: float = 0.0
    # where data_time_s covers other iterations than time_s: the mean of the data_span
    # iterations ending at this one, of the kind data_kind (WINDOW_MEAN or CUMULATIVE_MEAN);
    # 0 and None where it covers the same iterations as time_s
    data_span: int = 0
    data_kind: Optional[str] = None


@dataclass(frozen=True)
class ScrapeError:
    line: int  # 0-based index of the line
    reason: str
    text: str  # the line, cut to 200 characters
    # True where the log cannot give a true figure at all (a record line printed twice
    # inside a run, records out of order, a line too long to hold, a file that is not text);
    # False for a line that merely does not parse
    fatal: bool = False
    run: Optional[int] = None  # the run the error belongs to, where one (None: the whole log)
