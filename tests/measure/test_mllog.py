"""One MLPerf result file through mlperf_logging's parser and the round's rules (harness/measure/mllog.py)."""
import dataclasses
import json
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.measure import mllog
from tests.support import mllogs

FIXTURES = Path(__file__).resolve().parents[1] / "results" / "fixtures" / "mlperf"


def stamps(path):
    """key -> every time_ms of it, read with json alone."""
    out = {}
    for line in path.read_text(encoding="latin-1").splitlines():
        if ":::MLLOG " in line:
            record = json.loads(line.split(":::MLLOG ", 1)[1])
            out.setdefault(record["key"], []).append(record)
    return out


@pytest.mark.parametrize("name, benchmark, bracket", [
    ("v2.0-NVIDIA-dgxa100_ngc22.04_pytorch-ssd-result_0.txt", "ssd", "epoch"),
    ("v2.0-Google-cloud-tpu-v4-2048-TF-maskrcnn-result_0.txt", "maskrcnn", "block"),
])
def test_a_real_result_gives_its_time_to_train_curve_and_epochs(name, benchmark, bracket):
    path = FIXTURES / name
    records = stamps(path)
    result = mllog.read_result(str(path), "2.0.0")
    start, stop = records["run_start"][0]["time_ms"], records["run_stop"][0]["time_ms"]
    assert result.minutes == pytest.approx((stop - start) / 60000.0, abs=1e-12)
    assert result.compliance is None  # the closed division's rules pass, as the summarizer found
    assert result.benchmark == benchmark and result.division == "closed" and result.status == "success"
    assert len(result.curve) == len(records["eval_accuracy"])
    assert len(result.epochs) == len(records[bracket + "_stop"])
    target = mllog.targets("2.0.0", benchmark)
    reached = mllog.time_to_target(result.curve, target)
    last = records["eval_accuracy"][-1]
    assert reached == pytest.approx((last["time_ms"] - start) / 1000.0)  # the run stops at its first crossing
    assert result.global_batch == records["global_batch_size"][0]["value"]


def test_targets_are_the_closed_rules():
    assert mllog.targets("2.1.0", "maskrcnn") == {"BBOX": 0.377, "SEGM": 0.339}
    assert mllog.targets("2.1.0", "ssd") == {"": 0.34}


@pytest.mark.parametrize("shape", ["maskrcnn-pytorch", "ssd-pytorch", "tpu"])
def test_each_submitter_shape_reads_to_the_times_it_was_written_with(tmp_path, shape):
    bench = "maskrcnn" if shape == "maskrcnn-pytorch" else "ssd"
    path = mllogs.write_result(tmp_path / "result_0.txt", shape=shape, minutes=12.5, epochs=5, init_s=90.0,
                               benchmark=bench)
    result = mllog.read_result(str(path), "2.1.0")
    assert result.minutes == pytest.approx(12.5)
    assert result.init_s == pytest.approx(90.0 - 0.001)  # init_start is written 1 ms after the first record
    assert len(result.epochs) == 5 and len(result.curve) == 5
    assert result.compliance is None
    assert result.global_batch == 256
    assert result.local_batch == (None if shape == "tpu" else 32)
    # an evaluation after every epoch, from 1 ms after its end to 1 ms before the next starts
    each = (12.5 * 60000 - 10) // 5
    assert result.eval_s == pytest.approx(5 * (each - 1 - int(each * 0.98) - 1) / 1000.0)


def test_epoch_rate_is_the_closed_data_set_over_the_epoch_with_its_bound(tmp_path):
    path = mllogs.write_result(tmp_path / "result_0.txt", shape="ssd-pytorch", minutes=10, epochs=4)
    result = dataclasses.replace(mllog.read_result(str(path), "2.1.0"), division="closed")
    epoch = result.epochs[0]
    rate, bound = mllog.epoch_rate(result, epoch, 8)
    assert rate == pytest.approx(1170301 / epoch.seconds / 8)
    assert bound == pytest.approx(0.001 / epoch.seconds + 256 / 1170301)
    open_division = dataclasses.replace(result, division="open")
    assert mllog.epoch_rate(open_division, epoch, 8) is None  # its data set is not the closed one


def test_a_result_the_rules_refuse_carries_the_checkers_message(tmp_path):
    path = mllogs.write_result(tmp_path / "result_0.txt", shape="ssd-pytorch", accuracy=(0.2, 0.3),
                               division="closed")
    result = mllog.read_result(str(path), "2.0.0")
    assert result.compliance  # closed: the weights, the optimizer's settings and the target are missing


def line_of(path, key, nth=0):
    hits = [n for n, line in enumerate(path.read_text().splitlines(), 1) if '"key": "%s"' % key in line]
    return hits[nth]


def test_truncated_two_run_starts_and_non_mllog_name_file_and_line(tmp_path):
    cut = mllogs.write_result(tmp_path / "cut.txt", stop=False)
    with pytest.raises(UserError, match=r"cut.txt:%d: run_stop: missing" % len(cut.read_text().splitlines())):
        mllog.read_result(str(cut), "2.0.0")
    twice = mllogs.write_result(tmp_path / "twice.txt",
                                extra=lambda log, t0: log.start("run_start", None, time_ms=t0 + 2))
    with pytest.raises(UserError, match=r"twice.txt:%d: run_start: a second run_start \(the first at line %d\)"
                       % (line_of(twice, "run_start", 1), line_of(twice, "run_start", 0))):
        mllog.read_result(str(twice), "2.0.0")
    text = tmp_path / "notes.txt"
    text.write_text("epoch 1 loss 0.3\n")
    with pytest.raises(UserError, match=r"notes.txt:1: not an MLLOG result file"):
        mllog.read_result(str(text), "2.0.0")
    broken = tmp_path / "broken.txt"
    broken.write_text(cut.read_text().splitlines()[0] + "\n:::MLLOG {\"key\": \n")
    with pytest.raises(UserError, match=r"broken.txt:2: not an MLLOG record"):
        mllog.read_result(str(broken), "2.0.0")


def test_a_round_the_rules_do_not_know_is_refused():
    assert mllog.ruleset("v2.1") == "2.1.0"
    known = r"round 9.9: mlperf-logging has no training rules for it \(known rounds: .*2\.0"
    with pytest.raises(UserError, match=known):
        mllog.ruleset("9.9")
