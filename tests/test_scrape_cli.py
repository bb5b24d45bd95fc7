"""`detbench scrape`: a log in, its records and the measured window's figure out."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import frameworks
from harness.measure import ingest, scrapers
from harness.cli import main
from tests import logtext

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "scrapers" / "fixtures"

# fixture file -> the format its lines are written in
FIXTURE_FORMATS = {
    "detectron2.log": "detectron2", "detectron2_2019.log": "detectron2", "detectron2_v06.log": "detectron2",
    "detectron2_metrics.json": "detectron2", "dllogger_pytorch.log": "dllogger",
    "dllogger_tf2_time_log.txt": "dllogger", "effdet.log": "effdet", "maskrcnn_benchmark.log": "maskrcnn-benchmark",
    "mmdet_v1.log": "mmdet-v1", "mmdet_v1.log.json": "mmdet-v1", "mmdet_v2.log": "mmdet-v2",
    "mmdet_v2.log.json": "mmdet-v2", "mmdet_v2_iter.log": "mmdet-v2", "mmdet_v3.log": "mmdet-v3",
    "mmdet_v3_vis.json": "mmdet-v3", "simpledet_mxnet.log": "simpledet-mxnet",
    "simpledet_mxnet_old.log": "simpledet-mxnet", "torchvision_ref.log": "torchvision-ref",
    "detectron.log": "detectron", "detectron_truncated.log": "detectron",
    "tensorpack.log": "tensorpack", "tensorpack_short.log": "tensorpack",
}


def scrape(*args):
    return CliRunner().invoke(main, ["scrape", *map(str, args)])


def lines_of(result):
    return [json.loads(line) for line in result.stdout.splitlines()]


def write(tmp_path, text, name="train.log"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def trial_row(tmp_path, log_text, scraper, warmup, measure, images, options=None):
    """The store row (TrialResult.columns) ingest.analyse gives a finished trial whose log is `log_text`."""
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "log.txt").write_text(log_text, encoding="utf-8")
    (trial / "trial.json").write_text(json.dumps({"exit_code": 0}), encoding="utf-8")
    row = ingest.analyse(str(trial), scraper, warmup, measure, images, options or {}).columns()
    assert row["status"] == "done", row["reason"]
    return row


def test_the_last_line_is_the_window_figure_of_the_true_times(tmp_path):
    pairs = logtext.times(30, seed=1)
    log = write(tmp_path, logtext.detbench_jsonl(pairs, images=4))
    out = scrape("--framework", "detbench-trainer", log, "--warmup", 5, "--measure", 20)
    assert out.exit_code == 0, out.output
    *records, fig = lines_of(out)
    assert [r["iteration"] for r in records] == list(range(1, 31))
    iteration_time, data_time = logtext.truth(pairs, 6, 25)
    assert fig["window"] == [6, 25]
    assert fig["iteration_time_s"] == pytest.approx(iteration_time, rel=1e-12)
    assert fig["data_time_s"] == pytest.approx(data_time, rel=1e-12)
    assert fig["throughput"] == pytest.approx(4 / iteration_time, rel=1e-12)   # the log counts its images
    assert fig["exact"] is True and fig["kind"] == "exact"
    assert set(fig) == {"window", "iteration_time_s", "data_time_s", "throughput", "exact", "kind"}


def test_without_a_window_only_the_records_are_printed(tmp_path):
    log = write(tmp_path, logtext.detbench_jsonl(logtext.times(5), images=2))
    out = scrape("--framework", "detbench-trainer", log)
    assert out.exit_code == 0, out.output
    assert [r["iteration"] for r in lines_of(out)] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("scraper, text, options", [
    ("detbench-jsonl", lambda p: logtext.detbench_jsonl(p, images=2), {}),
    ("torchvision-ref", logtext.torchvision_ref, {}),
    ("mmdet-v3", logtext.mmengine_iter, {}),
    ("mmdet-v2", lambda p: logtext.mmcv_epoch(p, iters_per_epoch=100), {}),
    ("effdet", lambda p: logtext.effdet(p, global_batch=2), {}),
])
def test_the_figure_is_the_one_a_trial_of_that_log_gets(tmp_path, scraper, text, options):
    pairs = logtext.times(200, seed=3)
    log_text = text(pairs)
    log = write(tmp_path, log_text)
    out = scrape("--format", scraper, log, "--warmup", 40, "--measure", 120, "--images-per-iteration", 2)
    assert out.exit_code == 0, out.output
    fig = lines_of(out)[-1]
    row = trial_row(tmp_path, log_text, scraper, 40, 120, 2, options)
    assert fig["iteration_time_s"] == row["iteration_time_s"]
    assert fig["data_time_s"] == row["data_time_s"]
    assert fig["throughput"] == row["throughput"]
    assert fig["exact"] == bool(row["exact"])
    if row.get("figure_kind") is not None:
        assert fig["kind"] == row["figure_kind"]
        assert fig["window"] == json.loads(row["window_json"])


def test_window_means_of_a_stock_torchvision_log_add_up_to_the_truth(tmp_path):
    pairs = logtext.times(100, seed=5)
    # printed at 0-based i = 0, 20, 40, ...: the mean of iterations 2..21, 22..41, ...
    log = write(tmp_path, logtext.torchvision_ref(pairs))
    out = scrape(log, "--warmup", 21, "--measure", 60)
    assert out.exit_code == 0, out.output
    fig = lines_of(out)[-1]
    assert fig["window"] == [22, 81] and fig["exact"] is True
    assert fig["iteration_time_s"] == pytest.approx(logtext.truth(pairs, 22, 81)[0], abs=0.00005)


def test_throughput_is_null_when_the_images_per_iteration_are_not_known(tmp_path):
    pairs = logtext.times(100, seed=2)
    log = write(tmp_path, logtext.torchvision_ref(pairs))
    fig = lines_of(scrape(log, "--warmup", 20, "--measure", 60))[-1]
    assert fig["throughput"] is None and fig["iteration_time_s"] is not None
    given = lines_of(scrape(log, "--warmup", 20, "--measure", 60, "--images-per-iteration", 8))[-1]
    assert given["throughput"] == pytest.approx(8 / given["iteration_time_s"])


def test_a_throughput_only_log_gives_throughput_but_no_iteration_time_without_the_batch(tmp_path):
    out = scrape(FIXTURES / "simpledet_mxnet.log", "--warmup", 0, "--measure", 40)
    assert out.exit_code == 0, out.output
    fig = lines_of(out)[-1]
    assert fig["kind"] == "throughput" and fig["exact"] is False
    assert fig["throughput"] is not None and fig["iteration_time_s"] is None


@pytest.mark.parametrize("name", sorted(FIXTURE_FORMATS))
def test_every_format_is_detected_from_its_own_lines(name):
    assert scrapers.detect(FIXTURES / name) == [FIXTURE_FORMATS[name]]


def test_every_format_can_be_named_and_listed():
    assert set(FIXTURE_FORMATS.values()) == set(scrapers.SCRAPERS) - {"detbench-jsonl"}
    assert list(scrapers.FORMATS) == list(scrapers.SCRAPERS)
    out = scrape("--list-formats")
    assert out.exit_code == 0
    listed = [line.split()[0] for line in out.stdout.splitlines()]
    assert listed == list(scrapers.SCRAPERS)


def test_detection_says_which_format_it_chose(tmp_path):
    log = write(tmp_path, logtext.detbench_jsonl(logtext.times(3), images=2))
    out = scrape(log)
    assert out.exit_code == 0, out.output
    assert "detbench: reading %s as detbench-jsonl (detected)" % log in out.stderr


def test_an_mmdetection_2_log_is_read_by_detection_and_by_format_name():
    log = FIXTURES / "mmdet_v2.log"
    detected = scrape(log)
    named = scrape("--format", "mmdet-v2", log)
    assert detected.exit_code == named.exit_code == 0
    assert [r["iteration"] for r in lines_of(detected)] == [50, 100, 170]
    assert lines_of(detected) == lines_of(named)


def test_the_wrong_framework_for_a_log_names_the_format_its_lines_are_in():
    out = scrape("--framework", "mmdetection", FIXTURES / "mmdet_v2.log")
    assert out.exit_code == 2
    assert out.stdout == ""
    assert "mmdet_v2.log: no mmdet-v3 training record in the log; its lines are mmdet-v2: " \
           "read it with --format mmdet-v2" in out.stderr


def test_a_framework_reads_with_the_options_detbench_runs_it_with(tmp_path):
    # torchvision under detbench logs every iteration with a window of 1
    pairs = logtext.times(30, seed=4)
    log = write(tmp_path, logtext.torchvision_ref(pairs, print_freq=1, window=1))
    as_run = lines_of(scrape("--framework", "torchvision", log, "--warmup", 5, "--measure", 20))
    assert frameworks.FRAMEWORKS["torchvision"].scrape_options == {"window": 1}
    assert {r["span"] for r in as_run[:-1]} == {1}
    assert as_run[-1]["iteration_time_s"] == pytest.approx(logtext.truth(pairs, 6, 25)[0], abs=0.00005)


@pytest.mark.parametrize("args, message", [
    (["--framework", "nope", "{log}"], "unknown framework 'nope'"),
    (["--format", "nope", "{log}"], "unknown format 'nope'"),
    (["--framework", "calibrate", "--format", "detbench-jsonl", "{log}"], "give --framework or --format, not both"),
    (["{log}", "--warmup", "5"], "give both --warmup and --measure"),
    (["{log}", "--warmup", "40", "--measure", "10"], "{log}: the log ends at iteration 30; the window needs "
                                                     "iterations 41..50"),
    (["{log}", "--warmup", "10", "--measure", "40"], "{log}: the log ends at iteration 30; the window needs "
                                                     "iterations 11..50"),
    (["{plain}"], "{plain}: matches no known log format; name it with --format NAME"),
    (["{mixed}"], "{mixed}: mixes the formats detbench-jsonl and torchvision-ref"),
    (["--format", "detectron2", "{log}"], "{log}: no detectron2 training record in the log; its lines are "
                                          "detbench-jsonl: read it with --format detbench-jsonl"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    jsonl = logtext.detbench_jsonl(logtext.times(30), images=2)
    paths = {"log": write(tmp_path, jsonl), "plain": write(tmp_path, "hello\nworld\n", "plain.log"),
             "mixed": write(tmp_path, jsonl + logtext.torchvision_ref(logtext.times(30)), "mixed.log")}
    out = scrape(*[a.format(**paths) for a in args])
    assert out.exit_code == 2
    assert out.stdout == ""
    errors = [line for line in out.stderr.splitlines() if line.startswith("detbench: error: ")]
    assert len(errors) == 1 and message.format(**paths) in errors[0], out.stderr


def test_scrape_runs_as_a_command(tmp_path):
    pairs = logtext.times(30, seed=6)
    log = write(tmp_path, logtext.detbench_jsonl(pairs, images=2))
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "scrape", str(log), "--warmup", "5",
                           "--measure", "20"], cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    fig = json.loads(proc.stdout.splitlines()[-1])
    assert fig["iteration_time_s"] == pytest.approx(logtext.truth(pairs, 6, 25)[0], rel=1e-12)
    assert "reading %s as detbench-jsonl (detected)" % log in proc.stderr


# held-out logs of the formats that print running means: (log text, warmup, measure, the
# running-mean record counts n1 and n2 that bound the window, decimals printed)
CUMULATIVE = {
    "detectron2": (logtext.detectron2_v03, 20, 40, 18, 58, 4),       # iterations 3..20 and 3..60
    "maskrcnn-benchmark": (logtext.maskrcnn_benchmark, 20, 40, 20, 60, 4),
    "dllogger": (logtext.dllogger_pytorch, 10, 40, 10, 40, None),    # full floats: no rounding
}


@pytest.mark.parametrize("name", sorted(CUMULATIVE))
def test_a_log_of_running_means_gives_the_true_window_mean(tmp_path, name):
    text, warmup, measure, n1, n2, decimals = CUMULATIVE[name]
    pairs = logtext.times(100, seed=11)
    log = write(tmp_path, text(pairs))
    out = scrape(log, "--warmup", warmup, "--measure", measure)
    assert out.exit_code == 0, out.output
    assert "as %s (detected)" % name in out.stderr
    fig = lines_of(out)[-1]
    assert fig["window"] == [warmup + 1, warmup + measure]
    assert fig["kind"] == "exact-cumulative" and fig["exact"] is True
    # each printed mean is off by at most half its last digit; n2*g2 - n1*g1 carries both
    rounding = 0.5 * 10 ** -decimals * (n1 + n2) / (n2 - n1) if decimals else 1e-12
    assert fig["iteration_time_s"] == pytest.approx(logtext.truth(pairs, warmup + 1, warmup + measure)[0],
                                                    abs=rounding)


def test_a_running_mean_log_with_one_record_gives_no_figure(tmp_path):
    log = write(tmp_path, logtext.detectron2_v03(logtext.times(20)))
    out = scrape(log, "--warmup", 5, "--measure", 10)
    assert out.exit_code == 2 and out.stdout == ""
    assert "%s: the log has 1 running-mean record" % log in out.stderr
