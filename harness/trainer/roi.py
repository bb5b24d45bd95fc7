"""Multi-level RoIAlign: each box is pooled from the pyramid level that matches its scale."""
import math

import torch
import torch.nn as nn
from torchvision.ops import roi_align


class MultiLevelRoIAlign(nn.Module):
    def __init__(self, *, output_size=7, strides=(4, 8, 16, 32), sampling_ratio=2, aligned=False,
                 canonical_size=224, canonical_level=4):
        super().__init__()
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
