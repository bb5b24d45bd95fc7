"""detbench's replica of torchvision's detection training recipe (references/detection).

torchvision ships no training loop in its package: its published recipe is the
references/detection scripts of the pytorch/vision repository. Where their source at the
pinned release's tag is present, the torchvision row runs them unchanged
(torchvision_reference.py); on a machine without it, this file runs in the framework's pinned
env (it imports torch; harness does not) and does what those scripts do where time or accuracy
depend on it:

- the data: a RandomHorizontalFlip with p=0.5 drawn at every draw of an image; a RandomSampler
  that goes through the data set without replacement, a new permutation each epoch; batches
  grouped by aspect ratio as GroupedBatchSampler groups them (create_aspect_ratio_groups with
  the default factor 3: an epoch gives len(data) // batch batches, the leftovers of the groups
  filled up from their own images, fullest first);
- the step: SGD (momentum 0.9, weight decay 1e-4) over the parameters that train, a linear
  warmup in epoch 0 from 1/1000 of the rate over min(1000, batches per epoch - 1) iterations
  (torch's LinearLR, stepped each iteration) and a MultiStepLR at the epochs 16 and 22 (x0.1,
  stepped each epoch), a diverged loss stopping the run;
- the log: the reference MetricLogger line at every iteration, with the epoch and the batch
  within it:

    Epoch: [0]  [ 3/40]  eta: 0:00:05  lr: 0.000100  loss: 1.2345 (1.3456)  ...  time: 0.2762  data: 0.0031  max mem: 0

``time`` runs from the end of the previous iteration to the end of this one (data
included, and the printing of the previous iteration's lines), ``data`` is the wait for
the batch; both are printed for THIS iteration (window 1), so the scraper reads exact
per-iteration times (scrape option window=1). After it, one ``DETBENCH_WORK {json}`` line
gives the work of the iteration (proposals the RPN kept, RoIs sampled, positive RoIs, mask
RoIs; RetinaNet: positive anchors, summed over the batch's images) and one ``DETBENCH_DATA
{json}`` line what it drew (each image's id, whether the flip mirrored it, the epoch).

What still differs from the reference, named in the SETTINGS line's ``training_code`` part
(`recipe_differences`): this loop is detbench's own (the same steps, not the scripts'
code); every image is resized to --input-size in the data set (the model's transform then
keeps it), not by the transform from 800/1333; the flips and each epoch's permutation are
drawn from generators seeded by (seed, draw) and (seed, epoch) rather than torch's global one,
so a resumed run draws what the whole run drew; the run stops after --iterations, not at the
end of an epoch, with no evaluation between epochs. ``--no-flip``, ``--no-shuffle`` (the
file's order each epoch) and ``--schedule declared`` (the scenario's or the accuracy recipe's
warmup, and LR steps in iterations, instead of the reference's) depart from the recipe and
are named there too.
No weights are downloaded: weights=None, weights_backbone=None; ``--weights FILE`` starts
from a file of `detbench weights make` instead of torchvision's random initialisation. By default the backbone
is built the way the reference recipe trains it from ImageNet weights (FrozenBatchNorm,
conv1 and layer1 frozen: trainable_backbone_layers=3); ``--norm bn --trainable-layers 5``
gives torchvision's own from-scratch default instead.
``--depth 18`` builds the small scale (a ResNet-18 FPN: torchvision's resnet18 body under the same
extractor). For accuracy runs ``--checkpoint-every N --checkpoint-dir DIR`` writes the model and
optimizer state after every N-th iteration and the last (``iter_<N>.pth``, then one line
``checkpoint PATH``, as the bundled trainer prints it), ``--lr-steps`` and ``--gamma`` decay the
learning rate (with ``--schedule declared``), and ``--resume FILE`` goes on after a checkpoint's
iteration with the same images, flips and rates as the whole run.
Before the first iteration one ``DETBENCH_SETTINGS {json}`` line gives the settings read from
the built model, optimizer and loader (asrun.py), and how RoIAlign, the norms, the optimizer
step and the mask logits run, and which recipe ran.
"""
import argparse
import bisect
import datetime
import itertools
import json
import math
import os
import sys
import time
import warnings

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
    from harness.drivers import torchvision_reference as reference
except ImportError:
    import asrun                                # run as a script in the framework's pinned env
    import common
    import torchvision_reference as reference
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
    p.add_argument("--lr", type=float, default=0.0025, help="the reference's 0.02 for 8 devices of 2 images, "
                   "scaled as its docstring says: 0.02 / 8 per device")
    p.add_argument("--schedule", choices=["reference", "declared"], default="reference",
                   help="reference: the recipe's warmup in epoch 0 and MultiStepLR at epochs 16, 22; declared: "
                        "--warmup-iters, --warmup-factor and --lr-steps (iterations), as detbench declares them")
    p.add_argument("--warmup-iters", type=int, default=0,
                   help="--schedule declared: linear warmup over this many iterations (0: none)")
    p.add_argument("--warmup-factor", type=float, default=1.0 / 3,
                   help="--schedule declared: learning-rate factor at iteration 0")
    p.add_argument("--no-shuffle", dest="shuffle", action="store_false",
                   help="take each epoch's images in the file's order (default: a new permutation each epoch)")
    p.add_argument("--no-flip", dest="flip", action="store_false",
                   help="skip the reference's random horizontal flip (p=0.5 at every draw)")
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

    def image_id(self, i):
        return i

    def aspect_ratio(self, i):
        return self.w / self.h

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

    def image_id(self, i):
        return int(self.items[i][0]["id"])

    def aspect_ratio(self, i):
        """width / height of the image as the annotation file lists it (the reference's COCO fast path);
        the file's header where the entry has no size."""
        info = self.items[i][0]
        if isinstance(info.get("width"), (int, float)) and isinstance(info.get("height"), (int, float)) \
                and info["height"]:
            return float(info["width"]) / float(info["height"])
        from PIL import Image
        with Image.open(os.path.join(self.root, info["file_name"])) as im:
            return float(im.width) / float(im.height)

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


FLIP_P = 0.5                  # the reference's RandomHorizontalFlip (presets, data augmentation "hflip")
ASPECT_GROUP_FACTOR = 3       # train.py --aspect-ratio-group-factor, its default
WARMUP_FACTOR = 1.0 / 1000    # engine.train_one_epoch: LinearLR in epoch 0
WARMUP_MAX = 1000             # ... over min(1000, batches per epoch - 1) iterations
LR_STEP_EPOCHS = (16, 22)     # train.py --lr-steps, MultiStepLR at these epochs
LR_GAMMA = 0.1                # train.py --lr-gamma
MOMENTUM = 0.9                # train.py --momentum
VIEW = "view"                 # the target key that carries (image id, mirrored, epoch) to the loop


class Drawn(torch.utils.data.Dataset):
    """The reference's training transform as far as it draws anything: a horizontal flip with
    probability `p` at every draw of an image (so an image is mirrored in some draws and not in
    others). A key is (index, draw, epoch) from EpochBatches; the draw's flip comes from a
    generator seeded by (seed, draw), so a resumed run draws what the whole run drew. Each target
    carries its VIEW for the DATA line, which the loop takes off before the model sees it."""

    def __init__(self, inner, width, p, seed):
        self.inner, self.width, self.p, self.seed = inner, width, p, seed

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, key):
        index, draw, epoch = key
        img, target = self.inner[index]
        mirrored = self.p > 0 and float(
            torch.rand(1, generator=torch.Generator().manual_seed(self.seed * 1000003 + draw))) < self.p
        if mirrored:
            img, target = hflip(img, target, self.width)
        return img, dict(target, **{VIEW: torch.tensor([self.inner.image_id(index), int(mirrored), epoch])})


def aspect_groups(ratios, k=ASPECT_GROUP_FACTOR):
    """Each image's aspect-ratio group as the reference's create_aspect_ratio_groups gives it: the
    index of its width/height among 2k+1 bin edges spaced evenly in log2 from 1/2 to 2 (k=0: one
    edge at 1), counted as bisect_right counts."""
    import numpy as np
    edges = sorted((2 ** np.linspace(-1, 1, 2 * k + 1)).tolist()) if k > 0 else [1.0]
    return [bisect.bisect_right(edges, r) for r in ratios]


def grouped_batches(order, groups, batch, count):
    """One epoch's batches as the reference's GroupedBatchSampler forms them from the sampler's
    `order`: each group's images collected in order, a batch handed out when its group holds
    `batch`; once the order is spent, the groups' leftovers (fullest first, ties in the order the
    groups last began a batch) are topped up from the same group's images of this epoch, repeated
    from its first, until `count` batches (len(data) // batch) are out."""
    pending, seen, out = {}, {}, []
    for i in order:
        g = groups[i]
        pending.setdefault(g, []).append(i)
        seen.setdefault(g, []).append(i)
        if len(pending[g]) == batch:
            out.append(pending.pop(g))
            pending[g] = []       # the group begins a new batch, placed after the others
    for g in sorted(pending, key=lambda key: len(pending[key]), reverse=True):
        if len(out) >= count:
            break
        fill = pending[g]
        fill += [seen[g][k % len(seen[g])] for k in range(batch - len(fill))]
        out.append(fill)
    return out


class EpochBatches:
    """The replica's batch sampler: epochs without end, each a permutation of the data set (a
    RandomSampler without replacement, drawn anew each epoch from a generator seeded by (seed,
    epoch); the file's order with shuffle off) grouped into len(data) // batch batches by aspect
    ratio (grouped_batches). Yields lists of (index, draw, epoch): draw counts every image handed
    out over the run. `start` skips that many batches (a resumed run)."""

    def __init__(self, groups, batch, seed, shuffle=True, start=0):
        self.groups, self.batch, self.seed, self.shuffle, self.start = list(groups), batch, seed, shuffle, start
        self.per_epoch = len(self.groups) // batch

    def __len__(self):
        return self.per_epoch

    def order(self, epoch):
        n = len(self.groups)
        if not self.shuffle:
            return list(range(n))
        return torch.randperm(n, generator=torch.Generator().manual_seed(self.seed * 1000003 + epoch)).tolist()

    def __iter__(self):
        draw, skip = 0, self.start
        for epoch in itertools.count():
            for batch in grouped_batches(self.order(epoch), self.groups, self.batch, self.per_epoch):
                if skip:
                    skip -= 1
                else:
                    yield [(i, draw + k, epoch) for k, i in enumerate(batch)]
                draw += len(batch)


class ReferenceSchedule:
    """The reference's learning rate on the optimizer, through torch's own schedulers as
    train.py and engine.py drive them: MultiStepLR at LR_STEP_EPOCHS, stepped at each epoch's end,
    and in epoch 0 a LinearLR from WARMUP_FACTOR over min(WARMUP_MAX, batches per epoch - 1)
    iterations, stepped after each optimizer step."""

    def __init__(self, optimizer, per_epoch):
        self.optimizer, self.per_epoch = optimizer, per_epoch
        self.warmup_iters = min(WARMUP_MAX, per_epoch - 1)
        self.epochs = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=list(LR_STEP_EPOCHS),
                                                           gamma=LR_GAMMA)
        self.warm = None

    def begin(self, i):
        """Before the step of 0-based iteration i."""
        epoch, j = divmod(i, self.per_epoch)
        if j == 0 and i > 0:
            self.epochs.step()        # the epoch before ended
            self.warm = None
        if i == 0:
            self.warm = torch.optim.lr_scheduler.LinearLR(self.optimizer, start_factor=WARMUP_FACTOR,
                                                          total_iters=self.warmup_iters)

    def end(self):
        """After the optimizer's step."""
        if self.warm is not None:
            self.warm.step()

    def replay(self, iterations):
        """The rate after `iterations` iterations, stepped without training (a resumed run)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # torch warns of scheduler steps before optimizer steps
            for i in range(iterations):
                self.begin(i)
                self.end()


def build_loader(args, dataset, first=0):
    """The replica's DataLoader over `dataset` (Synthetic or Coco): Drawn flips, EpochBatches."""
    height, width = (int(v) for v in args.input_size.lower().split("x"))
    groups = aspect_groups([dataset.aspect_ratio(i) for i in range(len(dataset))])
    drawn = Drawn(dataset, width, FLIP_P if args.flip else 0.0, args.seed)
    batches = EpochBatches(groups, args.batch_size, args.seed, args.shuffle, start=first)
    return torch.utils.data.DataLoader(drawn, batch_sampler=batches, num_workers=args.workers, collate_fn=collate)


def recipe_differences(args, input_size):
    """The SETTINGS line's `training_code` part: which recipe ran, and what still differs from it."""
    out = ["detbench's replica of references/detection (torchvision %s; %s)"
           % (torchvision.__version__.split("+")[0],
              getattr(args, "replica_because", None) or "its scripts are not on this machine"),
           "its own loop, with the reference's sampler, flips, grouping, SGD and line",
           "images resized to %dx%d in the data set, not by the model's transform from 800/1333" % input_size,
           "flips and epoch permutations from generators seeded per draw and per epoch, not torch's global one",
           "stops after %d iterations, no evaluation between epochs" % args.iterations]
    if not args.flip:
        out.append("no flip (--no-flip)")
    if not args.shuffle:
        out.append("each epoch in the file's order (--no-shuffle)")
    if args.schedule == "declared":
        out.append("detbench's declared warmup and LR steps, not the recipe's")
    if args.weight_decay != 1e-4:
        out.append("weight decay %g" % args.weight_decay)
    return "; ".join(out)


class WorkCounter(common.WorkCounts):
    """Counts the detection work of each iteration from what torchvision's own modules are
    given and return: forward hooks on the RPN and the mask RoI pooler, and wrappers around
    the RoI sampler and RetinaNet's anchor matcher. Counts stay tensors until read."""

    def __init__(self, model):
        super().__init__()
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


def replica_data(loader):
    """What the replica's loader draws, for as_run: images per batch, flip, shuffle, batches per
    epoch (None for a loader not of the replica) and whether the images are synthetic."""
    dataset = loader.dataset
    drawn = dataset if isinstance(dataset, Drawn) else None
    inner = drawn.inner if drawn is not None else dataset
    batches = loader.batch_sampler if isinstance(loader.batch_sampler, EpochBatches) else None
    return {"batch": batches.batch if batches is not None else loader.batch_size,
            "flip": bool(drawn is not None and drawn.p > 0), "shuffle": bool(batches is not None and batches.shuffle),
            "per_epoch": len(batches) if batches is not None else None, "synthetic": isinstance(inner, Synthetic),
            "recipe": None}


def as_run(args, model, optimizer, loader, amp_dtype, device, data=None):
    """(settings, implementation) of the SETTINGS line, read from torchvision's built model, the
    optimizer and the data loader: what this run really trains with, in asrun's words. `data`:
    what the loader draws (replica_data, read from the replica's loader where not given) and the
    recipe text (recipe_differences where None)."""
    height, width = (int(v) for v in args.input_size.lower().split("x"))
    with torch.random.fork_rng(devices=[]):   # the transform's size draw must not move the run's RNG
        resized, _ = model.transform.resize(torch.zeros(3, height, width), None)
    body = model.backbone.body
    stages = [[body.conv1, body.bn1]] + [getattr(body, "layer%d" % i) for i in range(1, 5)]
    norm, norm_impl = asrun.norm(body.modules())
    data = data or replica_data(loader)
    settings = {
        "images_per_device": data["batch"], "devices": 1, "input_size": list(resized.shape[-2:]),
        "precision": asrun.precision(amp_dtype, device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32),
        "data": "synthetic" if data["synthetic"] else "coco",
        "frozen_stages": asrun.frozen_stages(stages), "norm": norm, "loader_workers": loader.num_workers,
        "flip": data["flip"], "threads": torch.get_num_threads(),
        "init": "file:" + os.path.basename(args.weights) if args.weights else "random",
        "momentum": asrun.momentum(optimizer), "weight_decay": asrun.weight_decay(optimizer),
    }
    per_epoch = data["per_epoch"]
    if args.schedule == "reference" and per_epoch is not None:
        settings.update(asrun.normalized.schedule(
            optimizer.defaults["lr"], min(WARMUP_MAX, per_epoch - 1), WARMUP_FACTOR, data["shuffle"],
            ([e * per_epoch for e in LR_STEP_EPOCHS], LR_GAMMA)))
    else:
        settings.update(asrun.normalized.schedule(
            optimizer.defaults["lr"], args.warmup_iters, args.warmup_factor, data["shuffle"],
            (lr_steps(args), args.gamma)))
    if args.clip_grad_norm:
        settings["clip_grad_norm"] = args.clip_grad_norm
    implementation = {"batch_norm": norm_impl, "optimizer": asrun.optimizer(optimizer),
                      "memory_format": asrun.memory_format(model.modules()),
                      "training_code": data["recipe"] or recipe_differences(args, tuple(settings["input_size"]))}
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
    found = reference.find()
    if found is not None:      # the recipe's own scripts at the pinned tag, where this cell can take them
        args.replica_because = reference.refusal(args)
        if args.replica_because is None:
            return reference.run(args, found)
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
    if args.data == "synthetic":   # as many images as the run draws: one epoch, each image drawn once
        dataset = Synthetic(args.iterations * args.batch_size, height, width, masks, args.seed)
    else:
        dataset = Coco(args.data, args.images, height, width, masks)
    if len(dataset) < args.batch_size:
        print("error: %d training images, fewer than one batch of %d" % (len(dataset), args.batch_size),
              file=sys.stderr, flush=True)
        return 2
    first = 0
    state = None
    if args.resume:
        state = torch.load(args.resume, map_location="cpu", weights_only=True)
        first = int(state["iteration"])
        model.load_state_dict(state["model"])
    loader = build_loader(args, dataset, first)
    per_epoch = len(loader)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=args.lr, momentum=MOMENTUM, weight_decay=args.weight_decay)
    schedule = ReferenceSchedule(optimizer, per_epoch) if args.schedule == "reference" else None
    if state is not None:          # the rates and draws of the whole run, less the iterations already done
        if schedule is not None:
            schedule.replay(first)
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        print("resuming %s after iteration %d" % (args.resume, first), flush=True)
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
    scaler = torch.amp.GradScaler(device.type) if args.precision == "fp16" else None
    cuda = device.type == "cuda"
    total = args.iterations
    width_n = len(str(per_epoch))
    print("torchvision %s torch %s model %s device %s images/iter %d input %dx%d norm %s "
          "trainable_layers %d threads %d rpn_pre_nms_train %d rpn_post_nms_train %d lr %g schedule %s "
          "shuffle %s flip %s batches/epoch %d" % (
              torchvision.__version__, torch.__version__, MODELS[args.model], device, args.batch_size,
              height, width, args.norm, args.trainable_layers, torch.get_num_threads(),
              args.rpn_pre_nms_train, args.rpn_post_nms_train, args.lr, args.schedule, args.shuffle, args.flip,
              per_epoch),
          flush=True)
    print(common.jsonlog.settings_line(*as_run(args, model, optimizer, loader, amp_dtype, device)), flush=True)
    common.breakdown_hooks(model, optimizer)
    work = WorkCounter(model)
    history = {}
    start = end = epoch_start = time.perf_counter()   # the first iteration's time starts here, with the loader
    batches = iter(loader)
    for i in range(first, total):
        epoch, j = divmod(i, per_epoch)
        if j == 0 and i > first:
            epoch_start = end
        fetch = time.perf_counter()
        images, targets = next(batches)
        data_time = time.perf_counter() - fetch
        views = [t.pop(VIEW).tolist() for t in targets]
        if schedule is not None:
            schedule.begin(i)
        else:
            for group in optimizer.param_groups:
                group["lr"] = lr_at(i, args)
        lr = optimizer.param_groups[0]["lr"]
        images = [im.to(device, non_blocking=True) for im in images]
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss_dict = model(images, targets)
            loss = sum(loss_dict.values())
        values = {k: float(v.detach()) for k, v in loss_dict.items()}
        if not math.isfinite(sum(values.values())):
            # as torchvision's reference train_one_epoch does: a diverged run stops before its step
            print("Loss is %s, stopping training" % sum(values.values()), flush=True)
            print(values, flush=True)
            return 1
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
        if schedule is not None:
            schedule.end()
        if cuda:
            torch.cuda.synchronize()
        now = time.perf_counter()
        iter_time, end = now - end, now
        # from here on, the time belongs to the next iteration
        if j % args.print_freq == 0 or j == per_epoch - 1 or i == total - 1:
            eta = datetime.timedelta(seconds=int(iter_time * (per_epoch - j - 1)))
            mem = torch.cuda.max_memory_allocated() / 1048576.0 if cuda else 0
            print("Epoch: [%d]  [%*d/%d]  eta: %s  lr: %.6f  %s  time: %.4f  data: %.4f  max mem: %.0f" % (
                epoch, width_n, j, per_epoch, eta, lr,
                loss_text(dict(loss=sum(values.values()), **values), history), iter_time, data_time, mem),
                flush=True)
        print(work.line(i + 1), flush=True)
        print(common.jsonlog.data_line(i + 1, views[0][2], [(v[0], v[1]) for v in views]), flush=True)
        if j == per_epoch - 1 or i == total - 1:
            ran = i + 1 - max(first, epoch * per_epoch)     # this epoch's iterations in this process
            print("Epoch: [%d] Total time: %s (%.4f s / it)" % (
                epoch, datetime.timedelta(seconds=int(end - epoch_start)), (end - epoch_start) / ran), flush=True)
        if args.checkpoint_every and ((i + 1) % args.checkpoint_every == 0 or i == total - 1):
            print("checkpoint %s" % save_checkpoint(args.checkpoint_dir, i + 1, model, optimizer), flush=True)
    print("Training time %s" % datetime.timedelta(seconds=int(end - start)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
