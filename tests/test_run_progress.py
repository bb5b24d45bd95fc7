"""A run's progress (harness/run.py): plain lines for logs, a live status line on a terminal."""
import io
import json
import time

from harness import run
from harness.jsonlog import iter_line
from harness.measure.result import TrialResult

DONE = TrialResult(status="done", throughput=40.0, iteration_time_s=0.05)
FAILED = TrialResult(status="failed", reason="exit code 1: boom")


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_plain_lines_when_the_stream_is_not_a_terminal():
    out = io.StringIO()
    p = run.make_progress(2, out, iterations=10)
    assert isinstance(p, run.PlainProgress) and not isinstance(p, run.LiveProgress)
    p.start({"id": "t1"}, "calibrate/retinanet/fp32/local/1/1", 1, None)
    p.finish(DONE)
    p.start({"id": "t2"}, "calibrate/retinanet/fp32/local/1/1", 2, None)
    p.finish(FAILED)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[1/2] calibrate/retinanet/fp32/local/1/1 repeat 1 ... "
                               "40.00 images/s (50.0 ms/iter)  [eta ")
    assert lines[1].startswith("[2/2] calibrate/retinanet/fp32/local/1/1 repeat 2 ... "
                               "FAILED: exit code 1: boom  [eta 0s]")
    assert "\r" not in out.getvalue() and "\033" not in out.getvalue()


def test_dumb_terminal_gets_plain_lines(monkeypatch):
    monkeypatch.setenv("TERM", "dumb")
    assert type(run.make_progress(1, Terminal())) is run.PlainProgress


def test_log_tail_counts_lines_and_iterations_as_the_log_grows(tmp_path):
    log = tmp_path / "log.txt"
    tail = run.LogTail(str(log))
    assert tail.poll().lines == 0                      # no file yet
    with open(log, "w") as f:
        f.write("starting\n" + iter_line(1, 0.1, 0.0, 2) + "\n" + iter_line(2, 0.1, 0.0, 2)[:10])
    tail.poll()
    assert (tail.lines, tail.iterations) == (2, 1)     # the half-written line is not counted yet
    with open(log, "a") as f:
        f.write(iter_line(2, 0.1, 0.0, 2)[10:] + "\nchatter\n")
    tail.poll()
    assert (tail.lines, tail.iterations) == (4, 2)


def wait_for(predicate, timeout=5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_live_line_follows_the_trial_log_and_ends_with_the_plain_result(tmp_path):
    out = Terminal()
    p = run.make_progress(3, out, iterations=10)
    assert isinstance(p, run.LiveProgress)
    p.refresh_s = 0.01
    trial_dir = tmp_path / "t1"
    trial_dir.mkdir()
    p.start({"id": "t1"}, "calibrate/retinanet/fp32/local/1/1", 1, trial_dir)
    with open(trial_dir / "log.txt", "w") as f:
        for k in range(1, 4):
            f.write(iter_line(k, 0.05, 0.005, 2) + "\n")
    assert wait_for(lambda: "iter 3/10" in out.getvalue()), out.getvalue()
    assert "\r\033[K[1/3] calibrate/retinanet/fp32/local/1/1 repeat 1  iter 3/10" in out.getvalue()
    assert "eta " in out.getvalue().rsplit("\r", 1)[-1]    # an ETA from the iteration rate alone
    p.finish(DONE)
    assert out.getvalue().endswith("\r\033[K[1/3] calibrate/retinanet/fp32/local/1/1 repeat 1 ... "
                                   "40.00 images/s (50.0 ms/iter)  [eta %ds]\n" % round(p.eta()))
    assert p.thread is None
    written = out.getvalue()
    time.sleep(0.05)
    assert out.getvalue() == written                      # nothing redraws between trials


def test_live_line_counts_plain_lines_for_other_log_formats(tmp_path):
    out = Terminal()
    p = run.LiveProgress(1, out, iterations=None, refresh_s=0.01)
    (tmp_path / "log.txt").write_text("2019-05-01 INFO iter: 20 loss: 1.0\n" * 5)
    p.start({"id": "t"}, "mmdet/retinanet/fp32/local/1/1", 1, tmp_path)
    assert wait_for(lambda: "5 log lines" in out.getvalue()), out.getvalue()
    p.close()
    assert out.getvalue().endswith("\r\033[K") and p.thread is None


def test_run_prints_plain_progress_to_a_log(tmp_path, write_scenario):
    from click.testing import CliRunner

    from harness.cli import main

    out = CliRunner().invoke(main, ["run", "--scenario", str(write_scenario()), "--results", str(tmp_path / "r")])
    assert out.exit_code == 0, out.output
    lines = [l for l in out.output.splitlines() if l.startswith("[")]
    assert [l.split(" ... ")[0] for l in lines] == [
        "[1/2] calibrate/retinanet/fp32/local/1/1 repeat 1", "[2/2] calibrate/retinanet/fp32/local/1/1 repeat 2"]
    assert all(" images/s (" in l and l.endswith("s]") for l in lines)
    assert json.dumps(out.output).count("\\r") == 0
