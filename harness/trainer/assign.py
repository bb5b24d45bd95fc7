"""Target assignment and sampling, batched over images (no per-image Python loops).

Ground truth arrives padded: boxes [B, G, 4] and labels [B, G] where label 0 marks padding.
Assignment labels use 1 = foreground, 0 = background, -1 = ignored.
"""
import torch
from torchvision.ops import box_iou

from .boxes import iou_batched


def match_anchors(anchors, gt_boxes, gt_valid, fg_thresh, bg_thresh, allow_low_quality):
    """Match shared anchors [A, 4] to each image's boxes -> (matched gt index [B, A], labels [B, A])."""
    b, g, _ = gt_boxes.shape
    iou = box_iou(gt_boxes.reshape(-1, 4).float(), anchors.float()).view(b, g, -1)
    return _match(iou, gt_valid, fg_thresh, bg_thresh, allow_low_quality)


def match_boxes(boxes, box_valid, gt_boxes, gt_valid, fg_thresh, bg_thresh):
    """Match per-image boxes [B, N, 4] (e.g. proposals) to ground truth; invalid boxes get -1."""
    iou = iou_batched(gt_boxes.float(), boxes.float())
    idx, labels = _match(iou, gt_valid, fg_thresh, bg_thresh, False)
    return idx, labels.masked_fill(~box_valid, -1)


def _match(iou, gt_valid, fg_thresh, bg_thresh, allow_low_quality):
    iou = iou.masked_fill(~gt_valid[:, :, None], -1.0)
    best, idx = iou.max(dim=1)
    # masked fills, not boolean-index assignments: those find their indices on the host
    labels = torch.full_like(idx, -1).masked_fill_(best < bg_thresh, 0).masked_fill_(best >= fg_thresh, 1)
    if allow_low_quality:
        # every box keeps the anchors it overlaps best, whatever their IoU
        best_per_gt = iou.amax(dim=2, keepdim=True)
        hit = (iou == best_per_gt) & (best_per_gt > 0) & gt_valid[:, :, None]
        labels.masked_fill_(hit.any(dim=1), 1)
    return idx, labels


def _pick_random(mask, quota, bound):
    """Per row, choose up to `quota` (int or [B] tensor, never above the int `bound`) random
    True entries of mask [B, N]. The draw looks at the best `bound` scores of each row, a size
    known without reading `quota` back from the device; the rows' first `quota` of them are
    the same entries a draw of exactly `quota` would pick."""
    n = mask.shape[1]
    k = min(int(bound), n)
    if k <= 0:
        return torch.zeros_like(mask)
    score = torch.rand(mask.shape, device=mask.device).masked_fill_(~mask, -1.0)
    vals, cols = score.topk(k, dim=1)
    keep = vals >= 0
    if torch.is_tensor(quota):
        keep &= torch.arange(k, device=mask.device)[None, :] < quota[:, None]
    out = torch.zeros_like(mask)
    out.scatter_(1, cols, keep)
    return out


def sample_balanced(labels, per_image, positive_fraction):
    """Random foreground/background subsample per image -> (pos mask, neg mask), both [B, N]."""
    pos_quota = int(per_image * positive_fraction)
    pos = _pick_random(labels == 1, pos_quota, pos_quota)
    neg_quota = per_image - pos.sum(dim=1)
    neg = _pick_random(labels == 0, neg_quota, per_image)
    return pos, neg


def top_k_per_image(mask, scores, k):
    """Indices [B, k] of the k best-scoring True entries per row, and which of them are real."""
    k = min(k, mask.shape[1])
    vals, cols = scores.masked_fill(~mask, float("-inf")).topk(k, dim=1)
    return cols, torch.isfinite(vals)


CROWD_IOA = 0.7     # a background box this much inside a crowd region is ignored instead


def ignore_crowd(labels, boxes, crowd, thresh=CROWD_IOA):
    """Background labels (0) of boxes that lie mostly inside a crowd region become ignored (-1).

    labels [B, N]; boxes [N, 4] shared (anchors) or [B, N, 4] per image; crowd [B, K, 4],
    padded with empty boxes. Inside: one crowd box covers at least `thresh` of the box's own
    area. Foreground labels stay; crowd regions are never matched as objects."""
    if crowd is None or crowd.shape[1] == 0:
        return labels
    boxes = boxes.float()
    if boxes.dim() == 2:
        boxes = boxes[None].expand(labels.shape[0], -1, -1)
    crowd = crowd.float()
    lt = torch.maximum(boxes[:, :, None, :2], crowd[:, None, :, :2])
    rb = torch.minimum(boxes[:, :, None, 2:], crowd[:, None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)                                # [B, N, K]
    area = (boxes[..., 2:] - boxes[..., :2]).clamp(min=0).prod(-1)        # [B, N]
    inside = (inter.amax(-1) >= thresh * area) & (area > 0)
    return labels.masked_fill((labels == 0) & inside, -1)
