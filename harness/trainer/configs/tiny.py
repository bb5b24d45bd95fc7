"""Shared shrink of the full configs for fast tests: small backbone, heads and inputs."""
import dataclasses

TINY_MODEL = dict(block="basic", layers=(1, 1, 1, 1), base_width=16, fpn_channels=32,
                  num_classes=4, rpn_pre_nms_top_n_train=200, rpn_post_nms_top_n_train=100,
                  rpn_batch_per_image=64, roi_batch_per_image=64, fc_dim=64,
                  mask_max_rois_per_image=16, mask_conv_dim=32, retina_num_convs=2)
TINY_DATA = dict(images_per_device=2, input_size=(128, 128), synthetic_max_boxes=4, workers=0)
TINY_TRAIN = dict(max_iter=5, warmup_iters=0, lr=0.02, lr_reference_batch=2)


def shrink(cfg):
    return dataclasses.replace(
        cfg,
        model=dataclasses.replace(cfg.model, **TINY_MODEL),
        data=dataclasses.replace(cfg.data, **TINY_DATA),
        train=dataclasses.replace(cfg.train, **TINY_TRAIN))
