"""Tiny faster variant of faster_r50v1_fpn_1x for tests: same pipeline, small widths and inputs."""
from harness.trainer.configs import faster_r50v1_fpn_1x as base
from harness.trainer.configs.tiny import shrink

CONFIG = shrink(base.CONFIG)
build_detector = base.build_detector
