"""detectron2's training log, as detectron2/engine and detectron2/utils/events.py write it.

- IterationTimer(warmup_iter=3) puts a step time from the run's 3rd iteration on (iter_done >=
  3); EventStorage is new in every run, so a resumed run's timer restarts too.
- PeriodicWriter(period=20 by default) writes at 0-based iter k with (k + 1) % period == 0 and at
  max_iter - 1; `iter` is printed 0-based.
- CommonMetricPrinter prints `time` = HistoryBuffer.global_avg() of every step time of the run
  to 4 decimals (a running mean), `data_time` the mean of the data times of the last 20
  iterations (4 decimals); since 2023-02 also last_time / last_data_time.
- Three text eras: 2019 (losses .3f, lr .6f, `time: x  data_time: y` each followed by two
  spaces even when empty), 2020-08..2023-02 (' {eta}iter: ...', losses .4g, lr .5g), current.
  Before 2020-09 after_train wrote the last line once more; in every era a run that dies of
  an exception writes once more at the iteration that failed (its figures end one before).
- metrics.json (JSONWriter): one object per write, sort_keys; `time` and `data_time` are the
  MEDIAN of the last 20 values; appended across runs with no banner.
- Resuming loads model_{k:07d}.pth written after 0-based iter k, (k + 1) % period == 0, and
  starts at iter k + 1: "Starting training from iteration {start_iter}".
"""
import json
import statistics

import numpy as np

from . import noise
from .core import (Clock, Fault, Log, Writer, base_time, budget, hms, inject_faults, merge_unmarked, new_run,
                   plan_runs, prefix, py_random, seeded)

FORMAT = "detectron2"
ERAS = ("2019", "2020", "current", "json")


def _losses(rnd, era, k):
    base = 2.0 / (1.0 + k / 5000.0)
    vals = [("total_loss", base), ("loss_cls", base * 0.3), ("loss_box_reg", base * 0.25),
            ("loss_mask", base * 0.35), ("loss_rpn_cls", base * 0.05), ("loss_rpn_loc", base * 0.05)]
    vals = [(n, v * rnd.uniform(0.9, 1.1)) for n, v in vals]
    fmt = "{}: {:.3f}" if era == "2019" else "{}: {:.4g}"
    return "  ".join(fmt.format(n, v) for n, v in vals), vals


def _prefix(clock, stdout):
    if stdout:   # the colourful stdout handler: "[05/17 10:42:13 d2.utils.events]: "
        return "\x1b[32m[%s d2.utils.events]: \x1b[0m" % clock.fmt("%m/%d %H:%M:%S")
    return "[%s] d2.utils.events INFO: " % clock.fmt("%m/%d %H:%M:%S")


def _other(clock, stdout, name, message):
    if stdout:
        return "\x1b[32m[%s %s]: \x1b[0m%s" % (clock.fmt("%m/%d %H:%M:%S"), name, message)
    return "[%s] %s INFO: %s" % (clock.fmt("%m/%d %H:%M:%S"), name, message)


def generate(choose, max_iters=200000, max_records=None):
    rng, rnd, clock = seeded(choose), py_random(choose), Clock(choose)
    era = choose.weighted("era", [("current", 40), ("2020", 25), ("2019", 15), ("json", 20)])
    stdout = choose.chance("stdout", 30)
    period = choose.weighted("period", [(20, 70), (10, 8), (50, 8), (100, 6), (5, 5), (2, 3)])
    ckpt = choose.weighted("ckpt", [(5000, 40), (1000, 30), (500, 20), (100, 10)])
    total = choose.log_integer("iters", 3 * period, budget(max_iters, max_records, period))
    base = base_time(choose)
    batch = choose.choice("batch", [2, 4, 8, 16, 32, 64])
    crash_prints = choose.chance("crash_exception", 50)
    segments = plan_runs(choose, total, ckpt)
    repeats_last = era == "2019" or (era == "2020" and choose.chance("before_2020_09", 30))
    w = Writer()
    runs = []
    faults = []
    for k, seg in enumerate(segments):
        final = k == len(segments) - 1
        run = new_run(rng, runs, seg, base, 0.2, timed_from=seg.start + 3)
        t, d, n = run.times, run.data, len(run.times)
        if era != "json":
            w.add(_other(clock, stdout, "detectron2", "Rank of current process: 0. World size: 8"))
            w.add(_other(clock, stdout, "detectron2", "Command line arguments: Namespace(config_file='configs/"
                         "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml', resume=%s, num_gpus=8)" % bool(k)))
            w.add(_other(clock, stdout, "detectron2", "Running with full config:\nSOLVER:\n  BASE_LR: 0.02\n"
                         "  CHECKPOINT_PERIOD: %d\n  IMS_PER_BATCH: %d\n  MAX_ITER: %d" % (ckpt, batch, total)))
            if seg.start:
                w.add(_other(clock, stdout, "fvcore.common.checkpoint",
                             "[Checkpointer] Loading from output/model_%07d.pth ..." % (seg.start - 1)))
            w.add(_other(clock, stdout, "d2.engine.train_loop", "Starting training from iteration %d" % seg.start))
        tp, dp = prefix(t), prefix(d)
        timed0 = 2                     # index in the run of its first timed iteration
        tl, dl = t.tolist(), d.tolist()
        clock0 = clock.seconds
        its = np.arange(seg.start, seg.end)          # 0-based iters of the run
        for j in np.nonzero(((its + 1) % period == 0) | (its == total - 1))[0].tolist():
            kk = seg.start + j
            clock.seconds = clock0 + tp[j + 1]
            line, timed = _line(era, rnd, stdout, clock, kk, j, tl, dl, tp, dp, timed0, total)
            if line is None:
                continue
            if timed:       # a running mean from the first timed iteration; metrics.json: medians of 20
                w.record(run, kk + 1, line, max(run.timed_first, kk - 18) if era == "json" else run.timed_first)
            else:
                w.add(line)
            note = noise.maybe_noise(rnd, 2)
            if note is not None and era != "json":
                w.add(note)
            if (kk + 1) % ckpt == 0 and rnd.random() < 0.3:
                if era == "json":
                    w.add(json.dumps({"bbox/AP": rnd.uniform(0, 40), "bbox/AP50": rnd.uniform(0, 60),
                                      "iteration": kk}, sort_keys=True))
                else:
                    w.add(_other(clock, stdout, "d2.evaluation.evaluator", "Start inference on 5000 batches"))
                    w.add(noise.coco_eval(rnd))
        clock.seconds = clock0 + tp[n]
        if era != "json" and n > 3:    # IterationTimer.after_train, for a finished or a failed run
            w.add(_other(clock, stdout, "d2.engine.hooks", "Overall training speed: %d iterations in %s (%.4f s / it)"
                         % (n - 3, hms(tp[n] - tp[3]), (tp[n] - tp[3]) / (n - 3))))
            w.add(_other(clock, stdout, "d2.engine.hooks", "Total training time: %s (0:00:%02d on hooks)"
                         % (hms(tp[n]), rnd.randint(0, 3))))
        if not final and era != "json":
            if crash_prints:       # after_train writes once more, at the iteration that failed
                line, _ = _line(era, rnd, stdout, clock, seg.end, n, tl, dl, tp, dp, timed0, total)
                if line is not None:
                    w.add(line)    # a record of an iteration the run never finished: not in the truth
                w.add(noise.traceback(rnd, "tools/train_net.py"))
            else:
                w.add("Killed")
        elif final and repeats_last and run.records and run.records[-1] == total:
            # after_train's write repeats the last line (before 2020-09)
            first = run.record_lines[-1]
            faults.append(Fault("twice", (first, w.add(w.lines[first - 1])), benign=True))
    if era == "json":
        runs = merge_unmarked(runs, [s.start for s in segments])
    faults += inject_faults(choose, w, runs)
    return Log(FORMAT, "detectron2 %s%s, period %d, %d run(s)" % (
        "metrics.json" if era == "json" else era + " text", " (stdout)" if stdout and era != "json" else "",
        period, len(runs)), w.lines, runs, images_per_iteration=batch, faults=faults,
        framework="detectron2-cuda" if era != "json" else None,
        params=dict(era=era, period=period, total=total))


def _line(era, rnd, stdout, clock, kk, j, t, d, tp, dp, timed0, total):
    """The printer's line at 0-based iter kk, j iterations into the run (figures up to j - 1
    when the iteration failed: j == len(t))."""
    done = min(j + 1, len(t))                      # iterations with figures
    timed = done - timed0                          # step times in the history
    data_n = min(20, done)
    data_avg = (dp[done] - dp[done - data_n]) / data_n if done > 0 else None
    time_avg = (tp[done] - tp[timed0]) / timed if timed > 0 else None
    loss_text, losses = _losses(rnd, era, kk)
    lr = 0.02 * min(1.0, (kk + 1) / 1000.0)
    mem = "max_mem: %.0fM" % (3000 + rnd.random() * 500)
    if era == "json":
        if timed <= 0:
            return None, False
        obj = {"data_time": statistics.median(d[max(0, done - 20):done]),
               "eta_seconds": time_avg * (total - kk - 1), "iteration": kk, "lr": lr,
               "time": statistics.median(t[max(timed0, done - 20):done])}
        obj.update({n: v for n, v in losses})
        return json.dumps(obj, sort_keys=True), True
    eta = None
    if timed > 0:      # detectron2 takes the median of the last 1000 step times; any estimate reads the same
        eta = hms(time_avg * (total - kk - 1))
    if era == "2019":
        body = "eta: %s  iter: %d  %s  %s  %s  lr: %.6f  %s" % (
            eta or "N/A", kk, loss_text, "time: %.4f" % time_avg if time_avg is not None else "",
            "data_time: %.4f" % data_avg if data_avg is not None else "", lr, mem)
        return _prefix(clock, stdout) + body, time_avg is not None
    eta_s = "eta: %s  " % eta if eta else ""
    if era == "2020":
        body = " %siter: %d  %s  %s%slr: %.5g  %s" % (
            eta_s, kk, loss_text, "time: %.4f  " % time_avg if time_avg is not None else "",
            "data_time: %.4f  " % data_avg if data_avg is not None else "", lr, mem)
        return _prefix(clock, stdout) + body, time_avg is not None
    last_t = "last_time: %.4f  " % t[done - 1] if timed > 0 else ""
    last_d = "last_data_time: %.4f  " % d[done - 1] if done > 0 else ""
    body = " %siter: %d  %s    %s%s%s%s lr: %.5g  %s" % (
        eta_s, kk, loss_text, "time: %.4f  " % time_avg if time_avg is not None else "", last_t,
        "data_time: %.4f  " % data_avg if data_avg is not None else "", last_d, lr, mem)
    return _prefix(clock, stdout) + body, time_avg is not None
