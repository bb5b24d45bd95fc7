"""mmengine hooks the mmdetection driver adds to mmdet's own training loop.

Runs inside the mmdetection framework's pinned env (mmdet_driver.py calls register()
before it executes mmdet's tools/train.py). Two hooks:

- ``DetbenchIterTimerHook`` replaces mmengine's IterTimerHook. Its ``time`` is mmengine's
  own (from the end of the previous iteration to the end of this one: the logging that
  follows an iteration belongs to the next one), but its ``data_time`` is only the wait
  for the batch. mmengine's own data_time runs from the previous iteration's timer, so
  it also holds that iteration's logging, which at one log line per iteration is not
  data loading.
- ``DetbenchWorkHook`` (lowest priority, after the logger) counts the detection work of
  each iteration from what mmdet's own modules return, and prints one
  ``DETBENCH_WORK {json}`` line per iteration on rank 0: proposals the RPN kept, RoIs
  sampled, positive RoIs and mask RoIs (RetinaNet: positive anchors), summed over the
  images of the batch, then one ``DETBENCH_DATA {json}`` line of what the iteration drew, read
  from the batch mmdet's own pipeline made (each data sample's img_id and RandomFlip's `flip`
  in its metainfo) without changing it. Its end marks the start of the next iteration's wait for data. Before
  the first iteration it prints one ``DETBENCH_SETTINGS {json}`` line (asrun.py): the settings
  read from the merged mmengine config the runner holds and from the built model and
  optimizer, and how its RoIAlign, norms, optimizer step and mask logits run (and how it pastes masks).
"""
import os
import sys
import time

try:
    from harness.drivers import asrun, common    # imported from the harness (tests)
except ImportError:
    import asrun                                # run as a script in the framework's pinned env
    import common

TIMER_HOOK = "DetbenchIterTimerHook"
WORK_HOOK = "DetbenchWorkHook"
WEIGHTS_HOOK = "DetbenchWeightsHook"   # mmdet_driver.py's: loads a weights file before the first iteration

# wall time (time.time(), as mmengine's timer) at which the last iteration's hooks, logging
# included, were done; None before the first iteration
_LOGGED = {"at": None}


class WorkCounter(common.WorkCounts):
    """Work counts of the iteration in flight, from wrappers around mmdet's own calls."""

    def install(self, model):
        """Wrap the calls of a two-stage detector or a RetinaNet that decide its work."""
        if hasattr(model, "rpn_head") and hasattr(model, "roi_head"):
            self._wrap_proposals(model.rpn_head)
            roi = model.roi_head
            self._wrap_sampler(roi.bbox_sampler, "sampled_rois", "positive_rois")
            if getattr(roi, "with_mask", False):
                roi.mask_roi_extractor.register_forward_hook(
                    lambda module, args, output: self.add("mask_rois", output.shape[0]))
            return True
        head = getattr(model, "bbox_head", None)
        if head is not None and getattr(head, "sampler", None) is not None:
            self._wrap_sampler(head.sampler, None, "positive_anchors")
            return True
        return False

    def _wrap_proposals(self, rpn_head):
        inner = rpn_head.loss_and_predict

        def loss_and_predict(*args, **kwargs):
            losses, proposals = inner(*args, **kwargs)
            self.add("proposals", sum(len(p) for p in proposals))
            return losses, proposals
        rpn_head.loss_and_predict = loss_and_predict

    def _wrap_sampler(self, sampler, sampled_key, positive_key):
        inner = sampler.sample

        def sample(*args, **kwargs):
            result = inner(*args, **kwargs)
            if sampled_key:
                self.add(sampled_key, len(result.pos_inds) + len(result.neg_inds))
            self.add(positive_key, len(result.pos_inds))
            return result
        sampler.sample = sample


def _get(tree, *keys, default=None):
    """tree[k1][k2]... of a merged config (dicts or mmengine ConfigDicts), default where absent."""
    for key in keys:
        if tree is None or key not in tree:
            return default
        tree = tree[key]
    return tree


def _loss(cfg):
    """A box or classification loss of mmdet's config in asrun's words."""
    kind = _get(cfg, "type", default="")
    if kind == "SmoothL1Loss":
        return asrun.smooth_l1(_get(cfg, "beta", default=1.0))
    if kind == "L1Loss":
        return "l1"
    if kind == "CrossEntropyLoss":
        return "bce" if _get(cfg, "use_sigmoid", default=False) else "ce"
    if kind == "FocalLoss":
        return asrun.focal(_get(cfg, "alpha", default=0.25), _get(cfg, "gamma", default=2.0))
    return kind.lower()


def _pipeline_step(cfg, kind):
    for step in _get(cfg, "train_dataloader", "dataset", "pipeline", default=None) or ():
        if _get(step, "type") == kind:
            return step
    return None


def _warmup_iters(cfg):
    """(iterations, start factor) of the config's iteration-based LinearLR, (0, 1.0) without one."""
    for sched in _get(cfg, "param_scheduler", default=None) or ():
        if _get(sched, "type") == "LinearLR" and not _get(sched, "by_epoch", default=True):
            factor = float(_get(sched, "start_factor", default=1.0 / 3))
            iters = int(_get(sched, "end", default=0)) - int(_get(sched, "begin", default=0))
            return (iters, factor) if factor != 1.0 and iters > 0 else (0, 1.0)
    return 0, 1.0


def _decay(cfg):
    """(milestones, gamma) of the config's iteration-based MultiStepLR, ((), 1.0) without one; the
    type's name for any other decaying scheduler (the warmup's LinearLR is not a decay)."""
    for sched in _get(cfg, "param_scheduler", default=None) or ():
        kind = _get(sched, "type")
        if kind == "MultiStepLR":
            if _get(sched, "by_epoch", default=True):
                return "MultiStepLR by epoch at %s" % list(_get(sched, "milestones"))
            return tuple(_get(sched, "milestones")), float(_get(sched, "gamma", default=0.1))
        if kind != "LinearLR":
            return str(kind)
    return (), 1.0


def _init(cfg):
    for hook in _get(cfg, "custom_hooks", default=None) or ():
        if _get(hook, "type") == WEIGHTS_HOOK:
            return "file:" + os.path.basename(_get(hook, "path"))
    loaded = _get(cfg, "load_from")
    return "file:" + os.path.basename(loaded) if loaded else "random"


def _anchors(generator):
    """asrun's anchor text from mmdet's AnchorGenerator: base size x scales per level, ratios."""
    scales = [float(s) for s in generator.scales.tolist()]
    return asrun.anchors([[b * s for s in scales] for b in (
        base if isinstance(base, (int, float)) else base[0] for base in generator.base_sizes)],
        generator.ratios.tolist(), generator.base_anchors)


def _roi_align(layer):
    if getattr(layer, "use_torchvision", False):
        return asrun.ROI_ALIGN_TORCHVISION + " (through mmcv)"
    return asrun.ROI_ALIGN_MMCV if type(layer).__module__.startswith("mmcv") else type(layer).__module__


def as_run(cfg, net, optim_wrapper, world_size, threads):
    """(settings, implementation) of the SETTINGS line: mmdet's merged config as the runner holds
    it (model.train_cfg, the heads' losses, the data pipeline, optim_wrapper, param_scheduler) and
    the built model and optimizer (norm layers in training mode, RoIAlign layers, anchors)."""
    model = _get(cfg, "model")
    loader = _get(cfg, "train_dataloader")
    resize = _pipeline_step(cfg, "Resize")
    flip = _pipeline_step(cfg, "RandomFlip")
    optimizer = optim_wrapper.optimizer
    amp = type(optim_wrapper).__name__ == "AmpOptimWrapper"
    device = next(net.parameters()).device.type
    autocast = (getattr(optim_wrapper, "cast_dtype", None) or ("float16" if device == "cuda" else "bfloat16")) \
        if amp else None
    was_training = net.training
    net.train()   # what the loop does before each iteration: norm_eval puts the BN layers in eval mode
    norm, norm_impl = asrun.norm(net.backbone.modules())
    net.train(was_training)
    iters, factor = _warmup_iters(cfg)
    settings = {
        "images_per_device": int(_get(loader, "batch_size")), "devices": int(world_size),
        "input_size": [int(_get(resize, "scale")[1]), int(_get(resize, "scale")[0])],
        "precision": asrun.precision(autocast), "data": "coco" if "Coco" in _get(loader, "dataset", "type",
                                                                                default="Coco") else "other",
        "frozen_stages": int(_get(model, "backbone", "frozen_stages", default=-1)), "norm": norm,
        "loader_workers": int(_get(loader, "num_workers", default=0)),
        "flip": flip is not None and float(_get(flip, "prob", default=0.0) or 0.0) > 0, "threads": threads,
        "init": _init(cfg), "momentum": asrun.momentum(optimizer), "weight_decay": asrun.weight_decay(optimizer),
    }
    settings.update(asrun.normalized.schedule(_get(cfg, "optim_wrapper", "optimizer", "lr"), iters, factor,
                                              _get(loader, "sampler", "shuffle", default=True), _decay(cfg)))
    clip = getattr(optim_wrapper, "clip_grad_kwargs", None) or {}
    if clip.get("max_norm"):    # the wrapper's own clip: its total-norm clipper and its bound
        settings["clip_grad_norm"] = float(clip["max_norm"])
    implementation = {"batch_norm": norm_impl, "optimizer": asrun.optimizer(optimizer),
                      "memory_format": asrun.memory_format(net.modules())}
    if not hasattr(net, "roi_head"):      # RetinaNet: one head
        head = _get(model, "bbox_head")
        extra = _get(model, "neck", "add_extra_convs", default=False)
        settings.update(box_loss=_loss(_get(head, "loss_bbox")), cls_loss=_loss(_get(head, "loss_cls")),
                        extra_levels_from={"on_output": "p5", "on_input": "c5", "on_lateral": "p5 lateral"}.get(
                            extra, "pool" if not extra else str(extra)),
                        anchors=_anchors(net.bbox_head.prior_generator))
        return settings, implementation
    train_cfg = _get(model, "train_cfg")
    layer = net.roi_head.bbox_roi_extractor.roi_layers[0]
    settings.update(
        rpn_pre_nms_train=int(_get(train_cfg, "rpn_proposal", "nms_pre")),
        rpn_post_nms_train=int(_get(train_cfg, "rpn_proposal", "max_per_img")),
        rpn_batch_per_image=int(_get(train_cfg, "rpn", "sampler", "num")),
        rpn_positive_fraction=float(_get(train_cfg, "rpn", "sampler", "pos_fraction")),
        roi_batch_per_image=int(_get(train_cfg, "rcnn", "sampler", "num")),
        roi_positive_fraction=float(_get(train_cfg, "rcnn", "sampler", "pos_fraction")),
        roi_align_sampling_ratio=int(layer.sampling_ratio), roi_align_aligned=bool(layer.aligned),
        box_loss=asrun.two_stage_box_loss(_loss(_get(model, "rpn_head", "loss_bbox")),
                                          _loss(_get(model, "roi_head", "bbox_head", "loss_bbox"))),
        cls_loss="rpn %s, rcnn %s" % (_loss(_get(model, "rpn_head", "loss_cls")),
                                      _loss(_get(model, "roi_head", "bbox_head", "loss_cls"))),
        anchors=_anchors(net.rpn_head.prior_generator))
    implementation["roi_align"] = _roi_align(layer)
    if getattr(net.roi_head, "with_mask", False):
        head = net.roi_head.mask_head
        settings["mask_rois_per_image_max"] = asrun.normalized.mask_rois_cap(
            settings["roi_batch_per_image"], settings["roi_positive_fraction"])   # no cap of its own
        roi_size = head.roi_feat_size[0] if isinstance(head.roi_feat_size, (tuple, list)) else head.roi_feat_size
        settings["mask_head"] = asrun.mask_head(head.num_convs, head.conv_out_channels, roi_size,
                                                int(_get(train_cfg, "rcnn", "mask_size", default=roi_size * 2)))
        implementation["mask_logits"] = ("one class-agnostic mask" if head.class_agnostic
                                         else "all %d classes" % head.conv_logits.out_channels)
        # its predict pastes with the _do_paste_mask of the head's own module (FCNMaskHead's)
        paste = getattr(sys.modules.get(type(head).__module__), "_do_paste_mask", None)
        if paste is not None:
            implementation["mask_paste"] = asrun.mask_paste(paste, exact=True)
        # the head's mask_target cuts from the masks LoadAnnotations made: bitmaps (poly2mask, its
        # default) or polygons, each kind's crop_and_resize (the module the head imported it from)
        structures = sys.modules.get("mmdet.structures.mask")
        if structures is not None:
            polygons = _get(_pipeline_step(cfg, "LoadAnnotations"), "poly2mask", default=True) is False
            kind, how = ((structures.PolygonMasks, asrun.MASK_TARGETS_POLYGONS) if polygons
                         else (structures.BitmapMasks, asrun.MASK_TARGETS_ALIGNED_BINARY))
            implementation["mask_targets"] = asrun.mask_targets(kind.crop_and_resize, how)
    return settings, implementation


def batch_views(data_batch):
    """[(img_id, mirrored)] of a training batch as mmdet's own pipeline left it: each data sample's
    metainfo, where RandomFlip recorded `flip` and the dataset `img_id` (PackDetInputs keeps both)."""
    samples = (data_batch or {}).get("data_samples") or ()
    return [(int(s.metainfo.get("img_id", -1)), bool(s.metainfo.get("flip", False))) for s in samples]


def loader_epoch(sampler, drawn, runner_epoch):
    """The pass through the data set the batch came from: mmengine's InfiniteSampler draws a new
    permutation of its rank's share each pass, so the pass is the images drawn before it over that
    share (under an aspect-ratio batch sampler, which holds a few images back to fill a batch of
    one shape, a batch at a pass's edge may count in the pass before); an epoch-based sampler's is
    the runner's epoch."""
    if type(sampler).__name__ == "InfiniteSampler":
        share = len(range(sampler.rank, sampler.size, sampler.world_size))
        return drawn // share if share else None
    return runner_epoch


def register():
    """Register both hooks in mmengine's HOOKS registry (mmdet's registry falls back to it)."""
    import torch
    from mmengine.hooks import Hook, IterTimerHook
    from mmengine.model import is_model_wrapper
    from mmengine.registry import HOOKS

    class DetbenchIterTimerHook(IterTimerHook):
        def _before_iter(self, runner, batch_idx, data_batch=None, mode="train"):
            if mode != "train" or _LOGGED["at"] is None:
                return super()._before_iter(runner, batch_idx, data_batch, mode)
            runner.message_hub.update_scalar("train/data_time", time.time() - _LOGGED["at"])

    class DetbenchWorkHook(Hook):
        priority = "LOWEST"

        def __init__(self):
            self.counter = WorkCounter()
            self.drawn = 0      # images this rank's loader has handed out so far

        def before_train(self, runner):
            net = runner.model.module if is_model_wrapper(runner.model) else runner.model
            counted = self.counter.install(net)
            if runner.rank == 0:
                print("detbench: torch threads %d, work counted: %s" % (
                    torch.get_num_threads(), "yes" if counted else "no (unknown detector)"), flush=True)
                ran = as_run(runner.cfg, net, runner.optim_wrapper, runner.world_size, torch.get_num_threads())
                print(common.jsonlog.settings_line(*ran), flush=True)
                common.breakdown_hooks(net, runner.optim_wrapper.optimizer)

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            line = self.counter.line(runner.iter + 1)
            views = batch_views(data_batch)
            loader = runner.train_dataloader
            # the sampler under a batch sampler (mmdet's AspectRatioBatchSampler), else the loader's own
            sampler = getattr(getattr(loader, "batch_sampler", None), "sampler", None) or loader.sampler
            epoch = loader_epoch(sampler, self.drawn, runner.epoch)
            self.drawn += len(views)
            if runner.rank == 0:
                print(line, flush=True)
                print(common.jsonlog.data_line(runner.iter + 1, epoch, views), flush=True)
            _LOGGED["at"] = time.time()

    HOOKS.register_module(name=TIMER_HOOK, module=DetbenchIterTimerHook, force=True)
    HOOKS.register_module(name=WORK_HOOK, module=DetbenchWorkHook, force=True)
