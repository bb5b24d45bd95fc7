"""tensorpack training logs (train/base.py main_loop, callbacks/prof.py ThroughputTracker,
callbacks/monitor.py ScalarPrinter), as examples/FasterRCNN writes them.

- Per epoch: "Start Epoch {e} ...", the steps (a tqdm bar redrawn with carriage returns),
  "Epoch {e} (global_step {G}) finished, time:{humanize_time_delta}.", then the epoch
  triggers: ScalarPrinter prints every scalar sorted by name as "{name}: {value:.5g}", among
  them "Throughput (samples/sec)" = steps since the last trigger * samples_per_step / seconds
  the tracker's timer ran (between its before_epoch and after_epoch: the epoch's steps).
- Log lines "[MMDD HH:MM:SS @file.py:N] message", the head in ANSI green.
- A resumed run (AutoResumeTrainConfig) restores the checkpoint of a global step at an epoch's
  end and starts at the next epoch: "Restoring checkpoint from .../model-{G} ...".
"""
from . import noise
from .core import Clock, Log, Writer, base_time, inject_faults, new_run, plan_runs, py_random, seeded

FORMAT = "tensorpack"


def humanize(sec):
    """tensorpack.utils.utils.humanize_time_delta."""
    if sec == 0:
        return "0 second"
    days, rest = divmod(int(sec), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    vals = [days, hours, minutes, seconds]
    if sec < 60:
        vals[-1] = sec
    out = []
    for v, unit in zip(vals, ("day", "hour", "minute", "second")):
        if v > 0:
            out.append("{:.3g} {}{}".format(v, unit, "s" if v > 1 else ""))
    return " ".join(out)


def generate(choose, max_iters=200000, max_records=None):
    rng, rnd, clock = seeded(choose), py_random(choose), Clock(choose)
    steps = choose.weighted("steps_per_epoch", [(500, 40), (None, 60)]) or choose.log_integer("steps", 2, 5000)
    epochs = max(1, min(choose.integer("epochs", 1, 40), max_iters // steps))
    total = steps * epochs
    gpus = choose.choice("gpus", [1, 2, 4, 8])
    base = base_time(choose)
    segments = plan_runs(choose, total, steps)
    w = Writer()
    runs = []

    def head(name, line_no):
        return "\x1b[32m[%s @%s:%d]\x1b[0m " % (clock.fmt("%m%d %H:%M:%S"), name, line_no)

    for seg in segments:
        run = new_run(rng, runs, seg, base, 0.2)
        t = run.times
        w.add(head("logger.py", 90) + "Argv: ./train.py --config MODE_MASK=True TRAIN.STEPS_PER_EPOCH=%d" % steps)
        w.add(head("train.py", 73) + "Warm Up Schedule (steps, value): [(0, 0.0033), (1000, 0.01)]")
        w.add(head("base.py", 209) + "Setup callbacks graph ...")
        if seg.start:
            w.add(head("sessinit.py", 114) + "Restoring checkpoint from train_log/maskrcnn/model-%d ..." % seg.start)
        w.add(head("base.py", 243) + "Graph Finalized.")
        for e0 in range(seg.start // steps, -(-seg.end // steps)):
            lo = max(e0 * steps, seg.start) - seg.start
            hi = min((e0 + 1) * steps, seg.end) - seg.start
            w.add(head("base.py", 275) + "Start Epoch %d ..." % (e0 + 1))
            seconds = float(t[lo:hi].sum())
            clock.advance(seconds)
            bar = "\r".join("%3d%%|%-10s|%d/%d[00:%02d<00:00,%5.2fit/s]" % (
                100 * q // 4, "#" * (10 * q // 4), (hi - lo) * q // 4, steps, q, (hi - lo) / seconds)
                for q in range(1, 5))
            if hi - lo < steps:               # the run dies inside this epoch
                w.add(bar)
                w.add(noise.traceback(rnd, "train.py"))
                break
            w.add(bar)
            g = (e0 + 1) * steps
            w.add(head("base.py", 285)
                  + "Epoch %d (global_step %d) finished, time:%s." % (e0 + 1, g, humanize(seconds)))
            w.add(head("misc.py", 109) + "Estimated Time Left: 5 days 3 hours 11 minutes 2 seconds")
            scalars = {"GPUUtil/0": rnd.uniform(80, 95), "HostFreeMemory (GB)": rnd.uniform(200, 300),
                       "PeakMemory(MB)/gpu:0": rnd.uniform(6000, 7000), "QueueInput/queue_size": rnd.uniform(40, 50),
                       "Throughput (samples/sec)": steps * gpus / seconds, "learning_rate": 0.01,
                       "fastrcnn_losses/box_loss": rnd.uniform(0.1, 0.3), "total_cost": rnd.uniform(0.5, 2)}
            for name in sorted(scalars):
                line = head("monitor.py", 474) + "{}: {:.5g}".format(name, scalars[name])
                if name.startswith("Throughput"):
                    w.record(run, g, line, g - steps + 1)
                else:
                    w.add(line)
            if rnd.random() < 0.1:
                w.add(head("eval.py", 261) + "Running evaluation ...")
                w.add(noise.coco_eval(rnd))
            note = noise.maybe_noise(rnd, 3)
            if note is not None:
                w.add(note)
        if seg.end == total:
            w.add(head("base.py", 289) + "Training has finished!")
    faults = inject_faults(choose, w, runs)
    return Log(FORMAT, "tensorpack, %d steps per epoch, %d GPU(s), %d run(s)" % (steps, gpus, len(runs)), w.lines, runs,
               images_per_iteration=gpus, epoch_length=steps, faults=faults, framework="tensorpack",
               params=dict(steps=steps, total=total, unplaced_records=True, implies_images=True))
