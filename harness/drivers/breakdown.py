"""Where a training step's time goes, timed through torch's own extension points, for any model.

A `Breakdown` is attached to a built model and its optimizer by a list of phases, each a name
and the paths of the submodules whose work it is (`MAPPINGS`: the paths of each framework's own
model per detector; "" is the whole model). It never edits a framework's code; it adds:

  forward    `nn.Module.register_forward_pre_hook` / `register_forward_hook` on each named module:
             the time between them, less that of a named module inside it (detectron2's FPN holds
             its ResNet), is the phase's forward;
  backward   autograd hooks: `Tensor.register_hook` on each named module's tensor outputs (the
             gradient reaching them starts the module's backward; an output a named part inside it
             made starts that part's) and inputs (the gradient leaving it hands back to its caller:
             the enclosing phase, or the model's own code), and
             `Tensor.register_post_accumulate_grad_hook` on its own parameters; the time from one
             such event to the next goes to the phase whose event began it;
  optimizer  `Optimizer.register_step_pre_hook` / `register_step_post_hook`: the step itself, and
             the step's end, which closes one iteration: its time is that since the previous end.

After each optimizer step it prints one DETBENCH_BREAKDOWN line (harness/jsonlog.py): the iteration
(optimizer steps since attaching), its step time and the seconds of every phase ("<name>
forward", "<name> backward", "optimizer"; a phase that ran nothing has 0). What no hook sees
(waiting for data, moving the batch, summing losses, logging, gradient clipping) is left for the
measure stage, which takes the data wait from the framework's own log and calls the remainder
"rest". On a CUDA device each event synchronises the device first, as profile.py does.

`attach_from_env` is the one call a training program makes: with DETBENCH_BREAKDOWN unset it does
nothing; set (to "<framework>/<model>", which the harness does for a scenario with
`breakdown: true`), it attaches that framework's mapping, or prints one error line naming the
submodule it could not find and leaves training as it was. Runs in every framework's env:
standard library at import, torch only through the objects it is given.
"""
import os
import time
import weakref

try:
    from harness import jsonlog
except ImportError:         # run as a script in a framework's pinned env: beside common.py
    from common import jsonlog

MODEL_REST = "model rest"   # the whole model's own forward outside the named parts (anchors, losses, ...)
_BOX = [("roi pooling", ["roi_heads.box_roi_pool"]), ("box head", ["roi_heads.box_head", "roi_heads.box_predictor"])]
_MASK = [("roi pooling", ["roi_heads.mask_roi_pool"]),
         ("mask head", ["roi_heads.mask_head", "roi_heads.mask_predictor"])]


def _two_stage(trunk, rpn, roi, box, mask=None):
    """Phases of a two-stage detector: trunk, RPN, the RoI heads' own part, pooling, box (and mask) head."""
    phases = trunk + [("rpn", rpn)] + ([("roi sampling", roi)] if roi else []) + box + (mask or [])
    return phases + [(MODEL_REST, [""])]


_TV_TRUNK = [("preprocess", ["transform"]), ("backbone", ["backbone.body"]), ("fpn", ["backbone.fpn"])]
_D2_TRUNK = [("backbone", ["backbone.bottom_up"]), ("fpn", ["backbone"])]
_D2_BOX = [("roi pooling", ["roi_heads.box_pooler"]), ("box head", ["roi_heads.box_head", "roi_heads.box_predictor"])]
_D2_MASK = [("roi pooling", ["roi_heads.mask_pooler"]), ("mask head", ["roi_heads.mask_head"])]
# mmdetection computes its RoI sampling and losses in methods of roi_head, not in its forward:
# that time is the model's own (model rest)
_MM_TRUNK = [("preprocess", ["data_preprocessor"]), ("backbone", ["backbone"]), ("fpn", ["neck"])]
_MM_BOX = [("roi pooling", ["roi_head.bbox_roi_extractor"]), ("box head", ["roi_head.bbox_head"])]
_MM_MASK = [("roi pooling", ["roi_head.mask_roi_extractor"]), ("mask head", ["roi_head.mask_head"])]
_TR_TRUNK = [("backbone", ["backbone"]), ("fpn", ["neck"])]
_TR_BOX = [("roi pooling", ["roi_heads.box_extractor"]), ("box head", ["roi_heads.box_head"])]
_TR_MASK = [("roi pooling", ["roi_heads.mask_extractor"]), ("mask head", ["roi_heads.mask_head"])]

# framework -> model -> [(phase, [submodule path, ...])], each path in the framework's own model as its
# driver (or the bundled trainer) builds it
MAPPINGS = {
    "torchvision": {
        "retinanet": _TV_TRUNK + [("head", ["head"]), (MODEL_REST, [""])],
        "faster_rcnn": _two_stage(_TV_TRUNK, ["rpn"], ["roi_heads"], _BOX),
        "mask_rcnn": _two_stage(_TV_TRUNK, ["rpn"], ["roi_heads"], _BOX, _MASK),
    },
    "detectron2": {
        "retinanet": _D2_TRUNK + [("head", ["head"]), (MODEL_REST, [""])],
        "faster_rcnn": _two_stage(_D2_TRUNK, ["proposal_generator"], ["roi_heads"], _D2_BOX),
        "mask_rcnn": _two_stage(_D2_TRUNK, ["proposal_generator"], ["roi_heads"], _D2_BOX, _D2_MASK),
    },
    "mmdetection": {
        "retinanet": _MM_TRUNK + [("head", ["bbox_head"]), (MODEL_REST, [""])],
        "faster_rcnn": _two_stage(_MM_TRUNK, ["rpn_head"], None, _MM_BOX),
        "mask_rcnn": _two_stage(_MM_TRUNK, ["rpn_head"], None, _MM_BOX, _MM_MASK),
    },
    "detbench-trainer": {
        "retinanet": _TR_TRUNK + [("head", ["head"]), (MODEL_REST, [""])],
        "faster_rcnn": _two_stage(_TR_TRUNK, ["rpn"], ["roi_heads"], _TR_BOX),
        "mask_rcnn": _two_stage(_TR_TRUNK, ["rpn"], ["roi_heads"], _TR_BOX, _TR_MASK),
    },
}


class AttachError(ValueError):
    """A phase's submodule is not in the model: one line naming it."""


def submodule(model, path):
    """The module at a dotted `path` of `model` ("" is the model; a wrapper's `.module` is looked
    through, as DistributedDataParallel's); AttachError where it is missing or None."""
    inner = getattr(model, "module", None)
    if path and inner is not None and not hasattr(model, path.split(".")[0]) and hasattr(inner, "named_modules"):
        model = inner
    found = model
    for part in path.split(".") if path else ():
        found = getattr(found, part, None)
        if found is None:
            raise AttachError("no submodule %r in the %s model" % (path, type(model).__name__))
    if not hasattr(found, "register_forward_pre_hook"):
        raise AttachError("%r of the %s model is not a module" % (path, type(model).__name__))
    return found


def _tensors(value, out):
    """Every tensor needing a gradient in a module's inputs or outputs (tuples, lists, dicts)."""
    if hasattr(value, "requires_grad") and hasattr(value, "register_hook"):
        if value.requires_grad:
            out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _tensors(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _tensors(v, out)
    return out


class Breakdown:
    """Seconds per phase of every optimizer step of `model` (module docstring). `phases`:
    [(name, [submodule path, ...])]; `emit(line)` prints a DETBENCH_BREAKDOWN line; `sync()` is
    called before each clock reading (the device's synchronise on CUDA)."""

    def __init__(self, model, optimizer, phases, emit=None, sync=None, clock=time.perf_counter):
        self.emit = emit or (lambda line: print(line, flush=True))
        self.sync, self.clock = sync, clock
        self.handles, self.stack, self.label, self.iteration = [], [], None, 0
        self.names = []
        modules = []                       # (phase, module), the order given
        for name, paths in phases:
            for path in paths:
                modules.append((name, submodule(model, path)))
            if name not in self.names:
                self.names.append(name)
        self.spent = self._zero()
        self.rest = MODEL_REST + " backward" if MODEL_REST in self.names else None
        self.produced = weakref.WeakValueDictionary()   # id -> a tensor a named module output this step
        owner = {}                         # parameter -> the innermost named module holding it
        for name, module in sorted(modules, key=lambda nm: -len(list(nm[1].modules()))):
            for p in module.parameters():
                owner[p] = name
        for name, module in modules:
            self.handles.append(module.register_forward_pre_hook(self._before(name)))
            self.handles.append(module.register_forward_hook(self._after(name)))
        for p, name in owner.items():
            if p.requires_grad:
                self.handles.append(p.register_post_accumulate_grad_hook(self._then(name + " backward")))
        self.handles.append(optimizer.register_step_pre_hook(lambda *_: self._event("optimizer")))
        self.handles.append(optimizer.register_step_post_hook(lambda *_: self._step_end()))
        self.last = self.step_start = self._now()

    def _zero(self):
        spent = {}
        for name in self.names:
            spent[name + " forward"] = spent[name + " backward"] = 0.0
        spent["optimizer"] = 0.0
        return spent

    def _now(self):
        if self.sync is not None:
            self.sync()
        return self.clock()

    def _event(self, label):
        """Charge the time since the last event to the running label; `label` runs from now."""
        now = self._now()
        if self.label is not None:
            self.spent[self.label] += now - self.last
        self.last, self.label = now, label

    def _then(self, label):
        return lambda *_: self._event(label)

    def _before(self, name):
        def hook(_module, args):
            self._event(name + " forward")
            # the gradient leaving this phase goes back to its caller: the enclosing phase, else
            # the model's own code (where a named phase made the input, that phase's hook takes over)
            caller = self.stack[-1] + " backward" if self.stack else self.rest
            self.stack.append(name)
            for t in _tensors(args, []):
                if self.produced.get(id(t)) is not t:
                    t.register_hook(self._then(caller))
        return hook

    def _after(self, name):
        def hook(_module, _args, output):
            if name in self.stack:
                del self.stack[len(self.stack) - 1 - self.stack[::-1].index(name)]
            self._event(self.stack[-1] + " forward" if self.stack else None)
            for t in _tensors(output, []):  # the gradient reaching this phase: its backward starts
                if self.produced.get(id(t)) is not t:   # else a named part inside it made it, and starts it
                    t.register_hook(self._then(name + " backward"))
                    self.produced[id(t)] = t
        return hook

    def _step_end(self):
        self._event(None)
        self.iteration += 1
        self.emit(jsonlog.breakdown_line(self.iteration, self.last - self.step_start, self.spent))
        self.step_start, self.spent, self.stack = self.last, self._zero(), []
        self.produced.clear()

    def close(self):
        for h in self.handles:
            h.remove()
        self.handles = []


def attach(model, optimizer, framework, model_name, emit=None, sync=None):
    """A Breakdown of `framework`'s mapping for `model_name`; AttachError where either has none
    or a named submodule is missing."""
    per_model = MAPPINGS.get(framework)
    if per_model is None:
        raise AttachError("no breakdown mapping for framework %r (known: %s)"
                          % (framework, ", ".join(sorted(MAPPINGS))))
    if model_name not in per_model:
        raise AttachError("no %s breakdown mapping for model %r" % (framework, model_name))
    return Breakdown(model, optimizer, per_model[model_name], emit=emit, sync=sync)


def attach_from_env(model, optimizer, environ=None, emit=None, unable=None):
    """attach() as DETBENCH_BREAKDOWN ("<framework>/<model>") asks, or None where it is unset; a
    mapping that cannot attach, or a program `unable` (why) to run hooks, prints one error line and
    returns None, training unchanged."""
    value = (os.environ if environ is None else environ).get(jsonlog.BREAKDOWN_ENV)
    if not value:
        return None
    emit = emit or (lambda line: print(line, flush=True))
    framework, _, model_name = value.partition("/")
    if unable:
        emit(jsonlog.breakdown_error_line("%s %s: %s" % (framework, model_name, unable)))
        return None
    sync = None
    try:
        params = [p for p in model.parameters()]
        if params and params[0].device.type == "cuda":
            import torch
            sync = torch.cuda.synchronize
        return attach(model, optimizer, framework, model_name, emit=emit, sync=sync)
    except AttachError as exc:
        emit(jsonlog.breakdown_error_line("%s %s: %s" % (framework, model_name, exc)))
        return None
