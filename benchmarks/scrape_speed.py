"""How fast the text-log scrapers read: lines per second and peak memory per format.

Writes a synthetic log per format (mostly training records, some other lines as in a
real log) and scrapes it streaming from disk (``common.run_path``) twice, each time in a
fresh child process so that its peak RSS is its own: once on the pure-Python path and
once with the compiled scanner (harness/measure/scrapers/_fastscan.c), when it is built. Records
are counted, never kept. One row per format puts the two paths side by side: lines/s by
wall clock and by CPU time, peak RSS and its growth over the process's RSS before
scraping, and the ratio of the two speeds. The two paths must count the same records
and errors. Exits 1 when they do not, or when the slowest format reads fewer than
1,000,000 lines/s with the scanner.

    python benchmarks/scrape_speed.py                 # ~200 MB per format
    python benchmarks/scrape_speed.py --mb 1024       # ~1 GB per format
    python benchmarks/scrape_speed.py --formats mmdet-v2 detectron2 --keep DIR
"""
import argparse
import multiprocessing
import os
import random
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from harness.measure.scrapers import common  # noqa: E402
from harness.measure.scrapers.detectron2 import Detectron2Scraper  # noqa: E402
from harness.measure.scrapers.maskrcnn_benchmark import MaskrcnnScraper  # noqa: E402
from harness.measure.scrapers.mmdet_v2 import MmcvScraper  # noqa: E402
from harness.measure.scrapers.mmdet_v3 import MmengineScraper  # noqa: E402

ITERS_PER_EPOCH = 7330
INTERVAL = 50
TARGET = 1000000  # lines per second
NOISE = [
    "2024-01-01 00:00:00,000 - mmdet - INFO - Saving checkpoint at 1 epochs",
    "/usr/lib/python3/site-packages/torch/functional.py:504: UserWarning: torch.meshgrid",
    " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.374",
    "Loading and preparing results...",
]


def _mmdet_v1(i, r):
    e, inner = divmod(i * INTERVAL, ITERS_PER_EPOCH)
    return ("2019-08-12 11:02:31,415 - INFO - Epoch [%d][%d/%d]\tlr: %.5f, eta: 1 day, "
            "0:21:01, time: %.3f, data_time: %.3f, memory: %d, loss_rpn_cls: %.4f, "
            "loss_rpn_bbox: %.4f, loss_cls: %.4f, acc: %.4f, loss_bbox: %.4f, loss: %.4f"
            % (e + 1, inner + INTERVAL, ITERS_PER_EPOCH, 0.02, r, r / 10, 3796, r, r, r,
               92.3, r, r * 3))


def _mmdet_v2(i, r):
    e, inner = divmod(i * INTERVAL, ITERS_PER_EPOCH)
    return ("2021-03-01 11:02:31,415 - mmdet - INFO - Epoch [%d][%d/%d]\tlr: %.3e, eta: "
            "12:01:10, time: %.3f, data_time: %.3f, memory: %d, loss_rpn_cls: %.4f, "
            "loss_rpn_bbox: %.4f, loss_cls: %.4f, acc: %.4f, loss_bbox: %.4f, loss: %.4f"
            % (e + 1, inner + INTERVAL, ITERS_PER_EPOCH, 0.02, r, r / 10, 3796, r, r, r,
               92.3, r, r * 3))


def _mmdet_v3(i, r):
    e, inner = divmod(i * INTERVAL, ITERS_PER_EPOCH)
    return ("06/12 14:02:41 - mmengine - INFO - Epoch(train)  [%d][%4d/%d]  base_lr: "
            "2.0000e-02 lr: 1.9820e-03  eta: 12:50:10  time: %.4f  data_time: %.4f  "
            "memory: %d  loss: %.4f  loss_rpn_cls: %.4f  loss_rpn_bbox: %.4f  loss_cls: %.4f"
            "  acc: %.4f  loss_bbox: %.4f"
            % (e + 1, inner + INTERVAL, ITERS_PER_EPOCH, r, r / 10, 3375, r * 3, r, r, r,
               92.3, r))


def _maskrcnn(i, r):
    return ("2019-05-01 10:00:00,000 maskrcnn_benchmark.trainer INFO: eta: 10:11:12  "
            "iter: %d  loss: %.4f (%.4f)  loss_classifier: %.4f (%.4f)  loss_box_reg: "
            "%.4f (%.4f)  loss_objectness: %.4f (%.4f)  loss_rpn_box_reg: %.4f (%.4f)  "
            "time: %.4f (%.4f)  data: %.4f (%.4f)  lr: 0.020000  max mem: 3012"
            % ((i + 1) * 20, r, r, r, r, r, r, r, r, r, r, r, r, r / 10, r / 10))


def _detectron2(i, r):
    return ("[05/17 10:42:13] d2.utils.events INFO:  eta: 11:02:41  iter: %d  total_loss: "
            "%.4g  loss_cls: %.4g  loss_box_reg: %.4g  loss_mask: %.4g  loss_rpn_cls: %.4g"
            "  loss_rpn_loc: %.4g    time: %.4f  last_time: %.4f  data_time: %.4f  "
            "last_data_time: %.4f   lr: %.5g  max_mem: 3189M"
            % (i * 20 + 19, r, r, r, r, r, r, r, r, r / 10, r / 10, 0.02))


FORMATS = {
    "mmdet-v1": (MmcvScraper, _mmdet_v1),
    "mmdet-v2": (MmcvScraper, _mmdet_v2),
    "mmdet-v3": (MmengineScraper, _mmdet_v3),
    "maskrcnn-benchmark": (MaskrcnnScraper, _maskrcnn),
    "detectron2": (Detectron2Scraper, _detectron2),
}


def write_log(path, make_line, megabytes, noise_every=20, seed=0):
    """Write about ``megabytes`` MB of log: records, with a non-record line every so often."""
    rng = random.Random(seed)
    target = megabytes * 1024 * 1024
    written = lines = 0
    with open(path, "w", encoding="utf-8") as f:
        batch = []
        i = 0
        while written < target:
            batch.clear()
            for _ in range(1000):
                if lines % noise_every == noise_every - 1:
                    batch.append(NOISE[lines % len(NOISE)])
                else:
                    batch.append(make_line(i, 0.3 + rng.random() * 0.2))
                    i += 1
                lines += 1
            text = "\n".join(batch) + "\n"
            f.write(text)
            written += len(text)
    return lines


def _rss_now_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def _measure(name, native, path, queue):
    """In a child: scrape ``path`` once and report counts, times and memory."""
    from harness.measure.records import IterationRecord

    scraper = FORMATS[name][0]()
    rss_before = _rss_now_mb()
    cpu0 = time.process_time()
    start = time.perf_counter()
    records = errors = 0
    for item in common.run_path(scraper, path, native=native):
        if item.__class__ is IterationRecord:
            records += 1
        else:
            errors += 1
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put((records, errors, elapsed, cpu, rss_mb, rss_mb - rss_before))


def _run(ctx, name, native, path):
    queue = ctx.Queue()
    proc = ctx.Process(target=_measure, args=(name, native, path, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200, help="log size per format in MB")
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=list(FORMATS))
    parser.add_argument("--keep", help="write the logs into this folder and keep them")
    args = parser.parse_args(argv)
    folder = args.keep or tempfile.mkdtemp(prefix="detbench-scrape-")
    os.makedirs(folder, exist_ok=True)
    ctx = multiprocessing.get_context("spawn")
    built = common._fastscan is not None
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    print("%-19s %9s %8s %6s %6s | %-30s | %-30s | %5s" % (
        "", "", "", "", "", "pure Python".center(30),
        ("compiled scanner" if built else "compiled scanner NOT BUILT").center(30), ""))
    print("%-19s %9s %8s %6s %6s | %9s %9s %10s | %9s %9s %10s | %5s" % (
        "format", "lines", "records", "errors", "log MB", "lines/s", "lines/cpu", "RSS(+)MB",
        "lines/s", "lines/cpu", "RSS(+)MB", "ratio"))
    worst = None
    same = True
    for name in args.formats:
        path = os.path.join(folder, name + ".log")
        lines = write_log(path, FORMATS[name][1], args.mb)
        size_mb = os.path.getsize(path) / 1e6
        cells = []
        counts = set()
        rates = []
        for native in ([False, True] if built else [False]):
            records, errors, elapsed, cpu, rss, grown = _run(ctx, name, native, path)
            counts.add((records, errors))
            rates.append(lines / elapsed)
            cells.append("%9.0f %9.0f %5.0f(%+3.0f)" % (lines / elapsed, lines / max(cpu, 1e-9),
                                                       rss, grown))
        if not args.keep:
            os.remove(path)
        if len(counts) != 1:
            same = False
            print("%s: MISMATCH, the paths counted (records, errors) %s" % (name, sorted(counts)))
        if built:
            worst = rates[1] if worst is None else min(worst, rates[1])
        else:
            cells.append("%30s" % "-")
        print("%-19s %9d %8d %6d %6.0f | %s | %s | %5s" % (
            name, lines, records, errors, size_mb, cells[0], cells[1],
            "%.1fx" % (rates[1] / rates[0]) if built else "-"))
    print("load average after: %.2f %.2f %.2f" % os.getloadavg())
    ok = built and same and worst >= TARGET
    print("scrape_speed: slowest format %s lines/s with the compiled scanner (target %d): %s" % (
        "%.0f" % worst if worst is not None else "-", TARGET,
        "PASS" if ok else "BELOW TARGET" if built and same else
        "FAIL (the paths disagree)" if built else "FAIL (scanner not built)"))
    if not args.keep:
        os.rmdir(folder)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
