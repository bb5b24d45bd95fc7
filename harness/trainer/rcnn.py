"""Second stage of R-CNN: RoI sampling, the 2fc box head and the (optional) mask branch."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from .assign import ignore_crowd, match_boxes, sample_balanced, top_k_per_image
from .boxes import BoxCoder, smooth_l1
from .masks import roi_targets


class TwoFCHead(nn.Module):
    """Flattened RoI features -> two hidden fc layers -> class scores and per-class deltas."""

    def __init__(self, *, in_channels=256, pool_size=7, fc_dim=1024, num_classes=80):
        super().__init__()
        self.fc6 = nn.Linear(in_channels * pool_size * pool_size, fc_dim)
        self.fc7 = nn.Linear(fc_dim, fc_dim)
        self.cls_score = nn.Linear(fc_dim, num_classes + 1)
        self.bbox_pred = nn.Linear(fc_dim, 4 * (num_classes + 1))
        nn.init.normal_(self.cls_score.weight, std=0.01)
        nn.init.normal_(self.bbox_pred.weight, std=0.001)
        nn.init.zeros_(self.cls_score.bias)
        nn.init.zeros_(self.bbox_pred.bias)

    def forward(self, x):
        x = F.relu(self.fc6(x.flatten(1)))
        x = F.relu(self.fc7(x))
        return self.cls_score(x), self.bbox_pred(x).view(x.shape[0], -1, 4)


class MaskHead(nn.Module):
    """Four 3x3 convs, a 2x deconvolution and per-class mask logits."""

    def __init__(self, *, in_channels=256, conv_dim=256, num_convs=4, num_classes=80):
        super().__init__()
        layers, c = [], in_channels
        for _ in range(num_convs):
            layers += [nn.Conv2d(c, conv_dim, 3, padding=1), nn.ReLU(inplace=True)]
            c = conv_dim
        layers += [nn.ConvTranspose2d(c, conv_dim, 2, 2), nn.ReLU(inplace=True)]
        self.body = nn.Sequential(*layers)
        self.logits = nn.Conv2d(conv_dim, num_classes + 1, 1)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)

    def forward(self, x, labels=None):
        """Mask logits of every class [N, classes + 1, 2S, 2S]; given `labels` [N], only each
        RoI's own class [N, 2S, 2S], which is all a training step reads (the other classes'
        logits get no gradient): a per-RoI dot product instead of the full 1x1 convolution."""
        x = self.body(x)
        if labels is None:
            return self.logits(x)
        weight = self.logits.weight[:, :, 0, 0][labels].to(x.dtype)          # [N, C]
        return torch.einsum("nchw,nc->nhw", x, weight) + self.logits.bias[labels].to(x.dtype)[:, None, None]


class RoIHeads(nn.Module):
    """Samples RoIs and trains the box (and mask) head; `last_work` holds the RoIs sampled,
    the positive ones and the mask RoIs of the last forward, as tensors (no host sync).

    The plain path gathers the sampled RoIs into a list whose length the host learns. The
    sync-free path (`sync_free=True`) keeps fixed shapes: `batch_per_image` box RoIs and
    `mask_max_rois_per_image` mask RoIs per image, the unused slots padded with zero weight
    and every loss divided by the count of real ones, so both give the same losses.

    Mask targets come from per-object crops (masks.py): 28x28 RoIAlign targets of the mask
    RoIs only. The plain path converts the crops some RoI uses to floats, the sync-free path
    every crop of the batch (B x G crops, no torch.unique)."""

    def __init__(self, *, box_extractor, box_head, mask_extractor=None, mask_head=None,
                 batch_per_image=512, positive_fraction=0.25, fg_iou=0.5, bg_iou=0.5,
                 mask_max_rois_per_image=128, mask_size=28, sync_free=False, mask_target_class_only=False):
        super().__init__()
        self.sync_free = sync_free
        self.mask_target_class_only = mask_target_class_only
        self.box_extractor = box_extractor
        self.box_head = box_head
        self.mask_extractor = mask_extractor
        self.mask_head = mask_head
        self.batch_per_image = batch_per_image
        self.positive_fraction = positive_fraction
        self.fg_iou, self.bg_iou = fg_iou, bg_iou
        self.mask_max_rois = mask_max_rois_per_image
        self.mask_size = mask_size
        self.coder = BoxCoder((10.0, 10.0, 5.0, 5.0))

    def forward(self, feats, proposals, valid, targets):
        gt_boxes, gt_labels = targets["boxes"], targets["labels"]
        gt_valid = gt_labels > 0
        # ground truth joins the candidates, as in Detectron-style training
        boxes = torch.cat([proposals, gt_boxes.to(proposals.dtype)], dim=1)
        box_valid = torch.cat([valid, gt_valid], dim=1)
        idx, labels = match_boxes(boxes, box_valid, gt_boxes, gt_valid, self.fg_iou, self.bg_iou)
        labels = ignore_crowd(labels, boxes, targets.get("crowd"))
        pos, neg = sample_balanced(labels, self.batch_per_image, self.positive_fraction)
        self.last_work = {"sampled_rois": (pos | neg).sum(), "positive_rois": pos.sum()}
        masks = (targets["mask_crops"], targets["mask_affine"]) if self.mask_head is not None else None
        if self.sync_free:
            losses = self._box_losses_fixed(feats, boxes, idx, pos, neg, gt_boxes, gt_labels)
            if self.mask_head is not None:
                losses.update(self._mask_losses_fixed(feats, boxes, idx, pos, gt_labels, masks))
            return losses
        losses = self._box_losses(feats, boxes, idx, pos, neg, gt_boxes, gt_labels)
        if self.mask_head is not None:
            losses.update(self._mask_losses(feats, boxes, idx, pos, gt_labels, masks))
        return losses

    def _box_losses(self, feats, boxes, idx, pos, neg, gt_boxes, gt_labels):
        b, n = (pos | neg).nonzero(as_tuple=True)
        roi_boxes = boxes[b, n]
        matched = idx[b, n]
        is_pos = pos[b, n]
        cls_target = torch.where(is_pos, gt_labels[b, matched], torch.zeros_like(matched))
        reg_target = self.coder.encode(roi_boxes, gt_boxes[b, matched].to(roi_boxes.dtype))
        rois = torch.cat([b[:, None].to(roi_boxes.dtype), roi_boxes], dim=1)
        cls_logits, deltas = self.box_head(self.box_extractor(feats, rois))
        norm = max(cls_target.numel(), 1)
        loss_cls = F.cross_entropy(cls_logits.float(), cls_target, reduction="sum") / norm
        picked = deltas.float().gather(1, cls_target[:, None, None].expand(-1, 1, 4))[:, 0]
        reg = smooth_l1(picked, reg_target, 1.0 / 9).sum(-1)
        loss_box = (reg * is_pos).sum() / norm
        return {"loss_rcnn_cls": loss_cls, "loss_rcnn_bbox": loss_box}

    def _mask_losses(self, feats, boxes, idx, pos, gt_labels, gt_crops):
        bsz, g = gt_labels.shape
        cols, real = top_k_per_image(pos, torch.rand(pos.shape, device=pos.device), self.mask_max_rois)
        rows = torch.arange(bsz, device=pos.device)[:, None].expand_as(cols)
        b, n = rows[real], cols[real]
        self.last_work["mask_rois"] = real.sum()
        weight = torch.ones(b.shape[0], device=pos.device)
        if b.numel() == 0:  # keep the branch in the graph (DDP) with zero weight
            b, n = rows[:, :1].reshape(-1)[:1], cols[:, :1].reshape(-1)[:1]
            weight = torch.zeros(1, device=pos.device)
        roi_boxes = boxes[b, n]
        matched = idx[b, n]
        rois = torch.cat([b[:, None].to(roi_boxes.dtype), roi_boxes], dim=1)
        label = gt_labels[b, matched]
        logits = self._mask_logits(self.mask_extractor(feats, rois), label)
        # targets of these RoIs only, from the crops of the objects they match
        target = roi_targets(*gt_crops, b * g + matched, roi_boxes, self.mask_size)
        bce = F.binary_cross_entropy_with_logits(logits, target, reduction="none").mean((1, 2))
        return {"loss_mask": (bce * weight).sum() / weight.sum().clamp(min=1)}

    def _mask_logits(self, pooled, label):
        """[N, 2S, 2S] float logits of each mask RoI's class."""
        if self.mask_target_class_only:
            return self.mask_head(pooled, label).float()
        logits = self.mask_head(pooled)
        return logits.float().gather(1, label[:, None, None, None].expand(-1, 1, *logits.shape[2:]))[:, 0]

    def _box_losses_fixed(self, feats, boxes, idx, pos, neg, gt_boxes, gt_labels):
        # every sampled RoI fits: sampling keeps at most batch_per_image per image
        cols, real = top_k_per_image(pos | neg, torch.zeros(pos.shape, device=pos.device), self.batch_per_image)
        b, n, real = _slots(cols), cols.reshape(-1), real.reshape(-1)
        roi_boxes = boxes[b, n].masked_fill(~real[:, None], 0.0)
        matched = idx[b, n]
        is_pos = pos[b, n] & real
        cls_target = torch.where(is_pos, gt_labels[b, matched], torch.zeros_like(matched))
        reg_target = self.coder.encode(roi_boxes, gt_boxes[b, matched].to(roi_boxes.dtype))
        rois = torch.cat([b[:, None].to(roi_boxes.dtype), roi_boxes], dim=1)
        cls_logits, deltas = self.box_head(self.box_extractor(feats, rois))
        weight = real.float()
        norm = weight.sum().clamp(min=1)
        loss_cls = (F.cross_entropy(cls_logits.float(), cls_target, reduction="none") * weight).sum() / norm
        picked = deltas.float().gather(1, cls_target[:, None, None].expand(-1, 1, 4))[:, 0]
        reg = smooth_l1(picked, reg_target, 1.0 / 9).sum(-1)
        loss_box = (reg * is_pos).sum() / norm
        return {"loss_rcnn_cls": loss_cls, "loss_rcnn_bbox": loss_box}

    def _mask_losses_fixed(self, feats, boxes, idx, pos, gt_labels, gt_crops):
        g = gt_labels.shape[1]
        # the same draw as the plain path, so both train the mask head on the same RoIs
        cols, real = top_k_per_image(pos, torch.rand(pos.shape, device=pos.device), self.mask_max_rois)
        self.last_work["mask_rois"] = real.sum()
        b, n, real = _slots(cols), cols.reshape(-1), real.reshape(-1)
        roi_boxes = boxes[b, n].masked_fill(~real[:, None], 0.0)
        matched = idx[b, n]
        rois = torch.cat([b[:, None].to(roi_boxes.dtype), roi_boxes], dim=1)
        label = gt_labels[b, matched]
        logits = self._mask_logits(self.mask_extractor(feats, rois), label)
        target = roi_targets(*gt_crops, b * g + matched, roi_boxes, self.mask_size, share=False)
        bce = F.binary_cross_entropy_with_logits(logits, target, reduction="none").mean((1, 2))
        weight = real.float()
        return {"loss_mask": (bce * weight).sum() / weight.sum().clamp(min=1)}


def _slots(cols):
    """The image index of every slot of a [B, K] selection, flattened."""
    bsz, k = cols.shape
    return torch.arange(bsz, device=cols.device)[:, None].expand(bsz, k).reshape(-1)
