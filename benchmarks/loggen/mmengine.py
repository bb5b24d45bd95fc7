"""mmdetection 3.x training logs: mmengine's LogProcessor text and the vis_data scalars JSON.

- IterTimerHook: data_time and time into the message hub's HistoryBuffer every iteration
  (t set in before_epoch: what happens between epochs counts in no iteration). The buffer
  spans the whole training and is saved in checkpoints: a resumed run continues it.
- LogProcessor(window_size=W) prints mean(last W values) of time and data_time with
  num_digits=4 (mmengine default W=10; mmdet 3.x default_runtime W=50); LoggerHook(interval=I)
  prints at inner iteration (batch_idx + 1) % I == 0 (iteration-based loops: global), and at
  an epoch's end only where the epoch has at most I iterations.
- Text "Epoch(train)  [e][ i/N]  base_lr: 2.0000e-02 lr: ..  eta: ..  time: ..  data_time: ..
  memory: M  loss: ..": the epoch right-aligned to the width of max_epochs + 3, the inner
  iteration to the width of N. JSON (LocalVisBackend scalars.json): full floats, "iter" and
  "step" global. Validation lines ("Epoch(val)") and scalars (no lr key) come in between.
- A resumed run: "Load checkpoint from ..." and "resumed epoch: E, iter: I" after the config.
"""
import json

import numpy as np

from . import noise
from .core import (Clock, Log, Writer, base_time, budget, epoch_length, hms, inject_faults, merge_unmarked,
                   new_run, plan_runs, prefix, py_random, seeded)

FORMAT = "mmdet-v3"


def generate(choose, max_iters=200000, max_records=None):
    rng, rnd, clock = seeded(choose), py_random(choose), Clock(choose)
    as_json = choose.chance("json", 35)
    by_epoch = not choose.chance("iter_based", 20)
    interval = choose.weighted("interval", [(50, 60), (10, 15), (20, 10), (100, 10), (1, 5)])
    window = choose.weighted("window", [(interval, 65), (10, 20), (50, 8), (20, 7)])
    limit = budget(max_iters, max_records, interval)
    epoch_len = epoch_length(choose, interval, longest=limit)
    epochs = max(1, min(choose.integer("epochs", 1, 24), limit // epoch_len))
    total = epoch_len * epochs
    base = base_time(choose)
    batch = choose.choice("batch", [2, 4, 8, 16, 32])
    ckpt_unit = epoch_len if by_epoch else choose.weighted("ckpt", [(1000, 50), (5000, 30), (epoch_len, 20)])
    segments = plan_runs(choose, total, ckpt_unit)
    w = Writer()
    runs = []
    timeline_t = np.zeros(0)           # the history buffer: iterations 1.. of the training so far
    timeline_d = np.zeros(0)
    head = lambda: "%s - mmengine - INFO - " % clock.fmt("%m/%d %H:%M:%S")   # noqa: E731
    ep_width = len(str(epochs)) + 3
    for seg in segments:
        run = new_run(rng, runs, seg, base, 0.3)
        t, d, n = run.times, run.data, len(run.times)
        # the checkpoint carries the history up to the resume point
        timeline_t = np.concatenate((timeline_t[:seg.start], t))
        timeline_d = np.concatenate((timeline_d[:seg.start], d))
        tp, dp = prefix(timeline_t), prefix(timeline_d)
        if not as_json:
            w.add(head() + "\n" + "-" * 60 + "\nSystem environment:\n    sys.platform: linux\n    Python: 3.8.18\n"
                  "    CUDA available: True\n" + "-" * 60 + "\n")
            w.add(head() + "Config:\ndefault_hooks = dict(\n    logger=dict(type='LoggerHook', interval=%d),\n"
                  "    timer=dict(type='IterTimerHook'))\nlog_processor = dict(type='LogProcessor', window_size=%d, "
                  "by_epoch=%s)\ntrain_cfg = dict(type='%s', %s=%d)" % (
                      interval, window, by_epoch, "EpochBasedTrainLoop" if by_epoch else "IterBasedTrainLoop",
                      "max_epochs" if by_epoch else "max_iters", epochs if by_epoch else total))
            if seg.start:
                w.add(head() + "Load checkpoint from work_dirs/faster_rcnn/%s" % (
                    "epoch_%d.pth" % (seg.start // epoch_len) if by_epoch else "iter_%d.pth" % seg.start))
                w.add(head() + "resumed epoch: %d, iter: %d" % (seg.start // epoch_len, seg.start))
            w.add(head() + "Checkpoints will be saved to ./work_dirs/faster_rcnn.")
        clock0 = clock.seconds
        rp = prefix(t)
        gs = seg.start + 1 + np.arange(n)
        inners = (gs - 1) % epoch_len + 1
        if by_epoch:
            dues = (inners % interval == 0) | ((inners == epoch_len) & (epoch_len <= interval))
        else:
            dues = gs % interval == 0
        for j in np.nonzero(dues | ((inners == epoch_len) & by_epoch))[0].tolist():
            g = seg.start + j + 1
            epoch, inner = divmod(g - 1, epoch_len)
            inner += 1
            clock.seconds = clock0 + rp[j + 1]
            if not dues[j]:
                _validate(w, head, rnd, as_json, epoch + 1)
                continue
            eta_tot = rp[j + 1]
            lo = max(0, g - window)
            tm = (tp[g] - tp[lo]) / (g - lo)
            dm = (dp[g] - dp[lo]) / (g - lo)
            eta = hms(eta_tot / (j + 1) * (total - g))
            lv = 2.0 / (1 + g / 5000.0)
            lr = 0.02 * min(1.0, g / 500.0)
            mem = 3000 + rnd.randint(0, 500)
            losses = [("loss", lv), ("loss_rpn_cls", lv * 0.1), ("loss_rpn_bbox", lv * 0.05),
                      ("loss_cls", lv * 0.4), ("acc", rnd.uniform(85, 98)), ("loss_bbox", lv * 0.3)]
            if as_json:
                obj = {"base_lr": 0.02, "lr": lr, "data_time": float(dm)}
                obj.update(losses)
                obj.update(time=float(tm), epoch=epoch + 1, iter=g, memory=mem, step=g)
                line = json.dumps(obj)
            else:
                where = ("Epoch(train) %s[%*d/%d]  " % (("[%d]" % (epoch + 1)).rjust(ep_width), len(str(epoch_len)),
                                                        inner, epoch_len)) if by_epoch else \
                    ("Iter(train) [%*d/%d]  " % (len(str(total)), g, total))
                line = head() + where + "base_lr: %.4e lr: %.4e  eta: %s  time: %.4f  data_time: %.4f  memory: %d  " % (
                    0.02, lr, eta, tm, dm, mem) + "  ".join("%s: %.4f" % (name, v) for name, v in losses)
            w.record(run, g, line, max(run.first, lo + 1))
            note = None if as_json else noise.maybe_noise(rnd, 2)
            if note is not None:
                w.add(note)
            if by_epoch and inner == epoch_len:
                _validate(w, head, rnd, as_json, epoch + 1)
        clock.seconds = clock0 + rp[n]
        if seg.end != total and not as_json:
            w.add(noise.traceback(rnd, "tools/train.py"))
    if as_json:
        runs = merge_unmarked(runs, [s.start for s in segments])
    faults = inject_faults(choose, w, runs)
    variant = "mmdet-v3 %s%s, interval %d, window %d, epoch %d, %d run(s)" % (
        "scalars.json" if as_json else "text", "" if by_epoch else " (IterBasedTrainLoop)", interval, window,
        epoch_len, len(runs))
    return Log(FORMAT, variant, w.lines, runs, images_per_iteration=batch, epoch_length=epoch_len, faults=faults,
               framework="mmdetection", params=dict(interval=interval, window=window, epoch_len=epoch_len,
                                                    by_epoch=by_epoch, json=as_json, total=total))


def _validate(w, head, rnd, as_json, epoch):
    if rnd.random() < 0.5:
        return
    m = rnd.choice([50, 500])
    if as_json:
        w.add(json.dumps({"coco/bbox_mAP": round(rnd.uniform(0, 0.4), 4),
                          "coco/bbox_mAP_50": round(rnd.uniform(0, 0.6), 4),
                          "data_time": rnd.uniform(0.001, 0.01), "time": rnd.uniform(0.05, 0.1), "step": epoch}))
        return
    w.add(head() + "Saving checkpoint at %d epochs" % epoch)
    for b in range(50, m + 1, 50):
        w.add(head() + "Epoch(val) [%d][%*d/%d]    eta: 0:00:30  time: 0.0601  data_time: 0.0021  memory: 900"
              % (epoch, len(str(m)), b, m))
    w.add(noise.coco_eval(rnd))
    w.add(head() + "Epoch(val) [%d][%d/%d]    coco/bbox_mAP: 0.0120  coco/bbox_mAP_50: 0.0330  data_time: 0.0021  "
          "time: 0.0601" % (epoch, m, m))
