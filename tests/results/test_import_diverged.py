"""`detbench import` of a log whose training diverged at or before the window's end is refused in one
line naming the log, the line, the iteration and the loss, with nothing written; one that diverged
after the window imports. The logs are loggen's, diverged as each framework prints it."""
import pytest
from click.testing import CliRunner

from benchmarks.loggen import diverge
from harness.cli import main
from tests.support.divergedlogs import clean_log

CELL = ["--scenario-name", "elsewhere", "--model", "faster_rcnn", "--precision", "fp32", "--platform", "local",
        "--gpus", "1"]


def import_log(tmp_path, log, warmup, measure):
    path = log.write(tmp_path / "train.log")
    # a detectron2 log does not say which column it belongs to (detectron2 or detectron2-cuda)
    framework = ["--framework", "detectron2"] if log.fmt == "detectron2" else []
    args = ["import", "--format", log.fmt, *framework, str(path), *CELL,
            "--batch-per-gpu", str(log.images_per_iteration), "--warmup", str(warmup), "--measure", str(measure),
            "--approximate", "--results", str(tmp_path / "res")]
    return path, CliRunner().invoke(main, args)


@pytest.mark.parametrize("fmt", ["mmdet-v3", "detectron2", "torchvision-ref"])
def test_a_log_that_diverged_within_the_window_is_refused_in_one_line(fmt, tmp_path):
    log, warmup, measure = clean_log(fmt, tmp_path)
    at = log.runs[0].records[3]
    bad = diverge.diverge(log, at)
    path, out = import_log(tmp_path, bad, warmup, measure)
    assert out.exit_code == 2, out.output
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    found = {"mmdet-v3": "at iteration %d (not finite)" % at,
             "detectron2": "at iteration %d (FloatingPointError: Loss became infinite or NaN" % at,
             "torchvision-ref": "after iteration %d (Loss is nan, stopping training)" % log.runs[0].records[2]}[fmt]
    head = "detbench: error: %s:" % path
    assert lines[0].startswith(head) and ": diverged: loss nan %s" % found in lines[0], lines[0]
    line = int(lines[0][len(head):].split(":")[0])
    assert ("nan" in bad.lines[line - 1]) or ("NaN" in bad.lines[line - 1])
    assert not (tmp_path / "res" / "detbench.sqlite").exists()


@pytest.mark.parametrize("fmt", ["mmdet-v3", "detectron2"])
def test_a_log_that_diverged_after_the_window_imports(fmt, tmp_path):
    log, warmup, measure = clean_log(fmt, tmp_path)
    _, out = import_log(tmp_path, diverge.diverge(log, log.runs[0].records[3] + 1), warmup, measure)
    assert out.exit_code == 0, out.output
