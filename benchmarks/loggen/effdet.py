"""rwightman/efficientdet-pytorch train.py logs (train_epoch with timm's AverageMeter).

- Per epoch, fresh meters: data_time = now - end, batch_time after the step (cuda synced);
  `end` is taken at the end of the loop body, after the logging: the logging counts in no
  iteration. AverageMeter: val = this batch, avg = sum / count since the epoch's batch 0.
- Logged (local rank 0) at batch_idx % log_interval == 0 and at the last batch:
  "Train: {epoch} [{b:>4d}/{N} ({pct:>3.0f}%)]  Loss: {val:>9.6f} ({avg:>6.4f})  Time:
  {val:.3f}s, {rate:>7.2f}/s  ({avg:.3f}s, {rate_avg:>7.2f}/s)  LR: {lr:.3e}  Data: {val:.3f}
  ({avg:.3f})"; timm's later train scripts print the loss as {:#.4g} ({:#.3g}).
- Several nodes: each node's local rank 0 logs (train.py tests `args.local_rank == 0`), so a
  merged log holds every node's records of each iteration, with srun --label's prefixes or none.
- Validation after each epoch ("Test: [ b/last]  Time: ..  Loss: .."), timm's checkpoint
  saver's "Current checkpoints:" list; a resumed run starts at the epoch after the checkpoint's
  ("Restoring model state from checkpoint...", "Loaded checkpoint '...' (epoch E)").
"""
from . import noise
from .core import (Log, Ranks, Writer, base_time, budget, epoch_length, inject_faults, new_run, plan_runs, prefix,
                   py_random, seeded)

FORMAT = "effdet"


def generate(choose, max_iters=200000, max_records=None):
    rng, rnd = seeded(choose), py_random(choose)
    interval = choose.weighted("log_interval", [(50, 50), (10, 15), (20, 10), (100, 15), (1, 10)])
    limit = budget(max_iters, max_records, interval)
    epoch_len = epoch_length(choose, interval, longest=limit)
    epochs = max(1, min(choose.integer("epochs", 1, 24), limit // epoch_len))
    total = epoch_len * epochs
    sig_loss = choose.chance("loss_g", 30)
    base = base_time(choose)
    batch = choose.choice("global_batch", [8, 16, 32, 64])
    segments = plan_runs(choose, total, epoch_len)
    ranks = Ranks(choose, rng)
    w = Writer()
    runs = []
    for seg in segments:
        run = new_run(rng, runs, seg, base, 0.3)
        t, d, n = run.times, run.data, len(run.times)
        t2, d2 = ranks.times(t, d)
        w.add("Model tf_efficientdet_d0 created, param count: 3880067")
        if seg.start:
            w.add("Restoring model state from checkpoint...\nRestoring optimizer state from checkpoint...\n"
                  "Loaded checkpoint './output/train/20200101-000000-tf_efficientdet_d0/last.pth.tar' (epoch %d)"
                  % (seg.start // epoch_len - 1))
        w.add("Scheduled epochs: %d" % epochs)
        if ranks.nodes > 1:
            ranks.add(w, "Scheduled epochs: %d" % epochs)
        j = 0
        while j < n:
            epoch, b0 = divmod(seg.start + j, epoch_len)
            stop = min((epoch + 1) * epoch_len, seg.end)
            m = stop - (seg.start + j)
            et, ed = t[j:j + m], d[j:j + m]
            tp, dp = prefix(et), prefix(ed)
            tp2, dp2 = prefix(t2[j:j + m]), prefix(d2[j:j + m])
            for b in range(b0, b0 + m):
                c = b - b0 + 1
                if not (b % interval == 0 or b == epoch_len - 1):
                    continue
                bt, ba = et[c - 1], tp[c] / c
                dv, da = ed[c - 1], dp[c] / c
                lv = 1.5 / (1 + (epoch * epoch_len + b) / 3000.0)
                loss = ("Loss: %#.4g (%#.3g)" % (lv * rnd.uniform(0.9, 1.1), lv)) if sig_loss else \
                    ("Loss: %9.6f (%6.4f)" % (lv * rnd.uniform(0.9, 1.1), lv))
                def text(bt, ba, dv, da, epoch=epoch, b=b, loss=loss):
                    return ("Train: %d [%4d/%d (%3.0f%%)]  %s  Time: %.3fs, %7.2f/s  (%.3fs, %7.2f/s)  LR: %.3e  "
                            "Data: %.3f (%.3f)" % (epoch, b, epoch_len, 100.0 * b / (epoch_len - 1), loss, bt,
                                                   batch / bt, ba, batch / ba, 0.09, dv, da))
                other = None
                if ranks.nodes > 1:
                    other = text(t2[j + c - 1], tp2[c] / c, d2[j + c - 1], dp2[c] / c)
                    if rnd.random() < 0.5:
                        ranks.add(w, other)
                        other = None
                w.record(run, epoch * epoch_len + b + 1, text(bt, ba, dv, da), epoch * epoch_len + 1)
                if other is not None:
                    ranks.add(w, other)
                note = noise.maybe_noise(rnd, 1)
                if note is not None:
                    w.add(note)
            j += m
            if stop == (epoch + 1) * epoch_len:
                last = rnd.choice([10, 100, 1000])
                for b in list(range(0, last, max(1, interval))) + [last]:
                    w.add("Test: [%4d/%d]  Time: %.3f (%.3f)  Loss: %7.4f (%6.4f)  " % (
                        b, last, rnd.uniform(0.05, 0.2), 0.1, rnd.uniform(0.5, 1.5), 1.0))
                w.add("Current checkpoints:\n "
                      "('./output/train/20200101-000000-tf_efficientdet_d0/checkpoint-%d.pth.tar'"
                      ", %.6f)\n" % (epoch, rnd.uniform(0.5, 1.5)))
        if seg.end != total:
            w.add(noise.traceback(rnd, "train.py"))
    ranks.label(w)
    faults = inject_faults(choose, w, runs)
    return Log(FORMAT, "efficientdet-pytorch, log_interval %d, epoch %d%s, %d run(s)%s" % (
        interval, epoch_len, ", loss {:#.4g}" if sig_loss else "", len(runs),
        "" if ranks.nodes == 1 else ", %d nodes %s" % (ranks.nodes, ranks.state)), w.lines, runs,
        images_per_iteration=batch, epoch_length=epoch_len, faults=faults, framework="effdet",
        params=dict(log_interval=interval, epoch_len=epoch_len, total=total, ranks=ranks.state))

