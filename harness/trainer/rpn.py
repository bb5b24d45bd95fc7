"""Region proposal network: shared head, batched proposal selection and batched losses."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.ops import batched_nms

from .anchors import AnchorGenerator, flatten_head, pyramid_sizes
from .assign import ignore_crowd, match_anchors, sample_balanced, top_k_per_image
from .boxes import BoxCoder, clip, smooth_l1
from .nms import greedy_keep


class RPNHead(nn.Module):
    def __init__(self, *, in_channels=256, num_anchors=3):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, in_channels, 3, padding=1)
        self.objectness = nn.Conv2d(in_channels, num_anchors, 1)
        self.deltas = nn.Conv2d(in_channels, num_anchors * 4, 1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, std=0.01)
                nn.init.zeros_(m.bias)

    def forward(self, feats):
        logits, deltas = [], []
        for x in feats:
            t = F.relu(self.conv(x))
            logits.append(self.objectness(t))
            deltas.append(self.deltas(t))
        return logits, deltas


class RPN(nn.Module):
    """Training-time RPN: returns (proposals [B, P, 4], valid [B, P], losses).

    `last_work` holds the proposals kept in the last forward (a tensor: counting needs no sync).
    With `sync_free`, NMS runs in fixed shapes (nms.greedy_keep, `nms_passes` passes) and
    `last_checks` holds how many of its groups had not settled, read where the work is."""

    def __init__(self, *, head, anchor_sizes=(32, 64, 128, 256, 512), aspect_ratios=(0.5, 1.0, 2.0),
                 pre_nms_top_n=2000, post_nms_top_n=2000, nms_thresh=0.7, batch_per_image=256,
                 positive_fraction=0.5, fg_iou=0.7, bg_iou=0.3, min_size=1e-3, sync_free=False,
                 nms_passes=32, whole_pixel_anchors=False):
        super().__init__()
        self.sync_free = sync_free
        self.nms_passes = nms_passes
        self.head = head
        self.anchors = AnchorGenerator(pyramid_sizes(anchor_sizes), aspect_ratios, whole_pixel_anchors)
        self.coder = BoxCoder()
        self.pre_nms_top_n = pre_nms_top_n
        self.post_nms_top_n = post_nms_top_n
        self.nms_thresh = nms_thresh
        self.batch_per_image = batch_per_image
        self.positive_fraction = positive_fraction
        self.fg_iou, self.bg_iou = fg_iou, bg_iou
        self.min_size = min_size

    def forward(self, feats, image_size, gt_boxes, gt_valid, crowd=None):
        logit_maps, delta_maps = self.head(feats)
        shapes = [tuple(f.shape[-2:]) for f in feats]
        anchors, per_level = self.anchors(image_size, shapes, feats[0].device)
        logits = flatten_head(logit_maps, 1)[..., 0].float()
        deltas = flatten_head(delta_maps, 4).float()
        with torch.no_grad():
            proposals, valid = self.propose(anchors, per_level, logits.detach(), deltas.detach(),
                                            image_size)
        self.last_work = {"proposals": valid.sum()}
        return proposals, valid, self.losses(anchors, logits, deltas, gt_boxes, gt_valid, crowd)

    def propose(self, anchors, per_level, logits, deltas, image_size):
        b = logits.shape[0]
        cols, levels, start = [], [], 0
        for lvl, n in enumerate(per_level):
            k = min(self.pre_nms_top_n, n)
            cols.append(logits[:, start:start + n].topk(k, dim=1).indices + start)
            levels.append(torch.full((k,), lvl, device=logits.device))
            start += n
        cols = torch.cat(cols, dim=1)                                   # [B, N]
        levels = torch.cat(levels)
        scores = logits.gather(1, cols)
        boxes = self.coder.decode(anchors[cols], deltas.gather(1, cols[..., None].expand(-1, -1, 4)))
        boxes = clip(boxes, *image_size)
        wh = boxes[..., 2:] - boxes[..., :2]
        ok = (wh >= self.min_size).all(-1) & torch.isfinite(scores)
        if self.sync_free:
            survived = self._survivors_fixed(boxes, scores, ok, [min(self.pre_nms_top_n, n) for n in per_level])
        else:
            groups = torch.arange(b, device=cols.device)[:, None] * len(per_level) + levels[None]
            flat_ok = ok.view(-1).nonzero().squeeze(1)
            keep = batched_nms(boxes.view(-1, 4)[flat_ok], scores.view(-1)[flat_ok],
                               groups.view(-1)[flat_ok], self.nms_thresh)
            survived = torch.zeros_like(ok).view(-1)
            survived[flat_ok[keep]] = True
        top, real = top_k_per_image(survived.view(b, -1), scores, self.post_nms_top_n)
        return boxes.gather(1, top[..., None].expand(-1, -1, 4)), real

    def _survivors_fixed(self, boxes, scores, ok, counts):
        """NMS per image and level, as batched_nms's groups, in a padded [B * levels, K] layout."""
        b, n = ok.shape
        k = max(counts)
        starts = [sum(counts[:i]) for i in range(len(counts))]
        slot = torch.arange(k, device=ok.device)
        where = torch.stack([start + slot.clamp(max=c - 1) for start, c in zip(starts, counts)])   # [L, K]
        real = torch.stack([slot < c for c in counts])                                              # [L, K]
        flat = where.view(-1)
        keep, unsettled = greedy_keep(
            boxes[:, flat].view(-1, k, 4), scores[:, flat].view(-1, k),
            (ok[:, flat] & real.view(1, -1)).view(-1, k), self.nms_thresh, self.nms_passes)
        self.last_checks = {"nms_unsettled_groups": unsettled}
        # padding slots write into a spare last column, dropped after the scatter
        target = torch.where(real.view(-1), flat, torch.full_like(flat, n))
        survived = torch.zeros((b, n + 1), dtype=torch.bool, device=ok.device)
        survived.scatter_(1, target[None].expand(b, -1), keep.view(b, -1))
        return survived[:, :n]

    def losses(self, anchors, logits, deltas, gt_boxes, gt_valid, crowd=None):
        idx, labels = match_anchors(anchors, gt_boxes, gt_valid, self.fg_iou, self.bg_iou, True)
        labels = ignore_crowd(labels, anchors, crowd)
        pos, neg = sample_balanced(labels, self.batch_per_image, self.positive_fraction)
        sampled = pos | neg
        norm = sampled.sum().clamp(min=1).float()
        obj = F.binary_cross_entropy_with_logits(logits, pos.float(), reduction="none")
        loss_obj = (obj * sampled).sum() / norm
        matched = gt_boxes.gather(1, idx[..., None].expand(-1, -1, 4))
        target = self.coder.encode(anchors[None].expand_as(matched), matched)
        reg = smooth_l1(deltas, target, 1.0 / 9).sum(-1)
        loss_box = (reg * pos).sum() / norm
        return {"loss_rpn_cls": loss_obj, "loss_rpn_bbox": loss_box}
