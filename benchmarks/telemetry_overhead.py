"""How much does runner.py's telemetry sampling cost the trial it watches?

Runs the same CPU-bound child under runner.py with sampling off, at 1 s and at 0.1 s,
interleaved round by round (so drift and other jobs hit every setting alike), and prints
the child's wall time per setting and the sampler's own CPU time per sample.

    python benchmarks/telemetry_overhead.py [--rounds 5] [--work 2.0]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = "import time\nn = 0\nt = time.perf_counter()\nwhile n < %d: n += 1\nprint(time.perf_counter() - t)\n"


def one(interval, loops, folder):
    trial = Path(folder) / ("t%s" % interval)
    subprocess.run([sys.executable, str(ROOT / "runner.py"), "--trial-dir", str(trial),
                    "--sample-interval", str(interval), "--", sys.executable, "-c", CHILD % loops],
                   check=True, capture_output=True)
    record = json.loads((trial / "trial.json").read_text())
    child_s = float((trial / "log.txt").read_text().split()[0])
    return child_s, record.get("telemetry") or {}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--work", type=float, default=2.0, help="seconds of child work, roughly")
    args = p.parse_args()
    loops = int(args.work * 2.5e7)
    settings = (0, 1.0, 0.1)
    times = {s: [] for s in settings}
    costs = {s: [] for s in settings}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.rounds):
            for s in settings:
                child_s, tel = one(s, loops, folder)
                times[s].append(child_s)
                if tel.get("sampler_ms_per_sample") is not None:
                    costs[s].append(tel["sampler_ms_per_sample"])
    base = statistics.median(times[0])
    print("interval  child median s  vs off   sampler CPU ms/sample (median)")
    for s in settings:
        med = statistics.median(times[s])
        cost = "%.2f" % statistics.median(costs[s]) if costs[s] else "-"
        print("%-8s  %13.3f  %+6.2f%%  %s" % (s or "off", med, 100 * (med / base - 1), cost))


if __name__ == "__main__":
    main()
