"""The per-iteration log format of the bundled trainer and the calibration workload.

One JSON object per line behind a fixed prefix, so it can share stdout with anything
else a workload prints. Standard library only: workloads import it without the harness.

The WORK line says how much detection work one iteration did (proposals kept, RoIs
sampled, ...), so that frameworks can be shown to do the same work. The SETTINGS line says,
once before the first iteration, the normalized settings a program really trains with (read
from its framework's own objects, in the keys of harness/frameworks/settings.py) and how it
implements the parts that decide its speed. The rival drivers in harness/drivers/ run in their
own envs, where the harness is not importable, and print these lines through this file all the
same (harness/drivers/common.py loads it by its path), so every prefix is declared here only.
"""
import json
from typing import Any, Dict, Tuple

ITER_PREFIX = "DETBENCH_ITER "
META_PREFIX = "DETBENCH_META "
WORK_PREFIX = "DETBENCH_WORK "   # work done in one iteration: {"iteration": N, "proposals": P, ...}
# the settings a training program runs with: {"settings": {...}, "implementation": {...}}
SETTINGS_PREFIX = "DETBENCH_SETTINGS "
# the parts of one inference batch: {"iteration": N, "pre_s": .., "net_s": .., "post_s": .., "detections": D}
PHASES_PREFIX = "DETBENCH_PHASES "
# what one training iteration drew from the data set, as the framework's own loader drew it:
# {"iteration": N, "epoch": E, "views": [[image_id, flipped], ...]}
DATA_PREFIX = "DETBENCH_DATA "
# where one training step's time went (harness/drivers/breakdown.py), after its optimizer step:
# {"iteration": N, "step_s": S, "phases": {name: seconds}}, or {"error": text} once where it cannot attach
BREAKDOWN_PREFIX = "DETBENCH_BREAKDOWN "
# set to "<framework>/<model>" in a trial's environment, it asks the program for BREAKDOWN lines
BREAKDOWN_ENV = "DETBENCH_BREAKDOWN"

# keys of an ITER object
ITERATION = "iteration"      # 1-based index of the iteration that just ended
TIME_S = "time_s"            # wall seconds from the end of the previous iteration to the end of this one
DATA_TIME_S = "data_time_s"  # seconds of it spent waiting for the batch
IMAGES = "images"            # images in this iteration, summed over all ranks
LOSS = "loss"                # total loss
LOSSES = "losses"            # {name: value}
LR = "lr"
PEAK_MEM_MB = "peak_mem_mb"  # peak device memory so far in MiB, null where unknown

# keys of a WORK object besides ITERATION: counts summed over the images of the batch (rank 0)
WORK_KEYS = (
    "proposals",         # region proposals kept after the RPN's NMS and top-k
    "sampled_rois",      # RoIs the box head was trained on (positives and negatives)
    "positive_rois",     # of those, the ones matched to a ground-truth box
    "mask_rois",         # RoIs the mask head was trained on
    "positive_anchors",  # RetinaNet: anchors matched to a ground-truth box
)


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


# An inference trial logs one ITER line per batch (iteration = the batch's 1-based number,
# warmup included; time_s = wall seconds from the end of the previous batch to the moment this
# batch's post-processed detections are ready, device-synchronised; data_time_s = the part spent
# fetching its raw images; images = the batch size), then one PHASES line for the same batch:
PRE_S = "pre_s"            # raw images to the network's input tensor on its device (convert, normalise, resize, pad)
NET_S = "net_s"            # the network's own forward: backbone, necks, heads (RPN proposals and RoI heads included)
POST_S = "post_s"          # head outputs to final detections: decode, score threshold, class NMS, top-k, mask paste
DETECTIONS = "detections"  # detections kept, summed over the batch's images
PHASE_KEYS = (PRE_S, NET_S, POST_S)


def phases_line(iteration, pre_s, net_s, post_s, detections=None):
    """Return one PHASES line (without the newline); a phase the driver cannot separate is None."""
    obj = {ITERATION: int(iteration)}
    for key, value in zip(PHASE_KEYS, (pre_s, net_s, post_s)):
        obj[key] = None if value is None else float(value)
    obj[DETECTIONS] = None if detections is None else int(detections)
    return PHASES_PREFIX + json.dumps(obj, separators=(",", ":"))


def work_line(iteration, **counts):
    """Return one WORK line (without the newline); counts given as None are left out."""
    unknown = sorted(set(counts) - set(WORK_KEYS))
    if unknown:
        raise ValueError("unknown work counts %s (known: %s)" % (", ".join(unknown), ", ".join(WORK_KEYS)))
    obj = {ITERATION: int(iteration)}
    obj.update((k, int(v)) for k, v in counts.items() if v is not None)
    return WORK_PREFIX + json.dumps(obj, sort_keys=True, separators=(",", ":"))


# keys of a DATA object besides ITERATION
EPOCH = "epoch"  # 0-based epoch of the loader's pass through the data set this batch came from (rank 0)
VIEWS = "views"  # [image id, 1 if mirrored else 0] of each image of the batch, in the order drawn (rank 0)


def data_line(iteration, epoch, views):
    """Return one DATA line (without the newline): the images of one iteration's batch, each with
    whether the framework's own augmentation mirrored it, and the loader's epoch."""
    obj = {ITERATION: int(iteration), EPOCH: None if epoch is None else int(epoch),
           VIEWS: [[int(image_id), 1 if flipped else 0] for image_id, flipped in views]}
    return DATA_PREFIX + json.dumps(obj, separators=(",", ":"))


def read_data(payload: str) -> Tuple[int, Any, list]:
    """(iteration, epoch or None, [(image_id, flipped)]) of the JSON text after a DATA prefix;
    ValueError saying what is wrong otherwise."""
    try:
        obj = json.loads(payload)
    except (ValueError, RecursionError):
        raise ValueError("the %sline is not JSON" % DATA_PREFIX) from None
    views = obj.get(VIEWS) if isinstance(obj, dict) else None
    iteration = obj.get(ITERATION) if isinstance(obj, dict) else None
    epoch = obj.get(EPOCH) if isinstance(obj, dict) else None
    if not isinstance(iteration, int) or isinstance(iteration, bool) or not isinstance(views, list) \
            or not (epoch is None or (isinstance(epoch, int) and not isinstance(epoch, bool))) \
            or not all(isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v) for v in views):
        raise ValueError("the %sline is not {%r: N, %r: E, %r: [[image_id, 0|1], ...]}"
                         % (DATA_PREFIX, ITERATION, EPOCH, VIEWS))
    return iteration, epoch, [(int(i), bool(f)) for i, f in views]


def meta_line(settings):
    """Return one META line: the normalized settings a workload actually ran with."""
    return META_PREFIX + json.dumps(settings, sort_keys=True, separators=(",", ":"))


# keys of a SETTINGS object
SETTINGS = "settings"              # {normalized key: value}, the keys of harness/frameworks/settings.py
IMPLEMENTATION = "implementation"  # {part: how it runs}, one of IMPLEMENTATION_PARTS each; not compared
IMPLEMENTATION_PARTS = (
    "roi_align",     # the RoIAlign that ran: a kernel (whose) or the bundled trainer's sparse products
    "batch_norm",    # how the backbone's norms run: frozen and folded into the convolutions, or modules
    "optimizer",     # the optimizer and its update path: fused kernel, foreach, per-parameter loop
    "mask_logits",   # Mask R-CNN: logits computed for the target class only, or for all classes
    "mask_paste",    # Mask R-CNN at test time: how a mask's map is laid over its box in the image
    "mask_targets",  # Mask R-CNN training: how a RoI's target is cut from its object's mask
    "memory_format",  # the convolutions' layout: NCHW, or channels-last (NHWC) where the weights are
    "training_code",  # the rival's own published script that trained, and what detbench added to it and where
)


def settings_line(settings, implementation):
    """Return one SETTINGS line (without the newline)."""
    unknown = sorted(set(implementation) - set(IMPLEMENTATION_PARTS))
    if unknown:
        raise ValueError("unknown implementation parts %s (known: %s)"
                         % (", ".join(unknown), ", ".join(IMPLEMENTATION_PARTS)))
    return SETTINGS_PREFIX + json.dumps({SETTINGS: settings, IMPLEMENTATION: implementation},
                                        sort_keys=True, separators=(",", ":"))


def read_settings(payload: str) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """(settings, implementation) of the JSON text after a SETTINGS prefix; ValueError, saying
    what is wrong, unless it is an object with a settings object and an implementation object of
    known parts, each a string."""
    try:
        obj = json.loads(payload)
    except (ValueError, RecursionError):
        raise ValueError("the %sline is not JSON" % SETTINGS_PREFIX) from None
    settings = obj.get(SETTINGS) if isinstance(obj, dict) else None
    implementation = obj.get(IMPLEMENTATION, {}) if isinstance(obj, dict) else None
    if not isinstance(settings, dict) or not isinstance(implementation, dict) or \
            not all(k in IMPLEMENTATION_PARTS and isinstance(v, str) for k, v in implementation.items()):
        raise ValueError("the %sline is not {%r: {...}, %r: {part: text}}"
                         % (SETTINGS_PREFIX, SETTINGS, IMPLEMENTATION))
    return settings, implementation


def parse_settings_line(line):
    """(settings, implementation) of a well-formed SETTINGS line (the prefix at its start, then
    what read_settings accepts); None for any other line."""
    line = line.strip()
    if not line.startswith(SETTINGS_PREFIX):
        return None
    try:
        return read_settings(line[len(SETTINGS_PREFIX):])
    except ValueError:
        return None


# keys of a BREAKDOWN object besides ITERATION
STEP_S = "step_s"    # seconds from the end of the previous optimizer step (or the attaching) to the end of this one
PHASES = "phases"    # {phase: seconds of this step}
ERROR = "error"      # why no breakdown could be attached (the line's only key)


def breakdown_line(iteration, step_s, phases):
    """Return one BREAKDOWN line (without the newline)."""
    obj = {ITERATION: int(iteration), STEP_S: float(step_s),
           PHASES: {str(k): round(float(v), 9) for k, v in phases.items()}}
    return BREAKDOWN_PREFIX + json.dumps(obj, separators=(",", ":"))


def breakdown_error_line(text):
    """Return the BREAKDOWN line saying why the breakdown could not be attached."""
    return BREAKDOWN_PREFIX + json.dumps({ERROR: str(text)}, separators=(",", ":"))


def read_breakdown(payload: str) -> Tuple[Any, Any, Any]:
    """(iteration, step_s, {phase: seconds}) or (None, None, error text) of the JSON text after a
    BREAKDOWN prefix; ValueError saying what is wrong otherwise."""
    try:
        obj = json.loads(payload)
    except (ValueError, RecursionError):
        raise ValueError("the %sline is not JSON" % BREAKDOWN_PREFIX) from None
    if isinstance(obj, dict) and isinstance(obj.get(ERROR), str) and len(obj) == 1:
        return None, None, obj[ERROR]
    iteration = obj.get(ITERATION) if isinstance(obj, dict) else None
    step = obj.get(STEP_S) if isinstance(obj, dict) else None
    phases = obj.get(PHASES) if isinstance(obj, dict) else None
    if not isinstance(iteration, int) or isinstance(iteration, bool) or not _seconds(step) \
            or not isinstance(phases, dict) or not all(_seconds(v) for v in phases.values()):
        raise ValueError("the %sline is not {%r: N, %r: S, %r: {phase: seconds}}"
                         % (BREAKDOWN_PREFIX, ITERATION, STEP_S, PHASES))
    return iteration, float(step), {str(k): float(v) for k, v in phases.items()}


def _seconds(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 and value == value
