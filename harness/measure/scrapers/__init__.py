"""Log scrapers: one module per training-log format, chosen by name.

Each ``scrape(lines, **options)`` returns (records, errors) and never raises on bad
input. Modules also offer ``iter_scrape`` (a generator, flat memory) and, except
jsonl, ``iter_scrape_path`` (streaming from a file with a chunked fast path, and the
compiled scanner for the text formats of mmdetection, detectron2 and
maskrcnn-benchmark). ``scrape_path(name, path)`` reads a log file the fastest way its
format has; every way gives the same (records, errors). ``LOG_FORMATS`` holds one
``LogFormat`` per format: its name, the frameworks that write it, its scrape functions,
the signature its lines carry and the option that gives its epoch length where its lines
do not print it; ``SCRAPERS``, ``FORMATS``, ``EPOCH_OPTIONS`` and ``PATH_SCRAPERS`` are
lookups by name read off it, and ``detect(path)`` names the formats whose signature lines
a log carries.
"""

import itertools
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Pattern, Tuple

from harness.measure.records import IterationRecord, ScrapeError

from harness import jsonlog
from harness.measure.scrapers import (
    common,
    detectron2,
    dllogger,
    effdet,
    jsonl,
    maskrcnn_benchmark,
    mmdet_v1,
    mmdet_v2,
    mmdet_v3,
    simpledet_mxnet,
    torchvision_ref,
)
from harness.measure.scrapers import detectron, tensorpack

ScrapeFunction = common.Scrape


@dataclass(frozen=True)
class LogFormat:
    """One log format: its name, who writes it, how it is read and how a line of it is known."""

    name: str
    writers: str  # one line: which frameworks (and versions) write it
    scrape: ScrapeFunction  # scrape(lines, **options) -> (records, errors)
    # a file read with the format's chunked fast path; None: the lines fed in turn
    iter_scrape_path: Optional[Callable[..., Iterator[common.Item]]] = None
    signature: Optional[Pattern[str]] = None  # a text line only this format writes
    json_line: Optional[Callable[[Dict[str, Any]], bool]] = None  # a JSON-object line of this format
    # the scraper option that sets the iterations per epoch where the format's lines do not
    # always print it (mmdetection's .log.json, SimpleDet's old lines, tensorpack without its
    # epoch lines); None where every record prints it or the format counts iterations only
    epoch_option: Optional[str] = None


def _after_lr(obj: Dict[str, Any]) -> Optional[str]:
    """The key after "lr" of an mmcv TextLoggerHook .log.json training record ("time" in mmcv 0.2,
    "memory" or "data_time" in mmcv 1.x; "" when lr is the last), or None for any other object."""
    if obj.get("mode") != "train" or "iter" not in obj or "lr" not in obj:
        return None
    keys = list(obj)
    at = keys.index("lr") + 1
    return keys[at] if at < len(keys) else ""


# Every format, in the order `detbench scrape --list-formats` lists them and detection tries
# them on a line: the first whose signature matches claims it, so a format whose lines also
# match a looser signature comes first (mmdet-v1 before mmdet-v2, maskrcnn-benchmark before
# detectron2).
LOG_FORMATS = (
    LogFormat(
        "detbench-jsonl",
        "DETBENCH_ITER {json} lines: detbench's bundled trainer and calibration workload",
        jsonl.scrape,
        None,
        re.compile(re.escape(jsonlog.ITER_PREFIX) + r"\{"),
    ),
    LogFormat(
        "mmdet-v1",
        "mmdetection 1.x (mmcv 0.2 TextLoggerHook): 'Epoch [E][I/N]<TAB>lr: ...' text and .log.json",
        mmdet_v1.scrape,
        mmdet_v1.iter_scrape_path,
        # mmdetection 1.x logs through the root logger: no logger name between time and level
        re.compile(r"\d,\d{3} - INFO - Epoch \[\d+\]\[\d+/\d+\]\tlr: "),
        lambda obj: "env_info" not in obj and _after_lr(obj) == "time",
        epoch_option="iters_per_epoch",
    ),
    LogFormat(
        "mmdet-v2",
        "mmdetection 2.x (mmcv 1.x TextLoggerHook): 'Epoch [E][I/N]' or 'Iter [I/N]' text and .log.json",
        mmdet_v2.scrape,
        mmdet_v2.iter_scrape_path,
        re.compile(r"(?:Epoch \[\d+\]\[\d+/\d+\]|Iter \[\d+/\d+\])\tlr: "),
        # env_info: the first line of an mmdetection 2.x .log.json
        lambda obj: "env_info" in obj or _after_lr(obj) not in (None, "time"),
        epoch_option="iters_per_epoch",
    ),
    LogFormat(
        "mmdet-v3",
        "mmdetection 3.x (mmengine LogProcessor): 'Epoch(train) [E][I/N]' or 'Iter(train) [I/N]' "
        "text and vis_data JSON",
        mmdet_v3.scrape,
        mmdet_v3.iter_scrape_path,
        re.compile(r"(?:Epoch\(train\) *\[\d+\]\[ *\d+/\d+\]|Iter\(train\) *\[ *\d+/\d+\])  "),
        lambda obj: "step" in obj and "iter" in obj and "time" in obj,
    ),
    LogFormat(
        "maskrcnn-benchmark",
        "maskrcnn-benchmark trainer: 'iter: N ... time: T (mean)  data: D (mean)'",
        maskrcnn_benchmark.scrape,
        maskrcnn_benchmark.iter_scrape_path,
        re.compile(r"\biter: \d+  .*\btime: [0-9.]+ \([0-9.]+\)  data: "),
    ),
    LogFormat(
        "detectron2",
        "detectron2 CommonMetricPrinter text (2019, v0.3 to v0.6 and current) and metrics.json",
        detectron2.scrape,
        detectron2.iter_scrape_path,
        re.compile(r"\biter: \d+  .*\btime: [0-9.]+  "),
        lambda obj: "iteration" in obj and "time" in obj,
    ),
    LogFormat(
        "torchvision-ref",
        "torchvision references/detection MetricLogger: 'Epoch: [E]  [ i/N] ... time: T  data: D'",
        torchvision_ref.scrape,
        torchvision_ref.iter_scrape_path,
        re.compile(r"Epoch: \[\d+\]  \[ *\d+/\d+\]  "),
    ),
    LogFormat(
        "simpledet-mxnet",
        "SimpleDet (MXNet) Speedometer: 'Epoch[E] Batch [B] ... Speed: S samples/sec' (images/s only)",
        simpledet_mxnet.scrape,
        simpledet_mxnet.iter_scrape_path,
        re.compile(r"(?:Epoch|Iter)\[\d+\] Batch \[\d+\]\t.*Speed: \S+ samples/s"),
        epoch_option="batches_per_epoch",
    ),
    LogFormat(
        "dllogger",
        "NVIDIA DeepLearningExamples EfficientDet through dllogger: 'DLL ...' and 'DLLL {json}' (PyTorch and TF2)",
        dllogger.scrape,
        dllogger.iter_scrape_path,
        re.compile(r"^DLLL \{|^DLL \S+ \S+ - "),
    ),
    LogFormat(
        "effdet",
        "rwightman/efficientdet-pytorch train.py: 'Train: E [ i/N (p%)]  Loss: ...  Time: ...'",
        effdet.scrape,
        effdet.iter_scrape_path,
        re.compile(r"Train: \d+ \[ *\d+/\d+ \( *\S+%\)\]  Loss: "),
    ),
    LogFormat(
        "detectron",
        "Detectron (Caffe2) training stats: 'json_stats: {...}' with a running-mean 'time' (2018-2019)",
        detectron.scrape,
        detectron.iter_scrape_path,
        re.compile(r"^json_stats: \{"),
    ),
    LogFormat(
        "tensorpack",
        "tensorpack ThroughputTracker at each epoch's end: 'Throughput (samples/sec): X' (images/s only)",
        tensorpack.scrape,
        tensorpack.iter_scrape_path,
        re.compile(
            r"^\[\d{4} \d\d:\d\d:\d\d @[\w.]+\.py:\d+\] (?:Start Epoch \d+ \.\.\.|"
            r"Epoch \d+ \(global_step \d+\) finished, time:|Throughput \(samples/sec\): )"
        ),
        epoch_option="steps_per_epoch",
    ),
)

# lookups by name, read off LOG_FORMATS
SCRAPERS = {f.name: f.scrape for f in LOG_FORMATS}
FORMATS = {f.name: f.writers for f in LOG_FORMATS}
EPOCH_OPTIONS = {f.name: f.epoch_option for f in LOG_FORMATS if f.epoch_option}
PATH_SCRAPERS = {f.name: f.iter_scrape_path for f in LOG_FORMATS if f.iter_scrape_path}


class UnknownScraperError(KeyError):
    """A scraper name that is not in SCRAPERS; the message lists the valid names."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def get(name: str) -> ScrapeFunction:
    """Return the scrape function called ``name``; UnknownScraperError lists the valid names."""
    try:
        return SCRAPERS[name]
    except KeyError:
        raise UnknownScraperError("unknown scraper %r; valid names: %s" % (name, ", ".join(sorted(SCRAPERS)))) from None


def iter_path(name: str, path: common.PathLike, **options: Any) -> Iterator[common.Item]:
    """The records and errors of the log file at ``path`` one by one, streamed from disk:
    what scrape_path collects."""
    get(name)  # an unknown name raises here
    iter_file = PATH_SCRAPERS.get(name)
    if iter_file is not None:
        return iter_file(path, **options)
    return _jsonl_path(path, options)


def _jsonl_path(path: common.PathLike, options: Dict[str, Any]) -> Iterator[common.Item]:
    """detbench-jsonl, the one format without a file reader of its own: its lines fed in
    turn, then what stopped the reading (a line too long, a NUL byte)."""
    problems: common.Problems = []
    yield from jsonl.iter_scrape(common.read_lines(path, problems), **options)
    yield from common.problem_errors(problems)


def scrape_path(
    name: str, path: common.PathLike, run: Optional[int] = None, **options: Any
) -> Tuple[List[IterationRecord], List[ScrapeError]]:
    """Return (records, errors) of the log file at ``path``, streamed from disk. With
    ``run``, only that run's records (and the errors of no run or of that one)."""
    records, errors = common.collect(iter_path(name, path, **options))
    if run is not None:
        records = [r for r in records if r.run == run]
        errors = [e for e in errors if e.run is None or e.run == run]
    return records, errors


# ------------------------------------------------------------------ format detection

DETECT_LINES = 5000  # a log shows its format within its first lines; detection reads no further

JSON_LINE_MAX = 1 << 16  # a JSON log line longer than this is not a training record


def _json_format(line: str) -> Optional[str]:
    """The format of a JSON-object line (the .json logs of mmdetection and detectron2), or None."""
    if len(line) > JSON_LINE_MAX:
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    return next((f.name for f in LOG_FORMATS if f.json_line is not None and f.json_line(obj)), None)


def line_format(line: str) -> Optional[str]:
    """The format whose signature this (cleaned) log line carries, or None."""
    if line.lstrip().startswith("{"):
        return _json_format(line.strip())
    return next((f.name for f in LOG_FORMATS if f.signature is not None and f.signature.search(line)), None)


def detect(
    path: common.PathLike, max_lines: int = DETECT_LINES, problems: Optional[common.Problems] = None
) -> List[str]:
    """The formats whose signature lines appear among the first ``max_lines`` lines of a
    log, in the order they first appear: one name when the log is decidable. What stops the
    reading early (a line too long) and the lines skipped for a NUL byte go into ``problems``
    when given."""
    found: List[str] = []
    for line in itertools.islice(common.read_lines(path, problems), max_lines):
        name = line_format(line) if line else None
        if name is not None and name not in found:
            found.append(name)
    return found
