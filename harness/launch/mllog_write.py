"""An accuracy trial's log in MLLOG (`mllog.txt` in its folder), written through mlperf_logging.mllog.

Written once the trial's checkpoints are scored, with every stamp given: run_start, then one
block per checkpoint interval (its first epoch and epoch count from the images trained over the
train split's size), each checkpoint's eval_accuracy at its training time, and run_stop after
the last. The stamps are on the trial's training clock: run_start lies the trial's training
seconds before the moment the file is written, and each checkpoint that many training seconds
after it, since detbench scores its checkpoints after training and evaluation is never
training time (so eval_start and eval_stop share the checkpoint's stamp). run_stop's status is
"success" where a checkpoint reached the scenario's target, else "aborted"; the run still
trains its whole schedule, so run_stop - run_start is the time to train the schedule, not
MLPerf's time to target.

The header says what detbench ran: submission_org detbench, division open, status research,
the benchmark's MLPerf name (Mask R-CNN maskrcnn, RetinaNet ssd; a model MLPerf has not, under
its own name), the seed, batch sizes and optimizer settings, cache_clear false (no cache is
cleared). docs/methodology.md lists the compliance rules such a log cannot meet.
"""
import logging
import os
import time
from itertools import count

from harness import atomic

BENCHMARKS = {"mask_rcnn": "maskrcnn", "retinanet": "ssd"}
FILE = "mllog.txt"
_loggers = count()


def benchmark_name(model):
    return BENCHMARKS.get(model, model)


def write(path, model, schedule, points, target, train_images, eval_images, platform, now_ms=None):
    """points: (iteration, training seconds, {"BBOX": AP, "SEGM": AP} or {"": AP}) per scored checkpoint;
    target: (metric values reached?) a bool per point, in the same order."""
    from mlperf_logging.mllog.mllog import MLLogger

    total_ms = int(round(points[-1][1] * 1000)) if points else 0
    t0 = (int(time.time() * 1000) if now_ms is None else now_ms) - total_ms
    logger = logging.getLogger("detbench-mllog-%d-%d" % (os.getpid(), next(_loggers)))
    logger.propagate = False
    logger.setLevel(logging.INFO)
    with atomic.replacing(path) as fh:
        handler = logging.StreamHandler(fh)
        logger.addHandler(handler)
        try:
            _records(MLLogger(logger=logger, default_stack_offset=1), t0, model, schedule, points, target,
                     train_images, eval_images, platform)
        finally:
            logger.removeHandler(handler)


def _records(log, t0, model, s, points, target, train_images, eval_images, platform):
    head = t0 - 2
    for key, value in (("submission_benchmark", benchmark_name(model)), ("submission_org", "detbench"),
                       ("submission_division", "open"), ("submission_status", "research"),
                       ("submission_platform", platform), ("cache_clear", False)):
        log.event(key, value, time_ms=head)
    log.start("init_start", None, time_ms=head)
    for key, value in (("seed", s.seed), ("global_batch_size", s.batch), ("local_batch_size", s.batch),
                       ("gradient_accumulation_steps", 1), ("opt_name", "sgd_with_momentum"),
                       ("opt_base_learning_rate", s.lr), ("opt_weight_decay", s.weight_decay),
                       ("opt_learning_rate_warmup_steps", s.warmup_iters),
                       ("opt_learning_rate_warmup_factor", s.warmup_factor),
                       ("opt_learning_rate_decay_steps", list(s.lr_steps)),
                       ("opt_learning_rate_decay_factor", s.gamma), ("max_iterations", s.iterations)):
        log.event(key, value, time_ms=head)
    log.end("init_stop", None, time_ms=t0 - 1)
    log.start("run_start", None, time_ms=t0)
    log.event("train_samples", train_images, time_ms=t0)
    log.event("eval_samples", eval_images, time_ms=t0)
    done_iter, done_ms = 0, t0
    for (iteration, seconds, accuracy) in points:
        first = done_iter * s.batch / float(train_images)
        epochs = (iteration - done_iter) * s.batch / float(train_images)
        at = t0 + int(round(seconds * 1000))
        log.start("block_start", None, metadata={"first_epoch_num": first, "epoch_count": epochs,
                                                 "first_iteration": done_iter + 1}, time_ms=done_ms)
        log.end("block_stop", None, metadata={"first_epoch_num": first, "iteration": iteration}, time_ms=at)
        epoch_num = iteration * s.batch / float(train_images)
        log.start("eval_start", None, metadata={"epoch_num": epoch_num}, time_ms=at)
        value = accuracy[""] if list(accuracy) == [""] else accuracy
        log.event("eval_accuracy", value, metadata={"epoch_num": epoch_num, "iteration": iteration}, time_ms=at)
        log.end("eval_stop", None, metadata={"epoch_num": epoch_num}, time_ms=at)
        done_iter, done_ms = iteration, at
    log.end("run_stop", None, metadata={"status": "success" if any(target) else "aborted"}, time_ms=done_ms)
