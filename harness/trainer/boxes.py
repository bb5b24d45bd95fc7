"""Box arithmetic on (x1, y1, x2, y2) tensors with any leading dimensions."""
import math

import torch

_CLAMP = math.log(1000.0 / 16)


class BoxCoder:
    """Encodes boxes as (dx, dy, dw, dh) offsets from reference boxes, and back."""

    def __init__(self, weights=(1.0, 1.0, 1.0, 1.0)):
        self.weights = tuple(float(w) for w in weights)

    def encode(self, ref, gt):
        wx, wy, ww, wh = self.weights
        rw = ref[..., 2] - ref[..., 0]
        rh = ref[..., 3] - ref[..., 1]
        rx = ref[..., 0] + 0.5 * rw
        ry = ref[..., 1] + 0.5 * rh
        gw = gt[..., 2] - gt[..., 0]
        gh = gt[..., 3] - gt[..., 1]
        gx = gt[..., 0] + 0.5 * gw
        gy = gt[..., 1] + 0.5 * gh
        # padded (degenerate) targets must not produce inf; they carry zero weight anyway
        rw = rw.clamp(min=1e-3)
        rh = rh.clamp(min=1e-3)
        return torch.stack((wx * (gx - rx) / rw, wy * (gy - ry) / rh,
                            ww * torch.log(gw.clamp(min=1e-3) / rw),
                            wh * torch.log(gh.clamp(min=1e-3) / rh)), dim=-1)

    def decode(self, ref, deltas):
        wx, wy, ww, wh = self.weights
        ref = ref.to(deltas.dtype)
        rw = ref[..., 2] - ref[..., 0]
        rh = ref[..., 3] - ref[..., 1]
        rx = ref[..., 0] + 0.5 * rw
        ry = ref[..., 1] + 0.5 * rh
        dx = deltas[..., 0] / wx
        dy = deltas[..., 1] / wy
        dw = (deltas[..., 2] / ww).clamp(max=_CLAMP)
        dh = (deltas[..., 3] / wh).clamp(max=_CLAMP)
        cx = dx * rw + rx
        cy = dy * rh + ry
        w = torch.exp(dw) * rw
        h = torch.exp(dh) * rh
        return torch.stack((cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h), dim=-1)


def clip(boxes, height, width):
    x = boxes[..., 0::2].clamp(0, width)
    y = boxes[..., 1::2].clamp(0, height)
    return torch.stack((x[..., 0], y[..., 0], x[..., 1], y[..., 1]), dim=-1)


def area(boxes):
    return (boxes[..., 2] - boxes[..., 0]).clamp(min=0) * (boxes[..., 3] - boxes[..., 1]).clamp(min=0)


def iou_batched(a, b):
    """IoU of [B, N, 4] against [B, M, 4] -> [B, N, M], one image per batch row."""
    lt = torch.maximum(a[:, :, None, :2], b[:, None, :, :2])
    rb = torch.minimum(a[:, :, None, 2:], b[:, None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    union = area(a)[:, :, None] + area(b)[:, None, :] - inter
    return inter / union.clamp(min=1e-6)


def smooth_l1(pred, target, beta):
    diff = (pred - target).abs()
    if beta <= 0:
        return diff
    return torch.where(diff < beta, 0.5 * diff * diff / beta, diff - 0.5 * beta)
