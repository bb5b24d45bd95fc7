"""Window figures of generated logs against their truth, and the command line's scrape speed.

Writes N logs (default 10,000) in every format `detbench scrape --list-formats` names, round
robin, each from known per-iteration times in its framework's printed format
(benchmarks/loggen), asks the library a few random windows of each, and judges every answer
(benchmarks/loggen/judge.py): a figure must lie within its stated error bound of the truth,
`exact` only within 0.1%, take in at most half its window's length outside it, and give a data
time beside a bounded figure only with a bound; images per iteration the log's own figures
contradict (asked now and then) give no figure; a refusal's reason must be true of the log. Per
format it prints the largest |figure - truth| / bound, the refusals by reason and every
violation with what reproduces it (`--replay FORMAT:SEED`). Then it times `detbench scrape` on a 50 MB log of each
text format of benchmarks/scrape_speed.py (lines per second through the command line, every
record printed to /dev/null). Exits 1 on any violation.

    python benchmarks/scrape_truth.py                         # 10,000 logs, 2 processes
    python benchmarks/scrape_truth.py --logs 240 --no-speed   # a quick sample
    python benchmarks/scrape_truth.py --replay detectron2:1234 --keep /tmp/log.txt
"""
import argparse
import collections
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks import loggen, scrape_speed  # noqa: E402
from benchmarks.loggen import interface, judge, windows  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = sorted(loggen.GENERATORS)


def chooser(seed):
    return loggen.RandomChooser(random.Random(seed))


def one_log(job):
    """Generate log `seed` of `fmt`, ask `count` windows, judge them: a summary per window."""
    fmt, seed, count, max_iters = job
    choose = chooser(seed)
    log = loggen.generate(fmt, choose, max_iters=max_iters)
    out = []
    with tempfile.TemporaryDirectory(prefix="detbench-truth-") as folder:
        path = log.write(os.path.join(folder, "train.log"))
        reader = interface.LibraryReader(path, fmt)
        for k in range(count):
            req = windows.request(choose, log, k)
            try:
                answer = reader.ask(req)
                verdict = judge.judge(log, req, answer, reader.ask)
            except Exception as exc:      # the library raised: a violation of its own
                verdict = judge.Verdict(refused=True, reason="raised",
                                        problems=["raised %s: %s" % (type(exc).__name__, exc)])
                answer = interface.Answer(None, str(exc))
            out.append(dict(window=req.window, options=req.as_dict(), refused=verdict.refused,
                            reason=verdict.reason, ratio=verdict.ratio, error=verdict.error, exact=verdict.exact,
                            problems=verdict.problems, notes=verdict.notes,
                            answer=answer.figure if answer.figure is not None else answer.message))
    return fmt, seed, log.variant, out


class Tally:
    def __init__(self):
        self.logs = self.windows = self.figures = self.exact = 0
        self.max_ratio = None             # (ratio, seed, window)
        self.max_unbounded = None         # (relative error, seed, window) of figures without a bound
        self.reasons = collections.Counter()
        self.notes = collections.Counter()
        self.violations = []              # (seed, variant, window summary)
        self.kinds = collections.Counter()

    def add(self, seed, variant, results):
        self.logs += 1
        for r in results:
            self.windows += 1
            if r["refused"]:
                self.reasons[r["reason"]] += 1
            else:
                self.figures += 1
                self.exact += bool(r["exact"])
                if r["ratio"] is not None and (self.max_ratio is None or r["ratio"] > self.max_ratio[0]):
                    self.max_ratio = (r["ratio"], seed, r["window"])
                if r["ratio"] is None and r["error"] is not None and (
                        self.max_unbounded is None or r["error"] > self.max_unbounded[0]):
                    self.max_unbounded = (r["error"], seed, r["window"])
            for note in r["notes"]:
                self.notes[note.split(":")[0].split(" (")[0]] += 1
            for problem in r["problems"]:
                self.kinds[_kind(problem)] += 1
            if r["problems"]:
                self.violations.append((seed, variant, r))


def _kind(problem):
    """A violation's class, for counting: its words before the first number or colon."""
    words = []
    for word in problem.split():
        if any(ch.isdigit() for ch in word) or word.endswith(":"):
            break
        words.append(word)
    return " ".join(words[:8]) or problem[:40]


def run_truth(args):
    formats = list(args.formats)
    jobs = [(formats[i % len(formats)], args.seed * 1000003 + i, args.windows, args.max_iters)
            for i in range(args.logs)]
    tallies = {fmt: Tally() for fmt in formats}
    started = time.perf_counter()
    if args.jobs > 1:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            results = pool.imap_unordered(one_log, jobs, chunksize=4)
            _collect(results, tallies, len(jobs), started)
    else:
        _collect(map(one_log, jobs), tallies, len(jobs), started)
    elapsed = time.perf_counter() - started
    print("\n%d logs, %d windows in %.0f s" % (args.logs, sum(t.windows for t in tallies.values()), elapsed))
    print("%-19s %5s %6s %6s %6s %12s %-26s %s" % ("format", "logs", "asked", "figs", "exact", "max err/bound",
                                                   "(seed, window)", "refusals by reason"))
    bad = 0
    for fmt in formats:
        t = tallies[fmt]
        ratio = "%.3f" % t.max_ratio[0] if t.max_ratio else "-"
        where = "(%d, %s)" % (t.max_ratio[1], "..".join(map(str, t.max_ratio[2]))) if t.max_ratio else ""
        print("%-19s %5d %6d %6d %6d %12s %-26s %s" % (fmt, t.logs, t.windows, t.figures, t.exact, ratio, where,
                                                      " ".join("%s:%d" % kv for kv in sorted(t.reasons.items()))))
        if t.max_unbounded:
            print("%-19s   figures without a bound: largest error %.3g%% (seed %d, window %s)" % (
                "", 100 * t.max_unbounded[0], t.max_unbounded[1], "..".join(map(str, t.max_unbounded[2]))))
        for note, n in sorted(t.notes.items()):
            print("%-19s   note x%d: %s" % ("", n, note))
        for kind, n in sorted(t.kinds.items(), key=lambda kv: -kv[1]):
            print("%-19s   VIOLATION x%d: %s" % ("", n, kind))
        bad += len(t.violations)
    if bad:
        print("\nviolations (replay one with --replay FORMAT:SEED):")
        for fmt in formats:
            for seed, variant, r in tallies[fmt].violations[:args.show]:
                print("  %s:%d  %s\n    window %s %s -> %s" % (fmt, seed, variant, "..".join(map(str, r["window"])),
                                                            r["options"], _short(r["answer"])))
                for p in r["problems"]:
                    print("      " + p)
    print("scrape_truth: %d violation(s) in %d windows: %s" % (
        bad, sum(t.windows for t in tallies.values()), "FAIL" if bad else "PASS"))
    return bad


def _collect(results, tallies, total, started):
    done = 0
    for fmt, seed, variant, out in results:
        tallies[fmt].add(seed, variant, out)
        done += 1
        if done % 500 == 0:
            print("  %d/%d logs (%.0f s)" % (done, total, time.perf_counter() - started), flush=True)


def _short(answer):
    text = str(answer)
    return text if len(text) < 400 else text[:400] + "..."


def replay(spec, windows_per_log, max_iters, keep):
    fmt, seed = spec.rsplit(":", 1)
    fmt, seed, variant, out = one_log((fmt, int(seed), windows_per_log, max_iters))
    print("%s:%s  %s" % (fmt, seed, variant))
    if keep:
        loggen.generate(fmt, chooser(seed), max_iters=max_iters).write(keep)
        print("log written to %s" % keep)
    for r in out:
        print("window %s %s\n  -> %s" % ("..".join(map(str, r["window"])), r["options"], _short(r["answer"])))
        for p in r["problems"]:
            print("  VIOLATION: " + p)
        for n in r["notes"]:
            print("  note: " + n)
    return 1 if any(r["problems"] for r in out) else 0


def cli_speed(mb, formats, folder):
    """Seconds and lines/s of `detbench scrape LOG --format F` on a log of about `mb` MB
    (benchmarks/scrape_speed.py's lines: random figures, not running means, so no window is
    asked of them), every record printed as a JSON line to /dev/null."""
    print("\n`detbench scrape` on a %.0f MB log, through the command line (load average %.2f):" % (
        mb, os.getloadavg()[0]))
    print("%-19s %9s %8s %10s %s" % ("format", "lines", "seconds", "lines/s", "exit"))
    for name in formats:
        path = os.path.join(folder, name + ".log")
        lines = scrape_speed.write_log(path, scrape_speed.FORMATS[name][1], mb)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "scrape", path, "--format", name], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, universal_newlines=True)
        elapsed = time.perf_counter() - start
        os.remove(path)
        print("%-19s %9d %8.2f %10.0f %s%s" % (name, lines, elapsed, lines / elapsed, proc.returncode,
                                               "" if proc.returncode == 0 else "  " + proc.stderr.strip()[:200]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=int, default=10000, help="generated logs, round robin over the formats")
    parser.add_argument("--windows", type=int, default=4, help="windows asked of each log")
    parser.add_argument("--formats", nargs="+", default=FORMATS, choices=FORMATS)
    parser.add_argument("--seed", type=int, default=0, help="first seed; log i has seed SEED * 1000003 + i")
    parser.add_argument("--max-iters", type=int, default=200000, help="longest training drawn")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--show", type=int, default=5, help="violations shown per format")
    parser.add_argument("--speed-mb", type=float, default=50.0, help="size of the log the command line reads")
    parser.add_argument("--speed-formats", nargs="+", default=list(scrape_speed.FORMATS),
                        choices=list(scrape_speed.FORMATS))
    parser.add_argument("--no-speed", action="store_true", help="skip the command line's speed")
    parser.add_argument("--replay", metavar="FORMAT:SEED", help="one log's windows and verdicts, in full")
    parser.add_argument("--keep", metavar="PATH", help="with --replay: write that log here")
    args = parser.parse_args(argv)
    if args.replay:
        return replay(args.replay, args.windows, args.max_iters, args.keep)
    bad = run_truth(args) if args.logs else 0
    if not args.no_speed:
        with tempfile.TemporaryDirectory(prefix="detbench-speed-") as folder:
            cli_speed(args.speed_mb, args.speed_formats, folder)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
