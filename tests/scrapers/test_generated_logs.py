"""Generated logs prove the window figures of `detbench scrape` and `detbench import`.

For every format `detbench scrape --list-formats` names, benchmarks/loggen writes logs the way
that framework writes them (its period, its averaging, its rounding; crashes and resumes,
warnings and evaluation output in between) from known per-iteration times. For random
windows of such logs, the answer is either a figure within its stated error bound of the
true mean of the iterations its window names, in the run it names, and `exact` only where
that bound is at most 0.1% of it and the window is the one asked for; or a refusal whose
reason is true of the log. Never a figure outside its bound.

Most examples ask the library (harness/measure/logfigure.py); a few ask the command line.
In CI (or with HYPOTHESIS_PROFILE=generated-logs-ci) the examples are derandomized.
`python benchmarks/scrape_truth.py` runs 10,000 such logs.
"""
import os
import random
import tempfile

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, event, given, note, settings
from hypothesis import strategies as st

from benchmarks import loggen
from benchmarks.loggen import interface, judge, windows
from harness.cli import main
from harness.measure import scrapers
from harness.measure.scrapers import common

# CI: the same examples every run, and no shrinking (a failure prints its log's draws and
# windows; shrinking a log of 200,000 iterations can take minutes)
settings.register_profile("generated-logs-ci", derandomize=True, deadline=None, print_blob=True,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate],
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("generated-logs-dev", deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CI = bool(os.environ.get("CI") or os.environ.get("DETBENCH_REQUIRE_SERVICES")
          or os.environ.get("HYPOTHESIS_PROFILE") == "generated-logs-ci")
PROFILE = settings.get_profile("generated-logs-ci" if CI else "generated-logs-dev")

FORMATS = sorted(loggen.GENERATORS)
EXAMPLES = 100           # logs per format; each is asked up to WINDOWS windows
WINDOWS = 6
# trainings of up to 200,000 iterations, with at most about MAX_RECORDS records in the test
# (a log of one record every iteration or two stays short; the benchmark has no such limit)
MAX_ITERS = 200000
MAX_RECORDS = 2000


class Drawn(loggen.Chooser):
    """Every choice of a generator drawn by hypothesis, so a failing log shrinks."""

    def __init__(self, data):
        self.data = data

    def integer(self, name, lo, hi):
        return self.data.draw(st.integers(lo, hi), label=name)


def ask_windows(log, choose, count, folder):
    """(request, answer, verdict) for `count` windows of `log`, through the library."""
    path = log.write(os.path.join(folder, "train.log"))
    reader = interface.LibraryReader(path, log.fmt)
    out = []
    for k in range(count):
        req = windows.request(choose, log, k)
        answer = reader.ask(req)
        out.append((req, answer, judge.judge(log, req, answer, reader.ask)))
    return out


def explain(log, results):
    lines = ["log: %s (%d lines, runs %s, faults %s)" % (
        log.variant, len(log.lines), ["%d..%d" % (r.first, r.last) for r in log.runs], log.faults)]
    for req, answer, verdict in results:
        if verdict.problems:
            lines.append("  window %s %s -> %s" % (req.window, req.as_dict(), answer.figure or answer.message))
            lines += ["    " + p for p in verdict.problems]
    return "\n".join(lines)


def test_every_listed_format_has_a_generator():
    out = CliRunner().invoke(main, ["scrape", "--list-formats"])
    assert out.exit_code == 0, out.output
    listed = {line.split()[0] for line in out.output.splitlines() if line.strip()}
    assert listed == set(scrapers.FORMATS)
    assert set(loggen.GENERATORS) == listed


@pytest.mark.parametrize("fmt", FORMATS)
def test_generated_records_carry_their_formats_signature(fmt):
    """The generators write what each framework writes: the record lines are the ones the
    format's own signature recognises, and the log is detected as that format."""
    logs = (loggen.generate(fmt, loggen.RandomChooser(random.Random(seed)), max_iters=5000, max_records=500)
            for seed in range(40))
    logs = [log for log in logs if any(r.records for r in log.runs)][:4]
    assert len(logs) == 4
    for log in logs:
        lines = {line for r in log.runs for line in r.record_lines}
        for line in lines:
            assert scrapers.line_format(common.clean_line(log.lines[line - 1])) == fmt, (log.variant,
                                                                                        log.lines[line - 1])
        with tempfile.TemporaryDirectory() as folder:
            assert scrapers.detect(log.write(os.path.join(folder, "train.log"))) == [fmt], log.variant


@pytest.mark.parametrize("fmt", FORMATS)
@settings(PROFILE, max_examples=EXAMPLES)
@given(data=st.data())
def test_a_window_figure_is_within_its_bound_or_refused_for_a_true_reason(fmt, data):
    choose = Drawn(data)
    log = loggen.generate(fmt, choose, max_iters=MAX_ITERS, max_records=MAX_RECORDS)
    count = data.draw(st.integers(1, WINDOWS), label="windows")
    with tempfile.TemporaryDirectory() as folder:
        results = ask_windows(log, choose, count, folder)
    for _req, _answer, verdict in results:
        event("refused: %s" % verdict.reason if verdict.refused else
              "figure, exact" if verdict.exact else "figure")
    note(explain(log, results))
    assert all(v.ok for _, _, v in results), explain(log, results)


@pytest.mark.parametrize("prefix", ["/tmp/tmpmixq1z2/train.log: ", "error: /tmp/tmpspan_01/train.log: ", ""])
def test_a_refusal_is_judged_by_its_reason_not_by_the_letters_of_its_log_s_path(prefix):
    # a temporary folder's name once held "mix": the judge read a coverage refusal as one about
    # mixing runs and called it false, and the example passed when replayed in another folder
    reason = "no record of the log lies inside the window 25967..25969 (in run 3 of the log's 3)"
    assert judge.classify(prefix + reason) == "coverage"
    assert judge.classify(prefix + "a figure never mixes runs: pick one with --run N") == "mixes-runs"


@pytest.mark.parametrize("fmt", ["detectron2", "maskrcnn-benchmark", "detectron", "mmdet-v2"])
@settings(PROFILE, max_examples=3)
@given(data=st.data())
def test_windows_late_in_a_200000_iteration_run_keep_their_bound(fmt, data):
    """Running means over 200,000 iterations carry the rounding of both records through the
    difference: the figure states that bound and stays inside it."""
    log = loggen.generate(fmt, _Long(Drawn(data)), max_iters=200000)
    recs = log.runs[-1].records
    n = len(recs)
    late = int(n * 0.88)
    spans = [(recs[late] + 1, recs[min(n - 1, late + 50)]), (recs[late] + 1, recs[late + 1]),
             (recs[n // 2] + 1, recs[-1]), (1, recs[-1])]
    ipe = log.epoch_length if log.needs_epoch_length else None
    with tempfile.TemporaryDirectory() as folder:
        reader = interface.LibraryReader(log.write(os.path.join(folder, "train.log")), fmt)
        results = []
        for lo, hi in spans:
            req = windows.Request(lo - 1, hi - lo + 1, iters_per_epoch=ipe,
                                  images_per_iteration=log.images_per_iteration)
            answer = reader.ask(req)
            results.append((req, answer, judge.judge(log, req, answer, reader.ask)))
    assert all(v.ok for _, _, v in results), explain(log, results)


class _Long(loggen.Chooser):
    """Draws like `inner`, except a long training of a single run."""

    def __init__(self, inner):
        self.inner = inner

    def integer(self, name, lo, hi):
        if name in ("iters", "epochs"):
            return hi
        if name in ("period", "interval", "log_interval", "print_freq", "fault"):
            return lo                       # each format's usual logging period; no misplaced line
        if name in ("epoch_len", "steps_per_epoch"):       # long epochs: the top quarter of the log scale
            return self.inner.integer(name, max(lo, (3 * hi) // 4), hi)
        if name == "runs":
            return lo                       # one run
        return self.inner.integer(name, lo, hi)


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_command_line_answers_like_the_library(fmt):
    """`detbench scrape` as a user runs it: the last line is the library's figure, and a refusal
    is exit 2 with one line on stderr."""
    choose = loggen.RandomChooser(random.Random(FORMATS.index(fmt)))
    log = loggen.generate(fmt, choose, max_iters=MAX_ITERS, max_records=MAX_RECORDS)
    with tempfile.TemporaryDirectory() as folder:
        path = log.write(os.path.join(folder, "train.log"))
        req = windows.request(choose, log)
        by_cli = interface.ask_cli(path, fmt, req)
        by_lib = interface.LibraryReader(path, fmt).ask(req)
    verdict = judge.judge(log, req, by_cli)
    assert verdict.ok, explain(log, [(req, by_cli, verdict)])
    assert by_cli.refused == by_lib.refused, (by_cli, by_lib)
    if by_cli.refused:
        assert by_cli.exit_code == 2 and len(by_cli.stderr) == 1
    else:
        assert by_cli.figure == by_lib.figure
