"""maskrcnn-benchmark's training log (maskrcnn_benchmark/engine/trainer.py do_train).

- Every iteration: data = time.time() - end once the batch is there; batch_time after the
  optimizer step; both go into a MetricLogger made fresh by each run.
- Printed at iteration % 20 == 0 and at max_iter (1-based, global): each meter as
  "{median:.4f} ({global_avg:.4f})", median of the last 20 (torch's median: the lower middle),
  global_avg = total / count since the run started.
- A resumed run starts at the checkpoint's iteration (model_{:07d}.pth written every
  checkpoint_period iterations): "Loading checkpoint from output/model_0005000.pth", then
  "Start training"; its meters cover only its own iterations.
"""
import numpy as np

from . import noise
from .core import (Clock, Log, Writer, base_time, budget, hms, inject_faults, new_run, plan_runs, prefix,
                   py_random, seeded)

FORMAT = "maskrcnn-benchmark"
LOSSES = ("loss", "loss_box_reg", "loss_classifier", "loss_mask", "loss_objectness", "loss_rpn_box_reg")


def _head(clock, name="maskrcnn_benchmark.trainer"):
    return "%s %s INFO: " % (clock.stamp(), name)


def _median(x):
    s = np.sort(x)
    return s[(len(s) - 1) // 2]


def generate(choose, max_iters=200000, max_records=None):
    rng, rnd, clock = seeded(choose), py_random(choose), Clock(choose)
    ckpt = choose.weighted("ckpt", [(2500, 40), (5000, 20), (1000, 20), (200, 20)])
    total = choose.log_integer("iters", 40, budget(max_iters, max_records, 20))
    base = base_time(choose)
    batch = choose.choice("batch", [2, 4, 8, 16])
    segments = plan_runs(choose, total, ckpt)
    w = Writer()
    runs = []
    for seg in segments:
        run = new_run(rng, runs, seg, base, 0.2)
        t, d, n = run.times, run.data, len(run.times)
        w.add(_head(clock, "maskrcnn_benchmark") + "Using 8 GPUs")
        w.add(_head(clock, "maskrcnn_benchmark") + "Namespace(config_file='configs/e2e_mask_rcnn_R_50_FPN_1x.yaml', "
              "distributed=True, local_rank=0, opts=[])")
        w.add(_head(clock, "maskrcnn_benchmark") + "Running with config:\nMODEL:\n  META_ARCHITECTURE: "
              "GeneralizedRCNN\nSOLVER:\n  CHECKPOINT_PERIOD: %d\n  MAX_ITER: %d" % (ckpt, total))
        w.add(_head(clock, "maskrcnn_benchmark.utils.checkpoint") + "Loading checkpoint from %s" % (
            "output/model_%07d.pth" % seg.start if seg.start else "catalog://ImageNetPretrained/MSRA/R-50"))
        w.add(_head(clock) + "Start training")
        tp, dp = prefix(t), prefix(d)
        clock0 = clock.seconds
        its = np.arange(seg.start + 1, seg.end + 1)
        for j in np.nonzero((its % 20 == 0) | (its == total))[0].tolist():
            it = seg.start + j + 1
            clock.seconds = clock0 + tp[j + 1]
            c = j + 1
            lo = max(0, c - 20)
            g_t, g_d = (tp[c]) / c, (dp[c]) / c
            m_t, m_d = _median(t[lo:c]), _median(d[lo:c])
            eta = hms(g_t * (total - it))
            lv = 2.0 / (1 + it / 5000.0)
            losses = "  ".join("%s: %.4f (%.4f)" % (name, lv * f * rnd.uniform(0.9, 1.1), lv * f)
                               for name, f in zip(LOSSES, (1.0, 0.1, 0.3, 0.35, 0.1, 0.05)))
            w.record(run, it, _head(clock) + "eta: %s  iter: %d  %s  time: %.4f (%.4f)  data: %.4f (%.4f)  "
                     "lr: %.6f  max mem: %.0f" % (eta, it, losses, m_t, g_t, m_d, g_d,
                                                  0.02 * min(1.0, it / 500.0), 3000 + rnd.random() * 200),
                     run.first)
            note = noise.maybe_noise(rnd, 2)
            if note is not None:
                w.add(note)
            if it % ckpt == 0:
                w.add(_head(clock, "maskrcnn_benchmark.utils.checkpoint") + "Saving checkpoint to "
                      "output/model_%07d.pth" % it)
        clock.seconds = clock0 + tp[n]
        if seg.end == total:
            w.add(_head(clock, "maskrcnn_benchmark.utils.checkpoint") + "Saving checkpoint to output/model_final.pth")
            w.add(_head(clock) + "Total training time: %s (%.4f s / it)" % (hms(tp[n]), tp[n] / n))
            w.add(noise.coco_eval(rnd, ("bbox", "segm")))
        else:
            w.add(noise.traceback(rnd, "tools/train_net.py"))
    faults = inject_faults(choose, w, runs)
    return Log(FORMAT, "maskrcnn-benchmark, period 20, checkpoint %d, %d run(s)" % (ckpt, len(runs)), w.lines, runs,
               images_per_iteration=batch, faults=faults, framework="maskrcnn-benchmark",
               params=dict(total=total, ckpt=ckpt))
