"""Detectron (Caffe2) training logs: tools/train_net.py through detectron/utils/train.py and
detectron/utils/training_stats.py.

- The loop runs 0-based cur_iter from start_iter to MAX_ITER - 1; IterTic before the
  learning-rate update, IterToc after the net has run; the timer's average_time is the mean
  of every timed iteration since the timer was last reset, and train.py resets it once, right
  after logging cur_iter == start_iter + 20.
- LogIterStats prints at cur_iter % 20 == 0 and at MAX_ITER - 1: "json_stats: " + json.dumps
  of the stats with sorted keys, every top-level float first turned into "{:.6f}".
- Checkpoints model_iter{cur_iter}.pkl when (cur_iter + 1) % CHECKPOINT_PERIOD == 0; a resumed
  run starts at the checkpoint's cur_iter + 1 and says "========> Resuming from checkpoint {}
  at start iter {}". Logging format '%(levelname)s %(filename)s:%(lineno)4d: %(message)s'.
"""
import json

from . import noise
from .core import Log, Writer, base_time, budget, hms, inject_faults, new_run, plan_runs, prefix, py_random, seeded

FORMAT = "detectron"
RPN = ["loss_rpn_bbox_fpn%d" % i for i in range(2, 7)] + ["loss_rpn_cls_fpn%d" % i for i in range(2, 7)]


def generate(choose, max_iters=200000, max_records=None):
    rng, rnd = seeded(choose), py_random(choose)
    ckpt = choose.weighted("ckpt", [(20000, 40), (5000, 30), (1000, 20), (200, 10)])
    total = choose.log_integer("iters", 21, budget(max_iters, max_records, 20))
    base = base_time(choose)
    batch = choose.choice("batch", [2, 8, 16])
    segments = plan_runs(choose, total, ckpt)
    w = Writer()
    runs = []
    for seg in segments:
        run = new_run(rng, runs, seg, base, 0.2)
        t, n = run.times, len(run.times)
        w.add("Found Detectron ops lib: /usr/local/lib/python2.7/dist-packages/torch/lib/"
              "libcaffe2_detectron_ops_gpu.so")
        w.add("INFO train_net.py:  95: Called with args:")
        w.add("INFO train_net.py:  96: Namespace(cfg_file='configs/12_2017_baselines/e2e_mask_rcnn_R-50-FPN_1x.yaml', "
              "multi_gpu_testing=False, opts=['OUTPUT_DIR', '/tmp/detectron-output'], skip_test=False)")
        w.add("INFO train_net.py: 104: Training with config:\nINFO train_net.py: 105: {'SOLVER': {'MAX_ITER': %d, "
              "'BASE_LR': 0.02}, 'TRAIN': {'SNAPSHOT_ITERS': %d, 'IMS_PER_BATCH': 2}}" % (total, ckpt))
        if seg.start:
            w.add("INFO train.py: 144: ========> Resuming from checkpoint /tmp/detectron-output/train/coco_2014_train/"
                  "generalized_rcnn/model_iter%d.pkl at start iter %d" % (seg.start - 1, seg.start))
        w.add("INFO train.py: 152: Building model: generalized_rcnn")
        w.add("INFO loader.py: 230: Pre-filling mini-batch queue...")
        w.add("INFO detector.py: 479: Changing learning rate 0.000000 -> 0.006667 at iter %d" % seg.start)
        tp = prefix(t)
        reset_at = None          # index of the first iteration timed after the reset
        for j in range(n):
            it0 = seg.start + j
            if j == 0:
                w.add("INFO net.py: 213: Printing model: generalized_rcnn\nINFO net.py: 254: End of model: "
                      "generalized_rcnn")
            if it0 % 20 == 0 or it0 == total - 1:
                lo = 0 if reset_at is None else reset_at
                avg = (tp[j + 1] - tp[lo]) / (j + 1 - lo)
                lv = 2.0 / (1 + it0 / 5000.0)
                stats = {"accuracy_cls": rnd.uniform(0.5, 0.95), "eta": hms(avg * (total - it0)), "iter": it0,
                         "loss": lv, "loss_bbox": lv * 0.1, "loss_cls": lv * 0.4, "lr": 0.02,
                         "mb_qsize": 64, "mem": 6000 + rnd.randint(0, 3000), "time": avg}
                stats.update((name, lv * 0.03 * rnd.uniform(0.5, 1.5)) for name in RPN)
                stats = {key: "{:.6f}".format(v) if isinstance(v, float) else v for key, v in stats.items()}
                w.record(run, it0 + 1, "json_stats: " + json.dumps(stats, sort_keys=True), run.first)
                note = noise.maybe_noise(rnd, 1)
                if note is not None:
                    w.add(note)
            if (it0 + 1) % ckpt == 0 and it0 > seg.start:
                w.add("INFO utils.py: 129: Saved checkpoint to /tmp/detectron-output/train/coco_2014_train/"
                      "generalized_rcnn/model_iter%d.pkl" % it0)
            if it0 == seg.start + 20:
                reset_at = j + 1
        if seg.end == total:
            w.add("INFO net.py: 143: Saving parameters and momentum to /tmp/detectron-output/train/coco_2014_train/"
                  "generalized_rcnn/model_final.pkl")
            w.add("INFO test_engine.py: 320: Wrote detections to: /tmp/detectron-output/test/detections.pkl")
            w.add(noise.coco_eval(rnd, ("bbox", "segm")))
        else:
            w.add(noise.traceback(rnd, "tools/train_net.py"))
    faults = inject_faults(choose, w, runs)
    return Log(FORMAT, "Detectron json_stats, checkpoint %d, %d run(s)" % (ckpt, len(runs)), w.lines, runs,
               images_per_iteration=batch, faults=faults, framework="detectron", params=dict(total=total, ckpt=ckpt))
