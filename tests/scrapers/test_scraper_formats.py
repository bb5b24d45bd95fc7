"""Each format's fixture parses to exactly the expected records."""
import importlib
from pathlib import Path

import pytest

from harness.measure import scrapers
from harness.measure.scrapers import common
from harness.measure.records import (CUMULATIVE_MEAN, GLOBAL_MEAN, ITERATION, THROUGHPUT, WINDOW_MEAN,
                             WINDOW_MEDIAN, IterationRecord)

FIXTURES = Path(__file__).parent / "fixtures"
WM, WMED, CM, IT, TP, GM = WINDOW_MEAN, WINDOW_MEDIAN, CUMULATIVE_MEAN, ITERATION, THROUGHPUT, GLOBAL_MEAN


def R(iteration, line, time_s, data_time_s, span, kind, images_per_s=None, memory_mb=None,
      loss=None, rounding=0.0, data_span=0, data_kind=None, run=1):
    return IterationRecord(iteration, line, time_s, data_time_s, span, kind, images_per_s,
                           None, memory_mb, loss, run, rounding, data_span, data_kind)


def rounded(unit, records):
    """The records with the rounding of their printed figures: half a unit of the last digit."""
    return [r._replace(rounding=unit) for r in records]


# half a unit of the last printed digit
D2, D3, D4, D5, D6 = 0.5e-2, 0.5e-3, 0.5e-4, 0.5 / 10 ** 5, 0.5e-6


CASES = [
    ("mmdet-v1", "mmdet_v1.log", {}, rounded(D3, [
        R(50, 1, 0.998, 0.071, 50, WM, memory_mb=3796.0, loss=1.8528),
        R(100, 2, 0.801, 0.012, 50, WM, memory_mb=3811.0, loss=1.0947),
        R(250, 3, 0.812, 0.020, 50, WM, memory_mb=3811.0, loss=0.8646)]), []),
    ("mmdet-v1", "mmdet_v1.log.json", {"iters_per_epoch": 200}, rounded(D5, [
        R(50, 0, 0.99812, 0.07104, 50, WM, memory_mb=3796.0, loss=1.8528),
        R(100, 1, 0.80133, 0.01210, 50, WM, memory_mb=3811.0, loss=1.0947),
        R(250, 3, 0.81177, 0.02003, 50, WM, memory_mb=3811.0, loss=0.8646)]), []),
    ("mmdet-v1", "mmdet_v1.log.json", {}, rounded(D5, [
        R(50, 0, 0.99812, 0.07104, 50, WM, memory_mb=3796.0, loss=1.8528),
        R(100, 1, 0.80133, 0.01210, 50, WM, memory_mb=3811.0, loss=1.0947)]), [3]),
    ("mmdet-v1", "mmdet_v1.log", {"interval": 10}, rounded(D3, [
        R(50, 1, 0.998, 0.071, 10, WM, memory_mb=3796.0, loss=1.8528),
        R(100, 2, 0.801, 0.012, 10, WM, memory_mb=3811.0, loss=1.0947),
        R(250, 3, 0.812, 0.020, 10, WM, memory_mb=3811.0, loss=0.8646)]), []),
    ("mmdet-v2", "mmdet_v2.log", {}, rounded(D3, [
        R(50, 1, 3.412, 2.751, 50, WM, memory_mb=3375.0, loss=1.8528),
        R(100, 2, 0.388, 0.018, 50, WM, memory_mb=3375.0, loss=1.0943),
        R(170, 4, 2.402, 2.013, 50, WM, memory_mb=3380.0, loss=0.8620)]), []),
    ("mmdet-v2", "mmdet_v2_iter.log", {}, rounded(D3, [
        R(20, 0, 0.512, 0.101, 20, WM, memory_mb=2101.0, loss=1.8528),
        R(40, 1, 0.498, 0.010, 20, WM, memory_mb=2101.0, loss=1.5011)]), []),
    ("mmdet-v2", "mmdet_v2.log.json", {}, rounded(D5, [
        R(50, 1, 3.41223, 2.75112, 50, WM, memory_mb=3375.0, loss=1.8528),
        R(100, 2, 0.38812, 0.01811, 50, WM, memory_mb=3375.0, loss=1.0943)]), []),
    ("mmdet-v3", "mmdet_v3.log", {}, rounded(D4, [
        R(50, 1, 0.3788, 0.0175, 50, WM, memory_mb=3375.0, loss=1.8528),
        R(100, 2, 0.3701, 0.0102, 50, WM, memory_mb=3380.0, loss=1.2001),
        R(170, 4, 0.3650, 0.0090, 50, WM, memory_mb=3390.0, loss=1.0001)]), []),
    ("mmdet-v3", "mmdet_v3.log", {"window": 10}, rounded(D4, [
        R(50, 1, 0.3788, 0.0175, 10, WM, memory_mb=3375.0, loss=1.8528),
        R(100, 2, 0.3701, 0.0102, 10, WM, memory_mb=3380.0, loss=1.2001),
        R(170, 4, 0.3650, 0.0090, 10, WM, memory_mb=3390.0, loss=1.0001)]), []),
    ("mmdet-v3", "mmdet_v3_vis.json", {}, rounded(D6, [
        # the JSON does not say its window (the text log's config does): means of unknown extent
        R(50, 0, 0.378811, 0.017512, 1, GM, memory_mb=3375.0, loss=1.8528),
        R(100, 1, 0.370102, 0.010203, 1, GM, memory_mb=3380.0, loss=1.2001)]), []),
    ("mmdet-v3", "mmdet_v3_vis.json", {"window": 50}, rounded(D6, [
        R(50, 0, 0.378811, 0.017512, 50, WM, memory_mb=3375.0, loss=1.8528),
        R(100, 1, 0.370102, 0.010203, 50, WM, memory_mb=3380.0, loss=1.2001)]), []),
    ("maskrcnn-benchmark", "maskrcnn_benchmark.log", {}, rounded(D4, [
        # the means since the start, in parentheses, over all `iteration` iterations
        R(20, 1, 0.5523, 0.1031, 20, CM, memory_mb=3012.0, loss=1.8528),
        R(40, 2, 0.4801, 0.0577, 40, CM, memory_mb=3020.0, loss=1.4011)]), []),
    ("detectron2", "detectron2.log", {}, rounded(D4, [
        # iterations 3..20 and 3..40; data_time is the mean of the last 20 (its own window)
        R(20, 1, 0.3716, 0.0132, 18, CM, memory_mb=3189.0, loss=1.104, data_span=20, data_kind=WM),
        R(40, 2, 0.3701, 0.0121, 38, CM, memory_mb=3190.0, loss=0.9912, data_span=20, data_kind=WM)]), []),
    ("detectron2", "detectron2.log", {"prefer": "last"}, rounded(D4, [
        R(20, 1, 0.3690, 0.0095, 1, IT, memory_mb=3189.0, loss=1.104),
        R(40, 2, 0.3650, 0.0088, 1, IT, memory_mb=3190.0, loss=0.9912)]), []),
    ("detectron2", "detectron2_v06.log", {}, rounded(D4, [
        R(20, 0, 0.5012, 0.0201, 18, CM, memory_mb=2811.0, loss=2.011, data_span=20, data_kind=WM)]), []),
    ("detectron2", "detectron2_2019.log", {}, rounded(D4, [
        R(20, 0, 0.6001, 0.0301, 18, CM, memory_mb=2700.0, loss=2.301, data_span=20, data_kind=WM)]), []),
    ("detectron2", "detectron2_metrics.json", {}, rounded(D6, [
        R(20, 0, 0.368012, 0.011205, 18, WMED, loss=1.104),
        R(40, 2, 0.365001, 0.010101, 20, WMED, loss=0.9912)]), []),
    ("torchvision-ref", "torchvision_ref.log", {}, rounded(D4, [
        R(1, 1, 3.1022, 2.5011, 1, WM, memory_mb=1502.0, loss=5.2011),
        R(21, 2, 0.4022, 0.0111, 20, WM, memory_mb=1533.0, loss=2.1011),
        R(100, 3, 0.3922, 0.0101, 20, WM, memory_mb=1533.0, loss=1.1011),
        R(101, 6, 0.7022, 0.3011, 1, WM, memory_mb=1533.0, loss=1.0011)]), []),
    ("simpledet-mxnet", "simpledet_mxnet.log", {}, rounded(D2, [
        # the loss: the sum of the metrics but the accuracies (RpnL1 + RcnnL1)
        R(21, 1, None, None, 20, TP, images_per_s=28.71, loss=0.051093 + 0.377015),
        R(41, 2, None, None, 20, TP, images_per_s=29.02, loss=0.050011 + 0.371101)]), []),
    ("simpledet-mxnet", "simpledet_mxnet_old.log", {}, rounded(D2, [
        R(11, 0, None, None, 10, TP, images_per_s=31.20, loss=0.061093),
        R(21, 1, None, None, 10, TP, images_per_s=31.90, loss=0.058093)]), [3]),
    ("simpledet-mxnet", "simpledet_mxnet_old.log", {"batches_per_epoch": 500}, rounded(D2, [
        R(11, 0, None, None, 10, TP, images_per_s=31.20, loss=0.061093),
        R(21, 1, None, None, 10, TP, images_per_s=31.90, loss=0.058093),
        R(511, 3, None, None, 10, TP, images_per_s=32.00, loss=0.051093)]), []),
    ("dllogger", "dllogger_pytorch.log", {}, [
        # batches 10..49 and 10..99 of epoch 3; the data means run from batch 0 (their own span);
        # the first line prints floats in full, the second was cut to 4 decimals
        R(3 * 462 + 50, 1, 0.4021739959716797, 0.0021451735496520997, 40, CM, loss=1.1402839422225952,
          rounding=0.5 / 10 ** 16, data_span=50, data_kind=CM),
        R(3 * 462 + 100, 2, 0.3987, 0.0019, 90, CM, loss=1.101, rounding=D4, data_span=100, data_kind=CM)], []),
    ("dllogger", "dllogger_tf2_time_log.txt", {}, [
        # the rounding of the images/s (the figure a throughput record gives)
        R(1201, 0, 0.21, None, 1, TP, images_per_s=2438.61, rounding=D2),
        R(1211, 1, 0.205, None, 10, TP, images_per_s=2497.5, rounding=0.05)], []),
    ("effdet", "effdet.log", {}, rounded(D3, [
        # the means since the epoch's first batch, in parentheses
        R(1, 1, 6.821, 5.901, 1, CM, loss=1.923113),
        R(51, 2, 0.540, 0.130, 51, CM, loss=1.402001),
        R(3000, 3, 0.401, 0.011, 1000, CM, loss=0.900001)]), []),
    ("detectron", "detectron.log", {}, rounded(D6, [
        # 0-based iter 0 and 20: means since iteration 1; the timer restarts after iter 20's line, so
        # later ones are means since iteration 22 (spans 20, 40, 60 and 69 at the last, iter 89)
        R(1, 9, 3.412561, None, 1, CM, memory_mb=6631.0, loss=4.521322),
        R(21, 10, 0.781234, None, 21, CM, memory_mb=7012.0, loss=2.301129),
        R(41, 11, 0.602113, None, 20, CM, memory_mb=7012.0, loss=1.822011),
        R(61, 12, 0.598870, None, 40, CM, memory_mb=7105.0, loss=1.601277),
        R(81, 13, 0.600412, None, 60, CM, memory_mb=7105.0, loss=1.555109),
        R(90, 14, 0.599876, None, 69, CM, memory_mb=7105.0, loss=1.530001)]), []),
    ("detectron", "detectron_truncated.log", {}, rounded(D6, [
        # a time that is no number, a line cut inside its JSON, a last line cut while written
        R(1, 1, 2.911005, None, 1, CM, memory_mb=6631.0, loss=4.4),
        R(41, 4, 0.645519, None, 20, CM, memory_mb=7012.0, loss=1.9)]), [2, 3, 5]),
    ("detectron", "detectron.log", {"start_iter": 20}, rounded(D6, [
        # a run resumed at iteration 20: its timer restarts after iter 40's line
        R(21, 10, 0.781234, None, 1, CM, memory_mb=7012.0, loss=2.301129),
        R(41, 11, 0.602113, None, 21, CM, memory_mb=7012.0, loss=1.822011),
        R(61, 12, 0.598870, None, 20, CM, memory_mb=7105.0, loss=1.601277),
        R(81, 13, 0.600412, None, 40, CM, memory_mb=7105.0, loss=1.555109),
        R(90, 14, 0.599876, None, 49, CM, memory_mb=7105.0, loss=1.530001)]), [9]),
    ("tensorpack", "tensorpack.log", {}, rounded(D3, [
        # the stock example: 500-step epochs, images/s of all GPUs over each epoch; the time per
        # step from the epoch line's time ("2 minutes 29 seconds" / 500); the loss: the epoch's
        # total_cost, printed among the scalars after the throughput
        R(500, 20, 149 / 500, None, 500, TP, images_per_s=26.873, loss=2.4122),
        R(1000, 43, 138 / 500, None, 500, TP, images_per_s=28.954, loss=1.9871),
        R(1500, 66, 137 / 500, None, 500, TP, images_per_s=29.117, loss=1.8014)]), []),
    ("tensorpack", "tensorpack_short.log", {"steps_per_epoch": 10}, rounded(0.5e-4, [
        # epoch 3's figure is garbled (still epoch 3: epoch 4 is placed at its own global step 40);
        # the last line is cut
        R(10, 6, 8.3 / 10, None, 10, TP, images_per_s=1.2043, loss=3.0),
        R(20, 13, 2.51 / 10, None, 10, TP, images_per_s=3.9861, loss=1.5),
        R(40, 27, 2.49 / 10, None, 10, TP, images_per_s=4.0219, loss=0.75)]), [20, 30]),
    ("tensorpack", "tensorpack_short.log", {}, rounded(0.5e-4, [
        # 10-step epochs by the log's own epoch lines, whatever steps_per_epoch says
        R(10, 6, 8.3 / 10, None, 10, TP, images_per_s=1.2043, loss=3.0),
        R(20, 13, 2.51 / 10, None, 10, TP, images_per_s=3.9861, loss=1.5),
        R(40, 27, 2.49 / 10, None, 10, TP, images_per_s=4.0219, loss=0.75)]), [20, 30]),
]


@pytest.mark.parametrize("name,fixture,options,expected,error_lines", CASES,
                         ids=["%s:%s:%s" % (c[0], c[1], sorted(c[2])) for c in CASES])
def test_fixture_parses_exactly(name, fixture, options, expected, error_lines):
    with open(FIXTURES / fixture, encoding="utf-8") as f:
        records, errors = scrapers.get(name)(f, **options)
    assert records == expected
    assert [e.line for e in errors] == error_lines


FIRST_FIXTURE = {case[0]: case[1] for case in reversed(CASES)}   # each format's first fixture in CASES


@pytest.mark.parametrize("name", sorted(scrapers.PATH_SCRAPERS))
def test_path_fast_path_equals_line_path(name, tmp_path, monkeypatch):
    module = importlib.import_module("harness.measure.scrapers." + name.replace("-", "_"))
    assert module.iter_scrape_path is scrapers.PATH_SCRAPERS[name]
    fixture = FIRST_FIXTURE[name]
    monkeypatch.setattr(common, "CHUNK_SIZE", 4096)  # many chunks, lines cut at edges
    text = (FIXTURES / fixture).read_text(encoding="utf-8")
    # later copies dirty some chunks (colours, a rank prefix) so both paths run
    text = text * 40 + "\x1b[32m" + text + "[rank1]:junk\n" + text * 40
    path = tmp_path / "big.log"
    path.write_text(text, encoding="utf-8")
    with open(path, "rb") as f:   # each raw line cleaned once, then fed
        by_lines = list(module.iter_scrape(f))
    by_path = list(module.iter_scrape_path(path))
    assert by_path == by_lines
    assert by_path


def test_get_unknown_name_lists_valid_names():
    with pytest.raises(KeyError) as info:
        scrapers.get("nope")
    assert "mmdet-v2" in str(info.value) and "detectron2" in str(info.value)


def test_scrapers_names():
    assert set(scrapers.SCRAPERS) == {
        "detbench-jsonl", "mmdet-v1", "mmdet-v2", "mmdet-v3", "maskrcnn-benchmark",
        "detectron2", "torchvision-ref", "simpledet-mxnet", "dllogger", "effdet", "detectron", "tensorpack"}


@pytest.mark.parametrize("name,fixture,options,expected,error_lines", CASES,
                         ids=["%s:%s:%s" % (c[0], c[1], sorted(c[2])) for c in CASES])
def test_scrape_path_reads_a_file_like_its_lines(name, fixture, options, expected, error_lines):
    records, errors = scrapers.scrape_path(name, FIXTURES / fixture, **options)
    assert records == expected
    assert [e.line for e in errors] == error_lines


def test_scrape_path_of_the_jsonl_format_reads_its_lines(tmp_path):
    path = tmp_path / "log.txt"
    path.write_text('noise\nDETBENCH_ITER {"iteration": 3, "time_s": 0.5}\n', encoding="utf-8")
    records, errors = scrapers.scrape_path("detbench-jsonl", path)
    assert [(r.iteration, r.line, r.time_s) for r in records] == [(3, 1, 0.5)] and not errors


def test_each_format_is_one_record_named_once_and_known_by_its_lines():
    names = [f.name for f in scrapers.LOG_FORMATS]
    assert len(names) == len(set(names))            # a second record of a name would hide the first
    assert all(f.signature is not None for f in scrapers.LOG_FORMATS)   # detect() finds every format
    assert list(scrapers.FORMATS) == list(scrapers.SCRAPERS) == names


def test_path_scrapers_are_the_formats_that_have_a_file_path():
    assert set(scrapers.PATH_SCRAPERS) == set(scrapers.SCRAPERS) - {"detbench-jsonl"}
    with pytest.raises(KeyError):
        scrapers.scrape_path("nope", FIXTURES / "mmdet_v2.log")
