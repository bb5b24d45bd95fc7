"""Multi-level RoIAlign: each box is pooled from the pyramid level that matches its scale.

The plain path pools each level's boxes with one call per level, which needs each level's
box count on the host. The sync-free path (`sync_free=True`) pools every box in one call
from an atlas: the levels side by side in one map, each with a one-pixel border that repeats
its edge, and each box moved into its level's place. Bilinear sampling reads the repeated
edge where the plain kernel clamps to the edge, so both give the same values.
"""
import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.ops import roi_align

# torch marks its CSR tensors beta with a warning on first use; the sparse path's tests pin its values
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")


class MultiLevelRoIAlign(nn.Module):
    def __init__(self, *, output_size=7, strides=(4, 8, 16, 32), sampling_ratio=2, aligned=False,
                 canonical_size=224, canonical_level=4, sync_free=False, sparse=False):
        super().__init__()
        if sparse and sampling_ratio < 1:
            raise ValueError("sparse RoIAlign needs a fixed sampling ratio (>= 1), not adaptive sampling")
        self.sync_free = sync_free
        self.sparse = sparse
        self.output_size = (output_size, output_size)
        self.strides = tuple(strides)
        self.sampling_ratio = sampling_ratio
        self.aligned = aligned
        self.canonical_size = canonical_size
        self.canonical_level = canonical_level
        self.min_level = int(math.log2(self.strides[0]))
        self.max_level = int(math.log2(self.strides[-1]))
        self._levels_on_device = {}

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
        if self.sparse:
            return self._pool_sparse(feats, rois, lvl)
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
            return feats[0].new_zeros((0, feats[0].shape[1]) + self.output_size)
        order = torch.cat(order)
        pooled = torch.cat([p.to(pooled[0].dtype) for p in pooled])
        # rows come back grouped by level; put them back in roi order with one gather
        return pooled[torch.argsort(order)]

    def _pool_atlas(self, feats, rois, lvl):
        atlas, origins = atlas_of(feats)
        # each level's scale and (x, y) in the atlas, made on the device once per pyramid shape:
        # a step copies nothing from the host (a CUDA graph cannot capture that copy)
        key = (str(rois.device), tuple(tuple(f.shape[-2:]) for f in feats))
        if key not in self._levels_on_device:
            self._levels_on_device[key] = (rois.new_tensor([1.0 / s for s in self.strides]), rois.new_tensor(origins))
        scales, places = self._levels_on_device[key]
        scale = scales[lvl]
        origin = places[lvl]            # [K, 2]: the level's (x, y) in the atlas
        boxes = rois[:, 1:] * scale[:, None] + origin.repeat(1, 2)
        placed = torch.cat([rois[:, :1], boxes], dim=1)
        pooled = roi_align(atlas, placed, self.output_size, 1.0, self.sampling_ratio, aligned=self.aligned)
        # CPU autocast pads in float32: the rows come back in the levels' dtype, as on the other paths
        return pooled.to(feats[0].dtype)


    def _pool_sparse(self, feats, rois, lvl):
        """Every box from every level as one sparse matrix product (model.roi_align=sparse).

        The product runs in float32 with autocast off, whatever the step's precision, as
        torchvision's kernel computes under autocast: autocast would cast its operands down, and
        torch's CPU sparse CSR product has neither a bf16 nor an fp16 kernel. The pooled rows
        come back in the levels' dtype, as the kernel's do, and the levels' gradient in theirs
        (the cast to float32 is part of the graph)."""
        with torch.autocast(device_type=rois.device.type, enabled=False):
            return self._pool_sparse_fp32(feats, rois, lvl)

    def _pool_sparse_fp32(self, feats, rois, lvl):
        key = ("sparse", str(rois.device), tuple(tuple(f.shape) for f in feats))
        if key not in self._levels_on_device:
            shapes = [f.shape for f in feats]
            starts = [0]
            for b, _, h, w in shapes[:-1]:
                starts.append(starts[-1] + b * h * w)
            self._levels_on_device[key] = (rois.new_tensor([1.0 / s for s in self.strides]),
                                           rois.new_tensor([[h, w] for _, _, h, w in shapes]),
                                           torch.tensor(starts, dtype=torch.int64, device=rois.device),
                                           starts[-1] + shapes[-1][0] * shapes[-1][2] * shapes[-1][3])
        scales, sizes, starts, rows = self._levels_on_device[key]
        matrix = sampling_matrix(rois, scales[lvl], sizes[lvl], starts[lvl], rows, self.output_size[0],
                                 self.sampling_ratio, self.aligned)
        c = feats[0].shape[1]
        flat = torch.cat([f.float().permute(0, 2, 3, 1).reshape(-1, c) for f in feats])   # channels last
        pooled = _SparsePool.apply(flat, matrix)                   # [K * S * S, C]
        k, size = rois.shape[0], self.output_size[0]
        return pooled.view(k, size, size, c).permute(0, 3, 1, 2).to(feats[0].dtype)


def _bilinear_1d(pos, length):
    """torchvision's RoIAlign bilinear rule along one axis: (low, high, weight of low, weight of
    high, inside) for sample positions `pos` [K, n] on axes of `length` [K, 1] pixels."""
    inside = (pos >= -1.0) & (pos <= length)
    pos = pos.clamp(min=0.0)
    low = pos.floor()
    last = (length - 1).expand_as(low)
    at_end = low >= last
    low = torch.where(at_end, last, low)
    high = torch.where(at_end, last, low + 1)
    pos = torch.where(at_end, low, pos)
    frac = pos - low
    return low.long(), high.long(), 1.0 - frac, frac, inside


def sampling_matrix(rois, scale, size, start, columns, out, ratio, aligned):
    """RoIAlign as a sparse [K * out * out, columns] matrix over the levels' channels-last rows.

    rois [K, 5] (image, x1, y1, x2, y2); per box its level's scale, (H, W) and first row.
    Each output bin averages ratio x ratio bilinear samples, four pixels each, exactly as
    torchvision's kernel places and weights them (aligned or not, samples past the edge)."""
    k = rois.shape[0]
    offset = 0.5 if aligned else 0.0
    x1 = rois[:, 1] * scale - offset
    y1 = rois[:, 2] * scale - offset
    w = rois[:, 3] * scale - offset - x1
    h = rois[:, 4] * scale - offset - y1
    if not aligned:
        w, h = w.clamp(min=1.0), h.clamp(min=1.0)
    # sample positions [K, out * ratio], in the kernel's order of operations:
    # start + bin * size + (i + 0.5) * size / ratio
    bins = torch.arange(out, device=rois.device, dtype=rois.dtype).repeat_interleave(ratio)
    within = (torch.arange(ratio, device=rois.device, dtype=rois.dtype) + 0.5).repeat(out)

    def positions(start, extent):
        size = (extent / out)[:, None]
        return start[:, None] + bins[None, :] * size + within[None, :] * size / ratio
    ys, xs = positions(y1, h), positions(x1, w)
    height, width = size[:, 0:1], size[:, 1:2]
    y_lo, y_hi, wy_lo, wy_hi, y_in = _bilinear_1d(ys, height)
    x_lo, x_hi, wx_lo, wx_hi, x_in = _bilinear_1d(xs, width)
    # [K, out, ratio] per axis -> [K, out(y), out(x), ratio(y), ratio(x), 4 corners]
    def axis(t, dim):
        t = t.view(k, out, ratio)
        return t[:, :, None, :, None] if dim == "y" else t[:, None, :, None, :]
    yl, yh, wyl, wyh, yi = (axis(t, "y") for t in (y_lo, y_hi, wy_lo, wy_hi, y_in))
    xl, xh, wxl, wxh, xi = (axis(t, "x") for t in (x_lo, x_hi, wx_lo, wx_hi, x_in))
    base = (start + rois[:, 0].long() * (size[:, 0] * size[:, 1]).long()).view(k, 1, 1, 1, 1)
    row_w = width.long().view(k, 1, 1, 1, 1)
    index = torch.stack([base + yl * row_w + xl, base + yl * row_w + xh,
                         base + yh * row_w + xl, base + yh * row_w + xh], dim=-1)
    weight = torch.stack([wyl * wxl, wyl * wxh, wyh * wxl, wyh * wxh], dim=-1)
    weight = weight * (yi & xi).unsqueeze(-1) / (ratio * ratio)
    per_row = ratio * ratio * 4
    index = index.reshape(k * out * out, per_row)
    weight = weight.reshape(k * out * out, per_row)
    crow = torch.arange(0, index.numel() + 1, per_row, device=rois.device)
    return torch.sparse_csr_tensor(crow, index.reshape(-1), weight.reshape(-1), (k * out * out, columns),
                                   check_invariants=False)


class _SparsePool(torch.autograd.Function):
    """rows = matrix @ flat; the gradient of flat is matrix^T @ grad, with the transpose built
    as its own CSR matrix (a stable sort of the column indices)."""

    @staticmethod
    def forward(ctx, flat, matrix):
        ctx.matrix = matrix
        return torch.sparse.mm(matrix, flat)

    @staticmethod
    def backward(ctx, grad):
        m = ctx.matrix
        rows, columns = m.shape
        col = m.col_indices()
        if rows == 0:
            return grad.new_zeros((columns, grad.shape[1]), dtype=torch.float32), None
        per_row = col.numel() // rows
        order = torch.argsort(col, stable=True)
        # row starts of the transpose: where each column index begins in the sorted order
        # (fixed shapes, no host sync)
        crow = torch.searchsorted(col[order], torch.arange(columns + 1, device=col.device))
        source = torch.div(order, per_row, rounding_mode="floor")
        transposed = torch.sparse_csr_tensor(crow, source, m.values()[order], (columns, rows),
                                             check_invariants=False)
        # float32 whatever the caller's autocast: the backward may run under it (a captured step)
        with torch.autocast(device_type=grad.device.type, enabled=False):
            return torch.sparse.mm(transposed, grad.float().contiguous()), None


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
