"""Mask R-CNN with a ResNet-50 v1 FPN backbone, 1x schedule (SimpleDet mask_r50v1_fpn_1x)."""
from harness.trainer.backbone import ResNet
from harness.trainer.config import Config, DataConfig, ModelConfig, TrainConfig
from harness.trainer.detectors import FasterRCNN
from harness.trainer.fpn import FPN
from harness.trainer.rcnn import MaskHead, RoIHeads, TwoFCHead
from harness.trainer.roi import MultiLevelRoIAlign
from harness.trainer.rpn import RPN, RPNHead

CONFIG = Config(
    model=ModelConfig(name="mask", norm="frozen_bn", frozen_stages=1,
                      rpn_pre_nms_top_n_train=2000, rpn_post_nms_top_n_train=2000,
                      roi_batch_per_image=512, roi_positive_fraction=0.25,
                      mask_max_rois_per_image=128, mask_target_class_only=True, roi_align="auto"),
    data=DataConfig(images_per_device=2, input_size=(800, 1344)),
    train=TrainConfig(lr=0.02, lr_reference_batch=16, warmup_iters=500, fused_sgd=True,
                      channels_last="auto"),
)


def build_detector(cfg: Config):
    m = cfg.model
    backbone = ResNet(block=m.block, layers=m.layers, base_width=m.base_width, norm=m.norm,
                      frozen_stages=m.frozen_stages, out_stages=(2, 3, 4, 5),
                      checkpoint_stages=cfg.train.checkpoint_backbone)
    neck = FPN(in_channels=backbone.channels(), out_channels=m.fpn_channels, extra="pool")
    rpn = RPN(head=RPNHead(in_channels=m.fpn_channels, num_anchors=3),
              pre_nms_top_n=m.rpn_pre_nms_top_n_train, post_nms_top_n=m.rpn_post_nms_top_n_train,
              nms_thresh=m.rpn_nms_thresh, batch_per_image=m.rpn_batch_per_image,
              positive_fraction=m.rpn_positive_fraction, sync_free=m.sync_free,
              nms_passes=m.sync_free_nms_passes, whole_pixel_anchors=m.anchor_corners == "whole-pixel")
    roi_heads = RoIHeads(
        box_extractor=MultiLevelRoIAlign(output_size=7, strides=(4, 8, 16, 32),
                                         sampling_ratio=m.roi_align_sampling_ratio,
                                         aligned=m.roi_align_aligned, sync_free=m.sync_free,
                                         sparse=m.roi_align == "sparse"),
        box_head=TwoFCHead(in_channels=m.fpn_channels, pool_size=7, fc_dim=m.fc_dim,
                           num_classes=m.num_classes),
        mask_extractor=MultiLevelRoIAlign(output_size=14, strides=(4, 8, 16, 32),
                                         sampling_ratio=m.roi_align_sampling_ratio,
                                         aligned=m.roi_align_aligned, sync_free=m.sync_free,
                                         sparse=m.roi_align == "sparse"),
        mask_head=MaskHead(in_channels=m.fpn_channels, conv_dim=m.mask_conv_dim, num_convs=4,
                           num_classes=m.num_classes),
        batch_per_image=m.roi_batch_per_image, positive_fraction=m.roi_positive_fraction, sync_free=m.sync_free,
        mask_max_rois_per_image=m.mask_max_rois_per_image, mask_size=28,
        mask_target_class_only=m.mask_target_class_only)
    return FasterRCNN(backbone=backbone, neck=neck, rpn=rpn, roi_heads=roi_heads)
