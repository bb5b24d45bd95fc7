"""Does `detbench bisect` name a commit that slowed the bundled trainer through its config file
alone, in one run, in under 20 minutes?

A throwaway git repository of this project with COMMITS commits, one of which raises
`roi_batch_per_image` from 512 to 2048 in harness/trainer/configs/faster_r50v1_fpn_1x.py (or,
with --by adapter, sets it through harness/frameworks/detbench_trainer.py); the scenario, outside
the repository, is the Faster R-CNN cell on the CPU at INPUTxINPUT, batch 1, fp32, MEASURE
measured iterations. Each revision's own detbench runs each of its trials. PASS when the culprit
is that commit, confirmed against its parent, within --minutes.

    python benchmarks/bisect_trainer.py                        # 8 commits, the 5th slows, 128x128
    python benchmarks/bisect_trainer.py --by adapter --commits 4 --slow-at 2
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.bisect import search  # noqa: E402
from tests.support import bisectrepo  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commits", type=int, default=8)
    p.add_argument("--slow-at", type=int, default=4, help="the 0-based index of the commit that slows")
    p.add_argument("--by", choices=("config", "adapter"), default="config")
    p.add_argument("--input", type=int, default=128)
    p.add_argument("--measure", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of each trial")
    p.add_argument("--minutes", type=float, default=20.0)
    p.add_argument("--seed", type=int, default=2026)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="detbench-bisect-trainer-") as tmp:
        repo = Path(tmp) / "repo"
        shas = bisectrepo.make_trainer_repo(repo, commits=args.commits, slow_at=args.slow_at, by=args.by)
        scenario = Path(tmp) / "faster.yaml"
        scenario.write_text(bisectrepo.trainer_scenario_text(args.input, args.measure, args.threads), encoding="utf-8")
        print("bisect of the trainer's Faster R-CNN cell (CPU, %dx%d, batch 1, fp32, %d measured iterations, %d "
              "thread(s)): %d commits, commit %d raises the RoI sample 512 -> 2048 by its %s"
              % (args.input, args.input, args.measure, args.threads, args.commits, args.slow_at, args.by), flush=True)
        opts = search.Options(scenario=str(scenario), good=shas[0], bad=shas[-1], repo=str(repo),
                              results_dir=str(Path(tmp) / "results"), seed=args.seed)
        started = time.perf_counter()
        outcome = search.bisect(opts, sys.stdout)        # each step as it is judged
        minutes = (time.perf_counter() - started) / 60
    right = (outcome.culprit is not None and outcome.culprit.label == shas[args.slow_at]
             and len(outcome.found) == 1 and outcome.found[0].isolated and outcome.found[0].confirmed)
    ok = right and minutes < args.minutes
    print("%s: %s in %.1f minutes (target: the slowing commit, under %g minutes)"
          % ("PASS" if ok else "FAIL", "named the slowing commit" if right else "did NOT name the slowing commit",
             minutes, args.minutes))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
