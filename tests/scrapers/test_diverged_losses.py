"""Every scraper gives the loss its framework prints per record, a diverged one too: 'nan' and 'inf'
in text lines, NaN and Infinity in JSON lines, as benchmarks/loggen/diverge.py writes them after each
framework's own formatting. Frameworks that stop themselves print a message instead
(harness/measure/divergence.STOPS), read with the iteration it names."""
import math
import random

import pytest

from benchmarks import loggen
from benchmarks.loggen import diverge
from harness.measure import divergence, scrapers

SEEDS = range(8)   # text and JSON variants, epoch and iteration loops, several periods


def logs(fmt):
    for seed in SEEDS:
        log = loggen.generate(fmt, loggen.RandomChooser(random.Random(seed)), max_iters=2000, max_records=40)
        # NVIDIA's TF2 EfficientDet logs throughput alone (TimeHistory): no loss to read
        if len(log.runs[-1].records) >= 3 and not log.faults and "TF2" not in log.variant:
            yield log


def scrape(log, tmp_path):
    name = scrapers.EPOCH_OPTIONS.get(log.fmt)
    opts = {name: log.epoch_length} if name and log.epoch_length else {}
    return scrapers.scrape_path(log.fmt, log.write(tmp_path / "train.log"), **opts)[0]


GOES_ON = sorted(f for f in loggen.GENERATORS if f not in diverge.STOPS)


@pytest.mark.parametrize("value", [math.nan, math.inf], ids=["nan", "inf"])
@pytest.mark.parametrize("fmt", GOES_ON)
def test_a_non_finite_loss_is_read_as_printed(fmt, value, tmp_path):
    seen = 0
    for log in logs(fmt):
        run = log.runs[-1]
        at = run.records[len(run.records) // 2]
        records = [r for r in scrape(diverge.diverge(log, at, value), tmp_path) if r.run == len(log.runs)]
        assert [r.iteration for r in records if r.iteration >= at] == [i for i in run.records if i >= at]
        for rec in records:
            if rec.iteration >= at:
                assert rec.loss is not None and (math.isnan(rec.loss) if math.isnan(value) else rec.loss == value), \
                    (log.variant, rec)
            else:
                assert rec.loss is not None and math.isfinite(rec.loss), (log.variant, rec)
        seen += 1
    assert seen >= 3


@pytest.mark.parametrize("fmt", sorted(diverge.STOPS))
def test_a_framework_that_stops_itself_is_read_from_its_message(fmt, tmp_path):
    for log in logs(fmt):
        run = log.runs[-1]
        at = run.records[-2]
        bad = diverge.diverge(log, at)
        records = scrape(bad, tmp_path)
        assert all(r.loss is not None and math.isfinite(r.loss) for r in records)
        found = divergence.stop_in(list(enumerate(bad.lines)), [(r.line, r.iteration) for r in records])
        message = {"detectron2": "FloatingPointError: Loss became infinite or NaN at iteration=",
                   "torchvision-ref": "Loss is nan, stopping training",
                   "detectron": "CRITICAL train.py: 180: Loss is NaN"}
        assert found is not None and bad.lines[found.line].startswith(message[fmt])
        if fmt == "detectron2":   # it names the 0-based iteration
            assert (found.iteration, found.after) == (at, False)
        else:                     # the first after the last record
            assert (found.iteration, found.after) == (run.records[-3] + 1, True)


@pytest.mark.parametrize("line, loss", [
    # mmengine (mmdetection 3.x): the loss keeps its place and prints as Python formats it
    ("06/12 14:02:41 - mmengine - INFO - Epoch(train)  [1][  50/7330]  lr: 1.9820e-03  eta: 12:50:10  "
     "time: 0.3788  data_time: 0.0175  memory: 3375  loss: nan  loss_rpn_cls: nan  loss_bbox: 0.0871", "nan"),
    # mmcv 1.x (mmdetection 2.x)
    ("2021-03-01 10:00:00,000 - mmdet - INFO - Epoch [1][50/7330]\tlr: 1.000e-02, eta: 1 day, 0:21:01, "
     "time: 0.998, data_time: 0.071, memory: 3796, loss_rpn_cls: inf, loss_cls: 1.0912, loss: inf", "inf"),
    # maskrcnn-benchmark: median (global mean)
    ("eta: 0:12:34  iter: 20  loss: nan (nan)  loss_classifier: nan (nan)  time: 0.5000 (0.5100)  "
     "data: 0.0100 (0.0120)  lr: 0.002000  max mem: 3159", "nan"),
])
def test_real_format_lines_with_a_non_finite_loss(line, loss, tmp_path):
    path = tmp_path / "log.txt"
    path.write_text(line + "\n")
    fmt = scrapers.detect(str(path))[0]
    records, errors = scrapers.scrape_path(fmt, str(path))
    assert not errors and len(records) == 1
    assert str(records[0].loss) == loss
