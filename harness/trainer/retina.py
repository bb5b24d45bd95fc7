"""RetinaNet head and its focal-loss training objective, batched over images."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.ops import sigmoid_focal_loss

from .anchors import AnchorGenerator, flatten_head, pyramid_sizes
from .assign import ignore_crowd, match_anchors
from .boxes import BoxCoder
from .focal import focal_loss_sum
from . import dist


def _tower(channels, num_convs):
    layers = []
    for _ in range(num_convs):
        layers += [nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers)


class RetinaHead(nn.Module):
    """Separate classification and box towers shared across pyramid levels.

    `merge_first=True` runs the first conv of both towers, which read the same input, as one
    convolution with both weight sets stacked (256 -> 512 channels): one pass over the input
    and a larger GEMM instead of two. The parameters stay separate (the state dict and the
    torchvision mapping are unchanged); the outputs are the same up to rounding."""

    def __init__(self, *, in_channels=256, num_anchors=9, num_classes=80, num_convs=4,
                 prior_prob=0.01, merge_first=False):
        super().__init__()
        self.num_classes = num_classes
        self.merge_first = merge_first and num_convs > 0
        self.cls_tower = _tower(in_channels, num_convs)
        self.box_tower = _tower(in_channels, num_convs)
        self.cls_logits = nn.Conv2d(in_channels, num_anchors * num_classes, 3, padding=1)
        self.box_deltas = nn.Conv2d(in_channels, num_anchors * 4, 3, padding=1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, std=0.01)
                nn.init.zeros_(m.bias)
        nn.init.constant_(self.cls_logits.bias, -math.log((1 - prior_prob) / prior_prob))

    def forward(self, feats):
        if self.merge_first:
            first_cls, first_box = self.cls_tower[0], self.box_tower[0]
            weight = torch.cat([first_cls.weight, first_box.weight])
            bias = torch.cat([first_cls.bias, first_box.bias])
            cls, box = [], []
            for x in feats:
                c, b = F.relu(F.conv2d(x, weight, bias, padding=1)).chunk(2, dim=1)
                cls.append(self.cls_logits(self.cls_tower[2:](c)))
                box.append(self.box_deltas(self.box_tower[2:](b)))
        else:
            cls = [self.cls_logits(self.cls_tower(x)) for x in feats]
            box = [self.box_deltas(self.box_tower(x)) for x in feats]
        return flatten_head(cls, self.num_classes), flatten_head(box, 4)


class RetinaNet(nn.Module):
    def __init__(self, *, backbone, neck, head, anchor_sizes=(32, 64, 128, 256, 512),
                 aspect_ratios=(0.5, 1.0, 2.0), scales_per_octave=3, fg_iou=0.5, bg_iou=0.4,
                 focal_alpha=0.25, focal_gamma=2.0, fused_focal_loss=False, whole_pixel_anchors=False):
        super().__init__()
        self.fused_focal_loss = fused_focal_loss
        self.backbone = backbone
        self.neck = neck
        self.head = head
        self.anchors = AnchorGenerator(pyramid_sizes(anchor_sizes, scales_per_octave), aspect_ratios,
                                       whole_pixel_anchors)
        self.coder = BoxCoder()
        self.fg_iou, self.bg_iou = fg_iou, bg_iou
        self.alpha, self.gamma = focal_alpha, focal_gamma

    def forward(self, images, targets):
        feats = self.neck(self.backbone(images))
        cls, deltas = self.head(feats)
        anchors, _ = self.anchors(images.shape[-2:], [f.shape[-2:] for f in feats], images.device)
        return self.losses(anchors, cls.float(), deltas.float(), targets)

    def losses(self, anchors, cls, deltas, targets):
        gt_boxes, gt_labels = targets["boxes"], targets["labels"]
        gt_valid = gt_labels > 0
        idx, labels = match_anchors(anchors, gt_boxes, gt_valid, self.fg_iou, self.bg_iou, True)
        labels = ignore_crowd(labels, anchors, targets.get("crowd"))
        pos = labels == 1
        counted = labels >= 0
        self.last_work = {"positive_anchors": pos.sum()}   # read at the logging point: no sync here
        # normalize by the positives of the whole global batch, so that N ranks with B images
        # each give the same loss and gradients as one rank with N*B images
        norm = dist.global_mean(pos.sum().float()).clamp(min=1.0)
        matched_label = gt_labels.gather(1, idx)
        if self.fused_focal_loss:
            pos_class = torch.where(pos, matched_label - 1, torch.full_like(matched_label, -1))
            loss_cls = focal_loss_sum(cls, pos_class, counted, self.alpha, self.gamma) / norm
        else:
            cls_target = torch.zeros_like(cls)
            cls_target.scatter_(2, (matched_label - 1).clamp(min=0)[..., None], pos[..., None].to(cls.dtype))
            focal = sigmoid_focal_loss(cls, cls_target, self.alpha, self.gamma, reduction="none")
            loss_cls = (focal.sum(-1) * counted).sum() / norm
        matched = gt_boxes.gather(1, idx[..., None].expand(-1, -1, 4)).to(anchors.dtype)
        target = self.coder.encode(anchors[None].expand_as(matched), matched)
        loss_box = ((deltas - target).abs().sum(-1) * pos).sum() / norm
        return {"loss_retina_cls": loss_cls, "loss_retina_bbox": loss_box}
