"""How exact detbench is: the calibration workload through the real `detbench run` path.

The calibration workload sleeps to absolute deadlines, so its true throughput is known
exactly (images per iteration / iteration time). For each iteration time this runs a
one-cell scenario (data time 10% of the iteration) through harness.run.start into a
temporary results store and checks, per cell:

  * the reported throughput (median over repeats of trials.throughput) against the truth;
  * the two estimators of every trial (framework-reported trials.throughput and
    line-timestamp trials.observed) against each other.

    python -m benchmarks.accuracy                 # 10, 50 and 500 ms, 7 repeats (~3 min)
    python -m benchmarks.accuracy --quick         # tiny windows, 3 repeats (seconds)
"""
import argparse
import io
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

TOLERANCE = 0.005  # 0.5 %
IMAGES = 2         # batch_per_gpu x 1 GPU
# iteration ms -> (warmup, measure): windows of 2-10 s, so the whole run takes minutes
WINDOWS = {10.0: (10, 300), 50.0: (5, 100), 500.0: (2, 20)}
QUICK_WINDOWS = {10.0: (3, 30), 50.0: (2, 10)}

SCENARIO = """\
name: accuracy-{tag}
matrix:
  framework: [calibrate]
  model: [retinanet]
  precision: [fp32]
  platform: [local]
  gpus: [1]
batch_per_gpu: {images}
input_size: [320, 320]
warmup: {warmup}
measure: {measure}
repeats: {repeats}
timeout_s: {timeout}
calibrate:
  iteration_ms: {iteration_ms}
  data_ms: {data_ms}
"""


def rel(a, b):
    return abs(a - b) / b


def measure_one(workdir, iteration_ms, warmup, measure, repeats):
    """Run one calibration cell; return a dict of figures."""
    from harness import run as run_mod

    tag = ("%g" % iteration_ms).replace(".", "p")
    path = os.path.join(workdir, "accuracy-%s.yaml" % tag)
    timeout = max(60.0, (warmup + measure) * iteration_ms / 1000.0 * 3 + 30)
    with open(path, "w") as f:
        f.write(SCENARIO.format(tag=tag, images=IMAGES, warmup=warmup, measure=measure,
                                repeats=repeats, timeout=timeout, iteration_ms=iteration_ms,
                                data_ms=iteration_ms / 10.0))
    results = os.path.join(workdir, "results-" + tag)
    started = time.monotonic()
    run_id = run_mod.start(path, results, out=io.StringIO())
    wall = time.monotonic() - started
    from harness.results.store import Store

    store = Store(results, create=False)
    try:
        rows = [(t.status, t.throughput, t.observed, t.reason) for t in store.read_trials(run_id)]
    finally:
        store.close()
    failed = [r for r in rows if r[0] != "done" or not r[1] or not r[2]]
    if failed:
        raise SystemExit("accuracy: %d trials at %g ms failed: %s" % (len(failed), iteration_ms, failed[0][3]))
    truth = IMAGES / (iteration_ms / 1000.0)
    reported = [r[1] for r in rows]
    observed = [r[2] for r in rows]
    return {
        "iteration_ms": iteration_ms, "trials": len(rows), "truth": truth,
        "median": statistics.median(reported),
        "median_err": rel(statistics.median(reported), truth),
        "worst_trial_err": max(rel(x, truth) for x in reported),
        "observed_median_err": rel(statistics.median(observed), truth),
        "worst_pair_gap": max(rel(o, r) for r, o in zip(reported, observed)),
        "wall_s": wall,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny windows and 3 repeats (smoke test)")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)
    windows = QUICK_WINDOWS if args.quick else WINDOWS
    repeats = args.repeats or (3 if args.quick else 7)
    ok = True
    print("accuracy: calibration workload through detbench run, %d repeats, tolerance %.1f%%"
          % (repeats, TOLERANCE * 100))
    print("%8s %6s %9s %10s %12s %14s %14s %14s %7s" % (
        "iter_ms", "trials", "truth", "reported", "median err", "worst trial", "observed err",
        "est. gap max", "wall_s"))
    with tempfile.TemporaryDirectory(prefix="detbench-accuracy-") as workdir:
        for iteration_ms, (warmup, measure) in sorted(windows.items()):
            r = measure_one(workdir, iteration_ms, warmup, measure, repeats)
            good = (r["median_err"] < TOLERANCE and r["observed_median_err"] < TOLERANCE
                    and r["worst_pair_gap"] < TOLERANCE)
            ok &= good
            print("%8g %6d %9.3f %10.3f %11.3f%% %13.3f%% %13.3f%% %13.3f%% %7.1f %s" % (
                iteration_ms, r["trials"], r["truth"], r["median"], r["median_err"] * 100,
                r["worst_trial_err"] * 100, r["observed_median_err"] * 100,
                r["worst_pair_gap"] * 100, r["wall_s"], "ok" if good else "MISSED"))
    print("accuracy: %s (targets: median reported and observed within %.1f%% of the truth, "
          "every trial's two estimators within %.1f%% of each other)"
          % ("PASS" if ok else "FAIL", TOLERANCE * 100, TOLERANCE * 100))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
