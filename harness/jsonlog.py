"""The per-iteration log format of the bundled trainer and the calibration workload.

One JSON object per line behind a fixed prefix, so it can share stdout with anything
else a workload prints. Standard library only: workloads import it without the harness.
"""
import json

ITER_PREFIX = "DETBENCH_ITER "
META_PREFIX = "DETBENCH_META "

# keys of an ITER object
ITERATION = "iteration"      # 1-based index of the iteration that just ended
TIME_S = "time_s"            # wall seconds of this iteration, data loading included
DATA_TIME_S = "data_time_s"  # seconds of it spent waiting for the batch
IMAGES = "images"            # images in this iteration, summed over all ranks
LOSS = "loss"                # total loss
LOSSES = "losses"            # {name: value}
LR = "lr"
PEAK_MEM_MB = "peak_mem_mb"  # peak device memory so far in MiB, null where unknown


def iter_line(iteration, time_s, data_time_s, images, loss=None, losses=None, lr=None,
              peak_mem_mb=None):
    """Return one ITER line (without the newline)."""
    obj = {
        ITERATION: int(iteration),
        TIME_S: float(time_s),
        DATA_TIME_S: None if data_time_s is None else float(data_time_s),
        IMAGES: int(images),
        LOSS: loss,
        LOSSES: losses or {},
        LR: lr,
        PEAK_MEM_MB: peak_mem_mb,
    }
    return ITER_PREFIX + json.dumps(obj, separators=(",", ":"))


def meta_line(settings):
    """Return one META line: the normalized settings a workload actually ran with."""
    return META_PREFIX + json.dumps(settings, sort_keys=True, separators=(",", ":"))
