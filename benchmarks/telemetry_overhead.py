"""How much does runner.py's telemetry sampling cost the trial it watches?

Runs the same child under runner.py's sampler with sampling off, at 1 s, and at 1 s with the
tree's PSS read at every sample (what the sampler did before it spaced those reads),
interleaved round by round in a rotating order, so that drift, other jobs and whatever the
previous child left behind hit every setting alike. The child holds `--resident-mb` of
memory, as a trainer does, and keeps every core busy with a loop that also allocates and
frees large blocks (each one a memory-map change, which a PSS read holds up). It prints the
child's wall time per setting and the sampler's own CPU time per sample.

    python benchmarks/telemetry_overhead.py [--rounds 6] [--work 2.0] [--resident-mb 3000]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import runner  # noqa: E402

# the child: RESIDENT MiB touched, then one worker per core (forked, sharing those pages), each
# running LOOPS steps of arithmetic with an 8 MiB allocation every 2000 steps; prints the
# slowest worker's seconds
CHILD = """
import os, sys, time
resident = b"\\x01" * (%d << 20)
loops, workers, out = %d, %d, %d
pids = []
for _ in range(workers - 1):
    pid = os.fork()
    if pid == 0:
        break
    pids.append(pid)
t = time.perf_counter()
n = 0
while n < loops:
    n += 1
    if n %% 2000 == 0:
        block = bytearray(8 << 20)
elapsed = time.perf_counter() - t
if len(pids) < workers - 1:
    os.write(out, b"%%f\\n" %% elapsed)
    os._exit(0)
for pid in pids:
    os.waitpid(pid, 0)
os.write(out, b"%%f\\n" %% elapsed)
"""


def one(setting, args, folder):
    """The slowest worker's seconds, and the sampler's CPU ms per sample (None when off)."""
    read, write = os.pipe()
    loops = int(args.work * 1.5e7)
    child = subprocess.Popen([sys.executable, "-c", CHILD % (args.resident_mb, loops, os.cpu_count() or 1, write)],
                             pass_fds=(write,), start_new_session=True)
    os.close(write)
    sampler = None
    if setting != "off":
        runner.Sampler.PSS_BUDGET = 0.01 if setting == "1 s" else 1e9
        sampler = runner.Sampler(os.path.join(folder, "t.jsonl"), 1.0, None, os.cpu_count())
        sampler.start(child.pid)
    with os.fdopen(read) as f:
        times = [float(line) for line in f]
    child.wait()
    cost = None
    if sampler is not None:
        sampler.stop()
        summary = sampler.summary()
        cost = (summary["sampler_ms_per_sample"], summary["pss_samples"], summary["samples"])
    return max(times), cost


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--work", type=float, default=2.0, help="seconds of child work, roughly")
    p.add_argument("--resident-mb", type=int, default=3000, help="memory the child holds")
    args = p.parse_args()
    settings = ("off", "1 s", "1 s, PSS every sample")
    times = {s: [] for s in settings}
    costs = {s: [] for s in settings}
    with tempfile.TemporaryDirectory() as folder:
        for r in range(args.rounds):
            for s in settings[r % 3:] + settings[:r % 3]:     # each setting takes each place in turn
                child_s, cost = one(s, args, folder)
                times[s].append(child_s)
                if cost is not None:
                    costs[s].append(cost)
    base = statistics.median(times["off"])
    print("child: %d MiB resident, %d workers; %d rounds" % (args.resident_mb, os.cpu_count() or 1, args.rounds))
    print("%-22s  %13s  %7s  %s" % ("sampling", "child median s", "vs off", "sampler CPU ms/sample, PSS reads/samples"))
    for s in settings:
        med = statistics.median(times[s])
        if costs[s]:
            cost = "%.2f, %d/%d" % (statistics.median(c[0] for c in costs[s]), sum(c[1] for c in costs[s]),
                                    sum(c[2] for c in costs[s]))
        else:
            cost = "-"
        print("%-22s  %13.3f  %+6.2f%%  %s" % (s, med, 100 * (med / base - 1), cost))


if __name__ == "__main__":
    main()
