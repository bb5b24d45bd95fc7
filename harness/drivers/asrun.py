"""Settings as run: the DETBENCH_SETTINGS line a training program prints, read from its own objects.

Each rival driver, and the bundled trainer, prints one line before its first iteration:

    DETBENCH_SETTINGS {"implementation": {...}, "settings": {...}}

`settings` holds the normalized keys of harness/frameworks/settings.py with the values the framework's built
objects hold (its model, its merged config, its optimizer and data loader), so that a report
compares what ran and not what an adapter says it asked for. `implementation` names how the
framework runs the parts that decide its speed (harness/jsonlog.py, IMPLEMENTATION_PARTS).
The measure stage stores the line as the trial's settings.

Standard library only at import: the drivers run as scripts in their framework's pinned env,
where the harness is not importable, so they import this file from their own folder (and print
the line with common.jsonlog.settings_line). The helpers read the objects handed to them by
their attributes; only `optimizer` imports torch, inside the call, to resolve torch's default
update path.
"""
import os

try:
    from harness.drivers import settings as normalized
except ImportError:      # run from a driver in a framework's pinned env
    import settings as normalized

# how each RoIAlign runs, in the words every framework's line uses
ROI_ALIGN_TORCHVISION = "torchvision.ops.roi_align kernel"
ROI_ALIGN_MMCV = "mmcv.ops.RoIAlign kernel"
ROI_ALIGN_SPARSE = "sparse matrix products (the bundled trainer's roi.py)"
TWO_STAGE_CLS_LOSS = "rpn bce, rcnn ce"


def mask_paste(function, exact):
    """How a framework's test-time code (`function`, the one it calls) lays a mask's map over its
    box: sampled over the float box, or resized into the box widened and cut to whole pixels."""
    how = ("bilinear over the float box" if exact
           else "resized into the box widened by one cell, corners truncated to whole pixels")
    return "%s (%s.%s)" % (how, function.__module__, function.__name__)


# how a RoI's mask target is cut from its object's mask, in the words every framework's line uses
MASK_TARGETS_ALIGNED_SOFT = "RoIAlign with the half-pixel offset (aligned), fractions kept"
MASK_TARGETS_ALIGNED_BINARY = "RoIAlign with the half-pixel offset (aligned), binarised at 0.5"
MASK_TARGETS_UNALIGNED_SOFT = "RoIAlign without the half-pixel offset, fractions kept"
MASK_TARGETS_POLYGONS = "the polygons rasterised in the RoI's frame"


def mask_targets(function, how):
    """How a framework's training cuts each positive RoI's mask target from its object's mask
    (`how`, one of the MASK_TARGETS_ words) and the function that does it. Without the offset a
    target is half a pixel up and left of where an aligned paste lays the map back."""
    return "%s (%s.%s)" % (how, function.__module__, function.__qualname__)


def _g(value):
    return "%.4g" % float(value)


def precision(autocast_dtype, tf32=False):
    """The normalized precision from the dtype autocast runs in (a torch dtype or its name;
    None: no autocast) and whether TF32 matrix products are on."""
    name = str(autocast_dtype or "").rpartition(".")[2]
    if name == "bfloat16":
        return "bf16"
    if name in ("float16", "half"):
        return "fp16"
    return "tf32" if tf32 else "fp32"


def smooth_l1(beta):
    """'smooth_l1(1/9)' for beta 1/9, 'l1' for beta 0, else 'smooth_l1(<beta>)'."""
    beta = float(beta)
    if beta == 0:
        return "l1"
    inverse = 1.0 / beta
    if abs(inverse - round(inverse)) < 1e-6:
        return "smooth_l1(1/%d)" % round(inverse)
    return "smooth_l1(%g)" % beta


def two_stage_box_loss(rpn, rcnn):
    return "rpn %s, rcnn %s" % (rpn, rcnn)


def focal(alpha, gamma):
    return "focal(alpha %g, gamma %g)" % (float(alpha), float(gamma))


WHOLE_PIXEL_CORNERS = "corners rounded to whole pixels"


def anchors(sizes, ratios, corners=None):
    """'sizes 32, 64, ...; ratios 0.5, 1, 2': the anchor sizes of each pyramid level (several
    sizes of one level joined by '/') and the aspect ratios (height / width), ascending. `ratios`
    is one sequence, or one per level (named per level where the levels differ). `corners`: the
    cell anchors the generator holds (each level's (x1, y1, x2, y2) rows, tensors or lists);
    where they are rounded to whole pixels and the exact ones are not, the text says so."""
    levels = ", ".join("/".join(_g(s) for s in level) for level in sizes)
    per_level = [tuple(sorted(float(r) for r in level)) for level in ratios] \
        if ratios and isinstance(ratios[0], (list, tuple)) else [tuple(sorted(float(r) for r in ratios))]
    text = ", ".join(_g(r) for r in per_level[0]) if len(set(per_level)) == 1 else \
        " | ".join(", ".join(_g(r) for r in level) for level in per_level)
    out = "sizes %s; ratios %s" % (levels, text)
    if corners is not None and _whole(_flat(corners)) and not _whole(_exact_corners(sizes, per_level)):
        out += "; " + WHOLE_PIXEL_CORNERS
    return out


def _flat(values):
    values = values.tolist() if hasattr(values, "tolist") else values
    if isinstance(values, (list, tuple)):
        return [v for item in values for v in _flat(item)]
    return [float(values)]


def _whole(values):
    return bool(values) and all(abs(v - round(v)) < 1e-4 for v in values)


def exact_cells(sizes, ratios):
    """One level's exact cell anchors (x1, y1, x2, y2), ratio-major: size s and ratio r (height /
    width) give an anchor s / sqrt(r) wide and s * sqrt(r) high, centred on 0."""
    return [[-s / r ** 0.5 / 2, -s * r ** 0.5 / 2, s / r ** 0.5 / 2, s * r ** 0.5 / 2]
            for r in (float(r) for r in ratios) for s in (float(s) for s in sizes)]


def _exact_corners(sizes, per_level_ratios):
    return _flat([exact_cells(level, per_level_ratios[min(i, len(per_level_ratios) - 1)])
                  for i, level in enumerate(sizes)])


def mask_head(convs, channels, roi_size, mask_size):
    """'4 conv 256, 14x14 RoIs to 28x28 masks'."""
    return "%d conv %d, %dx%d RoIs to %dx%d masks" % (convs, channels, roi_size, roi_size, mask_size, mask_size)


def frozen_stages(stages):
    """-1 when the first stage (the stem) trains, else the index of the last stage of the leading
    run of stages none of whose parameters train (0: the stem only). A stage is a module or a
    list of modules."""
    frozen = 0
    for stage in stages:
        parts = stage if isinstance(stage, (list, tuple)) else [stage]
        if any(p.requires_grad for part in parts for p in part.parameters()):
            break
        frozen += 1
    return frozen - 1


def norm(modules):
    """(normalized norm, how it runs) of a backbone's norm layers, read from their classes and
    state: frozen (fixed statistics and affine) as FrozenBatchNorm2d modules, folded into the
    convolutions, or BatchNorm in eval mode without gradients; or trained bn, syncbn, gn."""
    modules = list(modules)
    folded = {id(getattr(m, "norm", None)) for m in modules if type(m).__name__ == "ConvFrozenBN"}
    kinds = set()
    for m in modules:
        name = type(m).__name__
        if name == "ConvFrozenBN":
            kinds.add(("frozen_bn", "frozen, folded into the convolutions"))
        elif name == "FrozenBatchNorm2d":
            if id(m) not in folded:
                kinds.add(("frozen_bn", "frozen, FrozenBatchNorm2d modules (not folded)"))
        elif name == "SyncBatchNorm":
            kinds.add(("syncbn", "trained SyncBatchNorm"))
        elif name == "GroupNorm":
            kinds.add(("gn", "trained GroupNorm"))
        elif name.startswith("BatchNorm"):
            grads = any(p.requires_grad for p in m.parameters(recurse=False))
            if m.training:
                kinds.add(("bn", "trained %s" % name))
            elif grads:
                kinds.add(("bn_frozen_statistics", "%s in eval mode, affine trained" % name))
            else:
                kinds.add(("frozen_bn", "frozen, %s modules in eval mode without gradients (not folded)" % name))
    if not kinds:
        return "none", "no norm layers"
    return "+".join(sorted({k for k, _ in kinds})), "; ".join(sorted({t for _, t in kinds}))


def _trainable(optimizer):
    return [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]


MEMORY_NCHW = "NCHW"
MEMORY_CHANNELS_LAST = "channels-last (NHWC)"


def memory_format(modules):
    """The layout the model's convolutions run in, read from the first spatial convolution's
    weight: torch runs a convolution (and lays out its output) channels-last when its weight is,
    so the backbone's stem says how the whole network was prepared."""
    import torch
    for m in modules:
        w = getattr(m, "weight", None)
        if isinstance(w, torch.Tensor) and w.dim() == 4 and w.shape[1] > 1 and w.shape[2] * w.shape[3] > 1:
            nhwc = w.is_contiguous(memory_format=torch.channels_last) and not w.is_contiguous()
            return MEMORY_CHANNELS_LAST if nhwc else MEMORY_NCHW
    return MEMORY_NCHW


def optimizer(opt):
    """'SGD, fused kernel', 'SGD, foreach' or 'SGD, per-parameter loop': the optimizer's class and
    the update path its step takes (torch's default resolved for its parameters)."""
    defaults = getattr(opt, "defaults", {}) or {}
    name = type(opt).__name__
    if defaults.get("fused"):
        return name + ", fused kernel"
    foreach = defaults.get("foreach")
    if foreach is None:
        try:
            from torch.optim.optimizer import _default_to_fused_or_foreach
            _, foreach = _default_to_fused_or_foreach(_trainable(opt), bool(defaults.get("differentiable")),
                                                      use_fused=False)
        except Exception:   # an older or newer torch without the helper: say what is known
            return name + ", torch's default update path"
    return name + (", foreach" if foreach else ", per-parameter loop")


def momentum(opt):
    return float(opt.defaults.get("momentum", 0.0))


def weight_decay(opt):
    """The weight decay of the trained parameters: one number where every parameter has it, else
    '<decay>, none on biases and norms' (the one-dimensional parameters), else each value."""
    decayed, flat = set(), set()
    for group in opt.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                (flat if p.dim() <= 1 else decayed).add(float(group.get("weight_decay", 0.0)))
    if len(decayed | flat) == 1:
        return (decayed | flat).pop()
    if len(decayed) == 1 and flat == {0.0}:
        return "%g, none on biases and norms" % decayed.pop()
    return "matrices %s; biases and norms %s" % ("/".join("%g" % v for v in sorted(decayed)),
                                                 "/".join("%g" % v for v in sorted(flat)))


def trainer(cfg, model, world, opt, threads, decay=None, paste=None, targets=None):
    """(settings, implementation) of the bundled trainer: its config as resolved for the device
    (harness/trainer/config.py resolve_for_device), the detector it built and the optimizer its
    engine builds; `decay` as schedule() takes it, from the trainer's own schedule module, and
    `paste` the function its test time lays Mask R-CNN's masks with and `targets` the one its
    training cuts the mask targets with (the trainer is a program this package launches, and its
    modules are not imported here)."""
    m, d, t = cfg.model, cfg.data, cfg.train
    net = getattr(model, "module", model)
    coco = d.source == "coco"
    images = d.images_per_device * world
    settings = {
        "images_per_device": d.images_per_device, "devices": world, "input_size": list(d.input_size),
        "precision": t.precision if t.precision != "fp32" else precision(None, t.tf32),
        "data": "coco" if coco else "synthetic",
        "frozen_stages": frozen_stages([net.backbone.stem] + list(net.backbone.stages)),
        "norm": norm(net.backbone.modules())[0], "loader_workers": d.workers if coco else 0,
        "flip": bool(coco and d.flip_prob > 0), "threads": threads,
        "momentum": momentum(opt), "weight_decay": weight_decay(opt),
    }
    settings.update(normalized.schedule(t.lr * images / t.lr_reference_batch, t.warmup_iters,
                                        t.warmup_factor, d.shuffle if coco else False, decay))
    if t.clip_grad_norm:
        settings["clip_grad_norm"] = float(t.clip_grad_norm)
    if m.weights:
        settings["init"] = "file:" + os.path.basename(m.weights)
    elif m.backbone_weights:
        settings["init"] = "backbone:" + os.path.basename(m.backbone_weights)
    else:
        settings["init"] = "random"
    implementation = {"batch_norm": norm(net.backbone.modules())[1], "optimizer": optimizer(opt),
                      "memory_format": memory_format(net.modules())}
    if m.name == "retina":
        settings.update(box_loss="l1", cls_loss=focal(net.alpha, net.gamma),
                        extra_levels_from="p5" if net.neck.extra == "p6p7" else net.neck.extra,
                        anchors=anchors(net.anchors.sizes, net.anchors.aspect_ratios, net.anchors.cell_corners()))
        return settings, implementation
    rpn, heads = net.rpn, net.roi_heads
    box = heads.box_extractor
    settings.update(
        rpn_pre_nms_train=int(rpn.pre_nms_top_n), rpn_post_nms_train=int(rpn.post_nms_top_n),
        rpn_batch_per_image=int(rpn.batch_per_image), rpn_positive_fraction=float(rpn.positive_fraction),
        roi_batch_per_image=int(heads.batch_per_image), roi_positive_fraction=float(heads.positive_fraction),
        roi_align_sampling_ratio=int(box.sampling_ratio), roi_align_aligned=bool(box.aligned),
        # the trainer's rpn.py and rcnn.py: smooth L1 with beta 1/9 in both stages, BCE and CE
        box_loss=two_stage_box_loss(smooth_l1(1.0 / 9), smooth_l1(1.0 / 9)), cls_loss=TWO_STAGE_CLS_LOSS,
        anchors=anchors(rpn.anchors.sizes, rpn.anchors.aspect_ratios, rpn.anchors.cell_corners()))
    implementation["roi_align"] = ROI_ALIGN_SPARSE if box.sparse else ROI_ALIGN_TORCHVISION
    if m.sync_free:
        implementation["roi_align"] += ", one atlas of the levels (sync-free)"
    if heads.mask_head is not None:
        settings["mask_rois_per_image_max"] = normalized.mask_rois_cap(
            heads.batch_per_image, heads.positive_fraction, heads.mask_max_rois)
        convs = [c for c in heads.mask_head.body if type(c).__name__ == "Conv2d"]
        settings["mask_head"] = mask_head(len(convs), convs[-1].out_channels, heads.mask_extractor.output_size[0],
                                          heads.mask_size)
        implementation["mask_logits"] = ("target class only" if heads.mask_target_class_only
                                         else "all %d classes" % heads.mask_head.logits.out_channels)
        if paste is not None:
            implementation["mask_paste"] = mask_paste(paste, exact=True)
        if targets is not None:
            implementation["mask_targets"] = mask_targets(targets, MASK_TARGETS_ALIGNED_SOFT)
    return settings, implementation
