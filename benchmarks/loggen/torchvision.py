"""torchvision's references/detection training log (engine.py train_one_epoch, utils.MetricLogger).

- log_every: data_time = time until the batch is there, iter_time after the step; both
  SmoothedValue(window_size=20) printed as "{avg:.4f}": the mean of the last 20 values, taken
  in float32 (torch.tensor(..., dtype=torch.float32).mean()); a new MetricLogger each epoch.
- Printed when i % print_freq == 0 or i == len(loader) - 1 (i 0-based in the epoch); the
  printing itself counts in no iteration (`end` is taken after it).
- "Epoch: [e]  [ i/N]  eta: ..  lr: ..  loss: m (g)  ..  time: ..  data: ..  max mem: M";
  after each epoch "Epoch: [e] Total time: ...", then evaluation ("Test:" lines, COCO output).
- A resumed run (train.py --resume) starts at the epoch after the checkpoint's; "Start training".
"""
import numpy as np

from . import noise
from .core import (Log, Writer, base_time, budget, epoch_length, hms, inject_faults, new_run, plan_runs, prefix,
                   py_random, seeded)

FORMAT = "torchvision-ref"


def _avg32(x):
    return float(np.asarray(x, dtype=np.float32).mean(dtype=np.float32))


def generate(choose, max_iters=200000, max_records=None):
    rng, rnd = seeded(choose), py_random(choose)
    print_freq = choose.weighted("print_freq", [(20, 60), (10, 10), (50, 10), (100, 8), (1, 6), (5, 6)])
    limit = budget(max_iters, max_records, print_freq)
    epoch_len = epoch_length(choose, print_freq, longest=limit)
    epochs = max(1, min(choose.integer("epochs", 1, 26), limit // epoch_len))
    total = epoch_len * epochs
    gpu = not choose.chance("cpu", 15)
    base = base_time(choose)
    batch = choose.choice("batch", [2, 4, 8, 16, 32])
    segments = plan_runs(choose, total, epoch_len)
    w = Writer()
    runs = []
    width = len(str(epoch_len))
    for seg in segments:
        run = new_run(rng, runs, seg, base, 0.3)
        t, d, n = run.times, run.data, len(run.times)
        w.add("| distributed init (rank 0): env://" if rnd.random() < 0.5 else "Not using distributed mode")
        w.add("Namespace(data_path='/datasets01/COCO/022719/', dataset='coco', model='maskrcnn_resnet50_fpn', "
              "device='cuda', batch_size=%d, epochs=%d, workers=4, lr=0.02, print_freq=%d, resume='%s')"
              % (batch, epochs, print_freq, "checkpoint.pth" if seg.start else ""))
        w.add("Loading data\nCreating data loaders\nUsing [0, 1.0, inf] as bins for aspect ratio quantization\n"
              "Count of instances per bin: [ 104 1 ]\nCreating model\nStart training")
        j = 0
        while j < n:
            it0 = seg.start + j              # iterations done before this one
            epoch, i0 = divmod(it0, epoch_len)
            # iterations of this epoch in this run: i0 .. min(epoch end, run end)
            stop = min((epoch + 1) * epoch_len, seg.end)
            ep_t = t[j:j + stop - it0]
            ep_d = d[j:j + stop - it0]
            tp = prefix(ep_t)
            for i in range(i0, i0 + len(ep_t)):
                c = i - i0 + 1               # values in the meters (the run starts epochs at 0)
                if not (i % print_freq == 0 or i == epoch_len - 1):
                    continue
                lo = max(0, c - 20)
                lv = 2.0 / (1 + (epoch * epoch_len + i) / 5000.0)
                parts = ["Epoch: [%d]" % epoch, "[%*d/%d]" % (width, i, epoch_len),
                         "eta: %s" % hms(tp[c] / c * (epoch_len - i)), "lr: %.6f" % 0.02,
                         "loss: %.4f (%.4f)" % (lv * rnd.uniform(0.9, 1.1), lv),
                         "loss_classifier: %.4f (%.4f)" % (lv * 0.3, lv * 0.3),
                         "loss_box_reg: %.4f (%.4f)" % (lv * 0.2, lv * 0.2),
                         "loss_mask: %.4f (%.4f)" % (lv * 0.4, lv * 0.4),
                         "loss_objectness: %.4f (%.4f)" % (lv * 0.05, lv * 0.05),
                         "loss_rpn_box_reg: %.4f (%.4f)" % (lv * 0.05, lv * 0.05),
                         "time: %.4f" % _avg32(ep_t[lo:c]), "data: %.4f" % _avg32(ep_d[lo:c])]
                if gpu:
                    parts.append("max mem: %.0f" % (2000 + rnd.random() * 500))
                w.record(run, epoch * epoch_len + i + 1, "  ".join(parts), epoch * epoch_len + i + 1 - (c - lo) + 1)
                note = noise.maybe_noise(rnd, 1)
                if note is not None:
                    w.add(note)
            j += len(ep_t)
            if stop == (epoch + 1) * epoch_len:      # the epoch ran to its end
                w.add("Epoch: [%d] Total time: %s (%.4f s / it)" % (epoch, hms(tp[-1]), tp[-1] / len(ep_t)))
                if rnd.random() < 0.5:
                    m = rnd.choice([50, 500, 5000])
                    for b in range(0, m, 100):
                        w.add("Test:  [%*d/%d]  eta: 0:00:10  model_time: 0.0612 (0.0633)  evaluator_time: "
                              "0.0040 (0.0051)  time: 0.0900  data: 0.0051%s" % (len(str(m)), b, m,
                                                                                  "  max mem: 2100" if gpu else ""))
                    w.add("Test:  Total time: 0:01:10 (0.1400 s / it)")
                    w.add("Averaged stats: model_time: 0.0612 (0.0633)  evaluator_time: 0.0040 (0.0051)")
                    w.add("Accumulating evaluation results...\nDONE (t=1.02s).\nIoU metric: bbox")
                    w.add(noise.coco_eval(rnd))
        if seg.end != total:
            w.add(noise.traceback(rnd, "train.py"))
        else:
            w.add("Training time %s" % hms(float(t.sum())))
    faults = inject_faults(choose, w, runs)
    return Log(FORMAT, "torchvision references, print_freq %d, epoch %d, %d run(s)%s" % (
        print_freq, epoch_len, len(runs), "" if gpu else " (CPU: no max mem)"), w.lines, runs,
        images_per_iteration=batch, epoch_length=epoch_len, faults=faults, framework="torchvision",
        params=dict(print_freq=print_freq, epoch_len=epoch_len, total=total))
