"""Cases a user met with logs written from known times in each framework's own format
(benchmarks/loggen, every choice that makes the case fixed): the figure `detbench scrape` and
`detbench import` give is true of the iterations it names, or refused saying why.
"""
import pytest

from benchmarks import loggen
from benchmarks.loggen import dllogger
from harness.errors import UserError
from harness.measure import logfigure
from harness.measure.scrapers import common

ONE_RUN = {"runs": 1, "fault": None}


def write(tmp_path, log, name="train.log"):
    return log.write(str(tmp_path / name))


def read(path, fmt=None):
    how = logfigure.reading(path, None, fmt)
    records, _ = logfigure.read(path, how)
    return records


def within_bound(log, fig, run=1):
    truth, _ = log.mean(run, *fig.window)
    return abs(fig.iteration_time_s - truth) <= fig.error_bound_s * (1 + 1e-9) + 1e-15


# ---------------------------------------------------------------- images per iteration the log contradicts

def tf2_log(tmp_path, global_batch):
    log = dllogger._tf2(loggen.FixedChooser(dict(ONE_RUN, log_steps=100, steps_per_epoch=2000, epochs=2,
                                                  global_batch=global_batch, base_ms=300)), 200000, None)
    return log, write(tmp_path, log)


def test_a_dllogger_tf2_batch_the_log_contradicts_is_refused_with_both_numbers(tmp_path):
    # its fps = steps x global batch / seconds: 240 images a step, imported as 16 would be 15x off
    log, path = tf2_log(tmp_path, 240)
    records = read(path)
    with pytest.raises(UserError, match=r"imply 240 images per iteration .*not the 16 of --images-per-iteration "
                                         r"16: every figure would be 15x off$"):
        logfigure.figure(path, records, 200, 1000, 16)
    fig = logfigure.figure(path, records, 200, 1000, 240)
    assert fig.exact and within_bound(log, fig)


def test_a_dllogger_tf2_batch_off_by_a_few_percent_is_refused_too(tmp_path):
    # fps and Latency come from one timer: only the Latency's 10 ms printing separates them
    log, path = tf2_log(tmp_path, 256)
    with pytest.raises(UserError, match=r"imply 256 images per iteration .*not the 240 of"):
        logfigure.figure(path, read(path), 200, 1000, 240)


@pytest.mark.parametrize("given", [16, 4])
def test_a_tensorpack_batch_twice_or_half_the_logs_is_refused(tmp_path, given):
    # 8 GPUs, one image each: images/s x the epoch line's time / its steps = 8
    log = loggen.generate("tensorpack", loggen.FixedChooser(dict(ONE_RUN, steps_per_epoch=500, epochs=6, gpus=8)))
    path = write(tmp_path, log)
    records = read(path)
    with pytest.raises(UserError, match=r"imply [78](\.\d+)? images per iteration \(.*\), not the %d of "
                                         r"--images-per-iteration %d: every figure would be 2x off$"
                                         % (given, given)):
        logfigure.figure(path, records, 500, 1500, given)
    assert within_bound(log, logfigure.figure(path, records, 500, 1500, 8))


# ---------------------------------------------------------------- dllogger PyTorch: meters reset at batch 10

def pytorch_log(tmp_path, interval):
    log = dllogger._pytorch(loggen.FixedChooser(dict(ONE_RUN, log_interval=interval, steps_per_epoch=1000, epochs=3,
                                                     batch=16)), 200000, None, False)
    return log, write(tmp_path, log)


@pytest.mark.parametrize("interval", [20, 50, 100])
def test_an_epoch_whose_first_ten_batches_no_record_covers_gives_the_rest_of_the_window(tmp_path, interval):
    # epoch 2 is iterations 1001..2000; its time meter restarts at batch 10 (iteration 1011) and no
    # record of it ends before then: 1011..2000 is exact, 1001..1010 in no record
    log, path = pytorch_log(tmp_path, interval)
    fig = logfigure.figure(path, read(path), 1000, 1000, 16)
    assert fig.window == (1011, 2000) and fig.requested_window == (1001, 2000)
    assert within_bound(log, fig) and fig.error_bound_s <= 1e-3 * fig.iteration_time_s
    assert not fig.exact  # not the window asked for
    assert any("covers iterations 1011..2000, not the 1001..2000 asked for" in n for n in fig.notes)


@pytest.mark.parametrize("interval", [20, 50])
def test_a_data_time_of_other_iterations_than_the_figures_is_left_out_and_said(tmp_path, interval):
    # the data meter runs from batch 0: its means cover 1..100, the time's 11..100
    log, path = pytorch_log(tmp_path, interval)
    fig = logfigure.figure(path, read(path), 0, 100, 16)
    assert fig.window == (11, 100) and within_bound(log, fig)
    assert fig.data_time_s is None and fig.data_error_bound_s is None
    assert any("no data time: the log's data means cover iterations 1..100 nearest the figure's 11..100" in n
               for n in fig.notes)


def test_a_data_time_over_the_figures_own_window_is_given_within_its_bound(tmp_path):
    log, path = pytorch_log(tmp_path, 10)
    fig = logfigure.figure(path, read(path), 1000, 1000, 16)
    assert fig.window == (1001, 2000) and fig.exact
    _, data = log.mean(1, 1001, 2000)
    assert abs(fig.data_time_s - data) <= fig.data_error_bound_s * (1 + 1e-9) + 1e-15


# ---------------------------------------------------------------- a window widened into the warm-up

def test_a_one_record_maskrcnn_log_is_not_widened_into_its_warmup(tmp_path):
    # one print at iteration 20, a running mean since iteration 1: for 11..20 it is half warm-up
    log = loggen.generate("maskrcnn-benchmark", loggen.FixedChooser(dict(ONE_RUN, iters=20, ckpt=2500)))
    path = write(tmp_path, log)
    records = read(path)
    with pytest.raises(UserError, match=r"nearest the window 11\.\.20, at iterations 0 and 20, take in 10 iterations "
                                         r"outside it, more than half of its 10"):
        logfigure.figure(path, records, 10, 10, 8)
    fig = logfigure.figure(path, records, 0, 20, 8)  # the window it does give
    assert fig.window == (1, 20) and within_bound(log, fig)


# ---------------------------------------------------------------- NUL bytes

@pytest.mark.parametrize("fmt", ["maskrcnn-benchmark", "detectron2"])
@pytest.mark.parametrize("damage", ["block", "tail"])
def test_lines_of_nul_bytes_are_skipped_counted_and_the_rest_read(tmp_path, fmt, damage):
    log = loggen.generate(fmt, loggen.FixedChooser(dict(ONE_RUN, iters=4000, ckpt=5000), seed=3), max_iters=4000)
    intact = write(tmp_path, log, "intact.log")
    data = open(intact, "rb").read()
    cut = data.index(b"\n", len(data) * 3 // 4) + 1  # a line's start, past the window
    if damage == "block":  # a 4 KiB page never written inside an intact log
        damaged = data[:cut] + b"\0" * 4096 + data[cut + 4096:]
    else:  # a crash: the file's end never written, longer than a line may be
        damaged = data[:cut] + b"\0" * (2 * common.LINE_MAX)
    path = tmp_path / "damaged.log"
    path.write_bytes(damaged)
    skipped = len([line for line in damaged.split(b"\n") if b"\0" in line])
    first = data[:cut].count(b"\n") + 1
    records = read(str(path), fmt)
    fig = logfigure.figure(str(path), records, 100, 1000, 8, approximate=True)
    want = logfigure.figure(intact, read(intact, fmt), 100, 1000, 8, approximate=True)
    assert (fig.window, fig.iteration_time_s) == (want.window, want.iteration_time_s)
    more = " and %d more like it" % (skipped - 1) if skipped > 1 else ""
    assert ("%s: %d line%s did not parse (line %d%s: %s)" % (
        path, skipped, "" if skipped == 1 else "s", first, more, common.NUL_SKIPPED)) in fig.notes
