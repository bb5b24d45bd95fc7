"""Generated logs (benchmarks/loggen) with a window that gets a figure, and trial folders of them:
what the divergence tests of ingest and import make diverge (benchmarks/loggen/diverge.py)."""
import json
import random

from benchmarks import loggen
from harness.measure import ingest, scrapers


def trial_folder(path, lines, exit_code=0):
    path.mkdir(parents=True, exist_ok=True)
    (path / "log.txt").write_text("".join(line + "\n" for line in lines))
    (path / "trial.json").write_text(json.dumps({"exit_code": exit_code, "end_wall": 1.0}))
    return str(path)


def options(log):
    name = scrapers.EPOCH_OPTIONS.get(log.fmt)
    return {name: log.epoch_length} if name and log.epoch_length else {}


def clean_log(fmt, tmp_path):
    """A generated log of one run with at least 5 records whose window from its second record (left
    out) to its fourth gets a figure, and that window: (log, warmup, measure)."""
    for seed in range(200):
        log = loggen.generate(fmt, loggen.RandomChooser(random.Random(seed)), max_iters=600, max_records=30)
        run = log.runs[0]
        if len(log.runs) != 1 or len(run.records) < 5 or log.faults:
            continue
        warmup, end = run.records[1], run.records[3]
        folder = trial_folder(tmp_path / ("clean%d" % seed), log.lines)
        got = ingest.analyse(folder, fmt, warmup, end - warmup, log.images_per_iteration, options(log))
        if got.status == "done" and got.window[1] == end:
            return log, warmup, end - warmup
    raise AssertionError("no usable %s log" % fmt)
