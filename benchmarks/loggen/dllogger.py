"""NVIDIA DeepLearningExamples EfficientDet logs through dllogger.

PyTorch (PyTorch/Detection/Efficientdet/train.py train_epoch), stdout or the JSON file:
- per epoch, fresh AverageMeters; data_time since batch 0; batch_time_m.reset() at
  batch_idx == 10 before that batch is added, so from batch 10 on it is the mean of batches
  10..b. Logged at (b + 1) % log_interval == 0 or the last batch with
  step=(epoch, steps_per_epoch, b); after the epoch step=(epoch,); validation logs
  step=(epoch, last_idx, b) with eval_batch_time / eval_loss.
- StdOutBackend: "DLL {datetime} - {step} " + "name : value " joined by " " (str(float): every
  digit); JSONStreamBackend: "DLLL " + json.dumps({timestamp, datetime, elapsedtime, type, step,
  data}). A run starts with the PARAMETER line of its arguments.
TensorFlow2 (model/callback_builder.py TimeHistory), time_log.txt (JSON only):
- every log_steps global steps: step "PARAMETER", data {"Latency": "{:.2f} seconds",
  "fps": steps * batch_size / elapsed, "steps": (last_log_step, global_steps)}; elapsed from the
  batch begin of the window's first step; global steps count from 0 in every fit() run.
"""
import json

from .core import (Clock, Log, Writer, base_time, budget, epoch_length, inject_faults, new_run, plan_runs, prefix,
                   py_random, seeded)

FORMAT = "dllogger"


def generate(choose, max_iters=200000, max_records=None):
    kind = choose.weighted("flavour", [("pytorch-stdout", 40), ("pytorch-json", 30), ("tf2", 30)])
    if kind == "tf2":
        return _tf2(choose, max_iters, max_records)
    return _pytorch(choose, max_iters, max_records, as_json=kind == "pytorch-json")


def _emit(w, clock, as_json, step, data, started):
    now = clock.t
    if as_json:
        return "DLLL " + json.dumps({"timestamp": str(now.timestamp()), "datetime": str(now),
                                     "elapsedtime": str((now - started).total_seconds()), "type": "LOG",
                                     "step": list(step) if isinstance(step, tuple) else step, "data": data})
    step_s = step if isinstance(step, str) else str(tuple(step))
    return "DLL %s - %s %s" % (now, step_s, " ".join("%s : %s " % (k, v) for k, v in data.items()))


def _pytorch(choose, max_iters, max_records, as_json):
    rng, rnd, clock = seeded(choose), py_random(choose), Clock(choose)
    interval = choose.weighted("log_interval", [(50, 40), (10, 20), (20, 15), (100, 15), (1, 5), (5, 5)])
    limit = budget(max_iters, max_records, interval)
    steps = epoch_length(choose, interval, "steps_per_epoch", limit)
    epochs = max(1, min(choose.integer("epochs", 1, 24), limit // steps))
    total = steps * epochs
    base = base_time(choose)
    batch = choose.choice("batch", [8, 16, 30, 64])
    segments = plan_runs(choose, total, steps)
    w = Writer()
    runs = []
    for seg in segments:
        run = new_run(rng, runs, seg, base, 0.2)
        t, d, n = run.times, run.data, len(run.times)
        started = clock.t
        w.add(_emit(w, clock, as_json, "PARAMETER", {"model": "efficientdet-d0", "batch_size": batch,
                                                     "epochs": epochs, "log_interval": interval,
                                                     "resume": bool(seg.start)}, started))
        j = 0
        while j < n:
            epoch, b0 = divmod(seg.start + j, steps)
            stop = min((epoch + 1) * steps, seg.end)
            m = stop - (seg.start + j)
            et, ed = t[j:j + m], d[j:j + m]
            tp, dp = prefix(et), prefix(ed)
            clock0 = clock.seconds
            for b in range(b0, b0 + m):
                c = b - b0 + 1                  # batches of this epoch so far (epochs start at batch 0)
                if not ((b + 1) % interval == 0 or b == steps - 1):
                    continue
                clock.seconds = clock0 + tp[c]
                lo = 10 if b >= 10 else 0
                bt = (tp[c] - tp[lo]) / (c - lo)
                dt = dp[c] / c
                data = {"train_batch_time": float(bt), "train_loss": 1.5 / (1 + (epoch * steps + b) / 3000.0),
                        "throughput": batch / float(bt) * rnd.uniform(0.98, 1.02), "lr": 0.01,
                        "train_data_time": float(dt)}
                w.record(run, epoch * steps + b + 1, _emit(w, clock, as_json, (epoch, steps, b), data, started),
                         epoch * steps + lo + 1)
            j += m
            clock.seconds = clock0 + tp[m]
            if stop == (epoch + 1) * steps:
                w.add(_emit(w, clock, as_json, (epoch,), {"train_loss": 1.1, "train_batch_time": float(tp[-1] / m),
                                                          "train_throughout": batch * m / float(tp[-1])}, started))
                if rnd.random() < 0.5:
                    last = rnd.choice([20, 100, 500])
                    for b in range(0, last + 1, max(1, interval)):
                        w.add(_emit(w, clock, as_json, (epoch, last, b), {"eval_batch_time": rnd.uniform(0.05, 0.2),
                                                                          "eval_loss": rnd.uniform(0.5, 1.5)}, started))
                    w.add(_emit(w, clock, as_json, (epoch,), {"eval_batch_time": 0.1, "eval_throughput": 300.0,
                                                              "eval_loss": 0.9, "map": rnd.uniform(0, 0.4)}, started))
    faults = inject_faults(choose, w, runs)
    return Log(FORMAT, "dllogger PyTorch %s, log_interval %d, epoch %d, %d run(s)" % (
        "JSON" if as_json else "stdout", interval, steps, len(runs)), w.lines, runs, images_per_iteration=batch,
        epoch_length=steps, faults=faults, params=dict(flavour="pytorch", log_interval=interval, steps=steps,
                                                       total=total))


def _tf2(choose, max_iters, max_records):
    rng, rnd, clock = seeded(choose), py_random(choose), Clock(choose)
    log_steps = choose.weighted("log_steps", [(1, 25), (10, 20), (50, 20), (100, 25), (200, 10)])
    limit = budget(max_iters, max_records, log_steps)
    steps = epoch_length(choose, log_steps, "steps_per_epoch", limit)
    epochs = max(1, min(choose.integer("epochs", 1, 24), limit // steps))
    total = steps * epochs
    base = base_time(choose)
    batch = choose.choice("global_batch", [8, 64, 256, 512])
    segments = plan_runs(choose, total, steps)
    w = Writer()
    runs = []
    for seg in segments:
        run = new_run(rng, runs, seg, base, 0.2, first=1)     # global steps count from 0 in each fit()
        t, n = run.times, len(run.times)
        started = clock.t
        w.add(_emit(w, clock, True, "PARAMETER", {"model_name": "efficientdet-d0", "batch_size": batch // 8,
                                                  "num_epochs": epochs, "log_steps": log_steps}, started))
        tp = prefix(t)
        last = 0
        clock0 = clock.seconds
        for j in range(n):
            g = j + 1
            if g - last >= log_steps:
                clock.seconds = clock0 + tp[g]
                elapsed = float(tp[g] - tp[last])
                w.record(run, g, _emit(w, clock, True, "PARAMETER", {
                    "Latency": "{:.2f} seconds".format(elapsed), "fps": (g - last) / elapsed * batch,
                    "steps": [last, g]}, started), last + 1)
                last = g
            if (seg.start + g) % steps == 0 and rnd.random() < 0.4:
                w.add(_emit(w, clock, True, (), {"epoch": (seg.start + g) // steps,
                                                 "validation_accuracy_mAP": round(rnd.uniform(0, 40), 2)}, started))
        clock.seconds = clock0 + tp[n]
        if seg.end == total:
            w.add(_emit(w, clock, True, (), {"avg_fps_training": batch / base, "avg_latency_training": base,
                                             "e2e_training_time": float(tp[-1])}, started))
    faults = inject_faults(choose, w, runs)
    return Log(FORMAT, "dllogger TF2 time_log, log_steps %d, epoch %d, %d run(s)" % (log_steps, steps, len(runs)),
               w.lines, runs, images_per_iteration=batch, epoch_length=steps, faults=faults,
               framework="nvidia-efficientdet-tf2", params=dict(flavour="tf2", log_steps=log_steps, steps=steps,
                                                                total=total, implies_images=True))

