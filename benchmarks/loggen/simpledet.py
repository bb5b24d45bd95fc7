"""SimpleDet (MXNet) training logs: utils/callback.py Speedometer through core/detection_module.py fit.

- fit() counts nbatch from 0 in every epoch and total_iter from 0 in every run (a resumed
  run counts again from 0); the batch-end callback gets (epoch, nbatch, iter=total_iter).
- Speedometer: the first call of a run and of each epoch (nbatch went back) only starts the
  clock; then at nbatch % frequent == 0 it prints frequent * batch_size / (now - tic), "%.2f
  samples/sec", and restarts the clock. So batch 0 of every epoch and the batches after an
  epoch's last print are in no figure.
- Since late 2019: "Epoch[%d] Batch [%d]\\tIter: %d/%d\\tLr: %.5f\\tSpeed: %.2f samples/sec\\tTrain-"
  + "%s=%f,\\t" per metric (the log's iteration is Iter + 1); before: "Epoch[%d] Batch [%d]\\t
  Speed: %.2f samples/sec\\tTrain-..." (the iteration is epoch * N + nbatch + 1, N not printed).
- logging '%(asctime)s %(message)s', datefmt '%m-%d %H:%M:%S'; after each epoch
  "Epoch[%d] Train-%s=%f" per metric, "Epoch[%d] Time cost=%.3f" and the checkpoint line.
"""
import numpy as np

from . import noise
from .core import (Clock, Log, Writer, base_time, budget, epoch_length, inject_faults, new_run, plan_runs, prefix,
                   py_random, seeded)

FORMAT = "simpledet-mxnet"
METRICS = ("RpnAcc", "RpnL1", "RcnnAcc", "RcnnL1")


def generate(choose, max_iters=200000, max_records=None):
    rng, rnd, clock = seeded(choose), py_random(choose), Clock(choose)
    new = not choose.chance("old_format", 30)
    frequent = choose.weighted("frequent", [(10, 50), (20, 20), (50, 15), (100, 10), (1, 5)])
    limit = budget(max_iters, max_records, frequent)
    epoch_len = max(3, epoch_length(choose, frequent + 1, longest=limit))
    epochs = max(1, min(choose.integer("epochs", 1, 24), limit // epoch_len))
    total = epoch_len * epochs
    base = base_time(choose)
    batch = choose.choice("batch_image", [1, 2]) * choose.choice("gpus", [1, 2, 4, 8])
    segments = plan_runs(choose, total, epoch_len)
    w = Writer()
    runs = []
    shown = [",\t".join("%s=%f" % (m, rnd.uniform(0.0, 1.0)) for m in METRICS) + ",\t" for _ in range(16)]
    head = lambda: clock.fmt("%m-%d %H:%M:%S") + " "   # noqa: E731
    for seg in segments:
        # the log's numbering: Iter + 1 counts from this run's start (new format), or
        # epoch * N + nbatch + 1 (old format)
        first = 1 if new else seg.start + 1
        run = new_run(rng, runs, seg, base, 0.2, first=first)
        t, n = run.times, len(run.times)
        begin_epoch = seg.start // epoch_len
        w.add(head() + "total iter %d" % (epoch_len * (epochs - begin_epoch)))
        w.add(head() + "lr 0.02, lr_iters [%d, %d]" % (total * 2 // 3, total * 8 // 9))
        w.add(head() + "lr mode: step")
        tp = prefix(t)
        clock0 = clock.seconds
        gs = seg.start + np.arange(n)                  # batches done before each one, in the training
        nb = gs % epoch_len
        events = np.nonzero(((nb > 0) & (nb % frequent == 0)) | (nb == epoch_len - 1))[0].tolist()
        since = 0                                       # index where the Speedometer's clock started
        for j in events:
            g = seg.start + j
            epoch, nbatch = divmod(g, epoch_len)
            clock.seconds = clock0 + tp[j + 1]
            if nbatch > 0 and nbatch % frequent == 0:
                # the clock started after the callback of the previous print, or of batch 0
                since = max(since, j - nbatch + 1)
                speed = frequent * batch / (tp[j + 1] - tp[since])
                metrics = rnd.choice(shown)
                if new:
                    line = "Epoch[%d] Batch [%d]\tIter: %d/%d\tLr: %.5f\tSpeed: %.2f samples/sec\tTrain-%s" % (
                        epoch, nbatch, j, epoch_len * (epochs - begin_epoch), 0.02, speed, metrics)
                    it = j + 1
                else:
                    line = "Epoch[%d] Batch [%d]\tSpeed: %.2f samples/sec\tTrain-%s" % (epoch, nbatch, speed, metrics)
                    it = g + 1
                w.record(run, it, head() + line, it - frequent + 1)
                since = j + 1
                note = noise.maybe_noise(rnd, 1)
                if note is not None:
                    w.add(note)
            if nbatch == epoch_len - 1:
                for m in METRICS:
                    w.add(head() + "Epoch[%d] Train-%s=%f" % (epoch, m, rnd.uniform(0, 1)))
                w.add(head() + "Epoch[%d] Time cost=%.3f" % (epoch, tp[j + 1] - tp[max(0, j - nbatch)]))
                w.add(head() + 'Saved checkpoint to "experiments/faster_r50v1_fpn_1x/checkpoint-%04d.params"'
                      % (epoch + 1))
        clock.seconds = clock0 + tp[n]
        if seg.end != total:
            w.add(noise.traceback(rnd, "detection_train.py"))
    faults = inject_faults(choose, w, runs)
    return Log(FORMAT, "simpledet %s format, frequent %d, epoch %d, %d run(s)" % (
        "Iter/Lr" if new else "old", frequent, epoch_len, len(runs)), w.lines, runs, images_per_iteration=batch,
        epoch_length=epoch_len, needs_epoch_length=(not new and epochs > 1), faults=faults,
        params=dict(new=new, frequent=frequent, epoch_len=epoch_len, total=total))
