"""Batches for the training loop: synthetic on the device, or COCO through DataLoader workers.

Both yield (images [B, 3, H, W] float normalized on the device, targets) where targets hold
boxes [B, G, 4], labels [B, G] (0 = padding) and, for mask models, each object's mask as a
crop near it: mask_crops [B, G, Sh, Sw] uint8 and mask_affine [B, G, 4] (masks.py).
`start` skips that many batches: a resumed run sees the batches an uninterrupted one would.
Neither draws from torch's global random generator.

The canvas (H, W) is data.input_size, or with data.canvas=batch the batch's largest image
rounded up to a multiple of 32; data.aspect_grouping=true batches landscape and portrait
images apart (AspectGroupedSampler), so that fewer canvas pixels are padding.
"""
import functools

import torch

from . import coco, masks
from .augment import Augment

CANVAS_DIVISOR = 32     # data.canvas=batch: canvas sides are multiples of it (the coarsest stride)

_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


class SyntheticBatches:
    """Random boxes painted as class-coloured ellipses on noise. Image k of the global batch
    of iteration i depends only on (seed, i, k): N ranks see the same images as one rank
    with N times the batch."""

    def __init__(self, data_cfg, num_classes, with_masks, device, rank, world, seed, start=0):
        self.cfg = data_cfg
        self.start = start
        self.num_classes = num_classes
        self.with_masks = with_masks
        self.device = device
        self.rank, self.world, self.seed = rank, world, seed
        gen = torch.Generator().manual_seed(1234)
        colors = torch.rand((num_classes + 1, 3), generator=gen) * 2 - 1
        colors[0] = 0
        self.colors = colors.to(device)
        self.pixels = [0, 0]      # content and canvas pixels handed out, as CocoBatches counts them

    def __iter__(self):
        it = self.start
        h, w = self.cfg.input_size
        b = self.cfg.images_per_device
        filled = b * h * w     # synthetic images fill their canvas
        while True:
            batch = self.batch(it)
            self.pixels = [self.pixels[0] + filled, self.pixels[1] + filled]
            # every image is new (one endless pass) and none is mirrored
            first = it * b * self.world + self.rank * b
            self.views, self.epoch = [(first + j, False) for j in range(b)], 0
            yield batch
            it += 1

    def batch(self, iteration):
        b = self.cfg.images_per_device
        first = iteration * b * self.world + self.rank * b
        items = [self._image(first + j) for j in range(b)]
        return self._stack(items)

    def _image(self, index):
        if self.cfg.synthetic_pool:
            index %= self.cfg.synthetic_pool
        gen = torch.Generator(device=self.device).manual_seed(self.seed * 1_000_003 + index)
        h, w = self.cfg.input_size
        dev = self.device
        m = self.cfg.synthetic_max_boxes
        n = int(torch.randint(1, m + 1, (1,), generator=gen, device=dev).item()) if m else 0
        size = torch.tensor([w, h], device=dev, dtype=torch.float32)
        wh = (torch.rand((n, 2), generator=gen, device=dev) * 0.4 + 0.1) * size
        ctr = torch.rand((n, 2), generator=gen, device=dev) * size
        lo = torch.minimum((ctr - wh / 2).clamp(min=0), size - 8)
        hi = torch.maximum(torch.minimum(ctr + wh / 2, size), lo + 8)
        boxes = torch.cat([lo, hi], dim=1)
        labels = torch.randint(1, self.num_classes + 1, (n,), generator=gen, device=dev)
        ys = torch.arange(h, device=dev, dtype=torch.float32)[None, :, None] + 0.5
        xs = torch.arange(w, device=dev, dtype=torch.float32)[None, None, :] + 0.5
        c = (boxes[:, :2] + boxes[:, 2:]) / 2
        half = (boxes[:, 2:] - boxes[:, :2]) / 2
        inside = (((xs - c[:, 0, None, None]) / half[:, 0, None, None]) ** 2
                  + ((ys - c[:, 1, None, None]) / half[:, 1, None, None]) ** 2) <= 1
        image = torch.randn((3, h, w), generator=gen, device=dev) * 0.3
        if n:
            order = torch.arange(1, n + 1, device=dev)[:, None, None]
            top = (inside * order).amax(0)            # later boxes paint over earlier ones
            lab = torch.cat([labels.new_zeros(1), labels])
            image += self.colors[lab[top]].permute(2, 0, 1)
        out = {"image": image, "boxes": boxes, "labels": labels}
        if self.with_masks:
            out["mask_crops"], out["mask_affine"] = _ellipse_crops(boxes, c, half, h, w)
        return out

    def _stack(self, items):
        batch = coco.collate(items)
        batch.pop("pixels")
        images = batch.pop("images")
        return images, batch


def _ellipse_crops(boxes, centre, half, h, w):
    """The ellipses of SyntheticBatches as mask crops (masks.py) made on the device without a
    host sync: each from one pixel above and left of its box, in slots of (h // 2 + 4,
    w // 2 + 4) pixels (a box is at most half the canvas a side, so every crop is whole and
    exact). Canvas row h (column w) repeats the last one, as RoIAlign clamps there."""
    dev = boxes.device
    y0 = (boxes[:, 1].floor() - 1).clamp(min=0)
    x0 = (boxes[:, 0].floor() - 1).clamp(min=0)
    rows = y0[:, None] + torch.arange(h // 2 + 4, device=dev)
    cols = x0[:, None] + torch.arange(w // 2 + 4, device=dev)
    ys = rows.clamp(max=h - 1)[:, :, None] + 0.5
    xs = cols.clamp(max=w - 1)[:, None, :] + 0.5
    inside = (((xs - centre[:, 0, None, None]) / half[:, 0, None, None]) ** 2
              + ((ys - centre[:, 1, None, None]) / half[:, 1, None, None]) ** 2) <= 1
    inside &= (rows <= h)[:, :, None] & (cols <= w)[:, None, :]
    ones = torch.ones_like(x0)
    return inside.to(torch.uint8) * masks.INSIDE, torch.stack([ones, ones, -x0, -y0], dim=1)


class InfiniteShardedSampler(torch.utils.data.Sampler):
    """Endless epochs, reshuffled (or in the dataset's order); rank r takes every world-th
    index of each epoch. `start` skips that many of this rank's indices. With `positions`
    each index comes as (index, position): position p is the p-th index this rank hands out
    in the run (skipped ones counted) times world plus rank, so it is unique over all ranks."""

    def __init__(self, size, rank, world, seed, shuffle=True, start=0, positions=False):
        self.size, self.rank, self.world, self.seed = size, rank, world, seed
        self.shuffle = shuffle
        self.start = start
        self.positions = positions

    def __iter__(self):
        if not self.positions:
            yield from self._indices()
            return
        for k, index in enumerate(self._indices(), start=self.start):
            yield index, k * self.world + self.rank

    def shard_length(self):
        """How many indices this rank takes from each epoch."""
        padded = self.size
        while padded < self.world:
            padded *= 2
        return len(range(self.rank, padded, self.world))

    def order(self, epoch):
        """This rank's indices of an epoch, in the order they are handed out."""
        gen = torch.Generator().manual_seed(self.seed + epoch)
        perm = torch.randperm(self.size, generator=gen) if self.shuffle else torch.arange(self.size)
        while len(perm) < self.world:
            perm = torch.cat([perm, perm])
        return perm[self.rank::self.world].tolist()

    def _indices(self):
        epoch, skip = divmod(self.start, self.shard_length())
        while True:
            yield from self.order(epoch)[skip:]
            skip = 0
            epoch += 1


class AspectGroupedSampler(InfiniteShardedSampler):
    """InfiniteShardedSampler whose every `batch` consecutive indices are images of one aspect
    group (`groups[i]`: 0 landscape or square, 1 portrait), as far as an epoch allows.

    Each epoch's indices are reordered within the epoch, so each image is still handed out
    once per epoch, in a plan that depends only on (seed, epoch, rank): a resumed run
    (`start`) replays it. Walking the epoch's shuffled indices, a group's batch is complete
    when it holds `batch` images; batches go out in the order they complete. The images left
    over (fewer than `batch` of each group) end the epoch: they fill the batch it shares with
    the previous epoch where it does not start on a batch boundary, the one it shares with the
    next where it does not end on one, and in between at most one mixed batch."""

    def __init__(self, groups, batch, size, rank, world, seed, shuffle=True, start=0, positions=False):
        super().__init__(size, rank, world, seed, shuffle, start, positions)
        self.groups = list(groups)
        self.batch = batch

    def order(self, epoch):
        indices = super().order(epoch)
        b, length = self.batch, len(indices)
        head = (-epoch * length) % b           # slots left in the batch the last epoch began
        if length <= head:
            return indices
        tail = (length - head) % b             # the first slots of the batch the next epoch ends
        pending, full, rank_of = ([], []), [], {}
        for k, i in enumerate(indices):
            rank_of.setdefault(i, k)
            bucket = pending[self.groups[i]]
            bucket.append(i)
            if len(bucket) == b:
                full.append(list(bucket))
                bucket.clear()
        loose = pending[0] + pending[1]
        while len(loose) < head + tail:        # too few leftovers for both ends: open a batch
            loose += full.pop()
        loose.sort(key=rank_of.get)
        first, last = loose[:head], loose[len(loose) - tail:]
        middle = sorted(loose[head:len(loose) - tail], key=lambda i: (self.groups[i], rank_of[i]))
        return first + [i for group in full for i in group] + middle + last


class CocoBatches:
    """DataLoader over a COCO-format dataset, pinned and copied to the device one batch ahead.

    The workers decode, resize and pad (collate) the images and build the mask crops; the
    loader keeps 4 batches a worker in flight. `pixels` counts the image content and canvas
    pixels of the batches handed out so far (the padding fraction is 1 - content / canvas)."""

    def __init__(self, data_cfg, num_classes, with_masks, device, rank, world, seed, start=0):
        records, n_cats = coco.load_annotations(data_cfg.coco_json, data_cfg.coco_images)
        if n_cats > num_classes:
            raise coco.DataError(f"{data_cfg.coco_json} has {n_cats} categories, the model "
                                 f"has {num_classes} (set model.num_classes)")
        augment = Augment(data_cfg.flip_prob, tuple(data_cfg.scales), seed)
        dataset = coco.CocoDataset(records, data_cfg.input_size, data_cfg.max_gt, with_masks, augment,
                                   data_cfg.mask_crop)
        per_device = data_cfg.images_per_device
        order = (len(dataset), rank, world, seed, data_cfg.shuffle, start * per_device)
        if data_cfg.aspect_grouping:
            groups = [int(h > w) for h, w in coco.record_sizes(records)]
            sampler = AspectGroupedSampler(groups, per_device, *order, positions=augment.active)
        else:
            sampler = InfiniteShardedSampler(*order, positions=augment.active)
        if data_cfg.canvas == "batch":
            collate = functools.partial(coco.collate, divisor=CANVAS_DIVISOR, limit=tuple(data_cfg.input_size))
        else:
            collate = functools.partial(coco.collate, canvas=tuple(data_cfg.input_size))
        self.device = device
        self.per_device, self.start, self.shard = per_device, start, sampler.shard_length()
        self.views, self.epoch = None, None      # of the batch handed out last
        self.loader = torch.utils.data.DataLoader(
            dataset, batch_size=per_device, sampler=sampler,
            generator=torch.Generator().manual_seed(seed),  # its base seed, not the global stream
            num_workers=data_cfg.workers, collate_fn=collate,
            pin_memory=device.type == "cuda", persistent_workers=data_cfg.workers > 0,
            prefetch_factor=4 if data_cfg.workers > 0 else None)
        mean = torch.tensor(_MEAN, device=device).view(1, 3, 1, 1)
        std = torch.tensor(_STD, device=device).view(1, 3, 1, 1)
        self.scale, self.shift = 1.0 / std, -mean / std
        self.pixels = [0, 0]
        # the most crowd regions of one image (their padded slot in a captured step, graphs.py)
        self.max_crowd = max([len(r.get("crowd") or ()) for r in records] + [0]) if dataset.with_crowd else 0

    def _to_device(self, batch):
        pixels = batch.pop("pixels").tolist()
        views = [(i, bool(m)) for i, m in batch.pop("views").tolist()]
        batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
        images = batch.pop("images").float() * self.scale + self.shift
        return images, batch, pixels, views

    def __iter__(self):
        """Batches in order; after each is handed out, `views` holds its images' (id, mirrored) and
        `epoch` the sampler's epoch its first image came from (epochs of `shard` images each)."""
        source = iter(self.loader)
        ahead = self._to_device(next(source))
        handed = self.start * self.per_device        # this rank's images handed out before this batch
        while True:
            images, targets, pixels, views = ahead
            ahead = self._to_device(next(source))  # the copy overlaps the step on CUDA
            self.pixels = [a + b for a, b in zip(self.pixels, pixels)]
            self.views, self.epoch = views, handed // self.shard
            handed += len(views)
            yield images, targets


def build_batches(cfg, device, rank, world, start=0):
    with_masks = cfg.model.name == "mask"
    kind = SyntheticBatches if cfg.data.source == "synthetic" else CocoBatches
    return kind(cfg.data, cfg.model.num_classes, with_masks, device, rank, world, cfg.train.seed, start)
