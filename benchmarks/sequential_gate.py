"""Does the sequential gate keep the fixed gate's error rates with fewer candidate trials?

Measures a pool of real trials of the calibration workload through `detbench run` (runner.py,
scraper, store, exactly as a nightly runs them) in two conditions, then replays gate decisions
on draws from those measured throughputs:

  A  iteration_ms = base            (the build)
  B  iteration_ms = base x 1.10     (a 10% slowdown: must be caught)

The conditions run as alternating runs (A B, B A, ...), so drift and load on the machine hit
both alike. Each simulated comparison draws, without replacement, a baseline of --baseline
repeats from pool A and a candidate sequence of --max-trials from pool A (A/A) or pool B (the
slowdown), and judges it twice: with the fixed gate (harness.results.compare.decide on the
first 7 candidate repeats; a "possible regression" read as sequential.fixed_equivalent says)
and with the sequential gate (harness.results.sequential.judge,
which looks after each repeat and stops when clear). The figures are over draws from the
measured pool: the distribution the workload really produced on this machine, not a model of it.

The trial-count and same-verdict targets are for quiet cells: they are tested only when both
pools are quiet (every repeat within the gate's threshold of every other); on a machine whose
load put a trial further out than that, the table says NOT TESTED and gives the figures anyway.

    python benchmarks/sequential_gate.py [--pool 24] [--simulations 2000] [--iteration-ms 20]
"""
import argparse
import io
import math
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import run as run_mod  # noqa: E402
from harness.measure import stats  # noqa: E402
from harness.results import compare, sequential  # noqa: E402
from harness.results.store import Store  # noqa: E402

SCENARIO = """\
name: seqgate-{label}
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
"""

FIXED = 7            # the fixed gate's candidate repeats
NO_THRESHOLD = 1e-9  # an effect threshold that lets any significant drop count


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pool", type=int, default=24, help="measured trials per condition")
    p.add_argument("--runs", type=int, default=2, help="runs per condition the pool is split into")
    p.add_argument("--simulations", type=int, default=2000, help="comparisons drawn per condition")
    p.add_argument("--baseline", type=int, default=7, help="baseline repeats per comparison")
    p.add_argument("--max-trials", type=int, default=sequential.MAX_TRIALS)
    p.add_argument("--iteration-ms", type=float, default=20.0)
    p.add_argument("--data-ms", type=float, default=2.0)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--measure", type=int, default=20)
    p.add_argument("--threshold", type=float, default=0.05)
    p.add_argument("--alpha", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    need = args.baseline + max(args.max_trials, FIXED)
    if args.pool < need:
        p.error("--pool must hold a baseline and a candidate sequence without repeats: at least %d" % need)
    return args


def measure_pool(args, tmp):
    """{label: [throughput of each finished trial]} of real calibration runs, alternating A and B."""
    paths, factors = {}, {"A": 1.0, "B": 1.10}
    per_run = math.ceil(args.pool / args.runs)
    for label, factor in factors.items():
        paths[label] = tmp / ("%s.yaml" % label)
        paths[label].write_text(SCENARIO.format(
            label=label, warmup=args.warmup, measure=args.measure, repeats=per_run,
            iteration_ms=round(args.iteration_ms * factor, 4), data_ms=args.data_ms), encoding="utf-8")
    results = tmp / "results"
    runs = {label: [] for label in factors}
    for i in range(args.runs):
        for label in (("A", "B") if i % 2 == 0 else ("B", "A")):
            runs[label].append(run_mod.start(paths[label], results, out=io.StringIO()))
    store = Store(results, create=False)
    try:
        return {label: [t.throughput for r in ids for t in store.read_trials(r) if t.status == "done" and t.throughput]
                for label, ids in runs.items()}
    finally:
        store.close()


def upper95(hits, n):
    """Wilson score upper bound (95%, one-sided) of a rate seen as hits of n."""
    z = 1.645
    p = hits / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre + spread) / (1 + z * z / n)


def simulate(pool_base, pool_cand, same, args, rule, rng):
    """(sequential results, fixed verdicts) of --simulations comparisons drawn from the pools."""
    seq, fixed = [], []
    for _ in range(args.simulations):
        if same:
            draw = rng.sample(pool_base, args.baseline + args.max_trials)
            base, cand = draw[:args.baseline], draw[args.baseline:]
        else:
            base, cand = rng.sample(pool_base, args.baseline), rng.sample(pool_cand, args.max_trials)
        seq.append(sequential.judge(base, cand, rule, args.max_trials))
        verdict, _b, _c, ratio, _pd, _pg = compare.decide(base, cand[:FIXED], rule)
        fixed.append(sequential.fixed_equivalent(verdict, ratio, rule))
    return seq, fixed


def quiet_pool(values, threshold):
    """A quiet cell: every repeat within the gate's threshold of every other ((max - min) / min)."""
    return (max(values) - min(values)) / min(values) <= threshold


def report(args, pools, measured_s, sim_s, results):
    n = args.simulations
    lines = []
    quiet = all(quiet_pool(v, args.threshold) for v in pools.values())
    lines.append("calibration workload: iteration %g ms (data %g ms), warmup %d + measure %d iterations; "
                 "pool A %d trials, B (x1.10) %d trials in %d runs each, measured in %.0f s"
                 % (args.iteration_ms, args.data_ms, args.warmup, args.measure, len(pools["A"]),
                    len(pools["B"]), args.runs, measured_s))
    for label in ("A", "B"):
        v = pools[label]
        lines.append("pool %s: median %.3f images/s, CV %.3f%%, (max - min)/min %.3f%%, 95%% interval of the "
                     "median +-%.3f%%" % (label, stats.median(v), 100 * stats.cv(v),
                                          100 * (max(v) - min(v)) / min(v), 100 * stats.relative_half_width(v)))
    lines.append("quiet pools (every repeat within %g%% of every other): %s" % (
        args.threshold * 100, "yes" if quiet else "no: the targets on quiet cells are not tested by this pool"))
    lines.append("rule: threshold %g%%, alpha %g; baseline %d repeats; sequential looks %s (candidate repeats: level), "
                 "at most %d; fixed gate: %d candidate repeats; %d drawn comparisons per condition (%.0f s)"
                 % (args.threshold * 100, args.alpha, args.baseline,
                    ", ".join("%d: %.2g" % kv for kv in sequential.looks(args.baseline, args.alpha,
                                                                         args.max_trials).items()),
                    args.max_trials, FIXED, n, sim_s))
    aa_seq, aa_fixed = results["A/A"]
    sl_seq, sl_fixed = results["10% slowdown"]
    rows = []

    def count(seqs, verdict):
        return sum(1 for s in seqs if s.verdict == verdict)

    alarms = count(aa_seq, compare.REGRESSION)
    rows.append(("A/A false alarms (sequential)", "%d/%d = %.2f%% (95%% bound %.2f%%)"
                 % (alarms, n, 100 * alarms / n, 100 * upper95(alarms, n)), "<= 1%", alarms / n <= 0.01))
    bare_seq, bare_fixed = results["A/A, no threshold"]
    bare = count(bare_seq, compare.REGRESSION)
    rows.append(("A/A false alarms, threshold off (sequential)", "%d/%d = %.2f%% (95%% bound %.2f%%)"
                 % (bare, n, 100 * bare / n, 100 * upper95(bare, n)), "<= 1%", bare / n <= 0.01))
    bare_fixed_n = sum(1 for v in bare_fixed if v == compare.REGRESSION)
    rows.append(("A/A false alarms, threshold off (fixed 7)",
                 "%d/%d = %.2f%%" % (bare_fixed_n, n, 100 * bare_fixed_n / n), "(reference)", None))
    fixed_alarms = sum(1 for v in aa_fixed if v == compare.REGRESSION)
    rows.append(("A/A false alarms (fixed 7)", "%d/%d = %.2f%%" % (fixed_alarms, n, 100 * fixed_alarms / n),
                 "(reference)", None))
    caught = count(sl_seq, compare.REGRESSION)
    rows.append(("10% slowdown caught (sequential)", "%d/%d = %.2f%%" % (caught, n, 100 * caught / n),
                 ">= 99%", caught / n >= 0.99))
    fixed_caught = sum(1 for v in sl_fixed if v == compare.REGRESSION)
    rows.append(("10% slowdown caught (fixed 7)", "%d/%d = %.2f%%" % (fixed_caught, n, 100 * fixed_caught / n),
                 "(reference)", None))
    for name, seqs in (("A/A", aa_seq), ("10% slowdown", sl_seq)):
        used = [s.used for s in seqs]
        undecided = count(seqs, sequential.UNDECIDED)
        rows.append(("mean candidate trials, %s" % name, "%.2f vs %d fixed (%.0f%% fewer); max %d; undecided %d"
                     % (sum(used) / n, FIXED, 100 * (1 - sum(used) / n / FIXED), max(used), undecided),
                     "<= %.1f (30%% fewer)" % (0.7 * FIXED), sum(used) / n <= 0.7 * FIXED))
    agree = sum(1 for seqs, fixeds in (results["A/A"], results["10% slowdown"])
                for s, f in zip(seqs, fixeds) if s.verdict == f)
    rows.append(("same verdict as fixed 7 (quiet cells)", "%d/%d = %.2f%%" % (agree, 2 * n, 50 * agree / n),
                 ">= 99%", agree / (2 * n) >= 0.99))
    if not quiet:   # the targets on quiet cells say nothing about a pool that is not one
        rows = [r if not r[0].startswith(("mean candidate", "same verdict")) else
                (r[0], r[1], r[2], "NOT TESTED (pool not quiet)") for r in rows]
    width = max(len(r[0]) for r in rows)
    vwidth = max(len(r[1]) for r in rows)
    lines.append("")
    lines.append("%-*s  %-*s  %-22s %s" % (width, "figure", vwidth, "value", "target", "result"))
    for name, value, target, ok in rows:
        lines.append("%-*s  %-*s  %-22s %s" % (width, name, vwidth, value, target, "" if ok is None else
                                               ok if isinstance(ok, str) else ("PASS" if ok else "FAIL")))
    return lines, all(ok for *_, ok in rows if isinstance(ok, bool))


def main(argv=None):
    args = parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="detbench-seqgate-") as tmp:
        pools = measure_pool(args, Path(tmp))
    measured_s = time.monotonic() - started
    for label, values in pools.items():
        if len(values) < args.baseline + args.max_trials:
            sys.exit("pool %s has only %d finished trials" % (label, len(values)))
    rule = compare.Rule(args.threshold, args.alpha)
    rng = random.Random(args.seed)
    results = {"A/A": simulate(pools["A"], pools["A"], True, args, rule, rng),
               "10% slowdown": simulate(pools["A"], pools["B"], False, args, rule, rng),
               # the effect threshold all but off: only the spending of alpha over the looks keeps
               # identical runs from being called a regression
               "A/A, no threshold": simulate(pools["A"], pools["A"], True, args,
                                             compare.Rule(NO_THRESHOLD, args.alpha), rng)}
    sim_s = time.monotonic() - started - measured_s
    lines, ok = report(args, pools, measured_s, sim_s, results)
    print("\n".join(lines))
    print("\ntotal %.0f s: %s" % (time.monotonic() - started, "all targets PASS" if ok else "some target FAILS"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
