"""Train a detectron2 model-zoo detector for N iterations on the images the torchvision driver reads.

Runs inside the detectron2 framework's pinned env (it imports detectron2; harness does not).
The model is detectron2's own: get_cfg() merged with the R50-FPN config bundled in the installed
package (detectron2.model_zoo), built by build_model, its optimizer and learning-rate schedule by
detectron2.solver, its losses and samplers unchanged; this file sets the cfg to the scenario and
runs the loop of detectron2's SimpleTrainer (one batch, the model's losses summed, one SGD step,
then the schedule) inside an EventStorage, as detectron2's trainers do.

Set to the work of the other frameworks (docs/methodology.md): FREEZE_AT 2 (stem and res2) with
FrozenBN, the torchvision ResNet's strides (STRIDE_IN_1X1 off) and input normalisation (RGB, its
mean and std), the scenario's proposal counts (default 2000 per level before NMS, 2000 per image
after), RPN 256 at 0.5, RoI 512 at 0.25, poolers ROIAlign (not ROIAlignV2) at sampling ratio 2,
smooth L1 (beta 1/9) in both stages of the two-stage models; RetinaNet with an L1 box loss and
P6/P7 from P5 (a backbone registered here: detectron2's FPN and LastLevelP6P7 fed from p5 instead
of res5). No weights are downloaded (MODEL.WEIGHTS is empty; ``--weights FILE`` loads a file of
`detbench weights make`, mapped by weights_map.py), nothing is evaluated, nothing is saved.

For time to accuracy (`detbench accuracy`): ``--depth 18`` (detectron2's ResNet-18: basic blocks,
res2 at 64 channels), ``--freeze-at 0`` (nothing frozen; BN stays FrozenBN), the weight decay
(biases and norms too), ``--lr-steps``/``--gamma`` (SOLVER.STEPS and GAMMA of detectron2's own
scheduler), and ``--checkpoint-every N --checkpoint-dir DIR``: the model, optimizer and scheduler
after every N-th iteration and the last, as ``iter_N.pth``, each announced by one ``checkpoint
PATH`` line. ``--resume FILE`` goes on after a checkpoint's iteration with the draws the whole run
would have made (the same images, flips and RNG state).

Each iteration prints one ``DETBENCH_ITER`` line, its time from the end of the previous iteration
to the end of this one and its data time the wait for the batch (exact per iteration), and one
``DETBENCH_WORK`` line (proposals the RPN kept, RoIs sampled, positive RoIs, mask RoIs; RetinaNet:
positive anchors, summed over the batch). Before the first, one ``DETBENCH_SETTINGS`` line gives
the settings read from the built cfg, model, optimizer and loader.
"""
import argparse
import math
import os
import sys
import time

import torch

try:
    from harness.drivers import asrun, common, torchvision_driver, weights_map   # imported from the harness
except ImportError:
    import asrun                                # run as a script in the framework's pinned env
    import common
    import torchvision_driver
    import weights_map

MODELS = {"retinanet": "COCO-Detection/retinanet_R_50_FPN_1x.yaml",
          "faster_rcnn": "COCO-Detection/faster_rcnn_R_50_FPN_1x.yaml",
          "mask_rcnn": "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml"}
NUM_CLASSES = 80                  # detectron2 counts foreground classes only
# torchvision's input normalisation (RGB in 0..255), so one weights file sees the same input
PIXEL_MEAN = [123.675, 116.28, 103.53]
PIXEL_STD = [58.395, 57.12, 57.375]
TWO_STAGE_BETA = 1.0 / 9
RETINANET_BACKBONE = "build_detbench_retinanet_fpn_p5_backbone"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(MODELS), required=True)
    p.add_argument("--config", help="model-zoo config key (default: the model's R50-FPN 1x)")
    p.add_argument("--iterations", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--input-size", default="800x1333", help="HxW every image is made")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--data", default="synthetic", help="'synthetic' or a COCO instances JSON")
    p.add_argument("--images", help="image folder of --data")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--rpn-pre-nms-train", type=int, default=2000, help="per level and image")
    p.add_argument("--rpn-post-nms-train", type=int, default=2000, help="per image")
    p.add_argument("--roi-batch-per-image", type=int, default=512, help="the box head's sampled RoIs per image")
    p.add_argument("--lr", type=float, default=0.0025)
    p.add_argument("--warmup-iters", type=int, default=0)
    p.add_argument("--warmup-factor", type=float, default=1.0 / 3)
    p.add_argument("--no-shuffle", dest="shuffle", action="store_false")
    p.add_argument("--no-flip", dest="flip", action="store_false")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--weights", metavar="FILE",
                   help="initial weights made by `detbench weights make` (torchvision's layout, mapped)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--depth", type=int, choices=[18, 50], default=50, help="ResNet depth")
    p.add_argument("--freeze-at", type=int, choices=[0, 1, 2, 3, 4, 5], default=2,
                   help="BACKBONE.FREEZE_AT: 0 freezes nothing, 2 the stem and res2")
    common.add_accuracy_flags(p)       # the weight decay: SOLVER.WEIGHT_DECAY and its _NORM
    return common.checked_accuracy_flags(p, p.parse_args(argv))


def register_backbone():
    """RetinaNet's backbone with P6 from P5 (detectron2's own builder takes it from res5)."""
    from detectron2.modeling import BACKBONE_REGISTRY
    from detectron2.modeling.backbone import FPN
    from detectron2.modeling.backbone.fpn import LastLevelP6P7
    from detectron2.modeling.backbone.resnet import build_resnet_backbone

    if RETINANET_BACKBONE in BACKBONE_REGISTRY:
        return

    def build(cfg, input_shape):
        out = cfg.MODEL.FPN.OUT_CHANNELS
        return FPN(bottom_up=build_resnet_backbone(cfg, input_shape), in_features=cfg.MODEL.FPN.IN_FEATURES,
                   out_channels=out, norm=cfg.MODEL.FPN.NORM, top_block=LastLevelP6P7(out, out, in_feature="p5"),
                   fuse_type=cfg.MODEL.FPN.FUSE_TYPE)
    build.__name__ = RETINANET_BACKBONE
    BACKBONE_REGISTRY.register(build)


def build_cfg(args, height, width):
    """detectron2's cfg: the bundled model-zoo config, set to the scenario."""
    from detectron2 import model_zoo
    from detectron2.config import get_cfg
    cfg = get_cfg()
    cfg.merge_from_file(model_zoo.get_config_file(args.config or MODELS[args.model]))
    m = cfg.MODEL
    m.WEIGHTS = ""
    m.DEVICE = args.device
    m.PIXEL_MEAN, m.PIXEL_STD = list(PIXEL_MEAN), list(PIXEL_STD)
    cfg.INPUT.FORMAT = "RGB"
    cfg.INPUT.MIN_SIZE_TRAIN, cfg.INPUT.MAX_SIZE_TRAIN = (min(height, width),), max(height, width)
    m.BACKBONE.FREEZE_AT = args.freeze_at
    m.RESNETS.NORM = "FrozenBN"
    m.RESNETS.STRIDE_IN_1X1 = False
    m.RESNETS.DEPTH = args.depth
    if args.depth < 50:
        m.RESNETS.RES2_OUT_CHANNELS = 64     # basic blocks: res2 is as wide as the stem
    if args.model == "retinanet":
        register_backbone()
        m.BACKBONE.NAME = RETINANET_BACKBONE
        m.RETINANET.NUM_CLASSES = NUM_CLASSES
        m.RETINANET.BBOX_REG_LOSS_TYPE = "smooth_l1"
        m.RETINANET.SMOOTH_L1_LOSS_BETA = 0.0          # L1, as torchvision's and mmdet's
    else:
        m.ROI_HEADS.NUM_CLASSES = NUM_CLASSES
        m.RPN.PRE_NMS_TOPK_TRAIN = args.rpn_pre_nms_train
        m.RPN.POST_NMS_TOPK_TRAIN = args.rpn_post_nms_train
        m.RPN.BATCH_SIZE_PER_IMAGE, m.RPN.POSITIVE_FRACTION = 256, 0.5
        m.ROI_HEADS.BATCH_SIZE_PER_IMAGE, m.ROI_HEADS.POSITIVE_FRACTION = args.roi_batch_per_image, 0.25
        m.RPN.BBOX_REG_LOSS_TYPE = m.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE = "smooth_l1"
        m.RPN.SMOOTH_L1_BETA = m.ROI_BOX_HEAD.SMOOTH_L1_BETA = TWO_STAGE_BETA
        m.ROI_BOX_HEAD.POOLER_TYPE = m.ROI_MASK_HEAD.POOLER_TYPE = "ROIAlign"
        m.ROI_BOX_HEAD.POOLER_SAMPLING_RATIO = m.ROI_MASK_HEAD.POOLER_SAMPLING_RATIO = 2
    cfg.SOLVER.IMS_PER_BATCH = args.batch_size
    cfg.SOLVER.BASE_LR = args.lr
    cfg.SOLVER.MAX_ITER = max(args.iterations, 1)
    cfg.SOLVER.STEPS = tuple(args.lr_steps)
    cfg.SOLVER.GAMMA = args.gamma
    cfg.SOLVER.WEIGHT_DECAY = cfg.SOLVER.WEIGHT_DECAY_NORM = args.weight_decay
    cfg.SOLVER.WEIGHT_DECAY_BIAS = None          # biases decay as the weights do
    cfg.SOLVER.WARMUP_ITERS = args.warmup_iters
    cfg.SOLVER.WARMUP_FACTOR = args.warmup_factor if args.warmup_iters > 0 else 1.0
    cfg.SOLVER.WARMUP_METHOD = "linear"
    cfg.SOLVER.AMP.ENABLED = False
    cfg.DATALOADER.NUM_WORKERS = args.workers
    cfg.DATASETS.TRAIN, cfg.DATASETS.TEST = (), ()
    cfg.TEST.EVAL_PERIOD = 0
    cfg.SEED = args.seed
    cfg.freeze()
    return cfg


def build_model(cfg):
    from detectron2.modeling import build_model as build
    return build(cfg)


def to_inputs(images, targets, device):
    """detectron2's model inputs from the torchvision driver's samples: RGB 0..255 images and
    Instances with 0-based classes (torchvision's label L is class L-1) and bitmasks."""
    from detectron2.structures import BitMasks, Boxes, Instances
    out = []
    for img, t in zip(images, targets):
        h, w = img.shape[-2:]
        inst = Instances((h, w), gt_boxes=Boxes(t["boxes"].to(device)), gt_classes=(t["labels"] - 1).to(device))
        if "masks" in t:
            inst.gt_masks = BitMasks(t["masks"].bool().to(device))
        out.append({"image": (img * 255.0).to(device), "instances": inst, "height": h, "width": w})
    return out


class WorkCounter:
    """The work of each iteration, from what detectron2's modules are given and return: a hook on
    the proposal generator and on the mask pooler, wrappers of the RoI heads' sampler and of
    RetinaNet's anchor labelling."""

    def __init__(self, model):
        self.counts = {}
        if hasattr(model, "label_anchors"):
            label = model.label_anchors
            classes = model.num_classes

            def counted_label(anchors, gt_instances):
                gt_labels, gt_boxes = label(anchors, gt_instances)
                self.add("positive_anchors", sum(((g >= 0) & (g != classes)).sum() for g in gt_labels))
                return gt_labels, gt_boxes
            model.label_anchors = counted_label
            return
        model.proposal_generator.register_forward_hook(
            lambda module, args, output: self.add("proposals", sum(len(p) for p in output[0])))
        heads = model.roi_heads
        sample = heads.label_and_sample_proposals
        classes = heads.num_classes

        def counted_sample(proposals, targets):
            out = sample(proposals, targets)
            self.add("sampled_rois", sum(len(p) for p in out))
            self.add("positive_rois", sum(((p.gt_classes >= 0) & (p.gt_classes != classes)).sum() for p in out))
            return out
        heads.label_and_sample_proposals = counted_sample
        if getattr(heads, "mask_on", False):
            heads.mask_pooler.register_forward_hook(
                lambda module, args, output: self.add("mask_rois", output.shape[0]))

    def add(self, key, value):
        self.counts[key] = self.counts.get(key, 0) + value

    def line(self, iteration):
        counts, self.counts = self.counts, {}
        return common.jsonlog.work_line(iteration, **{k: int(v) for k, v in counts.items()})


def as_run(args, cfg, model, optimizer, loader, amp_dtype):
    """(settings, implementation) of the SETTINGS line, read from the built cfg, model, optimizer and loader."""
    bottom_up = model.backbone.bottom_up
    stages = [bottom_up.stem] + [getattr(bottom_up, name) for name in ("res2", "res3", "res4", "res5")]
    norm, norm_impl = asrun.norm(bottom_up.modules())
    dataset = loader.dataset
    flipped = isinstance(dataset, torchvision_driver.Flipped)
    inner = dataset.inner if flipped else dataset
    settings = {
        "images_per_device": loader.batch_size, "devices": 1,
        "input_size": [inner.h, inner.w],      # every image is made this size by the dataset
        "precision": asrun.precision(amp_dtype), "data": "synthetic" if isinstance(inner, torchvision_driver.Synthetic)
        else "coco", "frozen_stages": asrun.frozen_stages(stages), "norm": norm, "loader_workers": loader.num_workers,
        "flip": flipped, "threads": torch.get_num_threads(),
        "init": "file:" + os.path.basename(args.weights) if args.weights else "random",
        "momentum": asrun.momentum(optimizer), "weight_decay": asrun.weight_decay(optimizer),
    }
    settings.update(asrun.normalized.schedule(
        cfg.SOLVER.BASE_LR, cfg.SOLVER.WARMUP_ITERS, cfg.SOLVER.WARMUP_FACTOR,
        isinstance(loader.sampler, (torch.utils.data.RandomSampler, torchvision_driver.ResumedDraws)),
        (cfg.SOLVER.STEPS, cfg.SOLVER.GAMMA)))
    if getattr(type(optimizer), "clip_grad_norm", 0):
        settings["clip_grad_norm"] = float(type(optimizer).clip_grad_norm)
    implementation = {"batch_norm": norm_impl, "optimizer": asrun.optimizer(optimizer),
                      "memory_format": asrun.memory_format(model.modules())}
    anchors = model.anchor_generator if hasattr(model, "anchor_generator") else \
        model.proposal_generator.anchor_generator
    sizes = [list(s) for s in cfg.MODEL.ANCHOR_GENERATOR.SIZES]
    ratios = [list(r) for r in cfg.MODEL.ANCHOR_GENERATOR.ASPECT_RATIOS]
    anchor_text = asrun.anchors(sizes * (len(anchors.strides) if len(sizes) == 1 else 1),
                                ratios[0] if len(ratios) == 1 else ratios, list(anchors.cell_anchors))
    if hasattr(model, "label_anchors"):
        top = model.backbone.top_block
        beta = model.smooth_l1_beta if model.box_reg_loss_type == "smooth_l1" else None
        settings.update(box_loss=asrun.smooth_l1(beta) if beta is not None else model.box_reg_loss_type,
                        cls_loss=asrun.focal(model.focal_loss_alpha, model.focal_loss_gamma),
                        extra_levels_from="p5" if top.in_feature == "p5" else "c5", anchors=anchor_text)
        return settings, implementation
    rpn, heads = model.proposal_generator, model.roi_heads
    pooler = heads.box_pooler.level_poolers[0]
    settings.update(
        rpn_pre_nms_train=int(rpn.pre_nms_topk[True]), rpn_post_nms_train=int(rpn.post_nms_topk[True]),
        rpn_batch_per_image=int(rpn.batch_size_per_image), rpn_positive_fraction=float(rpn.positive_fraction),
        roi_batch_per_image=int(heads.batch_size_per_image), roi_positive_fraction=float(heads.positive_fraction),
        roi_align_sampling_ratio=int(pooler.sampling_ratio), roi_align_aligned=bool(pooler.aligned),
        box_loss=asrun.two_stage_box_loss(asrun.smooth_l1(rpn.smooth_l1_beta),
                                          asrun.smooth_l1(heads.box_predictor.smooth_l1_beta)),
        cls_loss=asrun.TWO_STAGE_CLS_LOSS, anchors=anchor_text)
    implementation["roi_align"] = asrun.ROI_ALIGN_TORCHVISION
    if getattr(heads, "mask_on", False):
        head = heads.mask_head
        convs = [c for c in head.conv_norm_relus]
        roi_size = heads.mask_pooler.output_size[0]
        settings["mask_rois_per_image_max"] = asrun.normalized.mask_rois_cap(
            settings["roi_batch_per_image"], settings["roi_positive_fraction"])   # no cap of its own
        settings["mask_head"] = asrun.mask_head(len(convs), convs[-1].out_channels, roi_size,
                                                roi_size * head.deconv.stride[0])
        implementation["mask_logits"] = "all %d classes" % head.predictor.out_channels
        from detectron2.layers import mask_ops   # detector_postprocess's ROIMasks.to_bitmasks pastes with this
        implementation["mask_paste"] = asrun.mask_paste(mask_ops.paste_masks_in_image, exact=True)
        from detectron2.structures import BitMasks   # the gt_masks this driver's loader hands it
        implementation["mask_targets"] = asrun.mask_targets(BitMasks.crop_and_resize, asrun.MASK_TARGETS_ALIGNED_BINARY)
    return settings, implementation


def make_loader(args, height, width, skip=0):
    """The run's batches, less the first `skip` iterations' (a resumed run: the same draws as the whole
    run's from there on)."""
    masks = args.model == "mask_rcnn"
    n = args.iterations * args.batch_size
    if args.data == "synthetic":
        dataset = torchvision_driver.Synthetic(n, height, width, masks, args.seed)
    else:
        dataset = torchvision_driver.Coco(args.data, args.images, height, width, masks)
    if args.flip:
        dataset = torchvision_driver.Flipped(dataset, width, args.seed)
    if args.shuffle:
        sampler = torch.utils.data.RandomSampler(dataset, replacement=True, num_samples=n,
                                                 generator=torch.Generator().manual_seed(args.seed))
    else:   # the file's order, cycled: the same images at the same iteration as the other frameworks
        sampler = [k % len(dataset) for k in range(n)]
    if skip:
        rest = list(sampler)[skip * args.batch_size:]
        sampler = torchvision_driver.ResumedDraws(rest) if args.shuffle else rest
    return torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler,
                                       num_workers=args.workers, collate_fn=torchvision_driver.collate,
                                       drop_last=True)


# training state a detectron2 model keeps outside its state_dict: RetinaNet's running mean of the
# foreground anchors its losses are divided by (detectron2's own checkpoints leave it out, so its
# resume starts that mean again; these checkpoints keep it, so a resumed run goes on as the whole
# run did)
STATE_ATTRIBUTES = ("loss_normalizer",)


def save_checkpoint(folder, iteration, model, optimizer, scheduler):
    """Write the state after `iteration` iterations atomically; its path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "iter_%d.pth" % iteration)
    tmp = path + ".tmp"
    torch.save({"format": "detbench-detectron2-checkpoint", "iteration": iteration, "model": model.state_dict(),
                "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "rng": torch.get_rng_state(), "attributes": {name: getattr(model, name) for name in STATE_ATTRIBUTES
                                                             if hasattr(model, name)}}, tmp)
    os.replace(tmp, path)
    return path


def with_global_clip(optimizer, max_norm):
    """`optimizer`, clipping the total L2 norm of all its parameters' gradients to `max_norm`
    before each step (0: as it is). detectron2's SOLVER.CLIP_GRADIENTS clips each parameter on
    its own; its optimizer-class factory also takes one clipper over all parameters, used here."""
    if not max_norm:
        return optimizer
    from detectron2.solver.build import _generate_optimizer_class_with_gradient_clipping
    clipped = _generate_optimizer_class_with_gradient_clipping(
        type(optimizer), global_clipper=lambda params: torch.nn.utils.clip_grad_norm_(list(params), max_norm))
    clipped.clip_grad_norm = max_norm
    optimizer.__class__ = clipped
    return optimizer


def main(argv=None):
    args = parse_args(argv)
    height, width = (int(v) for v in args.input_size.lower().split("x"))
    torch.manual_seed(args.seed)
    import detectron2
    from detectron2.solver import build_lr_scheduler, build_optimizer
    from detectron2.utils.events import EventStorage
    cfg = build_cfg(args, height, width)
    model = build_model(cfg)
    if args.weights and not args.resume:      # a resumed run's weights come from its checkpoint
        try:
            print("loaded weights %s: %d tensors" % (
                args.weights, weights_map.load(model, args.weights, args.model, "detectron2")), flush=True)
        except weights_map.WeightsError as exc:
            print("error: %s" % exc, file=sys.stderr, flush=True)
            return 2
    model.train()
    first, state = 0, None
    if args.resume:
        state = torch.load(args.resume, map_location="cpu", weights_only=False)
        first = int(state["iteration"])
        model.load_state_dict(state["model"])
        for name, value in state.get("attributes", {}).items():
            setattr(model, name, value)
    loader = make_loader(args, height, width, skip=first)
    optimizer = with_global_clip(build_optimizer(cfg, model), args.clip_grad_norm)
    scheduler = build_lr_scheduler(cfg, optimizer)
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"])
        print("resuming %s after iteration %d" % (args.resume, first), flush=True)
    amp_dtype = torch.bfloat16 if args.precision == "bf16" else None
    device = torch.device(args.device)
    print("detectron2 %s torch %s config %s device %s images/iter %d input %dx%d threads %d rpn_pre_nms_train %d "
          "rpn_post_nms_train %d lr %g warmup %d shuffle %s" % (
              detectron2.__version__, torch.__version__, args.config or MODELS[args.model], device, args.batch_size,
              height, width, torch.get_num_threads(), cfg.MODEL.RPN.PRE_NMS_TOPK_TRAIN,
              cfg.MODEL.RPN.POST_NMS_TOPK_TRAIN, cfg.SOLVER.BASE_LR, cfg.SOLVER.WARMUP_ITERS, args.shuffle), flush=True)
    print(common.jsonlog.settings_line(*as_run(args, cfg, model, optimizer, loader, amp_dtype)), flush=True)
    common.breakdown_hooks(model, optimizer)
    work = WorkCounter(model)
    cuda = device.type == "cuda"
    end = time.perf_counter()       # the first iteration's time starts here, with the loader
    batches = iter(loader)
    with EventStorage(first) as storage:
        for i in range(first, first + len(loader)):
            storage.iter = i
            fetch = time.perf_counter()
            images, targets = next(batches)
            data_time = time.perf_counter() - fetch
            lr = optimizer.param_groups[0]["lr"]
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss_dict = model(to_inputs(images, targets, device))
                loss = sum(loss_dict.values())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            values = {k: float(v.detach()) for k, v in loss_dict.items()}
            if not math.isfinite(sum(values.values())):
                # as detectron2's trainers do (FloatingPointError): a diverged run stops
                print("Loss became infinite or NaN at iteration=%d!\nloss_dict = %s" % (i, values), flush=True)
                return 1
            if cuda:
                torch.cuda.synchronize()
            now = time.perf_counter()
            iter_time, end = now - end, now
            print(common.jsonlog.iter_line(i + 1, iter_time, data_time, args.batch_size,
                                           loss=sum(values.values()), losses=values, lr=lr), flush=True)
            print(work.line(i + 1), flush=True)
            if args.checkpoint_every and ((i + 1) % args.checkpoint_every == 0 or i + 1 == args.iterations):
                print("checkpoint %s" % save_checkpoint(args.checkpoint_dir, i + 1, model, optimizer, scheduler),
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
