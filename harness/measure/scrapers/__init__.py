"""Log scrapers: one module per training-log format, chosen by name.

Each ``scrape(lines, **options)`` returns (records, errors) and never raises on bad
input. Modules also offer ``iter_scrape`` (a generator, flat memory) and, except
jsonl, ``iter_scrape_path`` (streaming from a file with a chunked fast path, and the
compiled scanner for the text formats of mmdetection, detectron2 and
maskrcnn-benchmark). ``scrape_path(name, path)`` reads a log file the fastest way its
format has; every way gives the same (records, errors). ``FORMATS`` says in one line
which frameworks write each format, ``EPOCH_OPTIONS`` the option that gives a format its
epoch length where its lines do not print it, and ``detect(path)`` names the formats
whose signature lines a log carries.
"""
import itertools
import json
import re

from harness import jsonlog
from harness.measure.scrapers import (common, detectron2, dllogger, effdet, jsonl,
                              maskrcnn_benchmark, mmdet_v1, mmdet_v2, mmdet_v3,
                              simpledet_mxnet, torchvision_ref)
from harness.measure.scrapers import detectron, tensorpack

SCRAPERS = {
    "detbench-jsonl": jsonl.scrape,
    "mmdet-v1": mmdet_v1.scrape,
    "mmdet-v2": mmdet_v2.scrape,
    "mmdet-v3": mmdet_v3.scrape,
    "maskrcnn-benchmark": maskrcnn_benchmark.scrape,
    "detectron2": detectron2.scrape,
    "torchvision-ref": torchvision_ref.scrape,
    "simpledet-mxnet": simpledet_mxnet.scrape,
    "dllogger": dllogger.scrape,
    "effdet": effdet.scrape,
    "detectron": detectron.scrape,
    "tensorpack": tensorpack.scrape,
}

# One line per format: which frameworks (and versions) write it.
FORMATS = {
    "detbench-jsonl": "DETBENCH_ITER {json} lines: detbench's bundled trainer and calibration workload",
    "mmdet-v1": "mmdetection 1.x (mmcv 0.2 TextLoggerHook): 'Epoch [E][I/N]<TAB>lr: ...' text and .log.json",
    "mmdet-v2": "mmdetection 2.x (mmcv 1.x TextLoggerHook): 'Epoch [E][I/N]' or 'Iter [I/N]' text and .log.json",
    "mmdet-v3": "mmdetection 3.x (mmengine LogProcessor): 'Epoch(train) [E][I/N]' or 'Iter(train) [I/N]' "
                "text and vis_data JSON",
    "maskrcnn-benchmark": "maskrcnn-benchmark trainer: 'iter: N ... time: T (mean)  data: D (mean)'",
    "detectron2": "detectron2 CommonMetricPrinter text (2019, v0.3 to v0.6 and current) and metrics.json",
    "torchvision-ref": "torchvision references/detection MetricLogger: 'Epoch: [E]  [ i/N] ... time: T  data: D'",
    "simpledet-mxnet": "SimpleDet (MXNet) Speedometer: 'Epoch[E] Batch [B] ... Speed: S samples/sec' (images/s only)",
    "dllogger": "NVIDIA DeepLearningExamples EfficientDet through dllogger: 'DLL ...' and 'DLLL {json}' "
                "(PyTorch and TF2)",
    "effdet": "rwightman/efficientdet-pytorch train.py: 'Train: E [ i/N (p%)]  Loss: ...  Time: ...'",
    "detectron": "Detectron (Caffe2) training stats: 'json_stats: {...}' with a running-mean 'time' (2018-2019)",
    "tensorpack": "tensorpack ThroughputTracker at each epoch's end: 'Throughput (samples/sec): X' (images/s only)",
}

# The scraper option that sets the iterations per epoch, for the formats whose lines do not
# always print it (mmdetection's .log.json, SimpleDet's old lines, tensorpack without its
# epoch lines). The other formats print it on every record or count iterations only.
EPOCH_OPTIONS = {
    "mmdet-v1": "iters_per_epoch",
    "mmdet-v2": "iters_per_epoch",
    "simpledet-mxnet": "batches_per_epoch",
    "tensorpack": "steps_per_epoch",
}

# The formats that read a file with a fast path (all but detbench-jsonl).
PATH_SCRAPERS = {
    "mmdet-v1": mmdet_v1.iter_scrape_path,
    "mmdet-v2": mmdet_v2.iter_scrape_path,
    "mmdet-v3": mmdet_v3.iter_scrape_path,
    "maskrcnn-benchmark": maskrcnn_benchmark.iter_scrape_path,
    "detectron2": detectron2.iter_scrape_path,
    "torchvision-ref": torchvision_ref.iter_scrape_path,
    "simpledet-mxnet": simpledet_mxnet.iter_scrape_path,
    "dllogger": dllogger.iter_scrape_path,
    "effdet": effdet.iter_scrape_path,
    "detectron": detectron.iter_scrape_path,
    "tensorpack": tensorpack.iter_scrape_path,
}


class UnknownScraperError(KeyError):
    """A scraper name that is not in SCRAPERS; the message lists the valid names."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


def get(name):
    """Return the scrape function called ``name``; UnknownScraperError lists the valid names."""
    try:
        return SCRAPERS[name]
    except KeyError:
        raise UnknownScraperError(
            "unknown scraper %r; valid names: %s" % (name, ", ".join(sorted(SCRAPERS)))
        ) from None


def iter_path(name, path, **options):
    """The records and errors of the log file at ``path`` one by one, streamed from disk:
    what scrape_path collects."""
    get(name)   # an unknown name raises here
    iter_file = PATH_SCRAPERS.get(name)
    if iter_file is not None:
        return iter_file(path, **options)
    return _jsonl_path(path, options)


def _jsonl_path(path, options):
    """detbench-jsonl, the one format without a file reader of its own: its lines fed in
    turn, then what stopped the reading (a line too long, a NUL byte)."""
    problems = []
    yield from jsonl.iter_scrape(common.read_lines(path, problems), **options)
    yield from common.problem_errors(problems)


def scrape_path(name, path, run=None, **options):
    """Return (records, errors) of the log file at ``path``, streamed from disk. With
    ``run``, only that run's records (and the errors of no run or of that one)."""
    records, errors = common.collect(iter_path(name, path, **options))
    if run is not None:
        records = [r for r in records if r.run == run]
        errors = [e for e in errors if e.run is None or e.run == run]
    return records, errors


# ------------------------------------------------------------------ format detection

DETECT_LINES = 5000   # a log shows its format within its first lines; detection reads no further

# (format, signature) in the order they are tried on a text line: the first that matches
# claims the line, so a format whose lines also match a looser signature comes first
# (mmdet-v1 before mmdet-v2, maskrcnn-benchmark before detectron2).
SIGNATURES = (
    ("detbench-jsonl", re.compile(re.escape(jsonlog.ITER_PREFIX) + r"\{")),
    ("mmdet-v3", re.compile(r"(?:Epoch\(train\) *\[\d+\]\[ *\d+/\d+\]|Iter\(train\) *\[ *\d+/\d+\])  ")),
    # mmdetection 1.x logs through the root logger: no logger name between time and level
    ("mmdet-v1", re.compile(r"\d,\d{3} - INFO - Epoch \[\d+\]\[\d+/\d+\]\tlr: ")),
    ("mmdet-v2", re.compile(r"(?:Epoch \[\d+\]\[\d+/\d+\]|Iter \[\d+/\d+\])\tlr: ")),
    ("maskrcnn-benchmark", re.compile(r"\biter: \d+  .*\btime: [0-9.]+ \([0-9.]+\)  data: ")),
    ("detectron2", re.compile(r"\biter: \d+  .*\btime: [0-9.]+  ")),
    ("torchvision-ref", re.compile(r"Epoch: \[\d+\]  \[ *\d+/\d+\]  ")),
    ("simpledet-mxnet", re.compile(r"(?:Epoch|Iter)\[\d+\] Batch \[\d+\]\t.*Speed: \S+ samples/s")),
    ("dllogger", re.compile(r"^DLLL \{|^DLL \S+ \S+ - ")),
    ("effdet", re.compile(r"Train: \d+ \[ *\d+/\d+ \( *\S+%\)\]  Loss: ")),
    ("detectron", re.compile(r"^json_stats: \{")),
    ("tensorpack", re.compile(r"^\[\d{4} \d\d:\d\d:\d\d @[\w.]+\.py:\d+\] (?:Start Epoch \d+ \.\.\.|"
                              r"Epoch \d+ \(global_step \d+\) finished, time:|Throughput \(samples/sec\): )")),
)
JSON_LINE_MAX = 1 << 16   # a JSON log line longer than this is not a training record


def _json_format(line):
    """The format of a JSON-object line (the .json logs of mmdetection and detectron2), or None."""
    if len(line) > JSON_LINE_MAX:
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    keys = list(obj)
    if "env_info" in obj:              # the first line of an mmdetection 2.x .log.json
        return "mmdet-v2"
    if obj.get("mode") == "train" and "iter" in obj and "lr" in keys:
        # mmcv 0.2 writes time right after lr; mmcv 1.x writes memory and data_time there
        after_lr = keys[keys.index("lr") + 1] if keys.index("lr") + 1 < len(keys) else None
        return "mmdet-v1" if after_lr == "time" else "mmdet-v2"
    if "step" in obj and "iter" in obj and "time" in obj:
        return "mmdet-v3"
    if "iteration" in obj and "time" in obj:
        return "detectron2"
    return None


def line_format(line):
    """The format whose signature this (cleaned) log line carries, or None."""
    if line.lstrip().startswith("{"):
        return _json_format(line.strip())
    for name, signature in SIGNATURES:
        if signature.search(line):
            return name
    return None


def detect(path, max_lines=DETECT_LINES, problems=None):
    """The formats whose signature lines appear among the first ``max_lines`` lines of a
    log, in the order they first appear: one name when the log is decidable. What stops the
    reading early (a line too long, a NUL byte) goes into ``problems`` when given."""
    found = []
    for line in itertools.islice(common.read_lines(path, problems), max_lines):
        name = line_format(line) if line else None
        if name is not None and name not in found:
            found.append(name)
    return found
