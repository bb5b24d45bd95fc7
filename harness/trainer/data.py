"""Batches for the training loop: synthetic on the device, or COCO through DataLoader workers.

Both yield (images [B, 3, H, W] float normalized on the device, targets) where targets hold
boxes [B, G, 4], labels [B, G] (0 = padding) and, for mask models, masks [B, G, H, W] uint8.
`start` skips that many batches: a resumed run sees the batches an uninterrupted one would.
Neither draws from torch's global random generator.
"""
import torch

from . import coco
from .augment import Augment

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

    def __iter__(self):
        it = self.start
        while True:
            yield self.batch(it)
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
            out["masks"] = inside.to(torch.uint8)
        return out

    def _stack(self, items):
        batch = coco.collate(items)
        images = batch.pop("images")
        return images, batch


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

    def _indices(self):
        padded = self.size
        while padded < self.world:
            padded *= 2
        epoch, skip = divmod(self.start, len(range(self.rank, padded, self.world)))
        while True:
            gen = torch.Generator().manual_seed(self.seed + epoch)
            perm = torch.randperm(self.size, generator=gen) if self.shuffle else torch.arange(self.size)
            while len(perm) < self.world:
                perm = torch.cat([perm, perm])
            yield from perm[self.rank::self.world][skip:].tolist()
            skip = 0
            epoch += 1


class CocoBatches:
    """DataLoader over a COCO-format dataset, pinned and copied to the device one batch ahead."""

    def __init__(self, data_cfg, num_classes, with_masks, device, rank, world, seed, start=0):
        records, n_cats = coco.load_annotations(data_cfg.coco_json, data_cfg.coco_images)
        if n_cats > num_classes:
            raise coco.DataError(f"{data_cfg.coco_json} has {n_cats} categories, the model "
                                 f"has {num_classes} (set model.num_classes)")
        augment = Augment(data_cfg.flip_prob, tuple(data_cfg.scales), seed)
        dataset = coco.CocoDataset(records, data_cfg.input_size, data_cfg.max_gt, with_masks, augment)
        self.device = device
        self.loader = torch.utils.data.DataLoader(
            dataset, batch_size=data_cfg.images_per_device,
            sampler=InfiniteShardedSampler(len(dataset), rank, world, seed, data_cfg.shuffle,
                                           start * data_cfg.images_per_device, positions=augment.active),
            generator=torch.Generator().manual_seed(seed),  # its base seed, not the global stream
            num_workers=data_cfg.workers, collate_fn=coco.collate,
            pin_memory=device.type == "cuda", persistent_workers=data_cfg.workers > 0,
            prefetch_factor=4 if data_cfg.workers > 0 else None)
        mean = torch.tensor(_MEAN, device=device).view(1, 3, 1, 1)
        std = torch.tensor(_STD, device=device).view(1, 3, 1, 1)
        self.scale, self.shift = 1.0 / std, -mean / std

    def _to_device(self, batch):
        batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
        images = batch.pop("images").float() * self.scale + self.shift
        return images, batch

    def __iter__(self):
        source = iter(self.loader)
        ahead = self._to_device(next(source))
        while True:
            current = ahead
            ahead = self._to_device(next(source))  # the copy overlaps the step on CUDA
            yield current


def build_batches(cfg, device, rank, world, start=0):
    with_masks = cfg.model.name == "mask"
    kind = SyntheticBatches if cfg.data.source == "synthetic" else CocoBatches
    return kind(cfg.data, cfg.model.num_classes, with_masks, device, rank, world, cfg.train.seed, start)
