"""Train a torchvision detection model for N iterations and log like torchvision's references.

Runs inside the torchvision framework's pinned env (it imports torch; harness does not).
The model, its losses and its transform are torchvision's own code; this file is the
small training loop of references/detection (SGD, one optimizer step per batch) with
the reference MetricLogger line printed at every iteration:

    Epoch: [0]  [  3/40]  eta: 0:00:05  lr: 0.000100  loss: 1.2345 (1.3456)  ...  time: 0.2762  data: 0.0031  max mem: 0

``time`` runs from the end of the previous iteration to the end of this one (data
included, and the printing of the previous iteration's lines), ``data`` is the wait for
the batch; both are printed for THIS iteration (window 1), so the scraper reads exact
per-iteration times (scrape option window=1). After it, one ``DETBENCH_WORK {json}`` line
gives the work of the iteration: proposals the RPN kept, RoIs sampled, positive RoIs, mask
RoIs (RetinaNet: positive anchors), summed over the batch's images.
No weights are downloaded: weights=None, weights_backbone=None; ``--weights FILE`` starts
from a file of `detbench weights make` instead of torchvision's random initialisation. By default the backbone
is built the way the reference recipe trains it from ImageNet weights (FrozenBatchNorm,
conv1 and layer1 frozen: trainable_backbone_layers=3); ``--norm bn --trainable-layers 5``
gives torchvision's own from-scratch default instead.
``--depth 18`` builds the small scale (a ResNet-18 FPN: torchvision's resnet18 body under the same
extractor). For accuracy runs ``--checkpoint-every N --checkpoint-dir DIR`` writes the model and
optimizer state after every N-th iteration and the last (``iter_<N>.pth``, then one line
``checkpoint PATH``, as the bundled trainer prints it), ``--lr-steps`` and ``--gamma`` decay the
learning rate, and ``--resume FILE`` goes on after a checkpoint's iteration with the same images
in the same order.
Before the first iteration one ``DETBENCH_SETTINGS {json}`` line gives the settings read from
the built model, optimizer and loader (asrun.py), and how RoIAlign, the norms, the optimizer
step and the mask logits run.
"""
import argparse
import datetime
import json
import math
import os
import sys
import time

import torch
import torchvision
from torchvision.models.detection import (FasterRCNN, MaskRCNN, RetinaNet,
                                          fasterrcnn_resnet50_fpn, maskrcnn_resnet50_fpn,
                                          retinanet_resnet50_fpn)
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.ops import misc as misc_nn_ops
from torchvision.ops.feature_pyramid_network import LastLevelP6P7

try:
    from harness.drivers import asrun, common, weights_map   # imported from the harness (tests, weights make)
except ImportError:
    import asrun                                # run as a script in the framework's pinned env
    import common
    import weights_map

MODELS = {"retinanet": "retinanet_resnet50_fpn", "faster_rcnn": "fasterrcnn_resnet50_fpn",
          "mask_rcnn": "maskrcnn_resnet50_fpn"}
NUM_CLASSES = 81          # 80 COCO categories + background (torchvision counts background)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(MODELS), required=True)
    p.add_argument("--iterations", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--input-size", default="800x1333", help="HxW every image is made")
    p.add_argument("--precision", choices=["fp32", "tf32", "fp16", "bf16"], default="fp32")
    p.add_argument("--data", default="synthetic", help="'synthetic' or a COCO instances JSON")
    p.add_argument("--images", help="image folder of --data")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--norm", choices=["frozen_bn", "bn"], default="frozen_bn")
    p.add_argument("--retinanet-anchors", choices=["exact", "whole-pixel"], default="exact",
                   help="RetinaNet's octave anchor sizes: exact (x, x*2^(1/3), x*2^(2/3)) as the other "
                        "frameworks use them, or torchvision's default that truncates them to whole pixels")
    p.add_argument("--anchor-corners", choices=["exact", "whole-pixel"], default="exact",
                   help="the anchors' corners: exact (width size/sqrt(ratio)), as mmdetection, detectron2 and "
                        "the bundled trainer place them, or torchvision's default, rounded to whole pixels")
    p.add_argument("--depth", type=int, choices=[50, 18], default=50, help="ResNet depth of the FPN backbone")
    p.add_argument("--trainable-layers", type=int, default=3, choices=range(0, 6))
    p.add_argument("--rpn-pre-nms-train", type=int, default=2000, help="per level and image")
    p.add_argument("--rpn-post-nms-train", type=int, default=2000, help="per image")
    p.add_argument("--roi-batch-per-image", type=int, default=512, help="the box head's sampled RoIs per image")
    p.add_argument("--lr", type=float, default=0.0025)
    p.add_argument("--warmup-iters", type=int, default=0,
                   help="linear warmup of the learning rate over this many iterations (0: none)")
    p.add_argument("--warmup-factor", type=float, default=1.0 / 3, help="learning-rate factor at iteration 0")
    p.add_argument("--no-shuffle", dest="shuffle", action="store_false",
                   help="take the images in the file's order, cycled (default: random draws)")
    p.add_argument("--no-flip", dest="flip", action="store_false",
                   help="skip the reference's random horizontal flip (p=0.5)")
    common.add_accuracy_flags(p)
    p.add_argument("--print-freq", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--weights", metavar="FILE",
                   help="initial weights made by `detbench weights make` (this model's own layout)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    return common.checked_accuracy_flags(p, p.parse_args(argv))


def retinanet_anchors(kind, corners="whole-pixel"):
    """RetinaNet's anchor generator: three octave scales per level, ratios 0.5, 1, 2. torchvision's
    default (`_default_anchorgen`) truncates the scales to int (32, 40, 50); "exact" keeps
    x*2^(k/3) (32, 40.32, 50.8), as mmdetection, detectron2 and the bundled trainer do. Both
    are torchvision's own AnchorGenerator; `corners` as in `placed_corners`."""
    octave = (1.0, 2 ** (1.0 / 3), 2 ** (2.0 / 3))
    if kind == "exact":
        sizes = tuple(tuple(x * k for k in octave) for x in (32, 64, 128, 256, 512))
    else:
        sizes = tuple(tuple(int(x * k) for k in octave) for x in (32, 64, 128, 256, 512))
    return placed_corners(AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(sizes)), corners)


def rpn_anchors(corners="whole-pixel"):
    """The RPN's anchor generator of torchvision's Faster and Mask R-CNN (one size per level, 32 to
    512, ratios 0.5, 1, 2); `corners` as in `placed_corners`."""
    sizes = ((32,), (64,), (128,), (256,), (512,))
    return placed_corners(AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(sizes)), corners)


def placed_corners(generator, corners):
    """torchvision's AnchorGenerator rounds its cell anchors' corners to whole pixels
    ("whole-pixel", as built). "exact" gives it the unrounded cells instead, a cell of size s and
    ratio r being s/sqrt(r) wide and s*sqrt(r) high, as mmdetection, detectron2 and the bundled
    trainer place them. The generator's own code still lays the cells over every level's grid."""
    if corners == "exact":
        generator.cell_anchors = [torch.tensor(asrun.exact_cells(sizes, ratios), dtype=torch.float32)
                                  for sizes, ratios in zip(generator.sizes, generator.aspect_ratios)]
    return generator


def build_model(args, height, width):
    size = dict(min_size=min(height, width), max_size=max(height, width))
    if args.model == "retinanet":
        size["anchor_generator"] = retinanet_anchors(args.retinanet_anchors, args.anchor_corners)
    else:
        size["rpn_anchor_generator"] = rpn_anchors(args.anchor_corners)
    if args.norm == "bn" and args.trainable_layers == 5 and args.depth == 50:
        # torchvision's own builder: without weights it trains every layer with BatchNorm
        fn = {"retinanet": retinanet_resnet50_fpn, "faster_rcnn": fasterrcnn_resnet50_fpn,
              "mask_rcnn": maskrcnn_resnet50_fpn}[args.model]
        kw = dict(size)
        if args.model != "retinanet":
            kw.update(rpn_pre_nms_top_n_train=args.rpn_pre_nms_train,
                      rpn_post_nms_top_n_train=args.rpn_post_nms_train,
                      box_batch_size_per_image=args.roi_batch_per_image)
        return fn(weights=None, weights_backbone=None, num_classes=NUM_CLASSES, **kw)
    norm = misc_nn_ops.FrozenBatchNorm2d if args.norm == "frozen_bn" else torch.nn.BatchNorm2d
    body = (torchvision.models.resnet18 if args.depth == 18 else torchvision.models.resnet50)(
        weights=None, norm_layer=norm)
    if args.model == "retinanet":
        backbone = _resnet_fpn_extractor(body, args.trainable_layers, returned_layers=[2, 3, 4],
                                         extra_blocks=LastLevelP6P7(256, 256))
        return RetinaNet(backbone, NUM_CLASSES, **size)
    backbone = _resnet_fpn_extractor(body, args.trainable_layers)
    cls = FasterRCNN if args.model == "faster_rcnn" else MaskRCNN
    return cls(backbone, NUM_CLASSES, rpn_pre_nms_top_n_train=args.rpn_pre_nms_train,
               rpn_post_nms_top_n_train=args.rpn_post_nms_train,
               box_batch_size_per_image=args.roi_batch_per_image, **size)


class Synthetic(torch.utils.data.Dataset):
    """Deterministic random images with 1-8 random boxes each (and box-shaped masks)."""

    def __init__(self, n, height, width, masks, seed):
        self.n, self.h, self.w, self.masks, self.seed = n, height, width, masks, seed

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 100003 + i)
        img = torch.rand(3, self.h, self.w, generator=g)
        k = int(torch.randint(1, 9, (1,), generator=g))
        xy = torch.rand(k, 2, generator=g) * torch.tensor([self.w * 0.7, self.h * 0.7])
        wh = 16 + torch.rand(k, 2, generator=g) * torch.tensor([self.w * 0.3, self.h * 0.3])
        boxes = torch.cat([xy, torch.minimum(xy + wh, torch.tensor([self.w - 1.0, self.h - 1.0]))], 1)
        target = {"boxes": boxes, "labels": torch.randint(1, NUM_CLASSES, (k,), generator=g)}
        if self.masks:
            target["masks"] = box_masks(boxes, self.h, self.w)
        return img, target


def box_masks(boxes, height, width):
    m = torch.zeros(len(boxes), height, width, dtype=torch.uint8)
    for j, (x0, y0, x1, y1) in enumerate(boxes.round().int().tolist()):
        m[j, y0:y1 + 1, x0:x1 + 1] = 1
    return m


def polygon_masks(anns, sx, sy, height, width):
    """One uint8 mask per annotation, made as references/detection's coco_utils makes them: its
    polygons, scaled by (sx, sy), rasterised by pycocotools (a pixel is inside where its centre
    is, as COCOeval rasterises the ground truth). An RLE is decoded and resized by nearest
    neighbour at pixel centres; an annotation without a segmentation fills its box."""
    import numpy as np
    from pycocotools import mask as mask_utils
    masks = torch.zeros(len(anns), height, width, dtype=torch.uint8)
    for j, a in enumerate(anns):
        seg = a.get("segmentation")
        if isinstance(seg, dict):
            rle = mask_utils.frPyObjects(seg, *seg["size"]) if isinstance(seg.get("counts"), list) else seg
            full = mask_utils.decode(rle)
            rows = np.minimum(((np.arange(height) + 0.5) / sy).astype(np.int64), full.shape[0] - 1)
            cols = np.minimum(((np.arange(width) + 0.5) / sx).astype(np.int64), full.shape[1] - 1)
            masks[j] = torch.from_numpy(np.ascontiguousarray(full[rows][:, cols], dtype=np.uint8))
            continue
        if isinstance(seg, list) and seg:
            polygons = [[float(v) * (sx if k % 2 == 0 else sy) for k, v in enumerate(poly)]
                        for poly in seg if len(poly) >= 6]
        else:
            x, y, w, h = (float(v) for v in a["bbox"])
            polygons = [[x * sx, y * sy, (x + w) * sx, y * sy, (x + w) * sx, (y + h) * sy, x * sx, (y + h) * sy]]
        if polygons:
            rle = mask_utils.merge(mask_utils.frPyObjects(polygons, height, width))
            masks[j] = torch.from_numpy(np.ascontiguousarray(mask_utils.decode(rle), dtype=np.uint8))
    return masks


class Coco(torch.utils.data.Dataset):
    """A COCO instances file read with json; masks from the polygons (pycocotools, as the reference)."""

    def __init__(self, ann_file, images, height, width, masks):
        with open(ann_file) as f:
            doc = json.load(f)
        cats = sorted(c["id"] for c in doc["categories"])
        self.label = {c: i + 1 for i, c in enumerate(cats)}
        anns = {}
        for a in doc["annotations"]:
            if not a.get("iscrowd"):
                anns.setdefault(a["image_id"], []).append(a)
        self.items = [(im, anns[im["id"]]) for im in sorted(doc["images"], key=lambda x: x["id"])
                      if im["id"] in anns]
        self.root, self.h, self.w, self.masks = images, height, width, masks

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        from PIL import Image
        info, anns = self.items[i]
        with Image.open(os.path.join(self.root, info["file_name"])) as im:
            im = im.convert("RGB")
            sx, sy = self.w / im.width, self.h / im.height
            im = im.resize((self.w, self.h))
            img = torch.frombuffer(bytearray(im.tobytes()), dtype=torch.uint8)
        img = img.view(self.h, self.w, 3).permute(2, 0, 1).float().div_(255)
        boxes = torch.tensor([[a["bbox"][0] * sx, a["bbox"][1] * sy, (a["bbox"][0] + a["bbox"][2]) * sx,
                               (a["bbox"][1] + a["bbox"][3]) * sy] for a in anns], dtype=torch.float32)
        target = {"boxes": boxes, "labels": torch.tensor([self.label[a["category_id"]] for a in anns])}
        if self.masks:
            target["masks"] = polygon_masks(anns, sx, sy, self.h, self.w)
        return img, target


def hflip(img, target, width):
    """The reference recipe's RandomHorizontalFlip, applied by the dataset."""
    img = img.flip(-1)
    boxes = target["boxes"].clone()
    boxes[:, [0, 2]] = width - target["boxes"][:, [2, 0]]
    target = dict(target, boxes=boxes)
    if "masks" in target:
        target["masks"] = target["masks"].flip(-1)
    return img, target


class Flipped(torch.utils.data.Dataset):
    """Flip each sample with probability 0.5, decided by a seeded generator per index."""

    def __init__(self, inner, width, seed):
        self.inner, self.width, self.seed = inner, width, seed

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        img, target = self.inner[i]
        if torch.rand(1, generator=torch.Generator().manual_seed(self.seed + 7919 * i)) < 0.5:
            return hflip(img, target, self.width)
        return img, target


class WorkCounter:
    """Counts the detection work of each iteration from what torchvision's own modules are
    given and return: forward hooks on the RPN and the mask RoI pooler, and wrappers around
    the RoI sampler and RetinaNet's anchor matcher. Counts stay tensors until read."""

    def __init__(self, model):
        self.counts = {}
        if isinstance(model, RetinaNet):
            model.proposal_matcher = _CountingMatcher(model.proposal_matcher, self)
            return
        model.rpn.register_forward_hook(
            lambda module, args, output: self.add("proposals", sum(len(b) for b in output[0])))
        heads = model.roi_heads
        sample = heads.select_training_samples

        def counted_sample(proposals, targets):
            out = sample(proposals, targets)
            self.add("sampled_rois", sum(len(p) for p in out[0]))
            self.add("positive_rois", sum((labels > 0).sum() for labels in out[2]))
            return out
        heads.select_training_samples = counted_sample
        if heads.mask_roi_pool is not None:
            heads.mask_roi_pool.register_forward_hook(
                lambda module, args, output: self.add("mask_rois", output.shape[0]))

    def add(self, key, value):
        self.counts[key] = self.counts.get(key, 0) + value

    def line(self, iteration):
        """The WORK line of the iteration just done (reads the counts), and a fresh count."""
        counts, self.counts = self.counts, {}
        return common.jsonlog.work_line(iteration, **counts)


class _CountingMatcher:
    def __init__(self, matcher, counter):
        self.matcher, self.counter = matcher, counter

    def __call__(self, quality):
        matched = self.matcher(quality)
        self.counter.add("positive_anchors", (matched >= 0).sum())
        return matched

    def __getattr__(self, name):
        return getattr(self.matcher, name)


# what torchvision's code fixes rather than a module attribute: smooth L1 with beta 1/9 in the RPN
# (rpn.py compute_loss) and the box head (roi_heads.py fastrcnn_loss), BCE objectness and
# cross-entropy classes, RetinaNet's sigmoid focal loss at its defaults (retinanet.py), and
# MultiScaleRoIAlign calling roi_align with aligned=False
TWO_STAGE_BETA = 1.0 / 9
RETINANET_FOCAL = (0.25, 2.0)
POOLER_ALIGNED = False


def as_run(args, model, optimizer, loader, amp_dtype, device):
    """(settings, implementation) of the SETTINGS line, read from torchvision's built model, the
    optimizer and the data loader: what this run really trains with, in asrun's words."""
    height, width = (int(v) for v in args.input_size.lower().split("x"))
    with torch.random.fork_rng(devices=[]):   # the transform's size draw must not move the run's RNG
        resized, _ = model.transform.resize(torch.zeros(3, height, width), None)
    body = model.backbone.body
    stages = [[body.conv1, body.bn1]] + [getattr(body, "layer%d" % i) for i in range(1, 5)]
    norm, norm_impl = asrun.norm(body.modules())
    dataset = loader.dataset
    flipped = isinstance(dataset, Flipped)
    inner = dataset.inner if flipped else dataset
    settings = {
        "images_per_device": loader.batch_size, "devices": 1, "input_size": list(resized.shape[-2:]),
        "precision": asrun.precision(amp_dtype, device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32),
        "data": "synthetic" if isinstance(inner, Synthetic) else "coco",
        "frozen_stages": asrun.frozen_stages(stages), "norm": norm, "loader_workers": loader.num_workers,
        "flip": flipped, "threads": torch.get_num_threads(),
        "init": "file:" + os.path.basename(args.weights) if args.weights else "random",
        "momentum": asrun.momentum(optimizer), "weight_decay": asrun.weight_decay(optimizer),
    }
    settings.update(asrun.normalized.schedule(
        optimizer.defaults["lr"], args.warmup_iters, args.warmup_factor,
        isinstance(loader.sampler, (torch.utils.data.RandomSampler, ResumedDraws)),
        (lr_steps(args), args.gamma)))
    if args.clip_grad_norm:
        settings["clip_grad_norm"] = args.clip_grad_norm
    implementation = {"batch_norm": norm_impl, "optimizer": asrun.optimizer(optimizer),
                      "memory_format": asrun.memory_format(model.modules())}
    if isinstance(model, RetinaNet):
        extra = model.backbone.fpn.extra_blocks
        settings.update(box_loss=model.head.regression_head._loss_type, cls_loss=asrun.focal(*RETINANET_FOCAL),
                        extra_levels_from="p5" if getattr(extra, "use_P5", False) else "c5",
                        anchors=asrun.anchors(model.anchor_generator.sizes, model.anchor_generator.aspect_ratios,
                                              model.anchor_generator.cell_anchors))
        return settings, implementation
    rpn, heads = model.rpn, model.roi_heads
    pool = heads.box_roi_pool
    beta = asrun.smooth_l1(TWO_STAGE_BETA)
    settings.update(
        rpn_pre_nms_train=int(rpn._pre_nms_top_n["training"]), rpn_post_nms_train=int(rpn._post_nms_top_n["training"]),
        rpn_batch_per_image=int(rpn.fg_bg_sampler.batch_size_per_image),
        rpn_positive_fraction=float(rpn.fg_bg_sampler.positive_fraction),
        roi_batch_per_image=int(heads.fg_bg_sampler.batch_size_per_image),
        roi_positive_fraction=float(heads.fg_bg_sampler.positive_fraction),
        roi_align_sampling_ratio=int(pool.sampling_ratio), roi_align_aligned=getattr(pool, "aligned", POOLER_ALIGNED),
        box_loss=asrun.two_stage_box_loss(beta, beta), cls_loss=asrun.TWO_STAGE_CLS_LOSS,
        anchors=asrun.anchors(rpn.anchor_generator.sizes, rpn.anchor_generator.aspect_ratios,
                              rpn.anchor_generator.cell_anchors))
    implementation["roi_align"] = asrun.ROI_ALIGN_TORCHVISION
    if heads.has_mask():
        convs = [m for m in heads.mask_head.modules() if isinstance(m, torch.nn.Conv2d)]
        roi_size = heads.mask_roi_pool.output_size[0]
        upsample = heads.mask_predictor.conv5_mask.stride[0]
        settings["mask_rois_per_image_max"] = asrun.normalized.mask_rois_cap(
            settings["roi_batch_per_image"], settings["roi_positive_fraction"])   # no cap of its own
        settings["mask_head"] = asrun.mask_head(len(convs), convs[-1].out_channels, roi_size, roi_size * upsample)
        implementation["mask_logits"] = "all %d classes" % heads.mask_predictor.mask_fcn_logits.out_channels
        from torchvision.models.detection import roi_heads, transform   # its postprocess pastes the masks
        implementation["mask_paste"] = asrun.mask_paste(transform.paste_masks_in_image, exact=False)
        implementation["mask_targets"] = asrun.mask_targets(roi_heads.project_masks_on_boxes,
                                                            asrun.MASK_TARGETS_UNALIGNED_SOFT)
    return settings, implementation


class ResumedDraws(list):
    """The random draws of a whole run less those of the iterations a resumed run already did."""


def lr_steps(args):
    return list(args.lr_steps)


def lr_at(iteration, args):
    """The learning rate of 0-based `iteration`: linear warmup from warmup_factor * lr, then
    multiplied by gamma once for every step at or before it."""
    decay = args.gamma ** sum(1 for step in lr_steps(args) if iteration >= step)
    if iteration >= args.warmup_iters:
        return args.lr * decay
    alpha = iteration / args.warmup_iters
    return args.lr * (args.warmup_factor * (1 - alpha) + alpha) * decay


def save_checkpoint(folder, iteration, model, optimizer):
    """Write the state after `iteration` iterations atomically; its path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "iter_%d.pth" % iteration)
    tmp = path + ".tmp"
    torch.save({"format": "detbench-torchvision-checkpoint", "iteration": iteration,
                "model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng": torch.get_rng_state()}, tmp)
    os.replace(tmp, path)
    return path


def collate(batch):
    return tuple(zip(*batch))


def loss_text(losses, history):
    parts = []
    for name, value in losses.items():
        history.setdefault(name, []).append(value)
        parts.append("%s: %.4f (%.4f)" % (name, value, sum(history[name]) / len(history[name])))
    return "  ".join(parts)


def main(argv=None):
    args = parse_args(argv)
    height, width = (int(v) for v in args.input_size.lower().split("x"))
    torch.manual_seed(args.seed)
    if args.precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    device = torch.device(args.device)
    model = build_model(args, height, width)
    if args.weights and not args.resume:
        try:
            print("loaded weights %s: %d tensors" % (
                args.weights, weights_map.load(model, args.weights, args.model, "torchvision")), flush=True)
        except weights_map.WeightsError as exc:
            print("error: %s" % exc, file=sys.stderr, flush=True)
            return 2
    model = model.to(device)
    model.train()
    masks = args.model == "mask_rcnn"
    n = args.iterations * args.batch_size
    if args.data == "synthetic":
        dataset = Synthetic(n, height, width, masks, args.seed)
    else:
        dataset = Coco(args.data, args.images, height, width, masks)
    if args.flip:
        dataset = Flipped(dataset, width, args.seed)
    if args.shuffle:
        sampler = torch.utils.data.RandomSampler(dataset, replacement=True, num_samples=n,
                                                 generator=torch.Generator().manual_seed(args.seed))
    else:   # the file's order, cycled: the same images at the same iteration as the other frameworks
        sampler = [k % len(dataset) for k in range(n)]
    first = 0
    if args.resume:     # the draws of the whole run, less those of the iterations already done
        state = torch.load(args.resume, map_location="cpu", weights_only=True)
        first = int(state["iteration"])
        model.load_state_dict(state["model"])
        rest = list(sampler)[first * args.batch_size:]
        sampler = ResumedDraws(rest) if args.shuffle else rest
        torch.set_rng_state(state["rng"])
        print("resuming %s after iteration %d" % (args.resume, first), flush=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler,
                                         num_workers=args.workers, collate_fn=collate, drop_last=True)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=args.lr, momentum=0.9, weight_decay=args.weight_decay)
    if args.resume:
        optimizer.load_state_dict(state["optimizer"])
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
    scaler = torch.amp.GradScaler(device.type) if args.precision == "fp16" else None
    cuda = device.type == "cuda"
    total = len(loader) + first
    width_n = len(str(total))
    print("torchvision %s torch %s model %s device %s images/iter %d input %dx%d norm %s "
          "trainable_layers %d threads %d rpn_pre_nms_train %d rpn_post_nms_train %d lr %g warmup %d "
          "shuffle %s" % (
              torchvision.__version__, torch.__version__, MODELS[args.model], device, args.batch_size,
              height, width, args.norm, args.trainable_layers, torch.get_num_threads(),
              args.rpn_pre_nms_train, args.rpn_post_nms_train, args.lr, args.warmup_iters, args.shuffle),
          flush=True)
    print(common.jsonlog.settings_line(*as_run(args, model, optimizer, loader, amp_dtype, device)), flush=True)
    common.breakdown_hooks(model, optimizer)
    work = WorkCounter(model)
    history = {}
    start = end = time.perf_counter()   # the first iteration's time starts here, with the loader
    batches = iter(loader)
    for i in range(first, total):
        fetch = time.perf_counter()
        images, targets = next(batches)
        data_time = time.perf_counter() - fetch
        for group in optimizer.param_groups:
            group["lr"] = lr_at(i, args)
        images = [im.to(device, non_blocking=True) for im in images]
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss_dict = model(images, targets)
            loss = sum(loss_dict.values())
        optimizer.zero_grad()
        if scaler is not None:
            scaler.scale(loss).backward()
            if args.clip_grad_norm:     # as torchvision's classification reference clips: unscaled first
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(params, args.clip_grad_norm)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            if args.clip_grad_norm:
                torch.nn.utils.clip_grad_norm_(params, args.clip_grad_norm)
            optimizer.step()
        values = {k: float(v.detach()) for k, v in loss_dict.items()}
        if not math.isfinite(sum(values.values())):
            # as torchvision's reference train_one_epoch does: a diverged run stops, it does not go on
            print("Loss is %s, stopping training" % sum(values.values()), flush=True)
            print(values, flush=True)
            return 1
        if cuda:
            torch.cuda.synchronize()
        now = time.perf_counter()
        iter_time, end = now - end, now
        # from here on, the time belongs to the next iteration
        if i % args.print_freq == 0 or i == total - 1:
            eta = datetime.timedelta(seconds=int(iter_time * (total - i - 1)))
            mem = torch.cuda.max_memory_allocated() / 1048576.0 if cuda else 0
            print("Epoch: [0]  [%*d/%d]  eta: %s  lr: %.6f  %s  time: %.4f  data: %.4f  max mem: %.0f" % (
                width_n, i, total, eta, optimizer.param_groups[0]["lr"],
                loss_text(dict(loss=sum(values.values()), **values), history), iter_time, data_time, mem),
                flush=True)
        print(work.line(i + 1), flush=True)
        if args.checkpoint_every and ((i + 1) % args.checkpoint_every == 0 or i == total - 1):
            print("checkpoint %s" % save_checkpoint(args.checkpoint_dir, i + 1, model, optimizer), flush=True)
    print("Epoch: [0] Total time: %s (%.4f s / it)" % (
        datetime.timedelta(seconds=int(end - start)), (end - start) / max(total - first, 1)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
