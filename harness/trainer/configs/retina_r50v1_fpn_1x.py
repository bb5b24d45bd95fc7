"""RetinaNet with a ResNet-50 v1 FPN backbone (P3-P7), 1x schedule (SimpleDet retina_r50v1_fpn_1x)."""
from harness.trainer.backbone import ResNet
from harness.trainer.config import Config, DataConfig, ModelConfig, TrainConfig
from harness.trainer.fpn import FPN
from harness.trainer.retina import RetinaHead, RetinaNet

CONFIG = Config(
    model=ModelConfig(name="retina", norm="frozen_bn", frozen_stages=1, retina_num_convs=4,
                      fused_focal_loss=True),
    data=DataConfig(images_per_device=2, input_size=(800, 1344)),
    train=TrainConfig(lr=0.01, lr_reference_batch=16, warmup_iters=500, fused_sgd=True,
                      channels_last="auto"),
)


def build_detector(cfg: Config):
    m = cfg.model
    backbone = ResNet(block=m.block, layers=m.layers, base_width=m.base_width, norm=m.norm,
                      frozen_stages=m.frozen_stages, out_stages=(3, 4, 5),
                      checkpoint_stages=cfg.train.checkpoint_backbone)
    neck = FPN(in_channels=backbone.channels(), out_channels=m.fpn_channels, extra="p6p7")
    head = RetinaHead(in_channels=m.fpn_channels, num_anchors=9, num_classes=m.num_classes,
                      num_convs=m.retina_num_convs, merge_first=m.retina_merge_first_convs)
    return RetinaNet(backbone=backbone, neck=neck, head=head, fused_focal_loss=m.fused_focal_loss,
                     whole_pixel_anchors=m.anchor_corners == "whole-pixel")
