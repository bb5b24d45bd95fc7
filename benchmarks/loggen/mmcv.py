"""mmdetection 1.x and 2.x training logs: mmcv's TextLoggerHook, text (.log) and JSON (.log.json).

- IterTimerHook: data_time = now - t before the iteration, time = now - t after it, t reset;
  t is set in before_epoch, so what happens between epochs counts in no iteration.
- LogBuffer: values since the last clear(), which LoggerHook.before_epoch calls at every
  epoch start (IterBasedRunner: once per run); average(interval) = mean of the last
  `interval` values, printed at inner iteration i % interval == 0 (IterBasedRunner: global),
  and at the end of an epoch when ignore_last=False (the mean of the last `interval` values
  again, so overlapping the previous record).
- Text: "Epoch [e][i/N]\\tlr: ..., eta: ..., time: {:.3f}, data_time: {:.3f}, memory: M, ..."
  (mmcv 0.2: lr {:.5f}, root logger; mmcv 1.x: lr {:.3e}, logger "mmdet"); IterBasedRunner
  "Iter [i/max]". JSON: floats round(x, 5); mmcv 0.2 keys mode, epoch, iter, lr, time,
  data_time, memory, losses; mmcv 1.x mode, epoch, iter, lr, memory, data_time, losses, time,
  after a first line of runner.meta (env_info, config, seed, exp_name).
- mmcv >= 0.5: EpochBasedRunner.train sleeps 2 s after before_train_epoch (inside the
  epoch's first data_time); IterLoader sleeps 2 s when the data loader starts a new epoch.
- A resumed run: "resumed epoch E, iter I" then "Start running, host: ..., work_dir: ...".
"""
import json

import numpy as np

from . import noise
from .core import (Clock, Log, Writer, base_time, budget, epoch_length, hms, inject_faults, merge_unmarked,
                   new_run, plan_runs, prefix, py_random, seeded)

LOSSES = (("loss_rpn_cls", 0.1), ("loss_rpn_bbox", 0.05), ("loss_cls", 0.4), ("acc", None), ("loss_bbox", 0.3))


def generate_v1(choose, max_iters=200000, max_records=None):
    return _generate(choose, max_iters, max_records, v1=True)


def generate_v2(choose, max_iters=200000, max_records=None):
    return _generate(choose, max_iters, max_records, v1=False)


def _generate(choose, max_iters, max_records, v1):
    rng, rnd, clock = seeded(choose), py_random(choose), Clock(choose)
    fmt = "mmdet-v1" if v1 else "mmdet-v2"
    as_json = choose.chance("json", 40)
    by_epoch = True if v1 else not choose.chance("iter_based", 20)
    interval = choose.weighted("interval", [(50, 60), (10, 12), (20, 12), (100, 10), (1, 6)])
    ignore_last = not choose.chance("keep_last", 10)
    limit = budget(max_iters, max_records, interval)
    epoch_len = epoch_length(choose, interval, longest=limit)
    epochs = max(1, min(choose.integer("epochs", 1, 24), limit // epoch_len))
    total = epoch_len * epochs
    base = base_time(choose)
    batch = choose.choice("batch", [2, 4, 8, 16, 32])
    sleeps = not v1
    ckpt_unit = epoch_len if by_epoch else choose.weighted("ckpt", [(1000, 50), (4000, 30), (epoch_len, 20)])
    segments = plan_runs(choose, total, ckpt_unit)
    w = Writer()
    runs = []
    head = (lambda: clock.stamp() + " - INFO - ") if v1 else (lambda: clock.stamp() + " - mmdet - INFO - ")
    eta_state = {}
    for seg in segments:
        run = new_run(rng, runs, seg, base, 0.3)
        t, d, n = run.times, run.data, len(run.times)
        if sleeps:    # the 2 s sleep at each (data loader) epoch start lands in that iteration's data time
            starts = (seg.start + np.arange(n)) % epoch_len == 0
            t[starts] += 2.0
            d[starts] += 2.0
        if as_json:
            if not v1:
                w.add(json.dumps({"env_info": "sys.platform: linux\nPython: 3.7.10\nCUDA available: True",
                                  "config": "log_config = dict(interval=%d, hooks=[dict(type='TextLoggerHook')])\n"
                                  "runner = dict(type='%s', max_%s=%d)"
                                  % (interval, "EpochBasedRunner" if by_epoch else "IterBasedRunner",
                                     "epochs" if by_epoch else "iters", epochs if by_epoch else total),
                              "seed": 0, "exp_name": "faster_rcnn_r50_fpn_1x_coco.py"}))
        else:
            if not v1:
                w.add(head() + "Environment info:\n" + "-" * 60 + "\nsys.platform: linux\nPython: 3.7.10\n"
                      "CUDA available: True\n" + "-" * 60 + "\n")
            w.add(head() + "Distributed training: True")
            if not v1:
                w.add(head() + "Config:\nlog_config = dict(interval=%d, hooks=[dict(type='TextLoggerHook')])\n"
                      "runner = dict(type='%s', max_%s=%d)" % (interval, "EpochBasedRunner" if by_epoch else
                                                               "IterBasedRunner", "epochs" if by_epoch else "iters",
                                                               epochs if by_epoch else total))
            if seg.start:
                checkpoint = ("work_dirs/faster_rcnn/epoch_%d.pth" % (seg.start // epoch_len) if by_epoch
                              else "work_dirs/faster_rcnn/iter_%d.pth" % seg.start)
                w.add(head() + "load checkpoint from %s" % checkpoint)
                w.add(head() + "resumed epoch %d, iter %d" % (seg.start // epoch_len, seg.start))
            w.add(head() + "Start running, host: root@f0c1a2, work_dir: ./work_dirs/faster_rcnn")
            if not v1:
                w.add(head() + "Hooks will be executed in the following order:\nbefore_run:\n"
                      "(VERY_HIGH   ) StepLrUpdaterHook\n(NORMAL      ) CheckpointHook\n(VERY_LOW    ) TextLoggerHook")
            w.add(head() + "workflow: [('train', 1)], max: %d %s"
                  % ((epochs, "epochs") if by_epoch else (total, "iters")))
        tp, dp = prefix(t), prefix(d)
        eta_state["tot"], eta_state["start"] = 0.0, seg.start
        clock0 = clock.seconds
        gs = seg.start + 1 + np.arange(n)                 # global 1-based iterations
        inners = (gs - 1) % epoch_len + 1
        if by_epoch:
            dues = (inners % interval == 0) | ((inners == epoch_len) & (not ignore_last))
        else:
            dues = gs % interval == 0
        for j in np.nonzero(dues | ((inners == epoch_len) & by_epoch))[0].tolist():
            g = seg.start + j + 1
            epoch, inner = divmod(g - 1, epoch_len)
            inner += 1
            clock.seconds = clock0 + tp[j + 1]
            lr = 0.02 * min(1.0, g / 500.0)
            if not dues[j]:
                _epoch_end(w, head, rnd, as_json, v1, epoch + 1, lr)
                continue
            # the LogBuffer holds this epoch's values (IterBasedRunner: this run's)
            buf_start = max(0, j - inner + 1) if by_epoch else 0
            c = j + 1
            lo = max(buf_start, c - interval)
            tm = (tp[c] - tp[lo]) / (c - lo)
            dm = (dp[c] - dp[lo]) / (c - lo)
            eta_state["tot"] += tm * interval
            eta = hms(eta_state["tot"] / (g - eta_state["start"]) * (total - g))
            lv = 2.0 / (1 + g / 5000.0)
            losses = [(name, lv * f * rnd.uniform(0.9, 1.1) if f else rnd.uniform(85, 98)) for name, f in LOSSES]
            losses.append(("loss", lv))
            mem = 3000 + rnd.randint(0, 500)
            shown_iter = inner if by_epoch else g
            if as_json:
                obj = {"mode": "train", "epoch": epoch + 1, "iter": shown_iter, "lr": round(lr, 5)}
                if v1:
                    obj.update(time=round(tm, 5), data_time=round(dm, 5), memory=mem)
                    obj.update((name, round(v, 5)) for name, v in losses)
                else:
                    obj.update(memory=mem, data_time=round(dm, 5))
                    obj.update((name, round(v, 5)) for name, v in losses)
                    obj["time"] = round(tm, 5)
                line = json.dumps(obj)
            else:
                where = ("Epoch [%d][%d/%d]\t" % (epoch + 1, inner, epoch_len)) if by_epoch else \
                    ("Iter [%d/%d]\t" % (g, total))
                lr_s = ("lr: %.5f, " if v1 else "lr: %.3e, ") % lr
                line = head() + where + lr_s + "eta: %s, time: %.3f, data_time: %.3f, memory: %d, " % (
                    eta, tm, dm, mem) + ", ".join("%s: %.4f" % (name, v) for name, v in losses)
            w.record(run, g, line, g - (c - lo) + 1)
            note = None if as_json else noise.maybe_noise(rnd, 2)
            if note is not None:
                w.add(note)
            if not as_json and not v1 and (g % 1000 == 0 or (by_epoch and inner == epoch_len)):
                w.add(head() + "Exp name: faster_rcnn_r50_fpn_1x_coco.py")
            if by_epoch and inner == epoch_len:
                _epoch_end(w, head, rnd, as_json, v1, epoch + 1, lr)
        clock.seconds = clock0 + tp[n]
        if seg.end != total and not as_json:
            w.add(noise.traceback(rnd, "tools/train.py"))
    if as_json and v1:
        runs = merge_unmarked(runs, [s.start for s in segments])
    faults = inject_faults(choose, w, runs)
    needs = as_json and by_epoch and epochs > 1
    variant = "%s %s%s, interval %d%s, epoch %d, %d run(s)" % (
        fmt, "JSON" if as_json else "text", "" if by_epoch else " (IterBasedRunner)", interval,
        "" if ignore_last else " (ignore_last=False)", epoch_len, len(runs))
    return Log(fmt, variant, w.lines, runs, images_per_iteration=batch, epoch_length=epoch_len,
               needs_epoch_length=needs, faults=faults,
               framework=None, params=dict(interval=interval, epoch_len=epoch_len, by_epoch=by_epoch,
                                           json=as_json, ignore_last=ignore_last, total=total))


def _epoch_end(w, head, rnd, as_json, v1, epoch, lr):
    if as_json:
        if rnd.random() < 0.6:
            w.add(json.dumps({"mode": "val", "epoch": epoch, "iter": 5000, "lr": round(lr, 5),
                              "bbox_mAP": round(rnd.uniform(0, 0.4), 4), "bbox_mAP_50": round(rnd.uniform(0, 0.6), 4)}))
        return
    w.add(head() + "Saving checkpoint at %d epochs" % epoch)
    if rnd.random() < 0.6:
        w.add("[>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>] 5000/5000, 21.3 task/s, elapsed: 235s, ETA:     0s")
        w.add(head() + "Evaluating bbox...")
        w.add(noise.coco_eval(rnd))
        if v1:
            w.add(head() + "Epoch(val) [%d][5000]\tbbox_mAP: 0.0120, bbox_mAP_50: 0.0330" % (epoch - 1))
        else:
            w.add(head() + "Epoch(val) [%d][5000]\tbbox_mAP: 0.0120, bbox_mAP_50: 0.0330, bbox_mAP_copypaste: "
                  "0.012 0.033 0.006 0.001 0.010 0.019" % epoch)
