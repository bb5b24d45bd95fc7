"""Does the regression gate catch real slowdowns and stay quiet on noise?

Runs the calibration workload through the real `detbench run` machinery (runner.py,
scraper, store) in three conditions and judges pairs of runs with `harness.results.compare`:

  A  iteration_ms = base            (the build)
  B  iteration_ms = base x 1.10     (a 10% slowdown: must be caught)
  C  iteration_ms = base x 1.03     (a 3% slowdown, below the 5% threshold: must not fail)

Pool design (to keep time down): ROUNDS runs of each condition, run in interleaved
rounds (A B C, then B C A, then C A B, ...) so drift and load on the machine hit every
condition alike. Comparisons:
  A/A        A[i] vs A[i+1 mod ROUNDS]  (each A run is used in two A/A pairs)
  10% slower A[i] vs B[i]
  3% slower  A[i] vs C[i]
Each run is one process tree per repeat, exactly as in a nightly. Both estimators are
judged (reported: from the workload's own log; observed: from log-line arrival times).

    python benchmarks/regression_gate.py [--rounds 20] [--repeats 7] [--iteration-ms 20]
"""
import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.results import baseline, compare  # noqa: E402
from harness.measure import flags, stats  # noqa: E402
from harness import run as run_mod  # noqa: E402
from harness.results.store import Store  # noqa: E402

SCENARIO = """\
name: gate-{label}
matrix:
  framework: [calibrate]
  model: [retinanet]
  precision: [fp32]
  platform: [local]
  gpus: [1]
batch_per_gpu: 2
input_size: [320, 320]
warmup: {warmup}
measure: {measure}
repeats: {repeats}
timeout_s: 120
calibrate:
  iteration_ms: {iteration_ms!r}
  data_ms: {data_ms!r}
  busy_threads: {busy_threads}
"""

CONDITIONS = (("A", 1.0), ("B", 1.10), ("C", 1.03))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20, help="runs per condition (and comparisons per figure)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--iteration-ms", type=float, default=20.0)
    p.add_argument("--data-ms", type=float, default=2.0)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--measure", type=int, default=20)
    p.add_argument("--threshold", type=float, default=0.05)
    p.add_argument("--alpha", type=float, default=0.01)
    p.add_argument("--busy-threads", type=int, default=0,
                   help="spinning threads inside every trial (CPU contention, more noise)")
    return p.parse_args()


def run_pool(scenarios, rounds, results, started):
    """Run every condition's scenario `rounds` times in rotating order (A B C, B C A, ...) into one
    store; {label: [the side of each run, in round order]}."""
    labels = list(scenarios)
    runs = {label: [] for label in labels}
    for i in range(rounds):
        shift = i % len(labels)
        for label in labels[shift:] + labels[:shift]:
            runs[label].append(run_mod.start(scenarios[label], results, out=io.StringIO()))
        print("round %d/%d done (%.0f s)" % (i + 1, rounds, time.monotonic() - started), flush=True)
    store = Store(results, create=False)
    try:
        return {label: [baseline.from_store(store, r) for r in ids] for label, ids in runs.items()}
    finally:
        store.close()


def main():
    args = parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="detbench-gate-") as tmp:
        tmp = Path(tmp)
        scenarios = {}
        for label, factor in CONDITIONS:
            path = tmp / ("%s.yaml" % label)
            path.write_text(SCENARIO.format(label=label, warmup=args.warmup, measure=args.measure,
                                            repeats=args.repeats, iteration_ms=round(args.iteration_ms * factor, 4),
                                            data_ms=args.data_ms, busy_threads=args.busy_threads),
                            encoding="utf-8")
            scenarios[label] = path
        sides = run_pool(scenarios, args.rounds, tmp / "results", started)
    run_s = time.monotonic() - started

    n = args.rounds
    pairs = {
        "A/A (identical workload)": [(sides["A"][i], sides["A"][(i + 1) % n]) for i in range(n)],
        "10% slowdown": [(sides["A"][i], sides["B"][i]) for i in range(n)],
        "3% slowdown": [(sides["A"][i], sides["C"][i]) for i in range(n)],
    }
    print()
    print("calibration workload: iteration %g ms (data %g ms), warmup %d + measure %d iterations, "
          "%d repeats per run, %d busy threads per trial" % (
              args.iteration_ms, args.data_ms, args.warmup, args.measure, args.repeats, args.busy_threads))
    for estimator, column in compare.ESTIMATORS.items():
        cvs = sorted(stats.cv(cell[column]) for s in sides["A"] for cell in s["cells"].values())
        spreads = sorted(flags.spread(cell[column]) for s in sides["A"] for cell in s["cells"].values())
        print("noise in A runs (%s): within-run CV median %.2f%% (max %.2f%%), (max-min)/min median %.2f%% "
              "(max %.2f%%)" % (estimator, 100 * cvs[len(cvs) // 2], 100 * cvs[-1],
                                100 * spreads[len(spreads) // 2], 100 * spreads[-1]))
    print("pool: %d runs per condition (A %g ms, B %g ms, C %g ms), %d trials in %.0f s; "
          "A/A pairs A[i] vs A[i+1 mod %d], slowdowns A[i] vs B[i] / C[i]"
          % (n, args.iteration_ms, args.iteration_ms * 1.10, args.iteration_ms * 1.03,
             3 * n * args.repeats, run_s, n))
    print("rule: regression = median drop >= %g%% AND one-sided Mann-Whitney U p < %g"
          % (args.threshold * 100, args.alpha))
    print()
    print("%-26s %-9s %11s %9s %9s %13s %s" % ("comparisons", "estimator", "regressions", "possible",
                                               "unchanged", "median ratio", "target"))
    targets = {"A/A (identical workload)": "0 regressions", "10% slowdown": ">= %d regressions" % (n - n // 20),
               "3% slowdown": "0 regressions"}
    for name, pair_list in pairs.items():
        for estimator in ("reported", "observed"):
            rule = compare.Rule(args.threshold, args.alpha, estimator, ("iteration_ms",))
            results = [compare.compare(b, c, rule).cells[0] for b, c in pair_list]
            counts = {v: sum(1 for r in results if r.verdict == v) for v in compare.VERDICTS}
            ratios = sorted(r.ratio for r in results if r.ratio is not None)
            print("%-26s %-9s %8d/%-2d %9d %9d %13.4f %s" % (
                name, estimator, counts[compare.REGRESSION], n, counts[compare.POSSIBLE],
                counts[compare.UNCHANGED] + counts[compare.IMPROVEMENT],
                ratios[len(ratios) // 2] if ratios else float("nan"), targets[name]))
    print("\ntotal %.0f s" % (time.monotonic() - started))


if __name__ == "__main__":
    main()
