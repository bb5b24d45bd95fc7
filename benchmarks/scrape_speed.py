"""How fast the text-log scrapers read: lines per second and peak memory per format.

Writes a synthetic log per format (mostly training records, some other lines as in a
real log), scrapes it streaming from disk with the module's ``iter_scrape_path``
(records are counted, never kept) and prints lines/s and peak RSS. Each format runs
in a fresh child process so its peak RSS is its own.

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

from harness.scrapers import (detectron2, maskrcnn_benchmark, mmdet_v1,  # noqa: E402
                              mmdet_v2, mmdet_v3)

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
    "mmdet-v1": (mmdet_v1, _mmdet_v1),
    "mmdet-v2": (mmdet_v2, _mmdet_v2),
    "mmdet-v3": (mmdet_v3, _mmdet_v3),
    "maskrcnn-benchmark": (maskrcnn_benchmark, _maskrcnn),
    "detectron2": (detectron2, _detectron2),
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


def _measure(name, path, lines, queue):
    from harness.records import IterationRecord

    module = FORMATS[name][0]
    cpu0 = time.process_time()
    start = time.perf_counter()
    records = errors = 0
    for item in module.iter_scrape_path(path):
        if item.__class__ is IterationRecord:
            records += 1
        else:
            errors += 1
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put((name, lines, records, errors, elapsed, cpu, rss_mb))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200, help="log size per format in MB")
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=list(FORMATS))
    parser.add_argument("--keep", help="write the logs into this folder and keep them")
    args = parser.parse_args(argv)
    folder = args.keep or tempfile.mkdtemp(prefix="detbench-scrape-")
    os.makedirs(folder, exist_ok=True)
    ctx = multiprocessing.get_context("spawn")
    print("%-20s %10s %9s %6s %8s %11s %11s %9s %7s" % (
        "format", "lines", "records", "errors", "wall s", "lines/s", "lines/cpu-s", "log MB",
        "RSS MB"))
    worst = None
    for name in args.formats:
        path = os.path.join(folder, name + ".log")
        lines = write_log(path, FORMATS[name][1], args.mb)
        size_mb = os.path.getsize(path) / 1e6
        queue = ctx.Queue()
        proc = ctx.Process(target=_measure, args=(name, path, lines, queue))
        proc.start()
        result = queue.get()
        proc.join()
        if not args.keep:
            os.remove(path)
        name, lines, records, errors, elapsed, cpu, rss = result
        rate = lines / elapsed
        worst = rate if worst is None else min(worst, rate)
        print("%-20s %10d %9d %6d %8.2f %11.0f %11.0f %9.0f %7.1f" % (
            name, lines, records, errors, elapsed, rate, lines / max(cpu, 1e-9), size_mb, rss))
    print("scrape_speed: slowest format %.0f lines/s (target %d): %s" % (
        worst, TARGET, "PASS" if worst >= TARGET else "BELOW TARGET"))
    if not args.keep:
        os.rmdir(folder)


if __name__ == "__main__":
    main()
