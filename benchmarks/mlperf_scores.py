"""MLPerf Training scores: `detbench import` against mlperf_logging's own result summarizer.

For one round's folder (training_results_vX.Y, or any copy holding its
<submitter>/results/<system>/{maskrcnn,ssd}/ and <submitter>/systems/), the Mask R-CNN and
RetinaNet ("ssd") result folders and the system JSONs are copied to a scratch folder (the
summarizer writes into the folders it reads: scaling.json, summary.json), then, side by side,
each in a fresh child process whose own peak RSS is read back (os.wait4):

- `python -m mlperf_logging.result_summarizer "COPY/{*}" training X.Y.0 --csv ...`;
- `python -m harness.cli import COPY --round X.Y` into a fresh results folder (its progress bar
  on stderr);
- `detbench import` of the folder of the largest result file alone (its system's results of one
  benchmark, scored as in the round), and of the round twice over (every submitter's folder a
  second time under another name, hard links, so twice the files with the same largest one): the
  import holds one folder's results and one file's records at a time, so its memory is set by the
  largest file, not by how many there are.

Every score must equal the summarizer's to 0.001 min, and every system the summarizer scores
must have one (a mismatch names submitter, system, benchmark and both figures); the import's
wall time must be at most 1.2x the summarizer's, and its peak RSS on the round twice over at
most 5% above its peak on the round once. Exits 1 when any of these fails.

    python -m benchmarks.mlperf_scores /path/to/training_results_v2.0 --round 2.0
"""
import argparse
import csv
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from harness.results.mlperf_import import DETECTION  # noqa: E402
from harness.results.mlperf_store import MlperfTables  # noqa: E402
from harness.results.store import Store  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TOLERANCE_MIN = 0.001
SPEED_LIMIT = 1.2
MEMORY_SLACK = 1.05


def copy_round(src, dst):
    """Copy the detection results and every system JSON; return (result files, bytes, largest file)."""
    files = []
    for bench in sorted(set(DETECTION)):
        files += glob.glob(os.path.join(src, "*", "results", "*", bench, "*"))
    files += glob.glob(os.path.join(src, "*", "systems", "*.json"))
    for path in files:
        target = os.path.join(dst, os.path.relpath(path, src))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(path, target)
    results = [f for f in files if os.path.basename(f).startswith("result_")]
    return results, sum(os.path.getsize(f) for f in results), max(results, key=os.path.getsize)


def timed(argv, cwd, stdout):
    """Run argv; return (wall seconds, peak RSS MiB, exit code) of that child alone."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=stdout, env=dict(os.environ, PYTHONPATH=ROOT))
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_maxrss / 1024.0, proc.returncode


def official(csv_path):
    """{(submitter, system, nodes, accelerators, benchmark): minutes} from the summarizer's CSV (a
    submitter may give several node counts, or systems of other sizes, one system name)."""
    scores = {}
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            for bench in ("maskrcnn", "ssd"):
                if row.get(bench) not in (None, "", "nan"):
                    key = (row["submitter"], row["system"], str(int(row["number_of_nodes"] or 1)),
                           str(int(row["accelerators_count"] or 0)), bench)
                    scores[key] = float(row[bench])
    return scores


def ours(results_dir):
    store = Store(results_dir, create=False)
    try:
        # the summarizer names a system as its JSON does, and counts no accelerators on a CPU-only one
        return {
            (r["platform"]["submitter"], r["platform"]["system"], str(r["platform"]["nodes"]),
             "0" if r["platform"]["cpu_only"] else str(r["platform"]["devices"]), r["benchmark"]):
            r["score_minutes"] for r in MlperfTables(store).runs()
        }
    finally:
        store.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("round_dir")
    ap.add_argument("--round", required=True, help="X.Y")
    ap.add_argument("--keep", help="scratch folder to use and keep (default: a temporary one)")
    args = ap.parse_args(argv)
    scratch = args.keep or tempfile.mkdtemp(prefix="mlperf-scores-")
    copy = os.path.join(scratch, "v" + args.round)
    shutil.rmtree(copy, ignore_errors=True)
    results, size, largest = copy_round(args.round_dir, copy)
    print("round %s: %d result files, %.1f MB (largest %s, %.1f MB)" % (
        args.round, len(results), size / 1e6, os.path.relpath(largest, args.round_dir),
        os.path.getsize(largest) / 1e6), flush=True)
    summary_csv = os.path.join(scratch, "summary-%s.csv" % args.round)
    with open(os.path.join(scratch, "summarizer-%s.log" % args.round), "w") as log:
        s_wall, s_rss, s_rc = timed([sys.executable, "-m", "mlperf_logging.result_summarizer", copy + "/{*}",
                                     "training", args.round + ".0", "--csv", summary_csv], scratch, log)
    store_dir = os.path.join(scratch, "results-%s" % args.round)
    shutil.rmtree(store_dir, ignore_errors=True)
    with open(os.path.join(scratch, "import-%s.log" % args.round), "w") as log:
        d_wall, d_rss, d_rc = timed([sys.executable, "-m", "harness.cli", "import", copy, "--round", args.round,
                                     "--results", store_dir], scratch, log)
    one_dir = os.path.join(scratch, "results-largest")
    shutil.rmtree(one_dir, ignore_errors=True)
    largest_copy = os.path.dirname(os.path.join(copy, os.path.relpath(largest, args.round_dir)))
    with open(os.devnull, "w") as null:
        _, one_rss, _ = timed([sys.executable, "-m", "harness.cli", "import", largest_copy, "--round", args.round,
                               "--results", one_dir], scratch, null)
    double = os.path.join(scratch, "twice-%s" % args.round)
    shutil.rmtree(double, ignore_errors=True)
    for submitter in os.listdir(copy):
        for name in (submitter, submitter + "-again"):
            shutil.copytree(os.path.join(copy, submitter), os.path.join(double, name), copy_function=os.link)
    twice_dir = os.path.join(scratch, "results-twice")
    shutil.rmtree(twice_dir, ignore_errors=True)
    with open(os.devnull, "w") as null:
        _, twice_rss, _ = timed([sys.executable, "-m", "harness.cli", "import", double, "--round", args.round,
                                 "--results", twice_dir], scratch, null)
    failures = []
    if s_rc != 0 or d_rc != 0:
        failures.append("exit codes: summarizer %d, detbench import %d" % (s_rc, d_rc))
    theirs, mine = official(summary_csv), ours(store_dir)
    matched = 0
    for key in sorted(theirs):
        got = mine.get(key)
        if got is None or abs(got - theirs[key]) > TOLERANCE_MIN:
            failures.append("%s %s (%s nodes, %s accelerators) %s: summarizer %.3f min, detbench %s" % (
                key + (theirs[key], "none" if got is None else "%.3f min" % got)))
        else:
            matched += 1
    extra = sorted(k for k, v in mine.items() if v is not None and k not in theirs)
    for key in extra:
        failures.append("%s %s (%s nodes, %s accelerators) %s: detbench %.3f min, summarizer none"
                        % (key + (mine[key],)))
    print("scores: %d of %d equal the summarizer's to %.3f min; %d systems without a score in both" % (
        matched, len(theirs), TOLERANCE_MIN, sum(1 for k, v in mine.items() if v is None and k not in theirs)))
    ratio = d_wall / s_wall
    print("speed: summarizer %.1f s, detbench import %.1f s: %.2fx (limit %.1fx)" % (s_wall, d_wall, ratio,
                                                                                   SPEED_LIMIT))
    print("memory: summarizer %.0f MiB; detbench import %.0f MiB, of the round twice over %.0f MiB, of the "
          "largest file's folder alone %.0f MiB" % (s_rss, d_rss, twice_rss, one_rss))
    if ratio > SPEED_LIMIT:
        failures.append("import took %.2fx the summarizer's time" % ratio)
    if twice_rss > d_rss * MEMORY_SLACK:
        failures.append("import peak of the round twice over, %.0f MiB, is more than %.0f%% over the round's "
                        "%.0f MiB: memory grows with the files" % (twice_rss, (MEMORY_SLACK - 1) * 100, d_rss))
    for line in failures:
        print("FAIL " + line)
    print("PASS" if not failures else "FAIL")
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
