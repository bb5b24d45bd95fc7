"""MLPerf Training result files written by mlperf_logging.mllog itself, in the shapes real submitters'
logs have, at times the test chooses (so every figure the import gives is known beforehand).

Shapes (as in training_results_v2.0 and v2.1):
- "maskrcnn-pytorch": NVIDIA's maskrcnn_benchmark: a block_start (first_epoch_num, epoch_count 1)
  around each epoch_start/epoch_stop, tracked_stats {time, data, loss...} and a throughput point
  every logging interval, eval_accuracy {BBOX, SEGM} after each epoch, d_batch_size;
- "ssd-pytorch": NVIDIA's RetinaNet: epoch_start/epoch_stop with epoch_num, one tracked_stats
  {imgs_sec} (metadata step) and one throughput per epoch, eval_start/eval_accuracy/eval_stop,
  local_batch_size;
- "tpu": Google's TensorFlow on TPU: block_start/block_stop only, eval inside each block.

`write_round` lays out <submitter>/results/<system>/<benchmark>/result_N.txt and
<submitter>/systems/<system>.json as a round's repository does.
"""
import json
import logging
from itertools import count
from pathlib import Path

from mlperf_logging.mllog.mllog import MLLogger

_names = count()
MS = 1_700_000_000_000  # the first stamp of every generated log


def write_result(path, shape="ssd-pytorch", minutes=10.0, epochs=4, accuracy=(0.20, 0.30, 0.345, 0.36),
                 division="open", status="success", stop=True, benchmark=None, org="Vendor", init_s=120.0,
                 global_batch=256, devices=8, extra=None):
    """One result file; its run lasts `minutes` from run_start to run_stop, its epochs share the time
    evenly less 2% evaluation after each. `extra(logger, t0_ms)` adds records after run_start."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger("mllogs-%d" % next(_names))
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.FileHandler(str(path), mode="w")
    logger.addHandler(handler)
    try:
        _write(MLLogger(logger=logger), shape, minutes, epochs, accuracy, division, status, stop,
               benchmark or ("maskrcnn" if shape == "maskrcnn-pytorch" else "ssd"), org, init_s,
               global_batch, devices, extra)
    finally:
        handler.close()
        logger.removeHandler(handler)
    return path


def _write(log, shape, minutes, epochs, accuracy, division, status, stop, benchmark, org, init_s,
           global_batch, devices, extra):
    start = MS
    t0 = start + int(init_s * 1000)
    for key, value in (("submission_benchmark", benchmark), ("submission_org", org),
                       ("submission_division", division), ("submission_status", "onprem"),
                       ("submission_platform", "1xServer")):
        log.event(key, value, time_ms=start)
    log.event("cache_clear", True, time_ms=start)
    log.start("init_start", None, time_ms=start + 1)
    log.event("seed", 1234, time_ms=start + 2)
    local = global_batch // devices
    if shape == "maskrcnn-pytorch":
        log.event("d_batch_size", float(local), time_ms=start + 3)
    elif shape == "ssd-pytorch":
        log.event("local_batch_size", local, time_ms=start + 3)
    log.event("global_batch_size", global_batch, time_ms=start + 3)
    log.event("opt_base_learning_rate", 0.12, time_ms=start + 4)
    log.end("init_stop", None, time_ms=t0 - 1)
    log.start("run_start", None, time_ms=t0)
    log.event("train_samples", 117266 if benchmark == "maskrcnn" else 1170301, time_ms=t0 + 1)
    log.event("eval_samples", 5000, time_ms=t0 + 1)
    if extra is not None:
        extra(log, t0)
    run_ms = int(minutes * 60000)
    each = (run_ms - 10) // epochs
    for e in range(epochs):
        begin = t0 + 5 + e * each
        train = int(each * 0.98)
        num = e + 1
        acc = accuracy[min(e, len(accuracy) - 1)]
        value = {"BBOX": acc, "SEGM": acc * 0.9} if benchmark == "maskrcnn" else acc
        if shape == "maskrcnn-pytorch":
            log.start("block_start", None, metadata={"first_epoch_num": num, "epoch_count": 1}, time_ms=begin)
            log.start("epoch_start", None, metadata={"epoch_num": num}, time_ms=begin)
            for step in range(1, 4):
                at = begin + train * step // 4
                iteration = global_batch * 1.0 / 700.0
                log.event("tracked_stats", {"time": iteration, "data": 0.005, "loss": 1.0 / step},
                          metadata={"step": (num, step * 20)}, time_ms=at)
                log.event("throughput", global_batch / iteration, time_ms=at)
            log.end("epoch_stop", None, metadata={"epoch_num": num}, time_ms=begin + train)
            log.end("block_stop", None, metadata={"first_epoch_num": num}, time_ms=begin + train)
            log.start("eval_start", None, metadata={"epoch_num": num}, time_ms=begin + train + 1)
            log.event("eval_accuracy", value, metadata={"epoch_num": num}, time_ms=begin + each - 2)
            log.end("eval_stop", None, metadata={"epoch_num": num}, time_ms=begin + each - 1)
        elif shape == "ssd-pytorch":
            log.start("epoch_start", e, metadata={"epoch_num": e}, time_ms=begin)
            log.end("epoch_stop", e, metadata={"epoch_num": e}, time_ms=begin + train)
            log.event("tracked_stats", {"imgs_sec": 120.0}, metadata={"step": num}, time_ms=begin + train)
            log.event("throughput", 120.0, time_ms=begin + train)
            log.start("eval_start", num, metadata={"epoch_num": num}, time_ms=begin + train + 1)
            log.event("eval_accuracy", value, metadata={"epoch_num": num}, time_ms=begin + each - 2)
            log.end("eval_stop", num, metadata={"epoch_num": num}, time_ms=begin + each - 1)
        else:  # tpu: blocks only, evaluation inside them
            log.start("block_start", None, metadata={"first_epoch_num": e, "epoch_count": 1}, time_ms=begin)
            log.start("eval_start", None, metadata={"epoch_num": num}, time_ms=begin + train + 1)
            log.event("eval_accuracy", value, metadata={"epoch_num": num}, time_ms=begin + each - 2)
            log.end("eval_stop", None, metadata={"epoch_num": num}, time_ms=begin + each - 1)
            log.end("block_stop", None, metadata={"first_epoch_num": e}, time_ms=begin + each - 1)
    if stop:
        log.end("run_stop", None, metadata={"status": status}, time_ms=t0 + run_ms)


def system_json(submitter_dir, system, nodes=1, per_node=8, accelerator="NVIDIA A100-SXM4-80GB",
                framework="PyTorch NVIDIA Release 22.04", submitter="Vendor", division="open"):
    path = Path(submitter_dir) / "systems" / (system + ".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "submitter": submitter, "division": division, "status": "onprem", "system_name": system,
        "number_of_nodes": str(nodes), "host_processors_per_node": "2",
        "host_processor_model_name": "AMD EPYC 7742", "host_processor_core_count": "64",
        "accelerators_per_node": str(per_node), "accelerator_model_name": accelerator,
        "framework": framework, "other_software_stack": {"cuda_version": "11.6"},
        "operating_system": "Ubuntu 20.04", "hw_notes": "", "sw_notes": "",
    }, indent=4))
    return path


def write_system(round_dir, system, benchmark, minutes, submitter="Vendor", nodes=1, per_node=8, **kw):
    """A system's folder of one benchmark with one result per entry of `minutes`, and its JSON."""
    sub = Path(round_dir) / submitter
    system_json(sub, system, nodes=nodes, per_node=per_node, submitter=submitter,
                division=kw.get("division", "open"))
    folder = sub / "results" / system / benchmark
    shape = kw.pop("shape", "maskrcnn-pytorch" if benchmark == "maskrcnn" else "ssd-pytorch")
    for n, m in enumerate(minutes):
        write_result(folder / ("result_%d.txt" % n), shape=shape, minutes=m, org=submitter,
                     devices=nodes * (per_node or 2), **kw)  # a CPU-only system: one process a socket
    return folder
