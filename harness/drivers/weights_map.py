"""One initial state for every framework of a cell: torchvision's names mapped to each framework's.

A detbench weights file holds the state_dict of torchvision's retinanet_resnet50_fpn,
fasterrcnn_resnet50_fpn or maskrcnn_resnet50_fpn as the torchvision driver builds it for
training (FrozenBatchNorm2d backbone, 81 classes: background first, then the 80 COCO
categories; `reference_model`). This module is the one home of that layout: the file's
format, the reference model, the slots other frameworks lack, and the renaming and reshaping
of such a state for the bundled trainer and for mmdetection 3.x, and back (`native_name` for
one key). It works on tensors through their own methods and imports torch only in read() and
torchvision only in reference_model(), so the drivers can use it from their pinned envs and
nothing in the harness that never trains pulls torch in.

Class layouts (a label L in 1..80 is the L-th COCO category in id order):

  torchvision        RetinaNet cls_logits: 81 channels per anchor, channel L; box and mask
                     predictors: 81 rows, background row 0, class L row L.
  detbench-trainer   RetinaNet: 80 channels per anchor, channel L-1; box and mask predictors
                     as torchvision (background first).
  mmdetection        RetinaNet: 80 channels per anchor, channel L-1; fc_cls: 81 rows, class L
                     row L-1, background LAST; fc_reg and conv_logits: 80 classes, no background.
  detectron2         as mmdetection (cls_score: background last; bbox_pred and the mask
                     predictor: 80 classes), RetinaNet's anchors in its own order (below).

Anchors per location are ordered (ratio, scale) with the scale varying fastest in torchvision,
the bundled trainer and mmdetection, so their heads need no channels permuted beyond the class
slots above. detectron2's anchor generator orders them (scale, ratio), the ratio fastest: its
RetinaNet classifier and box regressor take torchvision's anchor blocks transposed.

The slots torchvision has and another framework lacks (RetinaNet's background channel,
the background rows of the box regressor and mask logits) carry fixed values in a made
file: zero weights, and the prior bias for RetinaNet's classifier. Mapping back fills the
same values, so a made file survives any round trip unchanged.
"""
import math
import os
import re

FORMAT = "detbench-weights"
VERSION = 1
MODELS = ("retinanet", "faster_rcnn", "mask_rcnn")
DEPTHS = (50, 18)                # ResNet depth of the backbone; a file without one is ResNet-50
FRAMEWORKS = ("torchvision", "detbench-trainer", "mmdetection", "detectron2")
NUM_CLASSES = 80                 # foreground classes; torchvision adds the background
ANCHORS = {"retinanet": 9}       # anchors per location of the RetinaNet head
RETINANET_GRID = (3, 3)          # its aspect ratios x its scales per octave
PRIOR_BIAS = -math.log((1 - 0.01) / 0.01)   # RetinaNet's classifier bias, prior 0.01
COUNTERS = ("num_batches_tracked",)         # BatchNorm2d bookkeeping, not weights


class WeightsError(ValueError):
    """A weights file that does not fit: the message names the file and the first bad key."""


# (torchvision name pattern, native name template, tensor transform). Templates use the
# pattern's groups; "{L-1}" turns torchvision's layer number into a stage index ("{L+1}" into
# detectron2's res number), "{i+N}" adds N to an index and "{2i}" turns a conv index into its
# place in a conv/ReLU Sequential.
_BODY = r"backbone\.body\."
_TRAINER_FOLDED = [
    (_BODY + r"conv1\.weight", "backbone.stem.0.conv.weight", None),
    (_BODY + r"bn1\.(\w+)", "backbone.stem.0.norm.{0}", None),
    (_BODY + r"layer(\d)\.(\d+)\.conv(\d)\.weight", "backbone.stages.{L-1}.{1}.conv{2}.conv.weight", None),
    (_BODY + r"layer(\d)\.(\d+)\.bn(\d)\.(\w+)", "backbone.stages.{L-1}.{1}.conv{2}.norm.{3}", None),
    (_BODY + r"layer(\d)\.(\d+)\.downsample\.0\.weight", "backbone.stages.{L-1}.{1}.downsample.0.conv.weight",
     None),
    (_BODY + r"layer(\d)\.(\d+)\.downsample\.1\.(\w+)", "backbone.stages.{L-1}.{1}.downsample.0.norm.{2}", None),
]
_TRAINER_PLAIN = [     # model.norm bn or syncbn: the norms stay separate modules
    (_BODY + r"conv1\.weight", "backbone.stem.0.weight", None),
    (_BODY + r"bn1\.(\w+)", "backbone.stem.1.{0}", None),
    (_BODY + r"layer(\d)\.(\d+)\.(conv\d|bn\d|downsample\.\d)\.(\w+)", "backbone.stages.{L-1}.{1}.{2}.{3}", None),
]
_TRAINER_REST = [
    (r"backbone\.fpn\.inner_blocks\.(\d)\.0\.(\w+)", "neck.lateral.{0}.{1}", None),
    (r"backbone\.fpn\.layer_blocks\.(\d)\.0\.(\w+)", "neck.output.{0}.{1}", None),
    (r"backbone\.fpn\.extra_blocks\.(p6|p7)\.(\w+)", "neck.{0}.{1}", None),
    (r"head\.classification_head\.conv\.(\d)\.0\.(\w+)", "head.cls_tower.{2i}.{1}", None),
    (r"head\.regression_head\.conv\.(\d)\.0\.(\w+)", "head.box_tower.{2i}.{1}", None),
    (r"head\.classification_head\.cls_logits\.(\w+)", "head.cls_logits.{0}", "anchor_classes"),
    (r"head\.regression_head\.bbox_reg\.(\w+)", "head.box_deltas.{0}", None),
    (r"rpn\.head\.conv\.0\.0\.(\w+)", "rpn.head.conv.{0}", None),
    (r"rpn\.head\.cls_logits\.(\w+)", "rpn.head.objectness.{0}", None),
    (r"rpn\.head\.bbox_pred\.(\w+)", "rpn.head.deltas.{0}", None),
    (r"roi_heads\.box_head\.(fc6|fc7)\.(\w+)", "roi_heads.box_head.{0}.{1}", None),
    (r"roi_heads\.box_predictor\.(cls_score|bbox_pred)\.(\w+)", "roi_heads.box_head.{0}.{1}", None),
    (r"roi_heads\.mask_head\.(\d)\.0\.(\w+)", "roi_heads.mask_head.body.{2i}.{1}", None),
    (r"roi_heads\.mask_predictor\.conv5_mask\.(\w+)", "roi_heads.mask_head.body.8.{0}", None),
    (r"roi_heads\.mask_predictor\.mask_fcn_logits\.(\w+)", "roi_heads.mask_head.logits.{0}", None),
]
_MMDET = [
    (_BODY + r"(.+)", "backbone.{0}", None),
    (r"backbone\.fpn\.inner_blocks\.(\d)\.0\.(\w+)", "neck.lateral_convs.{0}.conv.{1}", None),
    (r"backbone\.fpn\.layer_blocks\.(\d)\.0\.(\w+)", "neck.fpn_convs.{0}.conv.{1}", None),
    # RetinaNet's P6 and P7 follow the three pyramid outputs in mmdet's fpn_convs
    (r"backbone\.fpn\.extra_blocks\.p6\.(\w+)", "neck.fpn_convs.3.conv.{0}", None),
    (r"backbone\.fpn\.extra_blocks\.p7\.(\w+)", "neck.fpn_convs.4.conv.{0}", None),
    (r"head\.classification_head\.conv\.(\d)\.0\.(\w+)", "bbox_head.cls_convs.{0}.conv.{1}", None),
    (r"head\.regression_head\.conv\.(\d)\.0\.(\w+)", "bbox_head.reg_convs.{0}.conv.{1}", None),
    (r"head\.classification_head\.cls_logits\.(\w+)", "bbox_head.retina_cls.{0}", "anchor_classes"),
    (r"head\.regression_head\.bbox_reg\.(\w+)", "bbox_head.retina_reg.{0}", None),
    (r"rpn\.head\.conv\.0\.0\.(\w+)", "rpn_head.rpn_conv.{0}", None),
    (r"rpn\.head\.cls_logits\.(\w+)", "rpn_head.rpn_cls.{0}", None),
    (r"rpn\.head\.bbox_pred\.(\w+)", "rpn_head.rpn_reg.{0}", None),
    (r"roi_heads\.box_head\.fc6\.(\w+)", "roi_head.bbox_head.shared_fcs.0.{0}", None),
    (r"roi_heads\.box_head\.fc7\.(\w+)", "roi_head.bbox_head.shared_fcs.1.{0}", None),
    (r"roi_heads\.box_predictor\.cls_score\.(\w+)", "roi_head.bbox_head.fc_cls.{0}", "background_last"),
    (r"roi_heads\.box_predictor\.bbox_pred\.(\w+)", "roi_head.bbox_head.fc_reg.{0}", "no_background_box"),
    (r"roi_heads\.mask_head\.(\d)\.0\.(\w+)", "roi_head.mask_head.convs.{0}.conv.{1}", None),
    (r"roi_heads\.mask_predictor\.conv5_mask\.(\w+)", "roi_head.mask_head.upsample.{0}", None),
    (r"roi_heads\.mask_predictor\.mask_fcn_logits\.(\w+)", "roi_head.mask_head.conv_logits.{0}",
     "no_background"),
]

# detectron2: ResNet stages res2..res5 (torchvision's layer1..4), FPN laterals and outputs named by
# the level of their input (res2 -> fpn_lateral2); RetinaNet's pyramid starts at res3
_DETECTRON2_BODY = [
    (_BODY + r"conv1\.weight", "backbone.bottom_up.stem.conv1.weight", None),
    (_BODY + r"bn1\.(\w+)", "backbone.bottom_up.stem.conv1.norm.{0}", None),
    (_BODY + r"layer(\d)\.(\d+)\.conv(\d)\.weight", "backbone.bottom_up.res{L+1}.{1}.conv{2}.weight", None),
    (_BODY + r"layer(\d)\.(\d+)\.bn(\d)\.(\w+)", "backbone.bottom_up.res{L+1}.{1}.conv{2}.norm.{3}", None),
    (_BODY + r"layer(\d)\.(\d+)\.downsample\.0\.weight", "backbone.bottom_up.res{L+1}.{1}.shortcut.weight", None),
    (_BODY + r"layer(\d)\.(\d+)\.downsample\.1\.(\w+)", "backbone.bottom_up.res{L+1}.{1}.shortcut.norm.{2}",
     None),
]
_DETECTRON2_RCNN = [
    (r"backbone\.fpn\.inner_blocks\.(\d)\.0\.(\w+)", "backbone.fpn_lateral{i+2}.{1}", None),
    (r"backbone\.fpn\.layer_blocks\.(\d)\.0\.(\w+)", "backbone.fpn_output{i+2}.{1}", None),
    (r"rpn\.head\.conv\.0\.0\.(\w+)", "proposal_generator.rpn_head.conv.{0}", None),
    (r"rpn\.head\.cls_logits\.(\w+)", "proposal_generator.rpn_head.objectness_logits.{0}", None),
    (r"rpn\.head\.bbox_pred\.(\w+)", "proposal_generator.rpn_head.anchor_deltas.{0}", None),
    (r"roi_heads\.box_head\.fc6\.(\w+)", "roi_heads.box_head.fc1.{0}", None),
    (r"roi_heads\.box_head\.fc7\.(\w+)", "roi_heads.box_head.fc2.{0}", None),
    (r"roi_heads\.box_predictor\.cls_score\.(\w+)", "roi_heads.box_predictor.cls_score.{0}", "background_last"),
    (r"roi_heads\.box_predictor\.bbox_pred\.(\w+)", "roi_heads.box_predictor.bbox_pred.{0}", "no_background_box"),
    (r"roi_heads\.mask_head\.(\d)\.0\.(\w+)", "roi_heads.mask_head.mask_fcn{i+1}.{1}", None),
    (r"roi_heads\.mask_predictor\.conv5_mask\.(\w+)", "roi_heads.mask_head.deconv.{0}", None),
    (r"roi_heads\.mask_predictor\.mask_fcn_logits\.(\w+)", "roi_heads.mask_head.predictor.{0}", "no_background"),
]
_DETECTRON2_RETINANET = [
    (r"backbone\.fpn\.inner_blocks\.(\d)\.0\.(\w+)", "backbone.fpn_lateral{i+3}.{1}", None),
    (r"backbone\.fpn\.layer_blocks\.(\d)\.0\.(\w+)", "backbone.fpn_output{i+3}.{1}", None),
    (r"backbone\.fpn\.extra_blocks\.(p6|p7)\.(\w+)", "backbone.top_block.{0}.{1}", None),
    (r"head\.classification_head\.conv\.(\d)\.0\.(\w+)", "head.cls_subnet.{2i}.{1}", None),
    (r"head\.regression_head\.conv\.(\d)\.0\.(\w+)", "head.bbox_subnet.{2i}.{1}", None),
    (r"head\.classification_head\.cls_logits\.(\w+)", "head.cls_score.{0}", "anchor_classes_scale_major"),
    (r"head\.regression_head\.bbox_reg\.(\w+)", "head.bbox_pred.{0}", "anchor_boxes_scale_major"),
]


def _fill(template, groups):
    out = template
    if "{L+1}" in out:
        out = out.replace("{L+1}", str(int(groups[0]) + 1))
    for offset in (1, 2, 3):
        if "{i+%d}" % offset in out:
            out = out.replace("{i+%d}" % offset, str(int(groups[0]) + offset))
    if "{L-1}" in out:
        out = out.replace("{L-1}", str(int(groups[0]) - 1))
    if "{2i}" in out:
        out = out.replace("{2i}", str(2 * int(groups[0])))
    return out.format(*groups)


def reference_model(model, depth=50):
    """torchvision's `model` exactly as the torchvision driver builds it for training (its defaults:
    FrozenBatchNorm2d, conv1 and layer1 frozen, 81 classes) on a ResNet-`depth` FPN: the layout
    every file is in."""
    try:
        from harness.drivers import torchvision_driver
    except ImportError:                         # run from a driver in a framework's pinned env
        import torchvision_driver
    if model not in MODELS:
        raise WeightsError("unknown model %r (known: %s)" % (model, ", ".join(MODELS)))
    if depth not in DEPTHS:
        raise WeightsError("unknown ResNet depth %r (known: %s)" % (depth, ", ".join(map(str, DEPTHS))))
    args = torchvision_driver.parse_args(["--model", model, "--iterations", "1", "--device", "cpu",
                                          "--depth", str(depth)])
    return torchvision_driver.build_model(args, 800, 1333)


def check(path, model):
    """Refuse a file that does not fit torchvision's `model` (names, shapes, metadata); the tensor count."""
    state = read(path, model)
    to_framework(state, "torchvision", model, reference_model(model, depth_of(state)).state_dict(), source=path)
    return len(state)


def depth_of(state):
    """The ResNet depth of a torchvision-layout state: bottleneck blocks (a conv3) are ResNet-50's,
    basic blocks ResNet-18's."""
    return 50 if "backbone.body.layer1.0.conv3.weight" in state else 18


def native_name(key, framework, target_keys):
    """The name torchvision's `key` takes in `framework`'s model whose state has `target_keys`
    (the bundled trainer's names depend on how its norms run), or None where it has no place."""
    for pattern, template, _ in _rules(framework, target_keys):
        m = re.match(pattern + r"\Z", key)
        if m:
            return _fill(template, m.groups())
    return None


def _rules(framework, target_keys):
    if framework == "detbench-trainer":
        folded = any(k.startswith("backbone.stem.0.conv.") for k in target_keys)
        return (_TRAINER_FOLDED if folded else _TRAINER_PLAIN) + _TRAINER_REST
    if framework == "mmdetection":
        return _MMDET
    if framework == "detectron2":
        retina = any(k.startswith("backbone.top_block.") for k in target_keys)
        return _DETECTRON2_BODY + (_DETECTRON2_RETINANET if retina else _DETECTRON2_RCNN)
    if framework == "torchvision":
        return [(r"(.+)", "{0}", None)]
    raise WeightsError("no weights mapping for framework %r (known: %s)" % (framework, ", ".join(FRAMEWORKS)))


# --- class-slot transforms: forward (torchvision -> native) and back ------------------------

def _anchor_classes(t, model, back):
    """RetinaNet classifier: drop (or restore) the background channel of every anchor."""
    a, k = ANCHORS[model], NUM_CLASSES
    rest = tuple(t.shape[1:])
    if not back:
        if t.shape[0] != a * (k + 1):
            return None
        return t.reshape((a, k + 1) + rest)[:, 1:].reshape((a * k,) + rest).clone()
    if t.shape[0] != a * k:
        return None
    out = t.new_zeros((a, k + 1) + rest)
    if not rest:                                   # the bias: background at the prior
        out[:, 0] = PRIOR_BIAS
    out[:, 1:] = t.reshape((a, k) + rest)
    return out.reshape((a * (k + 1),) + rest)


def _background_last(t, model, back):
    k = NUM_CLASSES
    if t.shape[0] != k + 1:
        return None
    order = [k] + list(range(k)) if back else list(range(1, k + 1)) + [0]
    return t[order].clone()


def _no_background(t, model, back, width=1):
    k = NUM_CLASSES
    if not back:
        return t[width:].clone() if t.shape[0] == (k + 1) * width else None
    if t.shape[0] != k * width:
        return None
    out = t.new_zeros(((k + 1) * width,) + tuple(t.shape[1:]))
    out[width:] = t
    return out


def _no_background_box(t, model, back):
    return _no_background(t, model, back, width=4)


def _swap_anchor_order(t, block):
    """A RetinaNet head's anchor blocks from (ratio, scale) order to (scale, ratio) order; the
    grid is square, so the same call maps them back."""
    ratios, scales = RETINANET_GRID
    rest = tuple(t.shape[1:])
    return t.reshape((ratios, scales, block) + rest).transpose(0, 1).reshape((ratios * scales * block,) + rest).clone()


def _anchor_classes_scale_major(t, model, back):
    """detectron2's RetinaNet classifier: no background channel, anchors (scale, ratio)."""
    if not back:
        out = _anchor_classes(t, model, False)
        return None if out is None else _swap_anchor_order(out, NUM_CLASSES)
    if t.shape[0] != ANCHORS[model] * NUM_CLASSES:
        return None
    return _anchor_classes(_swap_anchor_order(t, NUM_CLASSES), model, True)


def _anchor_boxes_scale_major(t, model, back):
    """detectron2's RetinaNet box regressor: 4 deltas per anchor, anchors (scale, ratio)."""
    if t.shape[0] != ANCHORS[model] * 4:
        return None
    return _swap_anchor_order(t, 4)


TRANSFORMS = {"anchor_classes": _anchor_classes, "background_last": _background_last,
              "no_background": _no_background, "no_background_box": _no_background_box,
              "anchor_classes_scale_major": _anchor_classes_scale_major,
              "anchor_boxes_scale_major": _anchor_boxes_scale_major}


def background_slots(model):
    """{torchvision key: (rows, value)}: the rows some framework lacks, pinned in a made file.

    A made file holds zeros there (the prior bias for RetinaNet's classifier bias), which
    is what mapping back restores."""
    if model == "retinanet":
        a, k = ANCHORS[model], NUM_CLASSES
        rows = [i * (k + 1) for i in range(a)]
        return {"head.classification_head.cls_logits.weight": (rows, 0.0),
                "head.classification_head.cls_logits.bias": (rows, PRIOR_BIAS)}
    out = {"roi_heads.box_predictor.bbox_pred.weight": ([0, 1, 2, 3], 0.0),
           "roi_heads.box_predictor.bbox_pred.bias": ([0, 1, 2, 3], 0.0)}
    if model == "mask_rcnn":
        out.update({"roi_heads.mask_predictor.mask_fcn_logits.weight": ([0], 0.0),
                    "roi_heads.mask_predictor.mask_fcn_logits.bias": ([0], 0.0)})
    return out


# --- the file --------------------------------------------------------------------------------

def pack(model, seed, state, versions):
    """The object a weights file holds (torch.save'd)."""
    return {"format": FORMAT, "version": VERSION, "model": model, "layout": "torchvision",
            "num_classes": NUM_CLASSES + 1, "seed": seed, "versions": dict(versions),
            "depth": depth_of(state), "state_dict": state}


def unpack(obj, source, model):
    """The torchvision-layout state of a loaded weights file, checked against `model`."""
    if not isinstance(obj, dict) or obj.get("format") != FORMAT or "state_dict" not in obj:
        raise WeightsError("%s: not a detbench weights file (make one with `detbench weights make`)" % source)
    if obj.get("version") != VERSION:
        raise WeightsError("%s: weights file version %r, this detbench reads version %d"
                           % (source, obj.get("version"), VERSION))
    if obj.get("model") != model:
        raise WeightsError("%s: holds %s weights, but this trial trains %s" % (source, obj.get("model"), model))
    return obj["state_dict"]


def read(path, model):
    """Load a weights file (tensors only, no code runs) and return its torchvision-layout state."""
    import torch
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise WeightsError("%s: no such weights file" % path) from None
    except Exception as exc:        # not a torch file, damaged archive, unpicklable content
        said = str(exc).strip().splitlines()
        why = said[0][:200] if said else type(exc).__name__      # an empty file: a bare EOFError
        if os.path.isfile(path) and os.path.getsize(path) == 0:
            why = "the file is empty"
        raise WeightsError("%s: not a detbench weights file (%s)" % (path, why)) from None
    return unpack(obj, path, model)


def load(net, path, model, framework):
    """Load a weights file into `net`, a `framework` model of `model`; returns the tensor count."""
    state = read(path, model)
    mapped = to_framework(state, framework, model, net.state_dict(), source=path)
    net.load_state_dict(mapped, strict=True)
    return len(mapped)


# --- mapping ---------------------------------------------------------------------------------

def _shape(t):
    return tuple(int(s) for s in t.shape)


def to_framework(state, framework, model, target, source="<weights>"):
    """Map a torchvision-layout `state` onto `target` (the framework model's own state_dict).

    Returns a complete state_dict for load_state_dict(strict=True); BatchNorm counters the
    file has no values for keep the target's. Raises WeightsError at the first key that is
    missing, left over or of the wrong shape."""
    rules = [(re.compile(p + r"\Z"), t, TRANSFORMS.get(f)) for p, t, f in _rules(framework, target)]
    out = {}
    for key in state:
        if key.endswith(COUNTERS):
            continue
        for pattern, template, transform in rules:  # noqa: B007 (the match's rule is read after the loop)
            m = pattern.match(key)
            if m:
                break
        else:
            raise WeightsError("%s: key %s has no place in %s's %s" % (source, key, framework, model))
        name = _fill(template, m.groups())
        if name not in target:
            raise WeightsError("%s: key %s (%s in %s) is not in %s's %s" % (
                source, key, name, framework, framework, model))
        tensor = state[key]
        mapped = transform(tensor, model, False) if transform else tensor
        if mapped is None or _shape(mapped) != _shape(target[name]):
            raise WeightsError("%s: key %s has shape %s, %s's %s expects %s for %s" % (
                source, key, list(_shape(tensor)), framework, model, list(_shape(target[name])), name))
        out[name] = mapped
    for name, value in target.items():
        if name in out:
            continue
        if name.endswith(COUNTERS):
            out[name] = value
            continue
        raise WeightsError("%s: no value for %s's %s (the file lacks the torchvision key that maps to it)"
                           % (source, framework, name))
    return out


def from_framework(native, framework, model, reference):
    """The torchvision-layout state of a framework's own state_dict `native`.

    `reference` is a torchvision-layout state (key order and shapes), e.g. a made file's."""
    rules = [(re.compile(p + r"\Z"), t, TRANSFORMS.get(f)) for p, t, f in _rules(framework, native)]
    out = {}
    for key in reference:
        if key.endswith(COUNTERS):
            continue
        for pattern, template, transform in rules:  # noqa: B007 (the match's rule is read after the loop)
            m = pattern.match(key)
            if m:
                break
        else:
            raise WeightsError("key %s has no place in %s's %s" % (key, framework, model))
        name = _fill(template, m.groups())
        if name not in native:
            raise WeightsError("%s's %s has no %s (for %s)" % (framework, model, name, key))
        value = transform(native[name], model, True) if transform else native[name]
        if value is None or _shape(value) != _shape(reference[key]):
            raise WeightsError("%s's %s: %s does not give %s's shape %s" % (
                framework, model, name, key, list(_shape(reference[key]))))
        out[key] = value.clone()
    return out
