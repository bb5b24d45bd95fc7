"""The divergence rule at ingest: a trial whose loss is not finite, or exploded, at or before the end of
its measured window fails with the iteration and the loss, whichever framework wrote the log; one that
diverged after the window keeps its figure. The logs are benchmarks/loggen's, in each framework's own
format, made to diverge as that framework prints it (benchmarks/loggen/diverge.py)."""
import math

import pytest

from benchmarks import loggen
from benchmarks.loggen import diverge
from harness import jsonlog
from harness.measure import divergence, ingest
from harness.measure.records import IterationRecord
from tests.support.divergedlogs import clean_log, options, trial_folder

FORMATS = sorted(loggen.GENERATORS)


@pytest.mark.parametrize("value", [math.nan, math.inf], ids=["nan", "inf"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_loss_not_finite_within_the_window_fails_the_trial_with_its_iteration(fmt, value, tmp_path):
    log, warmup, measure = clean_log(fmt, tmp_path)
    at = log.runs[0].records[3]   # the window's last record
    bad = diverge.diverge(log, at, value)
    stopped = fmt in diverge.STOPS
    folder = trial_folder(tmp_path / "bad", bad.lines, exit_code=1 if stopped else 0)
    got = ingest.analyse(folder, fmt, warmup, measure, log.images_per_iteration, options(log))
    assert got.status == "failed"
    assert divergence.diverged(got.reason), got.reason
    shown = "nan" if math.isnan(value) or fmt in ("detectron2", "detectron") else "inf"
    assert "loss %s" % shown in got.reason or "loss nan" in got.reason, got.reason
    if fmt == "torchvision-ref" or fmt == "detectron":   # their message names no iteration
        assert "after iteration %d" % log.runs[0].records[2] in got.reason, got.reason
    else:
        assert "at iteration %d" % at in got.reason, got.reason
    assert got.throughput is None


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_loss_not_finite_after_the_window_leaves_the_figure(fmt, tmp_path):
    log, warmup, measure = clean_log(fmt, tmp_path)
    clean = ingest.analyse(trial_folder(tmp_path / "ok", log.lines), fmt, warmup, measure,
                           log.images_per_iteration, options(log))
    bad = diverge.diverge(log, log.runs[0].records[3] + 1)
    folder = trial_folder(tmp_path / "bad", bad.lines, exit_code=1 if fmt in diverge.STOPS else 0)
    got = ingest.analyse(folder, fmt, warmup, measure, log.images_per_iteration, options(log))
    assert got.status == "done", got.reason
    assert got.throughput == clean.throughput


def test_an_exploded_loss_fails_like_a_nan_and_names_the_rule(tmp_path):
    losses = [2.0, 2.1, 1.9, 2.0, 1.8, 1.7, 250.0, 1.6]
    lines = [jsonlog.iter_line(i, 0.5, 0.01, 2, loss=v) for i, v in enumerate(losses, 1)]
    got = ingest.analyse(trial_folder(tmp_path / "t", lines), "detbench-jsonl", 2, 6, 2)
    assert got.status == "failed"
    assert got.reason.startswith("diverged: loss 250.0 at iteration 7 (above 100 x 2")
    assert "log.txt line 7" in got.reason
    # below the factor: a spike, not a divergence
    lines[6] = jsonlog.iter_line(7, 0.5, 0.01, 2, loss=150.0)
    assert ingest.analyse(trial_folder(tmp_path / "u", lines), "detbench-jsonl", 2, 6, 2).status == "done"


def test_an_explosion_among_the_first_losses_is_caught_where_it_happens(tmp_path):
    # effdet's train.py at a learning rate of 1e5 (its Loss values as printed, iterations 1-3)
    losses = [3.68929, 46060441600.0, 81890902016.0, 92175089664.0, 1.4e11, 1.8e13, 2e13, 3e13]
    lines = [jsonlog.iter_line(i, 0.5, 0.01, 2, loss=v) for i, v in enumerate(losses, 1)]
    got = ingest.analyse(trial_folder(tmp_path / "t", lines), "detbench-jsonl", 2, 6, 2)
    assert got.reason.startswith("diverged: loss 46060441600.0 at iteration 2 (above 100 x 3.689, the median "
                                 "of the run's first 1 logged losses"), got.reason


def test_the_bundled_trainers_stop_goes_through_the_same_rule(tmp_path):
    # harness/trainer/train.py: the NonFiniteLoss line on stderr (merged into the log) and exit 3
    lines = [jsonlog.iter_line(i, 0.5, 0.01, 2, loss=2.0) for i in range(1, 5)]
    lines.append("error: loss is nan (not finite) at iteration 5: loss_cls nan, loss_box_reg 0.3")
    got = ingest.analyse(trial_folder(tmp_path / "t", lines, exit_code=3), "detbench-jsonl", 2, 6, 2)
    assert got.status == "failed"
    assert got.reason.startswith("diverged: loss nan at iteration 5 (error: loss is nan"), got.reason


def test_a_run_that_diverged_before_a_restart_does_not_fail_the_run_measured(tmp_path):
    first = [jsonlog.iter_line(i, 0.5, 0.01, 2, loss=v) for i, v in enumerate([2.0, math.nan], 1)]
    second = [jsonlog.iter_line(i, 0.5, 0.01, 2, loss=2.0) for i in range(1, 9)]
    got = ingest.analyse(trial_folder(tmp_path / "t", first + second), "detbench-jsonl", 2, 6, 2)
    assert got.status == "done", got.reason


def test_the_watch_sets_no_limit_from_a_zero_median():
    watch = divergence.Watch()
    for i, v in enumerate([0.0] * 5 + [3.0], 1):
        watch.add(IterationRecord(i, i - 1, 0.5, loss=v))
    assert watch.first() is None
