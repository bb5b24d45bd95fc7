"""Training logs written from known per-iteration times, in the exact text of each format.

The tests of `detbench scrape` and `detbench import` read these and compare the window
figure with the truth computed here from the same times.
"""
import json
import random


def times(n, seed=0, base=0.30, spread=0.10, data=0.01):
    """n (iteration time, data time) pairs: known per-iteration truth."""
    rng = random.Random(seed)
    return [(round(base + rng.random() * spread, 6), round(data + rng.random() * data, 6)) for _ in range(n)]


def truth(pairs, first, last):
    """Mean iteration and data time of iterations first..last (1-based, inclusive)."""
    window = pairs[first - 1:last]
    return sum(t for t, _ in window) / len(window), sum(d for _, d in window) / len(window)


def detbench_jsonl(pairs, images):
    """The bundled trainer's DETBENCH_ITER lines, each followed by its human line."""
    out = []
    for i, (t, d) in enumerate(pairs, 1):
        out.append("DETBENCH_ITER " + json.dumps({"iteration": i, "time_s": t, "data_time_s": d, "images": images,
                                                  "loss": 1.0, "losses": {}, "lr": 0.01, "peak_mem_mb": None},
                                                 separators=(",", ":")))
        out.append("iter %d/%d  loss 1.0000  time %.0fms (data %.0fms)" % (i, len(pairs), t * 1000, d * 1000))
    return "\n".join(out) + "\n"


def torchvision_ref(pairs, print_freq=20, window=20):
    """torchvision references/detection MetricLogger lines of one epoch: the mean of the
    last `window` iterations, printed at i % print_freq == 0 and at the last one."""
    n = len(pairs)
    width = len(str(n))
    out = ["Start training"]
    for i in range(n):
        if i % print_freq and i != n - 1:
            continue
        recent = pairs[max(0, i + 1 - window):i + 1]
        t = sum(p[0] for p in recent) / len(recent)
        d = sum(p[1] for p in recent) / len(recent)
        out.append("Epoch: [0]  [%*d/%d]  eta: 0:00:10  lr: 0.000100  loss: 1.2345 (1.3456)  "
                   "loss_classifier: 0.5000 (0.5000)  time: %.4f  data: %.4f  max mem: 1502" % (width, i, n, t, d))
    return "\n".join(out) + "\n"


def mmengine_iter(pairs, interval=10, window=10):
    """mmdetection 3.x (mmengine) lines of an iteration-based loop: `Iter(train) [ i/N]`."""
    n = len(pairs)
    width = len(str(n))
    out = ["06/12 14:00:00 - mmengine - INFO - Checkpoints will be saved to work_dirs/x."]
    for i in range(interval, n + 1, interval):
        recent = pairs[max(0, i - window):i]
        t = sum(p[0] for p in recent) / len(recent)
        d = sum(p[1] for p in recent) / len(recent)
        out.append("06/12 14:02:41 - mmengine - INFO - Iter(train) [%*d/%d]  lr: 2.0000e-02  eta: 0:10:00  "
                   "time: %.4f  data_time: %.4f  memory: 3375  loss: 1.8528  loss_cls: 1.0912"
                   % (width, i, n, t, d))
    return "\n".join(out) + "\n"


def mmcv_epoch(pairs, iters_per_epoch, interval=50, first=1):
    """mmdetection 2.x (mmcv 1.x TextLoggerHook) lines of an epoch-based run: `Epoch [E][I/N]`,
    the mean of the last `interval` iterations of the epoch, after the start banner. A process
    resumed from a checkpoint at an epoch's end starts at iteration `first` (pairs are its own)."""
    out = ["2021-03-01 09:00:00,000 - mmdet - INFO - Environment info:"]
    if first > 1:
        out.append("2021-03-01 09:00:01,000 - mmdet - INFO - resumed epoch %d, iter %d"
                   % ((first - 1) // iters_per_epoch, first - 1))
    out.append("2021-03-01 09:00:02,000 - mmdet - INFO - Start running, host: user@node, work_dir: /work_dirs/x")
    for i in range(first, first + len(pairs)):
        epoch, it = (i - 1) // iters_per_epoch + 1, (i - 1) % iters_per_epoch + 1
        if it % interval:
            continue
        recent = pairs[i - first + 1 - interval:i - first + 1]
        t = sum(p[0] for p in recent) / interval
        d = sum(p[1] for p in recent) / interval
        out.append("2021-03-01 09:10:42,118 - mmdet - INFO - Epoch [%d][%d/%d]\tlr: 1.988e-03, eta: 9:48:21, "
                   "time: %.3f, data_time: %.3f, memory: 3375, loss_cls: 1.0912, loss: 1.8528"
                   % (epoch, it, iters_per_epoch, t, d))
    return "\n".join(out) + "\n"


def mmcv_log_json(pairs, iters_per_epoch, interval=50):
    """The .log.json mmcv 1.x writes beside that text: the runner's meta line, then one object per
    logged iteration with the epoch and the iteration within it (not the epoch's length), floats
    rounded to 5 decimals."""
    out = [json.dumps({"env_info": "sys.platform: linux", "config": "model = dict()", "seed": 0,
                       "exp_name": "faster_rcnn.py"})]
    for i in range(1, len(pairs) + 1):
        epoch, it = (i - 1) // iters_per_epoch + 1, (i - 1) % iters_per_epoch + 1
        if it % interval:
            continue
        recent = pairs[i - interval:i]
        out.append(json.dumps({"mode": "train", "epoch": epoch, "iter": it, "lr": 0.00199, "memory": 3375,
                               "data_time": round(sum(p[1] for p in recent) / interval, 5), "loss": 1.8528,
                               "time": round(sum(p[0] for p in recent) / interval, 5)}))
    return "\n".join(out) + "\n"


def mmengine_epoch(pairs, iters_per_epoch, interval=50, window=50):
    """mmdetection 3.x (mmengine) lines as its stock configs log: `Epoch(train) [E][I/N]` every
    `interval` iterations of an epoch (and at its last where it has no more than `interval`),
    the mean of the last `window` of the run."""
    width = len(str(iters_per_epoch))
    out = ["06/12 14:00:00 - mmengine - INFO - Checkpoints will be saved to /work_dirs/x."]
    for i in range(1, len(pairs) + 1):
        epoch, it = (i - 1) // iters_per_epoch + 1, (i - 1) % iters_per_epoch + 1
        if it % interval and not (it == iters_per_epoch <= interval):
            continue
        recent = pairs[max(0, i - window):i]
        t = sum(p[0] for p in recent) / len(recent)
        d = sum(p[1] for p in recent) / len(recent)
        out.append("06/12 14:02:41 - mmengine - INFO - Epoch(train)  [%d][%*d/%d]  lr: 2.0000e-02  eta: 0:10:00  "
                   "time: %.4f  data_time: %.4f  memory: 3375  loss: 1.8528  loss_cls: 1.0912"
                   % (epoch, width, it, iters_per_epoch, t, d))
    return "\n".join(out) + "\n"


def tensorpack(pairs, steps_per_epoch, gpus=8):
    """tensorpack's epoch-end lines: `Epoch N (global_step G) finished`, then ScalarPrinter's
    scalars, among them the epoch's images/s (all GPUs) to 5 significant digits."""
    out = ["[0901 09:58:02 @logger.py:90] Argv: ./train.py --config TRAIN.STEPS_PER_EPOCH=%d" % steps_per_epoch]
    for e in range(1, len(pairs) // steps_per_epoch + 1):
        secs = sum(p[0] for p in pairs[(e - 1) * steps_per_epoch:e * steps_per_epoch])
        out += ["[0901 10:00:00 @base.py:275] Start Epoch %d ..." % e,
                "[0901 10:00:09 @base.py:285] Epoch %d (global_step %d) finished, time:%.3g seconds."
                % (e, e * steps_per_epoch, secs),
                "[0901 10:00:09 @monitor.py:474] QueueInput/queue_size: 50",
                "[0901 10:00:09 @monitor.py:474] Throughput (samples/sec): {:.5g}".format(
                    steps_per_epoch * gpus / secs),
                "[0901 10:00:09 @monitor.py:474] total_cost: 1.5"]
    return "\n".join(out) + "\n"


def detectron(pairs, period=20):
    """Detectron (Caffe2) json_stats lines: the timer's mean since its start, 6 decimals, at
    0-based iterations 0, 20, 40, ... and the last; the timer restarts after iteration 20's line."""
    out = ["INFO train_net.py:  95: Called with args:"]
    timed = []
    for k in range(len(pairs)):
        timed.append(pairs[k][0])
        if k % period == 0 or k == len(pairs) - 1:
            out.append("json_stats: " + json.dumps({"eta": "0:05:07", "iter": k, "loss": "1.000000", "lr": "0.020000",
                                                    "mem": 9054, "time": "%.6f" % (sum(timed) / len(timed))},
                                                   sort_keys=True))
        if k == period:
            timed = []
    return "\n".join(out) + "\n"


def effdet(pairs, global_batch, log_interval=1):
    """rwightman/efficientdet-pytorch lines: each iteration's own time and images/s, then the
    running means since the epoch's first iteration (timm's AverageMeter) in parentheses."""
    n = len(pairs)
    out = ["Model efficientdet_d0 created, param count: 3880067"]
    total_t = total_d = 0.0
    for b, (t, d) in enumerate(pairs):
        total_t += t
        total_d += d
        if b % log_interval and b != n - 1:
            continue
        avg_t, avg_d = total_t / (b + 1), total_d / (b + 1)
        out.append("Train: 0 [%4d/%d (%3.0f%%)]  Loss: 1.402001 (1.6012)  Time: %.3fs, %7.2f/s  "
                   "(%.3fs, %7.2f/s)  LR: 1.000e-02  Data: %.3f (%.3f)"
                   % (b, n, 100.0 * b / (n - 1), t, global_batch / t, avg_t, global_batch / avg_t, d, avg_d))
    return "\n".join(out) + "\n"


def detectron2_v03(pairs, period=20, warmup_iter=3, start=0, banner=True):
    """detectron2 0.3-era CommonMetricPrinter lines (no last_time): `time` is the mean since
    the timer's warmup (the process's iterations warmup_iter..k + 1), to 4 decimals; `data_time`
    the mean of the last 20; printed at 0-based iter k = 19, 39, ... and at the last one. A
    process resumed from a checkpoint starts at 0-based iteration `start` (pairs are its own),
    and says so in its start banner."""
    n = len(pairs)
    out = ["[05/17 10:40:00 d2.engine.train_loop]: Starting training from iteration %d" % start] if banner else []
    for j in range(n):
        k = start + j
        if (k + 1) % period and j != n - 1:
            continue
        timed = pairs[warmup_iter - 1:j + 1]
        if not timed:
            continue
        recent = pairs[max(0, j + 1 - 20):j + 1]
        t = sum(p[0] for p in timed) / len(timed)
        d = sum(p[1] for p in recent) / len(recent)
        out.append("[05/17 10:42:13 d2.utils.events]:  eta: 0:10:00  iter: %d  total_loss: 1.104  "
                   "loss_cls: 0.3021  loss_box_reg: 0.2412  time: %.4f  data_time: %.4f  lr: 0.00079922  "
                   "max_mem: 3189M" % (k, t, d))
    return "\n".join(out) + "\n"


def maskrcnn_benchmark(pairs, period=20):
    """maskrcnn-benchmark trainer lines: each meter's median of the last 20, then its mean
    since the start in parentheses, to 4 decimals; printed every 20 iterations and at the last."""
    n = len(pairs)
    out = ["2019-05-01 10:00:00,000 maskrcnn_benchmark.trainer INFO: Start training"]
    for i in range(1, n + 1):
        if i % period and i != n:
            continue
        recent = sorted(pairs[max(0, i - 20):i])
        med_t = recent[len(recent) // 2][0]
        med_d = sorted(p[1] for p in pairs[max(0, i - 20):i])[len(recent) // 2]
        g_t = sum(p[0] for p in pairs[:i]) / i
        g_d = sum(p[1] for p in pairs[:i]) / i
        out.append("2019-05-01 10:00:12,500 maskrcnn_benchmark.trainer INFO: eta: 10:11:12  iter: %d  "
                   "loss: 1.8528 (2.0112)  loss_classifier: 1.0912 (1.2001)  time: %.4f (%.4f)  "
                   "data: %.4f (%.4f)  lr: 0.006667  max mem: 3012" % (i, med_t, g_t, med_d, g_d))
    return "\n".join(out) + "\n"


def dllogger_pytorch(pairs, log_interval=10, reset_at=10, steps_per_epoch=None):
    """NVIDIA EfficientDet (PyTorch) dllogger stdout lines: train_batch_time is the mean since
    the epoch's batch 0, and since batch `reset_at` once the meter is reset there;
    train_data_time the mean since batch 0; floats printed in full; each epoch ends with its
    summary line. One epoch unless `steps_per_epoch` says how long each is."""
    n = steps_per_epoch or len(pairs)
    out = ["DLL 2021-05-04 10:11:02.000000 - PARAMETER model_name : efficientdet_d0  batch_size : 2 "]
    for epoch in range(len(pairs) // n):
        batches = pairs[epoch * n:(epoch + 1) * n]
        for b in range(n):
            if (b + 1) % log_interval and b != n - 1:
                continue
            start = reset_at if b >= reset_at else 0
            t = sum(p[0] for p in batches[start:b + 1]) / (b + 1 - start)
            d = sum(p[1] for p in batches[:b + 1]) / (b + 1)
            out.append("DLL 2021-05-04 10:11:12.123456 - (%d, %d, %d) train_batch_time : %r  train_loss : 1.14  "
                       "throughput : 637.19  lr : 0.009823  train_data_time : %r " % (epoch, n, b, t, d))
        if steps_per_epoch:
            out.append("DLL 2021-05-04 10:14:00.000000 - (%d,) train_loss : 1.05  train_batch_time : 0.4  "
                       "train_throughout : 641.0 " % epoch)
    return "\n".join(out) + "\n"
