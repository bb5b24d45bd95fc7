"""Multi-level RoIAlign: each box is pooled from the pyramid level that matches its scale.

The plain path pools each level's boxes with one call per level, which needs each level's
box count on the host. The sync-free path (`sync_free=True`) pools every box in one call
from an atlas: the levels side by side in one map, each with a one-pixel border that repeats
its edge, and each box moved into its level's place. Bilinear sampling reads the repeated
edge where the plain kernel clamps to the edge, so both give the same values.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.ops import roi_align


class MultiLevelRoIAlign(nn.Module):
    def __init__(self, *, output_size=7, strides=(4, 8, 16, 32), sampling_ratio=2, aligned=False,
                 canonical_size=224, canonical_level=4, sync_free=False):
        super().__init__()
        self.sync_free = sync_free
        self.output_size = (output_size, output_size)
        self.strides = tuple(strides)
        self.sampling_ratio = sampling_ratio
        self.aligned = aligned
        self.canonical_size = canonical_size
        self.canonical_level = canonical_level
        self.min_level = int(math.log2(self.strides[0]))
        self.max_level = int(math.log2(self.strides[-1]))

    def levels(self, boxes):
        size = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).clamp(min=0).sqrt()
        lvl = torch.floor(self.canonical_level + torch.log2(size / self.canonical_size + 1e-6))
        return lvl.clamp(self.min_level, self.max_level).long() - self.min_level

    def forward(self, feats, rois):
        """feats: pyramid maps (finest first, only the first len(strides) are used);
        rois: [K, 5] rows of (image index, x1, y1, x2, y2) -> [K, C, S, S]."""
        feats = feats[: len(self.strides)]
        rois = rois.float()
        lvl = self.levels(rois[:, 1:])
        if self.sync_free:
            return self._pool_atlas(feats, rois, lvl)
        order, pooled = [], []
        for i, (f, stride) in enumerate(zip(feats, self.strides)):
            idx = (lvl == i).nonzero().squeeze(1)
            if idx.numel() == 0:
                continue
            order.append(idx)
            pooled.append(roi_align(f, rois[idx], self.output_size, 1.0 / stride,
                                    self.sampling_ratio, aligned=self.aligned))
        if not pooled:
            return rois.new_zeros((0, feats[0].shape[1]) + self.output_size)
        order = torch.cat(order)
        pooled = torch.cat([p.to(pooled[0].dtype) for p in pooled])
        # rows come back grouped by level; put them back in roi order with one gather
        return pooled[torch.argsort(order)]

    def _pool_atlas(self, feats, rois, lvl):
        atlas, origins = atlas_of(feats)
        scale = rois.new_tensor([1.0 / s for s in self.strides])[lvl]
        origin = rois.new_tensor(origins)[lvl]            # [K, 2]: the level's (x, y) in the atlas
        boxes = rois[:, 1:] * scale[:, None] + origin.repeat(1, 2)
        placed = torch.cat([rois[:, :1], boxes], dim=1)
        return roi_align(atlas, placed, self.output_size, 1.0, self.sampling_ratio, aligned=self.aligned)


def atlas_of(feats):
    """Pyramid levels [B, C, Hi, Wi] -> one map [B, C, max(Hi) + 2, sum(Wi + 2)] holding them
    side by side, each inside a one-pixel border that repeats its edge (rows below a shorter
    level are zeros no box reaches), and the (x, y) of each level's first pixel in it."""
    height = max(f.shape[-2] for f in feats) + 2
    parts, origins, x = [], [], 0
    for f in feats:
        part = F.pad(f, (1, 1, 1, 1), mode="replicate")
        parts.append(F.pad(part, (0, 0, 0, height - part.shape[-2])))
        origins.append((x + 1.0, 1.0))
        x += part.shape[-1]
    return torch.cat(parts, dim=-1), origins
