"""Two-stage detectors assembled from already-built parts."""
import torch.nn as nn


class FasterRCNN(nn.Module):
    """backbone -> neck -> rpn -> roi heads; forward(images, targets) returns a loss dict.

    A Mask R-CNN is this class with a mask extractor and mask head inside `roi_heads`.
    """

    def __init__(self, *, backbone, neck, rpn, roi_heads):
        super().__init__()
        self.backbone = backbone
        self.neck = neck
        self.rpn = rpn
        self.roi_heads = roi_heads

    def forward(self, images, targets):
        feats = self.neck(self.backbone(images))
        gt_valid = targets["labels"] > 0
        proposals, valid, losses = self.rpn(feats, tuple(images.shape[-2:]), targets["boxes"], gt_valid,
                                            targets.get("crowd"))
        losses.update(self.roi_heads(feats, proposals, valid, targets))
        return losses
