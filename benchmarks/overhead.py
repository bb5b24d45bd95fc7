"""What the harness costs: the calibration workload bare, through runner.py, through detbench.

Three ways to run the same workload, interleaved round by round (bare, runner, detbench,
bare, runner, detbench, ...) so drift and load hit all three alike:

  bare      python -m harness.workloads.calibrate, stdout to a pipe this script drains
  runner    python runner.py --trial-dir D -- (the same command)
  detbench  python -m harness.cli run --scenario S (one cell, TRIALS repeats)

Figures (medians over rounds):
  per-iteration overhead  CPU seconds the harness itself spent (children CPU minus the
                          bare run's) per iteration, as a share of the iteration time; and
                          the change of the workload's own mean iteration time vs bare
  start-up                launch -> first iteration line, minus bare's
  added wall per trial    wall time per trial minus bare's wall time

    python -m benchmarks.overhead            # 10 ms x 300 iterations, 100 lines each, 3 rounds
    python -m benchmarks.overhead --quick    # smoke test
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
PREFIX = b"DETBENCH_ITER "
ITER_TARGET = 0.001       # 0.1 % of the iteration
STARTUP_TARGET_S = 0.3

SCENARIO = """\
name: overhead
matrix: {{framework: [calibrate], model: [retinanet], precision: [fp32], platform: [local]}}
batch_per_gpu: 2
input_size: [320, 320]
warmup: 5
measure: {measure}
repeats: {trials}
timeout_s: 600
calibrate: {{iteration_ms: {ms}, data_ms: {data_ms}, lines_per_iteration: {lines}}}
"""


def workload_argv(args):
    return [sys.executable, "-m", "harness.workloads.calibrate", "--iterations", str(args.iterations),
            "--iteration-ms", str(args.ms), "--data-ms", str(args.ms / 10.0), "--images", "2",
            "--lines-per-iteration", str(args.lines)]


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def mean_iteration(lines):
    """Mean of the workload's own time_s over iterations 2.. (from ITER lines)."""
    times = []
    for line in lines:
        if line.startswith(PREFIX):
            obj = json.loads(line[len(PREFIX):])
            if obj["iteration"] > 1:
                times.append(obj["time_s"])
    return sum(times) / len(times)


def run_bare(args, _workdir, _k):
    cpu0 = children_cpu()
    t0 = time.monotonic()
    proc = subprocess.Popen(workload_argv(args), stdout=subprocess.PIPE, env=env(), cwd=ROOT)
    first = None
    buf = []
    fd = proc.stdout.fileno()
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        if first is None and PREFIX in chunk:
            first = time.monotonic()
        buf.append(chunk)
    proc.wait()
    wall = time.monotonic() - t0
    lines = b"".join(buf).split(b"\n")
    return dict(startup=first - t0, wall=wall, cpu=children_cpu() - cpu0, trials=1,
                iteration=mean_iteration(lines))


def _first_iter_time(trial_dir):
    with open(os.path.join(trial_dir, "log.txt"), "rb") as log, \
            open(os.path.join(trial_dir, "log.times")) as times:
        lines = log.read().split(b"\n")
        stamps = [float(l.split("\t")[0]) for l in times]
    for line, stamp in zip(lines, stamps):
        if line.startswith(PREFIX):
            return stamp, lines
    raise RuntimeError("no iteration line in %s" % trial_dir)


def run_runner(args, workdir, k):
    trial_dir = os.path.join(workdir, "runner-%s" % k)
    cpu0 = children_cpu()
    t0 = time.monotonic()
    subprocess.run([sys.executable, os.path.join(ROOT, "runner.py"), "--trial-dir", trial_dir, "--"]
                   + workload_argv(args), env=env(), cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    first, lines = _first_iter_time(trial_dir)
    return dict(startup=first - t0, wall=wall, cpu=children_cpu() - cpu0, trials=1,
                iteration=mean_iteration(lines))


def run_detbench(args, workdir, k):
    path = os.path.join(workdir, "overhead.yaml")
    with open(path, "w") as f:
        f.write(SCENARIO.format(measure=args.iterations - 5, trials=args.trials, ms=args.ms,
                                data_ms=args.ms / 10.0, lines=args.lines))
    results = os.path.join(workdir, "results-%d" % k)
    cpu0 = children_cpu()
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "harness.cli", "run", "--scenario", path,
                    "--results", results], env=env(), cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    from harness.results.store import Store

    store = Store(results, create=False)
    try:
        rows = [(t.id, t.started, t.ended) for t in store.read_trials(store.read_run("latest").id)]
    finally:
        store.close()
    starts, walls, first_lines = [], [], None
    for i, (trial_id, started, ended) in enumerate(rows):
        trial_dir = os.path.join(results, "trials", trial_id)
        first_mono, lines = _first_iter_time(trial_dir)
        first_lines = first_lines or lines
        with open(os.path.join(trial_dir, "trial.json")) as f:
            rec = json.load(f)
        # the runner stamps each line with monotonic and wall time: map back to wall time
        starts.append(first_mono - rec["start_mono"] + rec["start_wall"] - started)
        walls.append((rows[i + 1][1] if i + 1 < len(rows) else ended) - started)
    # per trial, as the run goes: start-up from the trial's start to its first
    # iteration line, and wall from one trial's start to the next's (ingest included);
    # the command's own start-up (Python, imports, scenario, store) is `cli` below
    return dict(startup=statistics.median(starts), wall=statistics.median(walls),
                cpu=(children_cpu() - cpu0) / len(rows), trials=1,
                iteration=mean_iteration(first_lines), cli=wall - sum(walls))


def run_runner_short(args, workdir, k):
    short = argparse.Namespace(**dict(vars(args), iterations=2))
    return run_runner(short, workdir, "short-%d" % k)


def run_bare_short(args, workdir, k):
    return run_bare(argparse.Namespace(**dict(vars(args), iterations=2)), workdir, k)


MODES = (("bare", run_bare), ("runner", run_runner), ("detbench", run_detbench))
SHORT = (("bare", run_bare_short), ("runner", run_runner_short))


def bare_cpu(med):
    return med["bare"]["cpu"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ms", type=float, default=10.0, help="iteration time")
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--lines", type=int, default=100, help="extra lines per iteration")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=3, help="trials per detbench run")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.iterations, args.rounds, args.trials = 30, 1, 2
    results = {name: [] for name, _ in MODES + SHORT}
    shorts = {}
    with tempfile.TemporaryDirectory(prefix="detbench-overhead-") as workdir:
        for k in range(args.rounds):
            for name, fn in MODES:
                results[name].append(fn(args, workdir, k))
            for name, fn in SHORT:
                shorts.setdefault(name, []).append(fn(args, workdir, k)["cpu"])
    med = {name: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
           for name, rs in results.items() if rs}
    # runner.py's CPU per iteration: its extra CPU on the long run minus on a 2-iteration run
    fixed = statistics.median(shorts["runner"]) - statistics.median(shorts["bare"])
    pump_cpu = (med["runner"]["cpu"] - bare_cpu(med) - fixed) / (args.iterations - 2)
    bare = med["bare"]
    period = args.ms / 1000.0
    print("overhead: %g ms iterations x %d, %d extra lines each, %d rounds (medians; per trial)"
          % (args.ms, args.iterations, args.lines, args.rounds))
    print("%-9s %8s %10s %11s %11s %13s %13s %12s" % (
        "mode", "wall s", "cpu s", "startup s", "+startup s", "+wall/trial s", "harness cpu %",
        "iter delta %"))
    ok = True
    for name, _ in MODES:
        m = med[name]
        cpu_share = (pump_cpu / period if name == "runner"
                     else max(0.0, m["cpu"] - bare["cpu"]) / (args.iterations * period))
        iter_delta = (m["iteration"] - bare["iteration"]) / period
        add_start = m["startup"] - bare["startup"]
        add_wall = m["wall"] - bare["wall"]
        print("%-9s %8.3f %10.3f %11.3f %11.3f %13.3f %12.3f%% %11.4f%%" % (
            name, m["wall"], m["cpu"], m["startup"], add_start, add_wall, cpu_share * 100,
            iter_delta * 100))
        if name != "bare":
            ok &= (abs(iter_delta) < ITER_TARGET and add_start < STARTUP_TARGET_S
                   and add_wall < STARTUP_TARGET_S)
            if name == "runner":
                ok &= cpu_share < ITER_TARGET
    print("runner.py CPU per iteration (pump only, start-up removed): %.1f us = %.4f%% of %g ms;"
          " detbench command start-up (once per run, not per trial): %.3f s"
          % (pump_cpu * 1e6, pump_cpu / period * 100, args.ms, med["detbench"]["cli"]))
    print("overhead: %s (targets: workload iteration time within %.1f%% of bare and runner CPU "
          "under %.1f%% of the iterations; start-up and wall added per trial under %.1f s)"
          % ("PASS" if ok else "FAIL", ITER_TARGET * 100, ITER_TARGET * 100, STARTUP_TARGET_S))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
