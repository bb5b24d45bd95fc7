"""RetinaNet head and its focal-loss training objective, batched over images."""
import math

import torch
import torch.nn as nn
from torchvision.ops import sigmoid_focal_loss

from .anchors import AnchorGenerator, flatten_head, pyramid_sizes
from .assign import ignore_crowd, match_anchors
from .boxes import BoxCoder
from . import dist


def _tower(channels, num_convs):
    layers = []
    for _ in range(num_convs):
        layers += [nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers)


class RetinaHead(nn.Module):
    """Separate classification and box towers shared across pyramid levels."""

    def __init__(self, *, in_channels=256, num_anchors=9, num_classes=80, num_convs=4,
                 prior_prob=0.01):
        super().__init__()
        self.num_classes = num_classes
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
        cls = [self.cls_logits(self.cls_tower(x)) for x in feats]
        box = [self.box_deltas(self.box_tower(x)) for x in feats]
        return flatten_head(cls, self.num_classes), flatten_head(box, 4)


class RetinaNet(nn.Module):
    def __init__(self, *, backbone, neck, head, anchor_sizes=(32, 64, 128, 256, 512),
                 aspect_ratios=(0.5, 1.0, 2.0), scales_per_octave=3, fg_iou=0.5, bg_iou=0.4,
                 focal_alpha=0.25, focal_gamma=2.0):
        super().__init__()
        self.backbone = backbone
        self.neck = neck
        self.head = head
        self.anchors = AnchorGenerator(pyramid_sizes(anchor_sizes, scales_per_octave), aspect_ratios)
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
        cls_target = torch.zeros_like(cls)
        matched_label = gt_labels.gather(1, idx)
        cls_target.scatter_(2, (matched_label - 1).clamp(min=0)[..., None], pos[..., None].to(cls.dtype))
        focal = sigmoid_focal_loss(cls, cls_target, self.alpha, self.gamma, reduction="none")
        loss_cls = (focal.sum(-1) * counted).sum() / norm
        matched = gt_boxes.gather(1, idx[..., None].expand(-1, -1, 4)).to(anchors.dtype)
        target = self.coder.encode(anchors[None].expand_as(matched), matched)
        loss_box = ((deltas - target).abs().sum(-1) * pos).sum() / norm
        return {"loss_retina_cls": loss_cls, "loss_retina_bbox": loss_box}
