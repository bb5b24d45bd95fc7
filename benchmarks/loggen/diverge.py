"""A generated log whose loss stops being finite at a chosen iteration, printed the way each
framework prints it.

Every framework prints its losses with Python's own formatting, so a NaN loss reads 'nan'
in a text line ('%.4f', '{:.4g}', '{:>9.6f}' all give it, right-aligned where the format pads)
and NaN in a JSON line (json.dumps, which mmcv, mmengine, detectron2's JSONWriter and dllogger
use, writes the bare literal). An infinite loss reads 'inf' and Infinity alike.

Where a framework stops itself at a non-finite loss the log ends with its own message there
instead of records that go on:

- detectron2 (engine/train_loop.py, SimpleTrainer._write_metrics): raises FloatingPointError
  "Loss became infinite or NaN at iteration={cur_iter}!" (the 0-based iteration) and
  "loss_dict = {...}" before that iteration's metrics are written; the trainer's hooks log
  "Exception during training:" with the traceback.
- torchvision's references/detection (engine.py, train_one_epoch): prints
  "Loss is {loss_value}, stopping training", then the reduced loss dict, and exits 1.
- Detectron (utils/train.py): logs "Loss is NaN" critical and raises Exception with it.
- detbench's trainer: "error: loss is nan (not finite) at iteration N: ..." and exit 3.

The others (mmdetection through mmcv or mmengine, maskrcnn-benchmark, SimpleDet, the two
EfficientDet train.py, tensorpack) go on printing the non-finite figure.

    log = diverge.diverge(loggen.generate(fmt, choose), at=40)
    log.params["diverged"]   # (iteration, the first record at or after it, or None where stopped)
"""
import copy
import json
import re

# formats whose framework stops itself at a non-finite loss, with the iteration it stops at
STOPS = {"detectron2", "torchvision-ref", "detectron"}

_TEXT_LOSS = {
    # label: value [(value)]: the number right after the label, and the one in parentheses after it
    "mmdet-v1": re.compile(r"(\bloss\w*: )(-?[0-9.]+(?:e[-+]?[0-9]+)?)"),
    "mmdet-v2": re.compile(r"(\bloss\w*: )(-?[0-9.]+(?:e[-+]?[0-9]+)?)"),
    "mmdet-v3": re.compile(r"(\bloss\w*: )(-?[0-9.]+(?:e[-+]?[0-9]+)?)"),
    "maskrcnn-benchmark": re.compile(r"(\bloss\w*: )(-?[0-9.]+) \((-?[0-9.]+)\)"),
    "effdet": re.compile(r"(Loss: +)(-?[0-9.]+(?:e[-+]?[0-9]+)?) \( *(-?[0-9.]+(?:e[-+]?[0-9]+)?)\)"),
    "dllogger": re.compile(r"(\btrain_loss : )(-?[0-9.]+(?:e[-+]?[0-9]+)?)"),
    # MXNet metrics: every figure but the accuracies is a running mean of a loss
    "simpledet-mxnet": re.compile(r"(\b(?!\w*Acc=)\w+=)(-?[0-9.]+)"),
    "tensorpack": re.compile(r"( total_cost: )(-?[0-9.]+(?:e[-+]?[0-9]+)?)"),
}


def _printed(value, width=0):
    """How Python's formatting prints a non-finite float: 'nan', 'inf' or '-inf', padded."""
    return ("%f" % value).rjust(width)


def _json_line(line, value):
    """A JSON record line with its losses (keys holding 'loss', and detectron2's total_loss) set to
    value; dllogger's 'DLLL ' prefix and detbench's 'DETBENCH_ITER ' kept."""
    at = line.find("{")
    obj = json.loads(line[at:])
    data = obj.get("data") if isinstance(obj.get("data"), dict) else obj
    for key in list(data):
        if "loss" in key and isinstance(data[key], (int, float, str)):
            data[key] = ("%f" % value) if isinstance(data[key], str) else value
    if line[at - len("DETBENCH_ITER "):at] == "DETBENCH_ITER ":
        return line[:at] + json.dumps(obj, separators=(",", ":"))
    return line[:at] + json.dumps(obj)


def _text_line(fmt, line, value):
    pattern = _TEXT_LOSS[fmt]

    def put(m):
        out = m.group(1) + _printed(value, len(m.group(2)) if fmt == "effdet" else 0)
        if m.lastindex and m.lastindex >= 3:
            inner = m.group(0)[len(m.group(1)) + len(m.group(2)):]
            out += inner.replace(m.group(3), _printed(value, len(m.group(3)) if fmt == "effdet" else 0))
        return out

    return pattern.sub(put, line)


def _record_line(fmt, line, value):
    stripped = line.lstrip()
    if stripped.startswith("{") or stripped.startswith("DLLL {") or "DETBENCH_ITER {" in line \
            or stripped.startswith("json_stats: {"):
        return _json_line(line, value)
    return _text_line(fmt, line, value)


def _stop_message(fmt, at, value):
    """The lines a framework that stops itself prints at the non-finite loss of iteration `at`."""
    shown = "%f" % value
    if fmt == "detectron2":
        loss_dict = "{'loss_cls': %s, 'loss_box_reg': 0.25, 'loss_rpn_cls': 0.05}" % shown
        return ["[06/15 09:26:05 d2.engine.train_loop]: Exception during training:",
                "Traceback (most recent call last):",
                '  File "detectron2/engine/train_loop.py", line 155, in train',
                "    self.run_step()",
                '  File "detectron2/engine/train_loop.py", line 409, in _write_metrics',
                "    raise FloatingPointError(",
                "FloatingPointError: Loss became infinite or NaN at iteration=%d!" % (at - 1),
                "loss_dict = %s" % loss_dict]
    if fmt == "torchvision-ref":
        return ["Loss is %s, stopping training" % shown,
                "{'loss_classifier': tensor(%s), 'loss_box_reg': tensor(0.2500), 'loss_objectness': tensor(0.0500), "
                "'loss_rpn_box_reg': tensor(0.0500)}" % shown]
    return ["CRITICAL train.py: 180: Loss is NaN",
            "INFO loader.py: 126: Stopping enqueue thread",
            "Traceback (most recent call last):",
            '  File "tools/train_net.py", line 132, in <module>',
            "    main()",
            "Exception: Loss is NaN"]


def diverge(log, at, value=float("nan")):
    """A copy of `log` whose loss is `value` (nan, inf) from iteration `at` of its last run on.
    A framework that goes on prints it in every record from there; one that stops itself ends
    the log with its message where the first non-finite loss is met (its records past `at`,
    and the lines after them, are gone). params["diverged"] = (at, the first record's iteration
    at or after it, or None where the framework stopped before printing one)."""
    out = copy.deepcopy(log)
    run = out.runs[-1]
    later = [(it, line) for it, line in zip(run.records, run.record_lines) if it >= at]
    if out.fmt in STOPS:
        cut = later[0][1] - 1 if later else len(out.lines)
        out.lines = out.lines[:cut] + _stop_message(out.fmt, at, value)
        keep = [k for k, it in enumerate(run.records) if it < at]
        run.records = [run.records[k] for k in keep]
        run.record_lines = [run.record_lines[k] for k in keep]
        run.spans = [run.spans[k] for k in keep]
        run.times, run.data = run.times[:at - run.first], run.data[:at - run.first]
        out.params = dict(out.params, diverged=(at, None))
        out.variant += ", stops at a %s loss at iteration %d" % ("%f" % value, at)
        return out
    for _, line in later:
        out.lines[line - 1] = _record_line(out.fmt, out.lines[line - 1], value)
    if out.fmt == "tensorpack":   # its loss is the epoch's total_cost, among the scalars after the throughput
        for _, line in later:
            for k in range(line, min(line + 12, len(out.lines))):
                out.lines[k] = _text_line(out.fmt, out.lines[k], value)
    out.params = dict(out.params, diverged=(at, later[0][0] if later else None))
    out.variant += ", a %s loss from iteration %d" % ("%f" % value, at)
    return out
