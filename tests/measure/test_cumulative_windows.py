"""Exact window means from logs of running means.

Each log below is written from known per-iteration times the way its framework writes
it: the framework's own meter arithmetic, its print schedule and its rounding. Scraped
and estimated, the window figure must equal the true mean of the iterations the estimate
says it covers, within the error bound it states, and that bound must be no looser than
the rounding of the printed figures allows: a printed mean is off by at most half a unit
of its last digit, and n2*g2 - n1*g1 carries that error n1 + n2 times (plus every segment
total a chain joins in between; a chain's start, where nothing is summed yet, carries none).
"""
import datetime
import json
import random
import statistics

import pytest

from harness.measure import ingest, scrapers, stats
from harness.measure.records import CUMULATIVE_MEAN, EXACT_CUMULATIVE, FIGURE_KINDS, FIGURE_TEXT, IterationRecord

UNIT_ROUNDOFF = 2.0 ** -53


def known_times(n, seed):
    """n (iteration time, data time) pairs: slow first iterations, then varied ones with spikes."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        t = rng.lognormvariate(-1.05, 0.25) + (rng.uniform(1.0, 4.0) if i < 3 else 0.0)
        d = rng.uniform(0.002, 0.03) + (rng.uniform(0.2, 0.8) if rng.random() < 0.05 else 0.0)
        pairs.append((t + d, d))
    return pairs


def hms(seconds):
    return str(datetime.timedelta(seconds=int(seconds)))


# ---------------------------------------------------------------- the frameworks' logs

def detectron2_v03(pairs, period=20, gpu=True, repeat_last=False):
    """detectron2 at its 0.3-era commit: CommonMetricPrinter through PeriodicWriter.

    IterationTimer(warmup_iter=3) puts a step time from the 3rd iteration on; the printer
    shows HistoryBuffer.global_avg() (an incremental mean) to 4 decimals, data_time as the
    mean of the last 20, lr with 5 significant digits, and no last_time."""
    n = len(pairs)
    out = ["[11/20 10:40:00 d2.engine.train_loop]: Starting training from iteration 0"]
    count, global_avg, history = 0, 0.0, []
    for k in range(n):
        if k + 1 >= 3:
            count += 1
            global_avg += (pairs[k][0] - global_avg) / count
            history.append(pairs[k][0])
        if (k + 1) % period and k != n - 1:
            continue
        data = [d for _, d in pairs[max(0, k - 19):k + 1]]
        eta = statistics.median(history[-1000:]) * (n - k - 1)
        line = ("[11/20 10:4%d:13 d2.utils.events]:  eta: %s  iter: %d  total_loss: %.4g  loss_cls: %.4g  "
                "loss_box_reg: %.4g  loss_rpn_cls: %.4g  loss_rpn_loc: %.4g  time: %.4f  data_time: %.4f  "
                "lr: %.5g  %s" % (k % 10, hms(eta), k, 2.1 - k / 1000, 1.0 - k / 2000, 0.5, 0.6, 0.1, global_avg,
                                  sum(data) / len(data), 0.02 * min(1.0, (k + 1) / 1000),
                                  "max_mem: %.0fM" % (3100 + k % 7) if gpu else ""))
        out.append(line)
    if repeat_last:   # after_train writes once more
        out.append(out[-1])
    return "\n".join(out) + "\n"


def maskrcnn_benchmark(pairs, period=20):
    """maskrcnn-benchmark do_train through MetricLogger: SmoothedValue(20) prints its median
    (torch's: the lower middle) and global_avg = total / count, both to 4 decimals."""
    n = len(pairs)
    out = ["2019-05-01 10:00:00,000 maskrcnn_benchmark.trainer INFO: Start training"]
    total_t = total_d = 0.0
    for i in range(1, n + 1):
        t, d = pairs[i - 1]
        total_t += t
        total_d += d
        if i % period and i != n:
            continue
        recent_t = sorted(p[0] for p in pairs[max(0, i - 20):i])
        recent_d = sorted(p[1] for p in pairs[max(0, i - 20):i])
        mid = (len(recent_t) - 1) // 2
        meters = "  ".join("%s: %.4f (%.4f)" % m for m in [
            ("loss", 1.9 - i / 1000, 2.0), ("loss_box_reg", 0.08, 0.09), ("loss_classifier", 1.0, 1.1),
            ("loss_objectness", 0.5, 0.6), ("loss_rpn_box_reg", 0.1, 0.12),
            ("time", recent_t[mid], total_t / i), ("data", recent_d[mid], total_d / i)])
        out.append("2019-05-01 10:%02d:12,500 maskrcnn_benchmark.trainer INFO: eta: %s  iter: %d  %s  "
                   "lr: %.6f  max mem: %.0f" % (i % 60, hms(total_t / i * (n - i)), i, meters, 0.0025, 3012 + i % 5))
    return "\n".join(out) + "\n"


class AverageMeter:
    """The meter of timm and of NVIDIA's EfficientDet: sum / count."""

    def __init__(self):
        self.val = self.avg = self.sum = 0.0
        self.count = 0

    def update(self, val):
        self.val = val
        self.sum += val
        self.count += 1
        self.avg = self.sum / self.count


def dllogger_pytorch(pairs, steps_per_epoch, log_interval=50, json_lines=False):
    """NVIDIA EfficientDet (PyTorch) train_epoch: batch_time reset at batch_idx 10 before that
    batch's update; train_data_time since batch 0; dllogger prints floats in full."""
    out = ["DLL 2021-05-04 10:11:02.000000 - PARAMETER model_name : efficientdet_d0  batch_size : 8 "]
    epochs = len(pairs) // steps_per_epoch
    for epoch in range(epochs):
        batch_time, data_time = AverageMeter(), AverageMeter()
        for b in range(steps_per_epoch):
            t, d = pairs[epoch * steps_per_epoch + b]
            data_time.update(d)
            if b == 10:
                batch_time = AverageMeter()
            batch_time.update(t)
            if b == steps_per_epoch - 1 or (b + 1) % log_interval == 0:
                data = {"train_batch_time": batch_time.avg, "train_loss": 1.1, "throughput": 8 / t,
                        "lr": 0.01, "train_data_time": data_time.avg}
                if json_lines:
                    out.append("DLLL " + json.dumps({"timestamp": "1620123072.1", "datetime": "2021-05-04 10:11:12",
                                                     "elapsedtime": "12.3", "type": "LOG",
                                                     "step": [epoch, steps_per_epoch, b], "data": data}))
                else:
                    out.append("DLL 2021-05-04 10:11:12.123456 - (%d, %d, %d) " % (epoch, steps_per_epoch, b)
                               + " ".join("%s : %s " % (k, v) for k, v in data.items()))
        out.append("DLL 2021-05-04 10:14:00.000000 - (%d,) train_loss : 1.05  train_batch_time : %s  "
                   "train_throughout : 641.0 " % (epoch, batch_time.avg))
    return "\n".join(out) + "\n"


def effdet(pairs, batches, log_interval=10, global_batch=16):
    """rwightman's efficientdet-pytorch train_one_epoch: timm AverageMeters made anew each
    epoch, printed at batch_idx % log_interval == 0 and at the last batch, times to 3 decimals."""
    out = ["Model efficientdet_d0 created, param count: 3880067"]
    for epoch in range(len(pairs) // batches):
        batch_time, data_time, losses = AverageMeter(), AverageMeter(), AverageMeter()
        for b in range(batches):
            t, d = pairs[epoch * batches + b]
            data_time.update(d)
            losses.update(1.9 - b / 1000)
            batch_time.update(t)
            if b == batches - 1 or b % log_interval == 0:
                out.append(
                    "Train: {} [{:>4d}/{} ({:>3.0f}%)]  Loss: {:>9.6f} ({:>6.4f})  Time: {:.3f}s, {:>7.2f}/s  "
                    "({:.3f}s, {:>7.2f}/s)  LR: {:.3e}  Data: {:.3f} ({:.3f})".format(
                        epoch, b, batches, 100.0 * b / (batches - 1), losses.val, losses.avg, batch_time.val,
                        global_batch / batch_time.val, batch_time.avg, global_batch / batch_time.avg, 0.01,
                        data_time.val, data_time.avg))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- the bound

def chain_terms(records, first, last):
    """The printed means whose rounding enters the window first..last: the two anchors (none
    where the window starts at a running sum's start) and the last record of every running
    sum the chain joins between them."""
    by_iteration = {r.iteration: r for r in records}
    end = by_iteration[last]
    terms = {end.iteration: end}
    if first - 1 in by_iteration:
        terms[first - 1] = by_iteration[first - 1]
    for rec, nxt in zip(records, records[1:]):
        if first - 1 <= rec.iteration < end.iteration and \
                nxt.iteration - nxt.span != rec.iteration - rec.span:
            terms[rec.iteration] = rec
    return list(terms.values())


def bound(records, window, decimals, field):
    """Largest error of the window mean: half a printed unit per count of every term, and
    the floating-point sums behind it (naive summation: count x unit roundoff x sum)."""
    terms = chain_terms(records, *window)
    counts = sum(r.span for r in terms)
    iterations = window[1] - window[0] + 1
    rounding = 0.5 * 10.0 ** -decimals * counts if decimals is not None else 0.0
    sums = sum(r.span * getattr(r, field) for r in terms)
    return (rounding + 8 * UNIT_ROUNDOFF * counts * sums) / iterations


def true_mean(pairs, window, which):
    first, last = window
    return sum(p[which] for p in pairs[first - 1:last]) / (last - first + 1)


def estimate(tmp_path, fmt, text, warmup, measure, images_per_iteration=2):
    path = tmp_path / "log.txt"
    path.write_text(text)
    records, errors = scrapers.scrape_path(fmt, str(path))
    assert errors == []
    return records, stats.reported(records, warmup, measure, images_per_iteration)


# ---------------------------------------------------------------- exact figures

# (format, log, decimals printed, warmup, measure, the window the figure covers)
CASES = {
    "detectron2 on the window edges": (
        "detectron2", lambda p: detectron2_v03(p[:120]), 4, 20, 80, (21, 100)),
    "detectron2 edges between prints": (
        "detectron2", lambda p: detectron2_v03(p[:100]), 4, 30, 50, (21, 80)),
    "detectron2 warmup before the first print": (   # from the timer's start, where nothing is summed yet
        "detectron2", lambda p: detectron2_v03(p[:100], gpu=False), 4, 5, 40, (3, 40)),
    "detectron2 run ending off the period, repeated last line": (
        "detectron2", lambda p: detectron2_v03(p[:95], repeat_last=True), 4, 40, 55, (41, 95)),
    "maskrcnn-benchmark on the window edges": (
        "maskrcnn-benchmark", lambda p: maskrcnn_benchmark(p[:200]), 4, 40, 160, (41, 200)),
    "maskrcnn-benchmark edges between prints": (
        "maskrcnn-benchmark", lambda p: maskrcnn_benchmark(p[:100]), 4, 25, 50, (21, 60)),
    "maskrcnn-benchmark no warmup": (
        "maskrcnn-benchmark", lambda p: maskrcnn_benchmark(p[:60]), 4, 0, 40, (1, 40)),
    "dllogger edges between prints": (
        "dllogger", lambda p: dllogger_pytorch(p[:240], 120, log_interval=20), None, 30, 60, (21, 80)),
    "dllogger every batch, across the meter reset": (
        "dllogger", lambda p: dllogger_pytorch(p[:60], 60, log_interval=1, json_lines=True), None,
        5, 20, (6, 25)),
    "dllogger before the reset": (
        "dllogger", lambda p: dllogger_pytorch(p[:60], 60, log_interval=1), None, 2, 6, (3, 8)),
    "dllogger second epoch": (
        "dllogger", lambda p: dllogger_pytorch(p[:240], 120, log_interval=20), None, 150, 60, (141, 200)),
    "effdet across an epoch boundary": (
        "effdet", lambda p: effdet(p[:120], 60), 3, 45, 40, (42, 81)),
    "effdet every batch": (
        "effdet", lambda p: effdet(p[:60], 60, log_interval=1), 3, 10, 40, (11, 50)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_window_figure_is_the_true_window_mean(tmp_path, case, seed):
    fmt, write, decimals, warmup, measure, window = CASES[case]
    pairs = known_times(240, seed)
    records, est = estimate(tmp_path, fmt, write(pairs), warmup, measure)
    assert {r.kind for r in records} == {CUMULATIVE_MEAN}
    assert est.window == window and est.requested == (warmup + 1, warmup + measure)
    assert est.kind == EXACT_CUMULATIVE and est.missing == 0
    assert est.iterations == window[1] - window[0] + 1
    truth = true_mean(pairs, window, 0)
    assert abs(est.iteration_time_s - truth) <= est.error_bound_s
    assert est.error_bound_s <= bound(records, window, decimals, "time_s") * (1 + 1e-9)
    assert est.exact == (est.error_bound_s <= 0.001 * est.iteration_time_s and window == est.requested)
    assert est.throughput == pytest.approx(2 / est.iteration_time_s, rel=1e-12)
    # every format here prints a data time: a figure of it covers the same window, within its own
    # bound; where the data means cover other iterations (or some twice) there is none, and
    # data_window says which they cover
    if est.data_time_s is None:
        assert est.data_window is not None
    else:
        assert est.data_window is None and est.data_error_bound_s is not None
        assert abs(est.data_time_s - true_mean(pairs, window, 1)) <= est.data_error_bound_s


def test_the_bound_is_tight_enough_to_tell_neighbouring_windows_apart(tmp_path):
    # the figure of 21..80 must not also pass for the window the request named (31..80)
    pairs = known_times(100, 4)
    records, est = estimate(tmp_path, "maskrcnn-benchmark", maskrcnn_benchmark(pairs), 30, 50)
    assert est.window == (21, 80) and not est.exact
    assert abs(true_mean(pairs, (31, 80), 0) - est.iteration_time_s) > est.error_bound_s


def test_a_0_3_era_detectron2_trial_is_analysed_not_failed(tmp_path):
    # before: no running mean lay inside a window after warmup, and every trial failed
    pairs = known_times(120, 5)
    (tmp_path / "log.txt").write_text(detectron2_v03(pairs))
    (tmp_path / "trial.json").write_text(json.dumps({"exit_code": 0, "end_wall": 1.0}))
    result = ingest.analyse(str(tmp_path), "detectron2", 20, 100, 2)
    row = result.columns()
    assert row["status"] == "done", row["reason"]
    assert row["figure_kind"] == EXACT_CUMULATIVE and json.loads(row["window_json"]) == [21, 120]
    assert abs(row["iteration_time_s"] - true_mean(pairs, (21, 120), 0)) <= 0.5e-4 * (18 + 118) / 100 + 1e-12
    # its data time, the mean of the last 20 at each print, tiles the window
    assert abs(row["data_time_s"] - true_mean(pairs, (21, 120), 1)) <= 0.5e-4 + 1e-12
    assert row["exact"] == (0.5e-4 * (18 + 118) / 100 <= 0.001 * row["iteration_time_s"])


def test_every_figure_kind_has_its_phrase():
    assert set(FIGURE_TEXT) == set(FIGURE_KINDS)
    assert all(FIGURE_TEXT[k].startswith("exact") == k.startswith("exact") for k in FIGURE_KINDS)


# ---------------------------------------------------------------- bad input

def running_mean(iteration, mean, span=None, line=None, rounding=0.0):
    return IterationRecord(iteration, iteration if line is None else line, mean, None,
                           iteration if span is None else span, CUMULATIVE_MEAN, rounding=rounding)


def test_a_log_that_never_reaches_the_window(tmp_path):
    with pytest.raises(stats.WindowError, match=r"^the log never reaches the window: it reaches iteration 40, "
                                                r"the window is 51\.\.70$"):
        estimate(tmp_path, "maskrcnn-benchmark", maskrcnn_benchmark(known_times(40, 6)), 50, 20)


def test_a_window_larger_than_the_log(tmp_path):
    with pytest.raises(stats.WindowError, match=r"^the window 21\.\.80 is larger than the log: it reaches "
                                                r"iteration 60$"):
        estimate(tmp_path, "maskrcnn-benchmark", maskrcnn_benchmark(known_times(60, 6)), 20, 60)


def test_a_running_mean_log_with_one_record_gives_the_mean_of_its_iterations(tmp_path):
    # one print at iteration 20: the mean since the timer's start (iteration 3), nothing to difference
    pairs = known_times(20, 6)
    records, est = estimate(tmp_path, "detectron2", detectron2_v03(pairs), 5, 15)
    assert len(records) == 1 and est.window == (3, 20) and not est.exact
    assert abs(est.iteration_time_s - true_mean(pairs, (3, 20), 0)) <= est.error_bound_s


def test_a_window_is_not_widened_into_the_warmup_past_half_its_length(tmp_path):
    # the same one print: for 6..15 its mean would take in 3..5 and 16..20, 8 iterations of 10
    pairs = known_times(20, 6)
    with pytest.raises(stats.WindowError, match=r"^the running means nearest the window 6\.\.15, at iterations 2 "
                                                r"and 20, take in 8 iterations outside it, more than half of its 10"):
        estimate(tmp_path, "detectron2", detectron2_v03(pairs), 5, 10)


def test_running_means_too_sparse_for_the_window(tmp_path):
    # dllogger every 50 batches: running means from batch 10 at 50 and 100; the window 12..99 lies
    # between the meter's reset and the second print
    with pytest.raises(stats.WindowError, match=r"^the running means nearest the window 12\.\.99, at iterations "
                                                r"10 and 50, span only 40 of its 88 iterations$"):
        estimate(tmp_path, "dllogger", dllogger_pytorch(known_times(100, 6), 100, log_interval=50), 11, 88)


def test_an_iteration_that_goes_back():
    records = [running_mean(20, 0.5), running_mean(40, 0.45), running_mean(30, 0.4)]
    with pytest.raises(stats.CounterError, match=r"^iteration goes back from 40 \(log line 41\) to 30 "
                                                 r"\(log line 31\)$"):
        stats.reported(records, 10, 20, 2)


def test_running_sums_that_shrink(tmp_path):
    # the mean at iteration 40 says the first 40 iterations took less than the first 20
    text = maskrcnn_benchmark([(0.5, 0.01)] * 60)
    lines = text.splitlines()
    lines[2] = lines[2].replace("time: 0.5000 (0.5000)", "time: 0.5000 (0.2000)")
    with pytest.raises(stats.CounterError, match=r"^running sums shrink beyond their printed rounding: 10 s by "
                                                 r"iteration 20 \(log line 2\), 8 s by iteration 40 \(log line 3\)$"):
        estimate(tmp_path, "maskrcnn-benchmark", "\n".join(lines) + "\n", 20, 40)


def test_a_running_mean_longer_than_the_run():
    records = [running_mean(20, 0.5, span=25), running_mean(40, 0.5)]
    with pytest.raises(stats.CounterError, match="^log line 21: a running mean over 25 iterations ending at "
                                                 "iteration 20$"):
        stats.reported(records, 20, 20, 2)


def test_a_refused_window_is_the_trial_s_reason(tmp_path):
    (tmp_path / "log.txt").write_text(dllogger_pytorch(known_times(100, 7), 100, log_interval=50))
    (tmp_path / "trial.json").write_text(json.dumps({"exit_code": 0, "end_wall": 1.0}))
    result = ingest.analyse(str(tmp_path), "dllogger", 11, 88, 2)
    assert result.status == "failed"
    assert result.reason.startswith("the running means nearest the window 12..99")
    assert result.figure_kind is None


def test_rounding_alone_never_shrinks_a_running_sum():
    # two 4-decimal means of a steady 0.35 s over 90,000 iterations: n2*g2 < n1*g1 as printed,
    # though the true sums grow; the figure carries the rounding in its bound instead
    records = [running_mean(88000, 0.35005, rounding=0.5e-4), running_mean(88020, 0.34995, rounding=0.5e-4)]
    est = stats.reported(records, 88000, 20, 2)
    assert 88020 * 0.34995 - 88000 * 0.35005 < 0   # what the printed digits difference to
    assert est.window == (88001, 88020) and not est.exact
    assert abs(est.iteration_time_s - 0.35) <= est.error_bound_s <= (88000 + 88020) * 0.5e-4 / 20


# ---------------------------------------------------------------- long runs

@pytest.mark.parametrize("fmt, write", [("detectron2", detectron2_v03), ("maskrcnn-benchmark", maskrcnn_benchmark)])
def test_windows_of_a_90k_iteration_log_are_true_within_their_bound(tmp_path, fmt, write):
    """4-decimal running means times 90,000 iterations carry more rounding than a few hundred
    iterations add: windows deep in the run are given with that bound (not exact), never refused,
    and a window near the start still is exact."""
    pairs = known_times(90000, 8)
    path = tmp_path / "log.txt"
    path.write_text(write(pairs))
    records, errors = scrapers.scrape_path(fmt, str(path))
    assert errors == []
    first = 3 if fmt == "detectron2" else 1
    for warmup, measure, window in [(88000, 1000, (88001, 89000)), (0, 90000, (first, 90000)),
                                    (200, 1000, (201, 1200))]:
        est = stats.reported(records, warmup, measure, 2)
        assert est.window == window
        assert abs(est.iteration_time_s - true_mean(pairs, window, 0)) <= est.error_bound_s
        assert est.exact == (window == (warmup + 1, warmup + measure)
                             and est.error_bound_s <= 0.001 * est.iteration_time_s)
    assert not stats.reported(records, 88000, 1000, 2).exact      # 1% of rounding: not exact
    assert stats.reported(records, 200, 1000, 2).exact
