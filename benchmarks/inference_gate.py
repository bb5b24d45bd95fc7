"""Does the regression gate catch a 10% rise of the 95th-percentile latency, and stay quiet on A/A?

Runs the calibration workload's inference mode (batches of known latency with a known tail:
every tail-every-th batch takes tail-ms) through the real `detbench run` machinery, in two
conditions, and judges pairs of runs with `harness.results.compare` on --metric p95:

  A  batch latency base, tail 2 x base     (the build)
  B  both 10% longer                       (a 10% rise at p95: must be caught)

ROUNDS runs of each condition, interleaved (A B, then B A, ...; regression_gate.run_pool). Comparisons:
  A/A        A[i] vs A[i+1 mod ROUNDS]
  10% slower A[i] vs B[i]

    python benchmarks/inference_gate.py [--rounds 20] [--repeats 7] [--latency-ms 10]
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.regression_gate import run_pool  # noqa: E402
from harness.results import compare  # noqa: E402

SCENARIO = """\
name: inference-gate-{label}
mode: inference
matrix:
  framework: [calibrate]
  model: [retinanet]
batch_sizes: [2]
input_size: [320, 320]
warmup: {warmup}
measure: {measure}
repeats: {repeats}
percentiles: [50, 90, 95]
timeout_s: 120
calibrate:
  iteration_ms: {latency_ms!r}
  data_ms: 1
  post_ms: 1
  tail_every: {tail_every}
  tail_ms: {tail_ms!r}
"""

CONDITIONS = (("A", 1.0), ("B", 1.10))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--latency-ms", type=float, default=10.0)
    p.add_argument("--tail-every", type=int, default=10, help="every N-th batch is the tail (2x latency)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--measure", type=int, default=40)
    p.add_argument("--threshold", type=float, default=0.05)
    p.add_argument("--alpha", type=float, default=0.01)
    return p.parse_args()


def main():
    args = parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="detbench-inference-gate-") as tmp:
        tmp = Path(tmp)
        scenarios = {}
        for label, factor in CONDITIONS:
            path = tmp / ("%s.yaml" % label)
            path.write_text(SCENARIO.format(
                label=label, warmup=args.warmup, measure=args.measure, repeats=args.repeats,
                latency_ms=round(args.latency_ms * factor, 4), tail_every=args.tail_every,
                tail_ms=round(2 * args.latency_ms * factor, 4)), encoding="utf-8")
            scenarios[label] = path
        sides = run_pool(scenarios, args.rounds, tmp / "results", started)
    run_s = time.monotonic() - started

    n = args.rounds
    pairs = {"A/A (identical workload)": [(sides["A"][i], sides["A"][(i + 1) % n]) for i in range(n)]}
    pairs["10% rise at p95"] = [(sides["A"][i], sides["B"][i]) for i in range(n)]
    p95 = sorted(v for s in sides["A"] for cell in s["cells"].values() for v in cell["latency_ms"]["p95"])
    print()
    print("calibration inference workload: batch %g ms, every %d-th batch %g ms; warmup %d + measure %d "
          "batches, %d repeats per run; %d runs per condition, %d trials in %.0f s"
          % (args.latency_ms, args.tail_every, 2 * args.latency_ms, args.warmup, args.measure, args.repeats,
             n, 2 * n * args.repeats, run_s))
    print("p95 of the A trials: median %.3f ms (truth %.3f ms), range %.3f..%.3f ms"
          % (p95[len(p95) // 2], 2 * args.latency_ms, p95[0], p95[-1]))
    print("rule: --metric p95; regression = median p95 rise >= %g%% AND one-sided Mann-Whitney U p < %g"
          % (args.threshold * 100, args.alpha))
    print()
    print("%-26s %11s %9s %9s %13s %s" % ("comparisons", "regressions", "possible", "unchanged",
                                          "median ratio", "target"))
    targets = {"A/A (identical workload)": "0 regressions", "10% rise at p95": "%d/%d regressions" % (n, n)}
    rule = compare.Rule(args.threshold, args.alpha, ignore_settings=("iteration_ms", "tail_ms"), metric="p95")
    for name, pair_list in pairs.items():
        results = [compare.compare(b, c, rule).cells[0] for b, c in pair_list]
        counts = {v: sum(1 for r in results if r.verdict == v) for v in compare.VERDICTS}
        ratios = sorted(r.ratio for r in results if r.ratio is not None)
        print("%-26s %8d/%-2d %9d %9d %13.4f %s" % (
            name, counts[compare.REGRESSION], n, counts[compare.POSSIBLE],
            counts[compare.UNCHANGED] + counts[compare.IMPROVEMENT],
            ratios[len(ratios) // 2] if ratios else float("nan"), targets[name]))
    print("\ntotal %.0f s" % (time.monotonic() - started))


if __name__ == "__main__":
    main()
