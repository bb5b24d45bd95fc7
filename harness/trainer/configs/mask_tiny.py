"""Tiny mask variant of mask_r50v1_fpn_1x for tests: same pipeline, small widths and inputs."""
from harness.trainer.configs import mask_r50v1_fpn_1x as base
from harness.trainer.configs.tiny import shrink

CONFIG = shrink(base.CONFIG)
build_detector = base.build_detector
