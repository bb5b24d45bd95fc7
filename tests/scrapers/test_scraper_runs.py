"""Runs inside a log, the rounding of printed figures, and bounded reading.

A log may hold several training processes one after another: a start banner or a counter
that goes back begins the next run, and every record carries its run. A line printed twice
word for word is read once; an iteration printed twice with other figures, or a record that
falls between the two before it, is a fatal error naming both lines. Every reading of a
file (line by line, the chunked pure-Python path, the compiled scanner) gives the same.
"""
from pathlib import Path

import pytest

from harness.measure import scrapers
from harness.measure.records import CUMULATIVE_MEAN, GLOBAL_MEAN, WINDOW_MEAN, IterationRecord, ScrapeError
from harness.measure.scrapers import common
from harness.measure.scrapers.detectron2 import Detectron2Scraper
from harness.measure.scrapers.maskrcnn_benchmark import MaskrcnnScraper
from harness.measure.scrapers.mmdet_v2 import MmcvScraper
from harness.measure.scrapers.mmdet_v3 import MmengineScraper
from tests.support import logtext
from tests.scrapers.fed import fed_line_by_line

FIXTURES = Path(__file__).parent / "fixtures"
MMCV = ("2021-03-01 09:11:01,500 - mmdet - INFO - Epoch [1][%d/500]\tlr: 3.986e-03, eta: 7:01:10, "
        "time: %s, data_time: 0.018, memory: 3375, loss: 1.0943")


def mmcv(iteration, time="0.388"):
    return MMCV % (iteration, time)


def records_of(name, lines, **options):
    return scrapers.get(name)(lines, **options)


# ---------------------------------------------------------------- where a run begins

# (format, a start banner, two record lines of increasing iteration)
BANNERS = {
    "mmdet-v2": ("2021-03-01 09:00:02,000 - mmdet - INFO - Start running, host: u@n, work_dir: /w",
                 [mmcv(50), mmcv(100)]),
    "mmdet-v3": ("06/12 14:00:00 - mmengine - INFO - Checkpoints will be saved to /w.",
                 logtext.mmengine_iter(logtext.times(20)).splitlines()[1:3]),
    "detectron2": ("[05/17 10:40:00 d2.engine.train_loop]: Starting training from iteration 0",
                   logtext.detectron2_v03(logtext.times(40)).splitlines()[1:3]),
    "maskrcnn-benchmark": ("2019-05-01 10:00:00,000 maskrcnn_benchmark.trainer INFO: Start training",
                           logtext.maskrcnn_benchmark(logtext.times(40)).splitlines()[1:3]),
    "torchvision-ref": ("Start training", logtext.torchvision_ref(logtext.times(40)).splitlines()[1:3]),
    "effdet": ("Scheduled epochs: 300", logtext.effdet(logtext.times(3), 2).splitlines()[1:3]),
    "dllogger": ("DLL 2021-05-04 10:11:02.000000 - PARAMETER model_name : efficientdet_d0  batch_size : 2 ",
                 logtext.dllogger_pytorch(logtext.times(20)).splitlines()[1:3]),
    "detbench-jsonl": ('DETBENCH_META {"workload": "calibrate"}',
                       logtext.detbench_jsonl(logtext.times(2), 2).splitlines()[::2]),
    "detectron": ("INFO train_net.py:  95: Called with args:", logtext.detectron(logtext.times(30)).splitlines()[1:3]),
}


@pytest.mark.parametrize("name", sorted(BANNERS))
def test_a_start_banner_between_records_begins_a_run(name):
    banner, (one, two) = BANNERS[name]
    records, errors = records_of(name, [banner, one, two, banner, one, two])
    assert not errors
    assert [r.run for r in records] == [1, 1, 2, 2]
    assert [r.iteration for r in records[:2]] == [r.iteration for r in records[2:]]


@pytest.mark.parametrize("name", sorted(BANNERS))
def test_a_counter_that_goes_back_begins_a_run(name):
    _, (one, two) = BANNERS[name]
    records, errors = records_of(name, [one, two, one.replace("0.3", "0.2"), two])
    assert not errors and [r.run for r in records] == [1, 1, 2, 2]


def test_a_run_s_last_line_printed_twice_is_read_once():
    # detectron2's writer flushes its last line once more as training ends
    records, errors = records_of("mmdet-v2", [mmcv(50), mmcv(100), mmcv(100)])
    assert not errors and [r.iteration for r in records] == [50, 100]


def test_a_line_printed_twice_in_the_middle_of_a_run_is_fatal_and_names_both_lines():
    records, errors = records_of("mmdet-v2", [mmcv(50), mmcv(100), mmcv(100), mmcv(150)])
    assert [r.iteration for r in records] == [50, 100]
    assert errors == [ScrapeError(2, "iteration 100 is logged twice: on line 2 and on line 3", "", True, 1)]


def test_an_iteration_logged_again_with_other_figures_is_a_restarted_process():
    # a crash right after a record, and a resume from the checkpoint before it: the same
    # iteration comes again, timed anew
    records, errors = records_of("mmdet-v2", [mmcv(50), mmcv(100), mmcv(100, "0.401"), mmcv(150)])
    assert not errors and [(r.run, r.iteration) for r in records] == [(1, 50), (1, 100), (2, 100), (2, 150)]


def test_a_record_between_the_two_before_it_is_out_of_order():
    records, errors = records_of("mmdet-v2", [mmcv(50), mmcv(150), mmcv(100), mmcv(200)])
    assert [r.iteration for r in records] == [50, 150, 200] and errors[0].fatal
    assert errors[0].reason == "records out of order: iteration 100 on line 3 comes after iteration 150 on line 2"


# ---------------------------------------------------------------- where a run starts

def test_a_detectron2_banner_gives_the_start_of_the_timer_s_mean():
    pairs = logtext.times(200, seed=2)
    lines = (logtext.detectron2_v03(pairs[:100]) + logtext.detectron2_v03(pairs[100:], start=60)).splitlines()
    records, errors = records_of("detectron2", lines)
    assert not errors
    second = [r for r in records if r.run == 2]
    # a process started at iteration 60 times from its 3rd iteration, 63: 18 iterations by 80
    assert (second[0].iteration, second[0].span, second[0].kind) == (80, 18, CUMULATIVE_MEAN)
    assert second[0].data_span == 20   # its data window holds the 20 iterations since its start


def test_a_detectron2_restart_without_its_banner_has_running_means_of_unknown_start():
    pairs = logtext.times(200, seed=3)
    lines = (logtext.detectron2_v03(pairs[:100]) + logtext.detectron2_v03(pairs[100:], start=60,
                                                                          banner=False)).splitlines()
    records, _ = records_of("detectron2", lines)
    second = [r for r in records if r.run == 2]
    assert {r.kind for r in second} == {GLOBAL_MEAN}
    assert second[0].data_time_s is None and second[1].data_time_s is not None


@pytest.mark.parametrize("first, kind", [(20, CUMULATIVE_MEAN), (2520, GLOBAL_MEAN)])
def test_a_maskrcnn_run_starts_at_0_only_where_its_first_record_lies_in_the_first_period(first, kind):
    # the log does not print where a resumed process started: a checkpoint's iteration, far past 20
    line = ("2019 maskrcnn_benchmark.trainer INFO: eta: 1:00  iter: %d  loss: 1.2 (1.3)  time: 0.4 (0.5)  "
            "data: 0.01 (0.02)  lr: 0.002  max mem: 3012")
    banner = "2019-05-01 10:00:00,000 maskrcnn_benchmark.trainer INFO: Start training"
    records, _ = records_of("maskrcnn-benchmark", [banner, line % 20, line % 40, banner, line % first,
                                                   line % (first + 20)])
    assert [(r.run, r.kind) for r in records] == [(1, CUMULATIVE_MEAN)] * 2 + [(2, kind)] * 2
    assert records[3].span == (first + 20 if kind == CUMULATIVE_MEAN else 1)


def test_tensorpack_restarts_where_its_global_step_goes_back():
    pairs = logtext.times(400)
    lines = (logtext.tensorpack(pairs, 100) + logtext.tensorpack(pairs[:200], 100)).splitlines()
    records, errors = records_of("tensorpack", lines, steps_per_epoch=7)
    assert not errors
    assert [(r.run, r.iteration, r.span) for r in records] == [(1, 100, 100), (1, 200, 100), (1, 300, 100),
                                                                (1, 400, 100), (2, 100, 100), (2, 200, 100)]


def test_simpledet_workers_lines_of_one_iteration_are_read_once_and_a_restart_is_a_run():
    # every worker logs: a second worker's line of an iteration comes soon after the first's
    line = "07-02 16:11:03 Epoch[0] Batch [%d]\tIter: %d/87960\tLr: 0.00693\tSpeed: %s samples/sec\tTrain-"
    lines = []
    for b in range(20, 2020, 20):
        lines += [line % (b, b, "28.7"), line % (b, b, "29.5")]
        if b == 60:
            lines.append(line % (40, 40, "30.0"))   # a worker behind by a record
    lines.append(line % (20, 20, "28.0"))           # a process resumed from the start of the epoch
    records, errors = records_of("simpledet-mxnet", lines)
    assert not errors
    assert [r.iteration for r in records] == list(range(21, 2021, 20)) + [21]
    assert {r.images_per_s for r in records[:-1]} == {28.7} and (records[-1].run, records[-1].images_per_s) == (2, 28.0)


# ---------------------------------------------------------------- every reading gives the same

NATIVE = {"mmdet-v2": MmcvScraper, "mmdet-v3": MmengineScraper, "detectron2": Detectron2Scraper,
          "maskrcnn-benchmark": MaskrcnnScraper}


def restarted(name):
    pairs = logtext.times(300, seed=4)
    if name == "mmdet-v2":
        return logtext.mmcv_epoch(pairs[:200], 100) + logtext.mmcv_epoch(pairs[:150], 100, first=101)
    if name == "mmdet-v3":
        return logtext.mmengine_iter(pairs[:200]) + logtext.mmengine_iter(pairs[:100])
    if name == "detectron2":
        return (logtext.detectron2_v03(pairs[:200]) + logtext.detectron2_v03(pairs[:100], start=100)
                + logtext.detectron2_v03(pairs, start=40, banner=False))
    return logtext.maskrcnn_benchmark(pairs[:200]) + logtext.maskrcnn_benchmark(pairs[:100])


@pytest.mark.parametrize("name", sorted(NATIVE))
@pytest.mark.parametrize("repeat", [False, True])
def test_a_restarted_log_reads_the_same_three_ways(tmp_path, name, repeat):
    lines = restarted(name).splitlines()
    if repeat:   # a line twice, then one with other figures: both readers refuse alike
        k = next(i for i, l in enumerate(lines) if l.count(".") > 3 and i > 5)
        lines[k + 1:k + 1] = [lines[k], lines[k].replace(".", "9", 1) if "0.3" not in lines[k]
                              else lines[k].replace("0.3", "0.9", 1)]
    path = tmp_path / "log.txt"
    path.write_text("\n".join(lines) + "\n")
    cls = NATIVE[name]
    by_lines = [repr(x) for x in fed_line_by_line(cls(), path)]
    assert len({r.run for r in fed_line_by_line(cls(), path) if isinstance(r, IterationRecord)}) >= 2
    for native in (False, True):
        assert [repr(x) for x in common.run_path(cls(), path, 64, native=native)] == by_lines


# ---------------------------------------------------------------- bounded reading

@pytest.mark.parametrize("name", sorted(NATIVE) + ["torchvision-ref", "detbench-jsonl"])
def test_a_line_with_a_nul_byte_is_skipped_and_named_and_the_lines_after_it_are_read(tmp_path, name):
    _, (one, two) = BANNERS.get(name, (None, BANNERS["mmdet-v2"][1]))
    path = tmp_path / "log.txt"
    path.write_bytes(("%s\n" % one).encode() + b"ab\0cd\n\0\0\n" + ("%s\n" % two).encode())
    records, errors = scrapers.scrape_path(name, path)
    assert [r.line for r in records] == [0, 3]  # the lines after the skipped ones keep their index
    assert errors == [ScrapeError(1, common.NUL_SKIPPED, "", False), ScrapeError(2, common.NUL_SKIPPED, "", False)]


@pytest.mark.parametrize("native", [False, True])
def test_a_nul_tail_longer_than_a_line_may_be_is_one_skipped_line_in_bounded_memory(tmp_path, native):
    # a crash leaves the file's last blocks unwritten: zeros, with no newline, past LINE_MAX
    path = tmp_path / "log.txt"
    path.write_bytes((mmcv(50) + "\n" + mmcv(100) + "\n").encode() + b"\0" * (3 * common.LINE_MAX))
    items = list(common.run_path(MmcvScraper(), path, 1 << 16, native=native))
    assert [x.iteration for x in items if isinstance(x, IterationRecord)] == [50, 100]
    assert [x for x in items if isinstance(x, ScrapeError)] == [ScrapeError(2, common.NUL_SKIPPED, "", False)]
    assert items == fed_line_by_line(MmcvScraper(), path)


def test_a_line_longer_than_the_limit_ends_the_reading(tmp_path, monkeypatch):
    path = tmp_path / "log.txt"
    path.write_text(mmcv(50) + "\n" + "x" * 5000 + "\n" + mmcv(100) + "\n")
    monkeypatch.setattr(common, "LINE_MAX", 4096)
    monkeypatch.setattr(common.read_blocks, "__defaults__", (common.CHUNK_SIZE, None, 4096, None))
    for native in (False, True):
        items = list(common.run_path(MmcvScraper(), path, 1024, native=native))
        assert [type(x).__name__ for x in items] == ["IterationRecord", "ScrapeError"]
        assert items[1] == ScrapeError(1, "a line longer than 4096 bytes: not a log line", "", True)


def test_an_endless_line_is_read_within_bounded_memory(tmp_path):
    # a file of one line, bigger than the limit: nothing of it is held past the limit
    path = tmp_path / "log.txt"
    path.write_bytes(b"y" * (3 * common.LINE_MAX))
    stops = []
    assert list(common.read_blocks(path, 1 << 16, stops)) == []
    assert stops == ["a line longer than %d bytes: not a log line" % common.LINE_MAX]


# ---------------------------------------------------------------- rounding

@pytest.mark.parametrize("text, half", [("0.3716", 0.5e-4), ("12", 0.5), ("0.388", 0.5e-3), ("1.5e-03", 0.5e-4),
                                        ("2.0000e-02", 0.5e-6), ("-0.5", 0.05), (".5", 0.05), ("5.", 0.5),
                                        ("0.4021739959716797", 0.5 / 10 ** 16), ("nan", float("inf")),
                                        ("1_0.5", float("inf"))])
def test_the_rounding_of_a_printed_number_is_half_its_last_digit(text, half):
    assert common.half_unit(text) == half


def test_a_record_keeps_the_coarser_rounding_of_its_time_and_data_time():
    [rec], _ = records_of("mmdet-v3", ["06/12 - Iter(train) [  20/90000]  lr: 2.0e-02  eta: 1 day  time: 0.3012  "
                                       "data_time: 0.01  memory: 33  loss: 1.8"])
    assert (rec.kind, rec.rounding) == (WINDOW_MEAN, 0.5e-2)


# ---------------------------------------------------------------- mmdetection 3.x's window

CONFIG = "log_processor = dict(type='LogProcessor', window_size=%d, by_epoch=True)"


def test_mmengine_takes_its_window_from_the_config_its_log_dumps():
    lines = logtext.mmengine_iter(logtext.times(100), interval=10, window=30).splitlines()
    records, _ = records_of("mmdet-v3", [CONFIG % 30] + lines)
    assert [r.span for r in records[:4]] == [10, 20, 30, 30]
    wrong, _ = records_of("mmdet-v3", lines)     # without it: the interval, as mmdet's configs set them
    assert [r.span for r in wrong[:4]] == [10, 10, 10, 10]


def test_mmengine_epochs_shorter_than_the_interval_do_not_give_the_window():
    # printed at each epoch's end only (2 iterations < interval 50): no record says the window
    pairs = logtext.times(12)
    records, _ = records_of("mmdet-v3", logtext.mmengine_epoch(pairs, 2).splitlines())
    assert {(r.kind, r.span) for r in records} == {(GLOBAL_MEAN, 1)}
    known, _ = records_of("mmdet-v3", [CONFIG % 50] + logtext.mmengine_epoch(pairs, 2).splitlines())
    assert [(r.kind, r.span) for r in known[:3]] == [(WINDOW_MEAN, 2), (WINDOW_MEAN, 4), (WINDOW_MEAN, 6)]


def test_mmengine_json_takes_its_window_from_the_text_log_beside_it(tmp_path):
    from harness.measure import logfigure
    run_dir = tmp_path / "20240612_140000"
    (run_dir / "vis_data").mkdir(parents=True)
    (run_dir / "20240612_140000.log").write_text(CONFIG % 50 + "\n")
    json_log = run_dir / "vis_data" / "scalars.json"
    json_log.write_text((FIXTURES / "mmdet_v3_vis.json").read_text())
    how = logfigure.reading(json_log, fmt="mmdet-v3")
    assert how.options == {"window": 50} and "from the config of the text log beside it" in how.notes[0]
    records, _ = logfigure.read(json_log, how)
    assert [(r.kind, r.span) for r in records] == [(WINDOW_MEAN, 50), (WINDOW_MEAN, 50)]
