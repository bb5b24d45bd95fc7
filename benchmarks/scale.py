"""How detbench copes with a big store: report, compare and plan times at scale.

Builds a store of RUNS runs x 100 trials (20 cells x 5 repeats, cells spread over four
platforms) with ITERS iteration records per trial, written through harness.results.store's own
API, then times these commands as subprocesses (Python start-up included):

  detbench report --platform X          target < 2 s
  detbench compare --baseline A --candidate B   target < 2 s
  detbench run --dry-run  (a 1,000-cell scenario)  target < 1 s

    python -m benchmarks.scale             # 100 runs, 10,000 trials, 1,000,000 records
    python -m benchmarks.scale --quick     # 4 runs (smoke test)
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

PLATFORMS = ("P1", "P2", "local", "h100")
FRAMEWORKS = ("calibrate", "detbench-trainer", "mmdetection", "maskrcnn-benchmark", "detectron2")
MODELS = ("retinanet", "faster_rcnn", "mask_rcnn", "efficientdet_d0")
REPEATS = 5
TARGETS = {"report": 2.0, "compare": 2.0, "dry-run": 1.0}

DRY_RUN_SCENARIO = """\
name: thousand-cells
matrix:
  framework: [calibrate]
  model: [retinanet, faster_rcnn, mask_rcnn, efficientdet_d0]
  precision: [fp32]
  platform: [local]
  gpus: [{gpus}]
  nodes: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
repeats: 7
"""


def build_store(results, runs, iters, seed=0):
    """Fill a store through Store.create_run / finish_trial; returns the run ids."""
    from harness.measure.result import TrialResult
    from harness.results.store import Store

    rng = random.Random(seed)
    store = Store(results)
    ids = []
    host = {"cpu": {"model": "bench", "cores": 8}, "gpus": {"model": "V100", "count": 8}}
    for r in range(runs):
        run_id = "20240101-%06d-bench" % r
        platform = PLATFORMS[r % len(PLATFORMS)]
        precision = ("fp32", "fp16")[(r // len(PLATFORMS)) % 2]
        cells, trials = [], []
        for fw in FRAMEWORKS:
            for model in MODELS:
                key = "/".join((fw, model, precision, platform, "8", "1"))
                cells.append(dict(cell_key=key, framework=fw, model=model, precision=precision,
                                  platform=platform, gpus=8, nodes=1, batch_per_gpu=2,
                                  images_per_iteration=16, excluded=None))
        for rep in range(1, REPEATS + 1):
            for c in cells:
                trials.append((len(trials) + 1, c["cell_key"], rep, ["python", "train.py", c["model"]]))
        store.create_run(run_id, "bench", "bench.yaml", json.dumps({"name": "bench"}), "local",
                         host, cells, trials)
        # the newest run must sort last: created is the time of writing
        for seq, key, _rep, _argv in trials:
            base = 0.25 + 0.05 * (hash(key) % 7)
            times = [base * (1 + 0.02 * rng.random()) for _ in range(iters)]
            iterations = [(i + 1, t, t / 10, 1000.0 + i * t) for i, t in enumerate(times)]
            mean = sum(times[iters // 5:]) / len(times[iters // 5:])
            result = TrialResult(status="done", ended=time.time(), exit_code=0, throughput=16 / mean,
                                 observed=16 / mean * (1 + 0.001 * rng.random()), iteration_time_s=mean,
                                 data_time_s=mean / 10, exact=True, peak_mem_mb=3000.0, records=iters,
                                 scrape_errors=0, settings={"images_per_device": 2, "devices": 8},
                                 iterations=tuple(iterations))
            store.finish_trial("%s-%04d" % (run_id, seq), result)
        ids.append(run_id)
    store.close()
    return ids


def timed(argv, runs=3):
    """Best wall time of `detbench ARGV` as a subprocess (start-up included), and its output."""
    best, out = None, None
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "harness.cli"] + argv, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        elapsed = time.perf_counter() - t0
        best = elapsed if best is None else min(best, elapsed)
        out = proc
    return best, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--iters", type=int, default=100, help="iteration records per trial")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--keep", help="build (or reuse) the store in this folder")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.iters = 4, 10
    workdir = args.keep or tempfile.mkdtemp(prefix="detbench-scale-")
    results = os.path.join(workdir, "results")
    t0 = time.perf_counter()
    if os.path.exists(os.path.join(results, "detbench.sqlite")):
        from harness.results.store import Store

        store = Store(results, create=False)
        try:
            ids = [run.id for run in store.read_runs()]
        finally:
            store.close()
    else:
        ids = build_store(results, args.runs, args.iters)
    built = time.perf_counter() - t0
    trials = len(ids) * len(FRAMEWORKS) * len(MODELS) * REPEATS
    print("scale: store of %d runs, %d trials, %d iteration records (built in %.1f s)"
          % (len(ids), trials, trials * args.iters, built))
    scenario = os.path.join(workdir, "thousand.yaml")
    with open(scenario, "w") as f:
        f.write(DRY_RUN_SCENARIO.format(gpus=", ".join(str(g) for g in range(1, 26))))
    same_platform = [i for k, i in enumerate(ids) if k % len(PLATFORMS) == 0]
    checks = [
        ("report", ["report", "--platform", "P2", "--results", results]),
        ("compare", ["compare", "--baseline", same_platform[0], "--candidate", same_platform[-1],
                     "--results", results]),
        ("dry-run", ["run", "--dry-run", "--scenario", scenario, "--results", results]),
    ]
    ok = True
    print("%-9s %9s %9s %7s  %s" % ("command", "best s", "target s", "exit", "output"))
    for name, cmd in checks:
        elapsed, proc = timed(cmd)
        text = proc.stdout.decode("utf-8", "replace")
        lines = text.count("\n")
        good = elapsed < TARGETS[name] and proc.returncode in (0, 1)
        if name == "dry-run":
            good &= "1000 cells" in text
        ok &= good
        print("%-9s %9.3f %9.1f %7d  %d lines%s" % (name, elapsed, TARGETS[name], proc.returncode,
                                                   lines, "" if good else "  MISSED: " + text[-300:]))
    print("scale: %s" % ("PASS" if ok else "FAIL"))
    if not args.keep:
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
