"""Does `detbench bisect` name the commit that made a workload slower, and stay quiet without one?

Each trial builds a throwaway git repository of COMMITS commits holding the calibration workload
(its iteration time multiplied by a PACE constant) and a one-cell scenario. In the slowdown
series one commit, drawn at random, sets PACE to SLOWDOWN (1.10: 10% slower); bisect runs from
the first commit to the last, through its real trials (runner.py, scraper, results store), and
the trial counts when it names that commit within log2(COMMITS) + 2 steps. In the null series no
commit changes the pace, and the trial counts when bisect says there is no regression.

    python benchmarks/bisect_calibration.py                     # 20 + 20 trials, 16 commits
    python benchmarks/bisect_calibration.py --quick             # 2 + 2 trials: a couple of minutes
    python benchmarks/bisect_calibration.py --trials 5 --iteration-ms 20 --measure 10
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

from harness.bisect import decide, search  # noqa: E402
from harness.plan import platforms  # noqa: E402
from harness.results.store import Store  # noqa: E402
from tests.support import bisectrepo  # noqa: E402


def one(tmp, index, args, slow_at, rng):
    repo = Path(tmp) / ("repo-%d" % index)
    scenario = bisectrepo.scenario_text(iteration_ms=args.iteration_ms, warmup=args.warmup, measure=args.measure)
    shas = bisectrepo.make_repo(repo, commits=args.commits, slow_at=slow_at, slowdown=args.slowdown,
                                scenario=scenario)
    opts = search.Options(scenario=bisectrepo.SCENARIO, good=shas[0], bad=shas[-1], repo=str(repo),
                          results_dir=str(Path(tmp) / ("results-%d" % index)), seed=rng.randrange(2 ** 31),
                          judge=decide.Judge(max_trials=args.max_trials))
    started = time.perf_counter()
    outcome = search.bisect(opts, io.StringIO())
    seconds = time.perf_counter() - started
    store = Store(opts.results_dir, create=False)
    trials = sum(1 for r in store.read_runs() for t in store.read_trials(r.id) if t.done)
    store.close()
    return shas, outcome, seconds, trials


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=20, help="bisects per series (N)")
    p.add_argument("--quick", action="store_true", help="2 bisects per series")
    p.add_argument("--commits", type=int, default=16)
    p.add_argument("--slowdown", type=float, default=1.10)
    p.add_argument("--iteration-ms", type=float, default=10.0, help="the calibration workload's iteration time")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--measure", type=int, default=10)
    p.add_argument("--max-trials", type=int, default=15, help="the cap on a revision's trials per step")
    p.add_argument("--seed", type=int, default=2026)
    args = p.parse_args(argv)
    n = 2 if args.quick else args.trials
    rng = random.Random(args.seed)
    max_steps = int(math.ceil(math.log2(args.commits))) + 2
    need = int(math.ceil(0.95 * n))
    cpu = (platforms.host_record([]).get("cpu") or {}).get("model", "this host")
    print("bisect calibration: %d commits, slowdown x%.2f, iteration %g ms, warmup %d, measure %d, cap %d trials "
          "per step; %s; %d + %d bisects" % (args.commits, args.slowdown, args.iteration_ms, args.warmup,
                                             args.measure, args.max_trials, cpu, n, n))
    found = quiet = 0
    with tempfile.TemporaryDirectory(prefix="detbench-bisect-bench-") as tmp:
        for i in range(n):
            slow_at = rng.randrange(1, args.commits)
            shas, outcome, seconds, trials = one(tmp, i, args, slow_at, rng)
            right = outcome.culprit is not None and outcome.culprit.label == shas[slow_at]
            ok = right and len(outcome.steps) <= max_steps
            found += ok
            named = outcome.culprit.short if outcome.culprit else "no regression"
            effect = outcome.effect.text() if outcome.effect else "-"
            print("slow %2d/%d: commit %2d slowed; named %s (%s), %d steps, %d trials, effect %s, %.0f s"
                  % (i + 1, n, slow_at, named, "right" if right else "WRONG", len(outcome.steps), trials,
                     effect, seconds), flush=True)
        for i in range(n):
            shas, outcome, seconds, trials = one(tmp, n + i, args, None, rng)
            ok = outcome.culprit is None
            quiet += ok
            print("null %2d/%d: %s, %d trials, bad/good %s, %.0f s"
                  % (i + 1, n, "no regression" if ok else "named %s (WRONG)" % outcome.culprit.short, trials,
                     outcome.effect.text() if outcome.effect else "-", seconds), flush=True)
    print("%s: named the slowing commit within %d steps in %d of %d (target %d of %d)"
          % ("PASS" if found >= need else "FAIL", max_steps, found, n, need, n))
    print("%s: no regression reported without a slowdown in %d of %d (target %d of %d)"
          % ("PASS" if quiet >= need else "FAIL", quiet, n, need, n))
    return 0 if found >= need and quiet >= need else 1


if __name__ == "__main__":
    sys.exit(main())
