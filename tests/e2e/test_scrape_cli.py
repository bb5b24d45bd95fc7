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
from tests.support import logtext

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "scrapers" / "fixtures"

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


# the keys of the figure line, in order
FIGURE_KEYS = ["requested_window", "window", "iteration_time_s", "data_time_s", "throughput", "error_bound_s",
               "data_error_bound_s", "exact", "kind", "run", "runs", "format", "format_source"]


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
    assert fig["requested_window"] == [6, 25] and (fig["run"], fig["runs"]) == (1, 1)
    assert 0 <= fig["error_bound_s"] < 1e-12 and 0 <= fig["data_error_bound_s"] < 1e-12   # printed in full
    assert (fig["format"], fig["format_source"]) == ("detbench-jsonl", "framework")
    assert list(fig) == FIGURE_KEYS
    assert out.stderr == ""


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
    refused = scrape(FIXTURES / "simpledet_mxnet.log", "--warmup", 0, "--measure", 40)
    assert refused.exit_code == 2 and refused.stdout == ""
    assert "no figure the printed digits bound: the log prints images/s only (give --images-per-iteration N); " \
           "--approximate gives it without a bound" in refused.stderr
    out = scrape(FIXTURES / "simpledet_mxnet.log", "--warmup", 0, "--measure", 40, "--approximate")
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
    as_run = lines_of(scrape("--framework", "torchvision", log, "--warmup", 5, "--measure", 20, "--approximate"))
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
    assert (fig["format"], fig["format_source"]) == ("detbench-jsonl", "detected") and proc.stderr == ""


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
    fig = lines_of(out)[-1]
    assert (fig["format"], fig["format_source"]) == (name, "detected")
    assert fig["window"] == [warmup + 1, warmup + measure]
    assert fig["kind"] == "exact-cumulative" and fig["exact"] is True
    # each printed mean is off by at most half its last digit; n2*g2 - n1*g1 carries both
    rounding = 0.5 * 10 ** -decimals * (n1 + n2) / (n2 - n1) if decimals else 1e-12
    assert fig["error_bound_s"] <= rounding * (1 + 1e-9)
    truth, data = logtext.truth(pairs, warmup + 1, warmup + measure)
    assert abs(fig["iteration_time_s"] - truth) <= fig["error_bound_s"]
    # every one prints its data time: within its own bound of the truth
    assert abs(fig["data_time_s"] - data) <= fig["data_error_bound_s"]


def test_one_running_mean_gives_the_mean_of_its_own_iterations_and_says_so(tmp_path):
    pairs = logtext.times(20)
    log = write(tmp_path, logtext.detectron2_v03(pairs))
    out = scrape(log, "--warmup", 5, "--measure", 15)
    assert out.exit_code == 0, out.output
    fig = lines_of(out)[-1]
    assert fig["window"] == [3, 20] and fig["requested_window"] == [6, 20] and fig["exact"] is False
    assert abs(fig["iteration_time_s"] - logtext.truth(pairs, 3, 20)[0]) <= fig["error_bound_s"]
    assert out.stderr.splitlines() == ["detbench: %s: the figure covers iterations 3..20, not the 6..20 asked for "
                                       "(the nearest the log's records allow)" % log]
    # for 6..15 the same mean would take in 8 iterations outside the window: past half of it, refused
    out = scrape(log, "--warmup", 5, "--measure", 10)
    assert out.exit_code == 2 and out.stderr.splitlines() == [
        "detbench: error: %s: the running means nearest the window 6..15, at iterations 2 and 20, take in 8 "
        "iterations outside it, more than half of its 10: their mean is mostly of other iterations" % log]


# ---------------------------------------------------------------- runs inside a log

def restarted_mmdet_log(tmp_path):
    """An mmdetection 2.x run of 500-iteration epochs that crashed after iteration 1000 and was
    resumed from the checkpoint of iteration 500, appended to the same log: run 1 is slower."""
    first, second = logtext.times(1000, seed=21, base=0.30), logtext.times(1500, seed=22, base=0.24)
    text = logtext.mmcv_epoch(first, 500) + logtext.mmcv_epoch(second, 500, first=501)
    return write(tmp_path, text), first, second


def test_a_restarted_run_gives_the_figure_of_one_run_and_says_which(tmp_path):
    log, first, second = restarted_mmdet_log(tmp_path)
    out = scrape(log, "--warmup", 600, "--measure", 400)     # iterations 601..1000: both runs hold them
    assert out.exit_code == 0, out.output
    *records, fig = lines_of(out)
    assert {r["run"] for r in records} == {1, 2}
    assert (fig["run"], fig["runs"], fig["window"]) == (2, 2, [601, 1000])   # the last run that covers it
    # the restarted run's own iterations 601..1000 (its 101st..500th), not a blend of both
    assert abs(fig["iteration_time_s"] - logtext.truth(second, 101, 500)[0]) <= fig["error_bound_s"]
    assert out.stderr.splitlines() == [
        "detbench: %s: the log holds 2 runs (a restarted process begins each); the figure is from run 2, "
        "iterations 501..2000 on lines 26..55 (--run N picks another)" % log]
    one = lines_of(scrape(log, "--warmup", 600, "--measure", 400, "--run", 1))[-1]
    assert one["run"] == 1 and abs(one["iteration_time_s"] - logtext.truth(first, 601, 1000)[0]) <= one["error_bound_s"]


def test_a_restarted_detectron2_run_counts_its_timer_from_its_own_start(tmp_path):
    first, second = logtext.times(1000, seed=23, base=0.30), logtext.times(1500, seed=24, base=0.24)
    log = write(tmp_path, logtext.detectron2_v03(first) + logtext.detectron2_v03(second, start=500))
    fig = lines_of(scrape(log, "--warmup", 600, "--measure", 400))[-1]
    assert (fig["run"], fig["runs"], fig["window"], fig["exact"]) == (2, 2, [601, 1000], True)
    assert abs(fig["iteration_time_s"] - logtext.truth(second, 101, 500)[0]) <= fig["error_bound_s"]


def test_a_restart_without_its_banner_is_still_a_run_of_its_own(tmp_path):
    # the counter going back is enough; where its timer started is then not known: approximate
    first, second = logtext.times(1000, seed=25, base=0.30), logtext.times(1500, seed=26, base=0.24)
    log = write(tmp_path, logtext.detectron2_v03(first) + logtext.detectron2_v03(second, start=500, banner=False))
    refused = scrape(log, "--warmup", 600, "--measure", 400)
    assert refused.exit_code == 2 and "no figure the printed digits bound: approximate" in refused.stderr
    fig = lines_of(scrape(log, "--warmup", 600, "--measure", 400, "--approximate"))[-1]
    assert (fig["run"], fig["runs"], fig["kind"], fig["exact"], fig["error_bound_s"]) == (2, 2, "global-mean", False,
                                                                                          None)


def test_no_figure_mixes_runs(tmp_path):
    # a crash at 1000 and a resume from the checkpoint of 900 (100-iteration epochs): 1..1100 is
    # in neither run alone, and the second holds less than half of it
    first, second = logtext.times(1000, seed=21), logtext.times(600, seed=22)
    log = write(tmp_path, logtext.mmcv_epoch(first, 100) + logtext.mmcv_epoch(second, 100, first=901))
    out = scrape(log, "--warmup", 0, "--measure", 1100)
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [
        "detbench: error: %s: no single run of the log covers the window 1..1100, and a figure never mixes runs: "
        "run 1 covers iterations 1..1000 (lines 3..22); run 2 covers iterations 901..1500 (lines 26..37); pick one "
        "with --run N" % log]
    one = lines_of(scrape(log, "--warmup", 0, "--measure", 1100, "--run", 2))[-1]
    assert (one["run"], one["window"], one["exact"]) == (2, [901, 1100], False)
    out = scrape(log, "--warmup", 0, "--measure", 1100, "--run", 3)
    assert out.exit_code == 2 and "the log holds 2 runs; there is no run 3" in out.stderr


@pytest.mark.parametrize("edit, message", [
    (lambda lines: lines[:10] + [lines[9]] + lines[10:],
     "{log}:11: iteration 400 is logged twice: on line 10 and on line 11"),
    (lambda lines: lines[:8] + [lines[9], lines[8]] + lines[10:],
     "{log}:10: records out of order: iteration 350 on line 10 comes after iteration 400 on line 9"),
])
def test_records_seen_twice_or_out_of_order_are_refused_naming_both_lines(tmp_path, edit, message):
    lines = logtext.mmcv_epoch(logtext.times(1000, seed=27), 500).splitlines()
    log = write(tmp_path, "\n".join(edit(lines)) + "\n")
    out = scrape(log, "--warmup", 100, "--measure", 400)
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr.splitlines() == ["detbench: error: " + message.format(log=log)]


def test_a_run_s_last_line_printed_twice_is_read_once_and_a_retimed_one_is_a_restart(tmp_path):
    lines = logtext.mmcv_epoch(logtext.times(1000, seed=28), 500).splitlines()
    log = write(tmp_path, "\n".join(lines + [lines[-1]]) + "\n")
    out = scrape(log, "--warmup", 100, "--measure", 400)
    assert out.exit_code == 0 and out.stderr == "", out.output
    assert [r["iteration"] for r in lines_of(out)[:-1]].count(1000) == 1
    retimed = write(tmp_path, "\n".join(lines[:10] + [lines[9].replace("time: 0.", "time: 9.")] + lines[10:]) + "\n",
                    "retimed.log")
    fig = lines_of(scrape(retimed, "--warmup", 400, "--measure", 100))[-1]
    assert (fig["run"], fig["runs"], fig["window"]) == (2, 2, [401, 500])


# ---------------------------------------------------------------- epoch geometry

def test_tensorpack_takes_its_epoch_length_from_its_own_lines(tmp_path):
    pairs = logtext.times(2000, seed=29)
    log = write(tmp_path, logtext.tensorpack(pairs, steps_per_epoch=100, gpus=8))
    truth = 8 / logtext.truth(pairs, 501, 1000)[0]
    for how in (["--format", "tensorpack"], ["--framework", "tensorpack"]):   # the framework's default is 10
        out = scrape(log, *how, "--warmup", 500, "--measure", 500, "--approximate")
        assert out.exit_code == 0 and out.stderr == "", out.output
        *records, fig = lines_of(out)
        assert [r["iteration"] for r in records] == list(range(100, 2001, 100))
        assert fig["window"] == [501, 1000] and fig["kind"] == "throughput" and fig["exact"] is False
        assert fig["throughput"] == pytest.approx(truth, rel=1e-4)   # 5 significant digits


def test_an_mmdetection_log_json_past_its_first_epoch(tmp_path):
    pairs = logtext.times(2000, seed=30)
    log = write(tmp_path, logtext.mmcv_log_json(pairs, 1000), "20210301_090000.log.json")
    out = scrape(log, "--warmup", 500, "--measure", 1000)
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [
        "detbench: error: %s: the window 501..1500 lies past iteration 1000, the last the log places: 20 record "
        "lines cannot be placed, as the log does not print the epoch length (first: line 22); give "
        "--iters-per-epoch N" % log]
    truth = logtext.truth(pairs, 501, 1500)
    given = lines_of(scrape(log, "--warmup", 500, "--measure", 1000, "--iters-per-epoch", 1000))[-1]
    assert given["window"] == [501, 1500] and given["exact"] is True   # 5 decimals
    assert abs(given["iteration_time_s"] - truth[0]) <= given["error_bound_s"] <= 0.5e-5 * 1.0001
    assert abs(given["data_time_s"] - truth[1]) <= given["data_error_bound_s"]
    # the text log mmdetection writes beside it prints the epoch length on every line
    write(tmp_path, logtext.mmcv_epoch(pairs, 1000), "20210301_090000.log")
    beside = scrape(log, "--warmup", 500, "--measure", 1000)
    assert lines_of(beside)[-1] == given
    assert beside.stderr.splitlines() == ["detbench: %s: 1000 iterations per epoch, from the text log beside it "
                                          "(%s)" % (log, str(log)[:-len(".json")])]


def test_dllogger_across_an_epoch_gives_what_its_records_hold_and_says_what_they_leave_out(tmp_path):
    # the batch-time meter restarts at batch 10 of each epoch: batches 0..9 are in no running mean,
    # so the figure is the longest stretch of the window the running means give whole
    pairs = logtext.times(3000, seed=31)
    log = write(tmp_path, logtext.dllogger_pytorch(pairs, log_interval=50, steps_per_epoch=1000))
    out = scrape(log, "--warmup", 1000, "--measure", 1000)
    assert out.exit_code == 0, out.output
    fig = lines_of(out)[-1]
    assert fig["window"] == [1011, 2000] and fig["exact"] is False
    assert abs(fig["iteration_time_s"] - logtext.truth(pairs, 1011, 2000)[0]) <= fig["error_bound_s"] < 1e-12
    # the data meter runs from batch 0: its means cover 1001..2000, not the figure's iterations
    assert fig["data_time_s"] is None
    assert out.stderr.splitlines() == [
        "detbench: %s: the figure covers iterations 1011..2000, not the 1001..2000 asked for (the nearest the "
        "log's records allow)" % log,
        "detbench: %s: no data time: the log's data means cover iterations 1001..2000 nearest the figure's "
        "1011..2000, and a data time of other iterations is none of its window" % log]
    # inside one epoch both meters give the window whole
    fig = lines_of(scrape(log, "--warmup", 500, "--measure", 400))[-1]
    assert fig["window"] == [501, 900] and fig["exact"] is True
    assert abs(fig["data_time_s"] - logtext.truth(pairs, 501, 900)[1]) <= fig["data_error_bound_s"] < 1e-12


# ---------------------------------------------------------------- the window used, stated

def test_mmdetection_read_as_detbench_runs_it_is_not_exact_on_a_stock_log(tmp_path):
    # detbench runs mmdetection logging every iteration; a stock 3.x config logs every 50
    pairs = logtext.times(2000, seed=32)
    log = write(tmp_path, logtext.mmengine_epoch(pairs, 1000))
    out = scrape(log, "--framework", "mmdetection", "--warmup", 200, "--measure", 1000, "--approximate")
    assert out.exit_code == 0, out.output
    fig = lines_of(out)[-1]
    assert fig["window"] == [250, 1200] and fig["exact"] is False and fig["error_bound_s"] is None
    assumed, window = out.stderr.splitlines()
    assert assumed == ("detbench: %s: read as detbench runs mmdetection (window 1), which a log without detbench's "
                       "own lines need not follow: the figure has no error bound; --format mmdet-v3 reads it as its "
                       "framework's scripts write it" % log)
    assert window.startswith("detbench: %s: the figure covers iterations 250..1200, not the 201..1200 asked for" % log)
    assert "it was written with another logging interval or window than it is read with" in window
    stock = lines_of(scrape(log, "--warmup", 200, "--measure", 1000))[-1]   # read as its own format
    assert stock["window"] == [201, 1200] and stock["kind"] == "window-means" and stock["exact"] is True
    assert abs(stock["iteration_time_s"] - logtext.truth(pairs, 201, 1200)[0]) <= stock["error_bound_s"]


@pytest.mark.parametrize("text, warmup, measure, used", [
    (lambda p: logtext.detectron2_v03(p), 201, 1000, (201, 1200)),      # prints at 20, 40, ...
    (lambda p: logtext.detectron(p), 1000, 1000, (982, 2000)),          # prints at 1, 21, ...; reset after 21
])
def test_a_window_moved_to_the_logged_iterations_is_stated_and_not_exact(tmp_path, text, warmup, measure, used):
    pairs = logtext.times(2000, seed=33)
    log = write(tmp_path, text(pairs))
    out = scrape(log, "--warmup", warmup, "--measure", measure)
    assert out.exit_code == 0, out.output
    fig = lines_of(out)[-1]
    assert tuple(fig["window"]) == used and fig["exact"] is False
    assert abs(fig["iteration_time_s"] - logtext.truth(pairs, *used)[0]) <= fig["error_bound_s"]
    assert out.stderr.splitlines() == ["detbench: %s: the figure covers iterations %d..%d, not the %d..%d asked for "
                                       "(the nearest the log's records allow)"
                                       % (log, used[0], used[1], warmup + 1, warmup + measure)]


# ---------------------------------------------------------------- error bounds

def test_max_error_refuses_a_window_the_printed_digits_cannot_bound_so_tightly(tmp_path):
    pairs = logtext.times(2000, seed=34)
    log = write(tmp_path, logtext.mmcv_epoch(pairs, 1000))     # 3 decimals of a 0.35 s mean: 0.14%
    out = scrape(log, "--warmup", 200, "--measure", 1000, "--max-error", 0.001)
    assert out.exit_code == 2 and out.stdout == ""
    [line] = out.stderr.splitlines()
    assert line.startswith("detbench: error: %s: the window 201..1200 cannot meet --max-error 0.001: the printed "
                           "digits bound its figure" % log)
    fig = lines_of(scrape(log, "--warmup", 200, "--measure", 1000, "--max-error", 0.01))[-1]
    assert fig["error_bound_s"] / fig["iteration_time_s"] <= 0.01
    medians = write(tmp_path, (FIXTURES / "detectron2_metrics.json").read_text(), "metrics.json")
    out = scrape(medians, "--warmup", 20, "--measure", 20, "--max-error", 0.5)
    assert out.exit_code == 2 and "a window-median figure has no error bound" in out.stderr


# ---------------------------------------------------------------- bounded input, one error line

@pytest.mark.parametrize("content, message", [
    (b"\0" * 100000, "{log}:1: a NUL byte: the file is not a text log"),
    (b"[05/17 d2]: Starting training from iteration 0\n" + b"x" * (3 << 20) + b"\n",
     "{log}:2: a line longer than 1048576 bytes: not a log line"),
])
def test_a_file_that_is_no_text_log_is_one_line_and_exit_2(tmp_path, content, message):
    log = tmp_path / "train.log"
    log.write_bytes(content)
    out = scrape("--format", "detectron2", log, "--warmup", 0, "--measure", 10)
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr.splitlines() == ["detbench: error: " + message.format(log=log)]


def test_dev_zero_is_refused_within_a_memory_limit():
    # an endless line: before, it was read whole until memory ran out
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
            "from harness.cli import main; sys.argv = ['detbench', 'scrape', '/dev/zero']; main()")
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["detbench: error: /dev/zero:1: a NUL byte: the file is not a text log"]


def test_a_wrong_format_is_one_line_that_counts_the_noise(tmp_path):
    # torchvision's lines hold maskrcnn-benchmark's key ("  data: ") but not its meters
    log = write(tmp_path, logtext.torchvision_ref(logtext.times(2000, seed=35)))
    out = scrape("--format", "maskrcnn-benchmark", log, "--warmup", 10, "--measure", 100)
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [
        "detbench: error: %s: no maskrcnn-benchmark training record in the log; its lines are torchvision-ref: read "
        "it with --format torchvision-ref; 101 lines did not parse (line 2 and 100 more like it: looks like a "
        "training record but does not parse)" % log]


def test_noise_beside_a_figure_is_counted_on_one_line(tmp_path):
    lines = logtext.mmengine_iter(logtext.times(200, seed=36)).splitlines()
    bad = [lines[0]] + [l.replace("time: 0.", "time: x.") if k % 5 == 0 else l for k, l in enumerate(lines[1:])]
    log = write(tmp_path, "\n".join(bad) + "\n")
    out = scrape(log, "--warmup", 100, "--measure", 50, "--approximate")
    assert out.exit_code == 0, out.output
    assert out.stderr.splitlines() == ["detbench: %s: 4 lines did not parse (line 2 and 3 more like it: cannot parse: "
                                       "ValueError)" % log]


# ---------------------------------------------------------------- data time

def test_detectron2_prints_a_data_time_of_its_own_window_and_it_is_read(tmp_path):
    pairs = logtext.times(200, seed=37)
    log = write(tmp_path, logtext.detectron2_v03(pairs))
    fig = lines_of(scrape(log, "--warmup", 40, "--measure", 120))[-1]
    assert fig["window"] == [41, 160]
    # the mean of the last 20 at each print: the prints tile the window, to 4 decimals
    assert abs(fig["data_time_s"] - logtext.truth(pairs, 41, 160)[1]) <= fig["data_error_bound_s"] <= 0.5e-4 * 1.0001


# ---------------------------------------------------------------- bounded memory

@pytest.mark.parametrize("text, windows", [
    (lambda: logtext.mmcv_epoch(logtext.times(1000, seed=41), 500)
     + logtext.mmcv_epoch(logtext.times(1500, seed=42), 500, first=501), [(600, 400), (0, 2000), (1000, 500)]),
    (lambda: logtext.detectron2_v03(logtext.times(3000, seed=43)), [(0, 3000), (1201, 1000), (2980, 20)]),
    (lambda: logtext.dllogger_pytorch(logtext.times(3000, seed=44), log_interval=50, steps_per_epoch=1000),
     [(500, 1000), (0, 3000), (1950, 50)]),
    (lambda: logtext.tensorpack(logtext.times(10000, seed=45), 100, gpus=2), [(500, 500), (0, 10000)]),
])
def test_a_window_read_alone_gives_the_figure_of_the_whole_log(tmp_path, text, windows):
    """The command line keeps only the records a window's figure can use (memory bounded by
    the window, not the log): the figure is the one every record gives."""
    from harness.measure import logfigure
    log = write(tmp_path, text())
    how = logfigure.reading(log)
    every, _ = logfigure.read(log, how)
    sizes = []
    for warmup, measure in windows:
        kept, _ = logfigure.read(log, how, window=(warmup + 1, warmup + measure))
        sizes.append(len(kept))
        whole = logfigure.figure(log, every, warmup, measure, 2, approximate=True)
        alone = logfigure.figure(log, kept, warmup, measure, 2, approximate=True)
        assert alone == whole
    assert min(sizes) < len(every) and max(sizes) <= len(every)
