"""Does `detbench bisect` name the commit that made a workload slower, and stay quiet without one?

Each trial builds a throwaway git repository of COMMITS commits holding the calibration workload
(its iteration time multiplied by a PACE constant) and a one-cell scenario. In the slowdown
series one commit, drawn at random, sets PACE to SLOWDOWN (1.10: 10% slower); bisect runs from
the first commit to the last, through its real trials (runner.py, scraper, results store), and
the trial counts when it names that commit (and only it). In the null series no commit changes
the pace, and the trial counts when bisect names no culprit. Each commit runs as itself: its own
`python -m harness.cli run` plans and launches each trial. On a busy machine its timings are noisy.

--simulate runs the same searches through the same decision code (harness/bisect/simulate.py:
search.Bisect's search, tests and alpha ledger) with each trial's figure drawn from a seeded
log-normal distribution of coefficient of variation --cv around the revision's true speed: a
statistical simulation of the decisions, in well under a second, that measures nothing.

    python benchmarks/bisect_calibration.py --simulate          # 20 + 20 simulated searches
    python benchmarks/bisect_calibration.py                     # 20 + 20 real ones, 16 commits (hours)
    python benchmarks/bisect_calibration.py --quick             # 2 + 2 real ones
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

from harness.bisect import decide, search, simulate  # noqa: E402
from harness.plan import platforms  # noqa: E402
from harness.results import compare  # noqa: E402
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
    return shas, outcome, seconds, bisectrepo.done_trials(opts.results_dir)


def one_simulated(index, args, slow_at, rng):
    speeds = [100.0 if slow_at is None or i < slow_at else 100.0 / args.slowdown for i in range(args.commits + 1)]
    opts = search.Options(scenario="<simulated>", seed=rng.randrange(2 ** 31), judge=decide.Judge(
        rule=compare.Rule(alpha=args.alpha), max_trials=args.max_trials))
    outcome, arms, sim = simulate.simulate(speeds, cv=args.cv, seed=rng.randrange(2 ** 31), opts=opts)
    return [a.label for a in arms], outcome, 0.0, sim.trials


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
    p.add_argument("--alpha", type=float, default=decide.ALPHA, help="the whole search's error budget")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--simulate", action="store_true",
                   help="draw each trial's figure from a seeded distribution instead of running it")
    p.add_argument("--cv", type=float, default=0.03, help="--simulate: the trials' coefficient of variation")
    args = p.parse_args(argv)
    n = 2 if args.quick else args.trials
    rng = random.Random(args.seed)
    need_found, need_quiet = n, int(math.ceil(0.95 * n))
    if args.simulate:
        print("bisect calibration, SIMULATED (trial figures drawn from a seeded log-normal, cv %g; the decision "
              "code of a real bisect, no trial run): %d commits, slowdown x%.2f, alpha %g, cap %d trials per test; "
              "%d + %d bisects" % (args.cv, args.commits, args.slowdown, args.alpha, args.max_trials, n, n))
    else:
        cpu = (platforms.host_record([]).get("cpu") or {}).get("model", "this host")
        print("bisect calibration: %d commits, slowdown x%.2f, iteration %g ms, warmup %d, measure %d, alpha %g, "
              "cap %d trials per test; %s; %d + %d bisects" % (args.commits, args.slowdown, args.iteration_ms,
                                                              args.warmup, args.measure, args.alpha,
                                                              args.max_trials, cpu, n, n))
    run_one = (lambda tmp, i, slow_at: one_simulated(i, args, slow_at, rng)) if args.simulate else (
        lambda tmp, i, slow_at: one(tmp, i, args, slow_at, rng))
    found = quiet = 0
    with tempfile.TemporaryDirectory(prefix="detbench-bisect-bench-") as tmp:
        for i in range(n):
            slow_at = rng.randrange(1, args.commits + 1 if args.simulate else args.commits)
            shas, outcome, seconds, trials = run_one(tmp, i, slow_at)
            right = (outcome.culprit is not None and outcome.culprit.label == shas[slow_at]
                     and len(outcome.found) == 1 and outcome.found[0].isolated and outcome.found[0].confirmed)
            found += right
            named = (outcome.culprit.short if outcome.culprit else
                     "undecided" if outcome.undecided is not None else "no regression")
            effect = outcome.effect.text() if outcome.effect else "-"
            print("slow %2d/%d: commit %2d slowed; named %s (%s), %d steps, %d trials, effect vs parent %s, %.0f s"
                  % (i + 1, n, slow_at, named, "right" if right else "WRONG" if outcome.found else "missed",
                     len(outcome.steps), trials,
                     effect, seconds), flush=True)
        for i in range(n):
            shas, outcome, seconds, trials = run_one(tmp, n + i, None)
            ok = outcome.culprit is None and not outcome.found
            quiet += ok
            print("null %2d/%d: %s, %d trials, bad/good %s, %.0f s"
                  % (i + 1, n, ("undecided" if outcome.undecided is not None else "no regression") if ok
                     else "named %s (WRONG)" % (outcome.culprit or outcome.found[0].arm).short, trials,
                     outcome.effect.text() if outcome.effect else "-", seconds), flush=True)
    print("%s: named the slowing commit in %d of %d (target %d of %d)"
          % ("PASS" if found >= need_found else "FAIL", found, n, need_found, n))
    print("%s: no culprit named without a slowdown in %d of %d (target %d of %d)"
          % ("PASS" if quiet >= need_quiet else "FAIL", quiet, n, need_quiet, n))
    return 0 if found >= need_found and quiet >= need_quiet else 1


if __name__ == "__main__":
    sys.exit(main())
