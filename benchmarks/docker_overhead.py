"""What a container costs a trial: the same calibration cell on the local and docker backends.

Runs one calibration scenario (50 ms iterations, a few repeats) through `detbench run` with
`--backend local` and `--backend docker`, alternating backends round by round so drift and
load hit both alike, and reports per backend:

  wall per trial     the whole `detbench run` wall time divided by its trials, minus the
                     workload's own time per trial (detbench's own start-up is spread over
                     the trials alike on both backends)
  throughput         the reported images/s (the truth is 40.0): a container must not change it

Needs a Docker engine and the `calibrate` image (`detbench image build calibrate`).

    python -m benchmarks.docker_overhead            # 3 rounds of 3 trials per backend
    python -m benchmarks.docker_overhead --quick
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
SCENARIO = """\
name: docker-overhead
matrix: {{framework: [calibrate], model: [retinanet]}}
batch_per_gpu: 2
input_size: [320, 320]
warmup: 2
measure: {measure}
repeats: {trials}
timeout_s: 120
calibrate: {{iteration_ms: 50, data_ms: 5}}
"""


def one_run(backend, scenario, results):
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "harness.cli", "run", "--scenario", scenario, "--backend", backend,
                    "--results", results], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - start
    from harness.results.store import Store

    store = Store(results, create=False)
    try:
        trials = store.read_trials(store.read_run("latest").id)
    finally:
        store.close()
    return wall, [t.throughput for t in trials]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--measure", type=int, default=20)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.trials, args.measure = 1, 2, 5
    workload_s = (2 + args.measure) * 0.050
    with tempfile.TemporaryDirectory() as tmp:
        scenario = os.path.join(tmp, "s.yaml")
        with open(scenario, "w") as f:
            f.write(SCENARIO.format(measure=args.measure, trials=args.trials))
        per_trial = {"local": [], "docker": []}
        throughput = {"local": [], "docker": []}
        for r in range(args.rounds):
            for backend in ("local", "docker") if r % 2 == 0 else ("docker", "local"):
                wall, figures = one_run(backend, scenario, os.path.join(tmp, "results-" + backend))
                per_trial[backend].append(wall / args.trials - workload_s)
                throughput[backend] += figures
    print("backend  added wall per trial (s, median of %d runs)  throughput images/s (median, truth 40.0)"
          % args.rounds)
    for backend in ("local", "docker"):
        print("%-7s  %42.3f  %10.3f" % (backend, statistics.median(per_trial[backend]),
                                        statistics.median(throughput[backend])))
    extra = statistics.median(per_trial["docker"]) - statistics.median(per_trial["local"])
    print("a container adds %.3f s per trial over the local backend" % extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
