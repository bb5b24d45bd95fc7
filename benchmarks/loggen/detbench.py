"""The bundled trainer's log (harness/trainer/train.py and engine.py): one DETBENCH_ITER line per
iteration with its own time and data time (every digit of the float), the images it trained
on, then its DETBENCH_WORK line and a line for people. A run starts with DETBENCH_META (and
DETBENCH_SETTINGS); a resumed one first says "resuming {checkpoint} after iteration {n}".
"""
import json

from harness import jsonlog

from . import noise
from .core import Log, Writer, base_time, budget, inject_faults, new_run, plan_runs, py_random, seeded

FORMAT = "detbench-jsonl"


def generate(choose, max_iters=200000, max_records=None):
    rng, rnd = seeded(choose), py_random(choose)
    total = choose.log_integer("iters", 5, budget(max_iters, max_records, 1))
    every = choose.weighted("checkpoint_every", [(100, 30), (500, 30), (2000, 40)])
    base = base_time(choose)
    images = choose.choice("images", [1, 2, 4, 8, 16])
    segments = plan_runs(choose, total, every)
    w = Writer()
    runs = []
    for seg in segments:
        run = new_run(rng, runs, seg, base, 0.2)
        t, d, n = run.times, run.data, len(run.times)
        meta = {"framework": "detbench-trainer", "model": "faster_rcnn", "images_per_iteration": images,
                "max_iter": total}
        if seg.start:
            meta["resumed_after_iteration"] = seg.start
            w.add("resuming checkpoints/iter_%07d.pt after iteration %d" % (seg.start, seg.start))
        w.add(jsonlog.meta_line(meta))
        w.add("DETBENCH_SETTINGS " + json.dumps({"implementation": {"roi_align": "sparse"}, "settings": {}},
                                                 sort_keys=True, separators=(",", ":")))
        for j in range(n):
            it = seg.start + j + 1
            loss = round(2.0 / (1 + it / 5000.0), 6)
            line = jsonlog.iter_line(it, float(t[j]), float(d[j]), images, loss=loss, losses={"loss_cls": loss},
                                     lr=0.02, peak_mem_mb=None)
            w.record(run, it, line, it)
            w.add(jsonlog.work_line(it, proposals=1000, sampled_rois=512, positive_rois=rnd.randint(10, 128)))
            w.add("iter %d/%d  loss %.4f  time %.0fms (data %.0fms)  %.2f img/s  lr 0.02000" % (
                it, total, loss, t[j] * 1000, d[j] * 1000, images / t[j]))
            if it % every == 0:
                w.add("checkpoint checkpoints/iter_%07d.pt" % it)
            note = noise.maybe_noise(rnd, 0.5)
            if note is not None:
                w.add(note)
        if seg.end != total:
            w.add(noise.traceback(rnd, "harness/trainer/train.py"))
        else:
            w.add("data summary " + json.dumps({"data_time_fraction": 0.05, "padding_fraction": 0.1}, sort_keys=True))
    faults = inject_faults(choose, w, runs)
    return Log(FORMAT, "detbench trainer, %d run(s)" % len(runs), w.lines, runs, images_per_iteration=None,
               faults=faults, framework="detbench-trainer", params=dict(total=total, images=images))
