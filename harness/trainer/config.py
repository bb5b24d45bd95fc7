"""Typed trainer settings and the `--set key=value` override mechanism.

A config file is plain Python: it builds a `Config` from the frozen dataclasses below and
defines `build_detector(cfg)`, which assembles the detector from concrete module classes.
Every section rejects unknown keys; overrides are converted to the field's declared type.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import typing
from dataclasses import dataclass, field
from typing import Tuple

from .schedule import SCHEDULES, check_steps


class ConfigError(ValueError):
    """A bad config file or a bad override; the message names the key or the file."""


PRECISIONS = ("fp32", "fp16", "bf16")
NORMS = ("frozen_bn", "gn", "syncbn", "bn")
SOURCES = ("synthetic", "coco")
CANVASES = ("fixed", "batch")
MODELS = ("retina", "faster", "mask")
ROI_ALIGNS = ("torchvision", "sparse", "auto")
ANCHOR_CORNERS = ("exact", "whole-pixel")
CHANNELS_LAST = ("true", "false", "auto")
# torch's CPU kernel level (torch.backends.cpu.get_cpu_capability()) where channels_last=auto turns on
CHANNELS_LAST_CPU = ("AVX512", "AVX512_BF16", "AMX")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _check_choice(section, name, value, choices):
    if value not in choices:
        raise ConfigError(f"{section}.{name}={value!r} is not one of {', '.join(choices)}")


def _check_min(section, name, value, low):
    if value < low:
        raise ConfigError(f"{section}.{name}={value!r} must be >= {low}")


@dataclass(frozen=True)
class ModelConfig:
    name: str = "faster"
    block: str = "bottleneck"           # bottleneck | basic
    layers: Tuple[int, ...] = (3, 4, 6, 3)
    base_width: int = 64
    norm: str = "frozen_bn"
    frozen_stages: int = 1              # stem plus this many residual stages are frozen
    num_classes: int = 80               # foreground classes
    fpn_channels: int = 256
    # RPN
    rpn_pre_nms_top_n_train: int = 2000  # per FPN level and image
    rpn_post_nms_top_n_train: int = 2000  # per image
    rpn_nms_thresh: float = 0.7
    rpn_batch_per_image: int = 256
    rpn_positive_fraction: float = 0.5
    # R-CNN
    roi_batch_per_image: int = 512
    roi_positive_fraction: float = 0.25
    fc_dim: int = 1024
    mask_max_rois_per_image: int = 128
    mask_conv_dim: int = 256
    roi_align_sampling_ratio: int = 2   # points per bin side (0: adaptive, as torchvision's ops)
    roi_align_aligned: bool = False     # half-pixel offset of RoIAlign (Detectron2's aligned=True)
    # fixed shapes and no host sync inside a step (two-stage models): fixed-point NMS in the
    # RPN (this many passes), RoIAlign from one atlas of the levels, padded RoI slots
    sync_free: bool = False
    sync_free_nms_passes: int = 32
    # RetinaNet
    retina_num_convs: int = 4
    # speed levers that give the same numbers up to rounding (docs/methodology.md, "Levers")
    retina_merge_first_convs: bool = False  # both towers' first conv as one 256->512 conv
    fused_focal_loss: bool = False          # focal.py: one autograd function, sync-free
    mask_target_class_only: bool = False   # training mask logits of each RoI's class only
    # RoIAlign of the box and mask heads: torchvision's kernel, or roi.py's sparse matrix products
    # (the same values; on the CPU a tenth of the kernel's backward); auto: sparse on the CPU
    roi_align: str = "torchvision"
    # anchor corners: exact (w = size / sqrt(ratio), as mmdetection and detectron2 place them) or
    # rounded to whole pixels (as torchvision's AnchorGenerator and py-faster-rcnn do)
    anchor_corners: str = "exact"
    # initial weights (pretrained.py); empty: the trainer's own initialisation
    backbone_weights: str = ""          # ImageNet ResNet state_dict, torchvision's layout
    weights: str = ""                   # a whole detector (the same as train.py --weights)

    def __post_init__(self):
        _check_choice("model", "name", self.name, MODELS)
        _check_choice("model", "norm", self.norm, NORMS)
        _check_choice("model", "block", self.block, ("bottleneck", "basic"))
        if len(self.layers) != 4:
            raise ConfigError("model.layers needs 4 stage depths")
        _check_min("model", "frozen_stages", self.frozen_stages, 0)
        _check_min("model", "roi_align_sampling_ratio", self.roi_align_sampling_ratio, 0)
        if self.frozen_stages > 4:
            raise ConfigError("model.frozen_stages must be <= 4")
        for name in ("num_classes", "fpn_channels", "rpn_pre_nms_top_n_train",
                     "rpn_post_nms_top_n_train", "rpn_batch_per_image", "roi_batch_per_image",
                     "fc_dim", "mask_max_rois_per_image", "base_width", "sync_free_nms_passes"):
            _check_min("model", name, getattr(self, name), 1)
        _check_choice("model", "roi_align", self.roi_align, ROI_ALIGNS)
        _check_choice("model", "anchor_corners", self.anchor_corners, ANCHOR_CORNERS)
        if self.roi_align == "sparse" and self.roi_align_sampling_ratio < 1:
            raise ConfigError("model.roi_align=sparse needs model.roi_align_sampling_ratio >= 1: with adaptive "
                              "sampling (0) each box has its own number of samples")
        if self.backbone_weights and self.weights:
            raise ConfigError("model.backbone_weights and model.weights are both set: model.weights "
                              "replaces every tensor, set one of them")
        if self.backbone_weights and self.norm == "gn":
            raise ConfigError("model.backbone_weights needs batch norms (model.norm=frozen_bn, bn or syncbn), "
                              "not model.norm=gn")


@dataclass(frozen=True)
class DataConfig:
    source: str = "synthetic"
    images_per_device: int = 2
    input_size: Tuple[int, int] = (800, 1344)   # H, W: every image is fitted and padded to it
    coco_json: str = ""
    coco_images: str = ""
    workers: int = 2
    max_gt: int = 100                   # ground-truth boxes kept per image
    synthetic_max_boxes: int = 8        # 0 gives images without boxes
    synthetic_pool: int = 0             # >0: cycle over this many fixed images
    shuffle: bool = True                # coco: reshuffle each pass; false: the file's order, cycled
    flip_prob: float = 0.0              # coco: chance an image is mirrored left-right (augment.py)
    scales: Tuple[int, ...] = ()        # coco: shorter-side lengths drawn per image; empty: fit input_size
    canvas: str = "fixed"               # coco: fixed (every batch input_size) | batch (its largest image, to 32)
    aspect_grouping: bool = False       # coco: batches of landscape or of portrait images (needs canvas=batch)
    mask_crop: int = 0                  # coco, masks: >0 averages mask crops down to this side (masks.py)

    def __post_init__(self):
        _check_choice("data", "source", self.source, SOURCES)
        _check_min("data", "images_per_device", self.images_per_device, 1)
        _check_min("data", "workers", self.workers, 0)
        _check_min("data", "max_gt", self.max_gt, 1)
        _check_min("data", "synthetic_max_boxes", self.synthetic_max_boxes, 0)
        _check_min("data", "synthetic_pool", self.synthetic_pool, 0)
        if len(self.input_size) != 2 or min(self.input_size) < 32:
            raise ConfigError(f"data.input_size={self.input_size!r} needs HxW, both >= 32")
        if not 0.0 <= self.flip_prob <= 1.0:
            raise ConfigError(f"data.flip_prob={self.flip_prob!r} must be between 0 and 1")
        for side in self.scales:
            if side < 16:
                raise ConfigError(f"data.scales={','.join(map(str, self.scales))}: each must be >= 16")
        _check_choice("data", "canvas", self.canvas, CANVASES)
        if self.mask_crop and self.mask_crop < 8:
            raise ConfigError(f"data.mask_crop={self.mask_crop} must be 0 (full resolution) or >= 8")
        if self.aspect_grouping and self.canvas != "batch":
            raise ConfigError("data.aspect_grouping=true needs data.canvas=batch: on the fixed canvas every "
                              "batch is padded to data.input_size whatever its images' shapes")
        if self.source == "coco" and not (self.coco_json and self.coco_images):
            raise ConfigError("data.source=coco needs data.coco_json and data.coco_images")


@dataclass(frozen=True)
class TrainConfig:
    max_iter: int = 100
    precision: str = "fp32"
    seed: int = 0
    lr: float = 0.02                    # for `lr_reference_batch` images, scaled linearly
    lr_reference_batch: int = 16
    momentum: float = 0.9
    weight_decay: float = 1e-4
    decay_norm_bias: bool = False       # decay biases and norm weights too (torchvision's and mmdetection's default)
    clip_grad_norm: float = 0.0         # > 0: scale the gradients so their total L2 norm is at most this; 0: off
    warmup_iters: int = 500
    warmup_factor: float = 1.0 / 3
    # activations and conv weights in NHWC: true | false | auto (resolve_for_device: on where it was
    # measured faster, a CPU at torch's AVX-512 level; docs/methodology.md, "Speed levers")
    channels_last: str = "false"
    compile_backbone: bool = False
    fused_sgd: bool = False             # torch's fused SGD kernel (one pass over all parameters)
    cuda_graph: bool = False            # graphs.py: forward and backward captured once, replayed (one GPU)
    checkpoint_backbone: bool = False
    tf32: bool = False                  # TensorFloat-32 matrix products (CUDA, compute capability 8.0+)
    # bf16 on a CPU without bf16 kernels runs torch's emulation, tens of times slower: refused
    # unless this is set, which only the test suite does (tiny shapes, never timed); the META
    # line names it and says whether the run emulated (emulated_bf16)
    allow_emulated_bf16: bool = False
    device: str = "auto"                # auto | cpu | cuda
    threads: int = 0                    # torch intra-op threads, 0 leaves the default
    schedule: str = "step"              # step | cosine | constant (schedule.py), after warmup
    steps: Tuple[int, ...] = ()         # step: iterations done before each decay; empty: 1x steps
    gamma: float = 0.1                  # step: lr multiplier at each step
    checkpoint_every: int = 0           # write a checkpoint every N iterations and at the end; 0: off
    checkpoint_dir: str = ""            # folder of the checkpoints (needed when checkpoint_every > 0)

    def __post_init__(self):
        # true/false in any of the spellings a boolean override takes (and Python's bools)
        low = str(self.channels_last).strip().lower()
        object.__setattr__(self, "channels_last", "true" if low in _TRUE else "false" if low in _FALSE else low)
        _check_choice("train", "channels_last", self.channels_last, CHANNELS_LAST)
        _check_choice("train", "precision", self.precision, PRECISIONS)
        _check_choice("train", "device", self.device, ("auto", "cpu", "cuda"))
        _check_min("train", "max_iter", self.max_iter, 1)
        _check_min("train", "warmup_iters", self.warmup_iters, 0)
        _check_min("train", "lr_reference_batch", self.lr_reference_batch, 1)
        _check_min("train", "threads", self.threads, 0)
        _check_min("train", "checkpoint_every", self.checkpoint_every, 0)
        if not self.lr > 0:
            raise ConfigError(f"train.lr={self.lr!r} must be > 0")
        if not self.clip_grad_norm >= 0:
            raise ConfigError(f"train.clip_grad_norm={self.clip_grad_norm!r} must be >= 0 (0: no clipping)")
        _check_choice("train", "schedule", self.schedule, SCHEDULES)
        if not self.gamma > 0:
            raise ConfigError(f"train.gamma={self.gamma!r} must be > 0")
        if self.steps and self.schedule != "step":
            raise ConfigError(f"train.steps applies to train.schedule=step, not {self.schedule}")
        problem = check_steps(tuple(self.steps), self.max_iter)
        if problem:
            raise ConfigError(problem)
        if self.checkpoint_every and not self.checkpoint_dir:
            raise ConfigError(f"train.checkpoint_every={self.checkpoint_every} needs train.checkpoint_dir")


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)



def _convert(key, text, hint):
    origin = typing.get_origin(hint)
    try:
        if hint is bool:
            low = text.strip().lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ValueError("expected true or false")
        if hint is int:
            return int(text)
        if hint is float:
            return float(text)
        if hint is str:
            return text
        if origin in (tuple, Tuple):
            text = text.strip().strip("[]()")
            sep = "x" if "x" in text else ","
            return tuple(int(part) for part in text.split(sep) if part.strip())
    except ValueError as exc:
        raise ConfigError(f"bad value for --set {key}={text!r}: {exc}") from None
    raise ConfigError(f"--set {key}: unsupported field type {hint!r}")


def valid_keys(cfg: Config):
    return [f"{sec.name}.{f.name}" for sec in dataclasses.fields(cfg)
            for f in dataclasses.fields(getattr(cfg, sec.name))]


def apply_overrides(cfg: Config, pairs) -> Config:
    """Return a copy of `cfg` with each 'section.field=value' in `pairs` applied."""
    changes = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--set expects key=value, got {pair!r}")
        key, text = pair.split("=", 1)
        key = key.strip()
        section, _, name = key.partition(".")
        sub = getattr(cfg, section, None) if section in ("model", "data", "train") else None
        if sub is None or name not in {f.name for f in dataclasses.fields(sub)}:
            raise ConfigError(f"unknown --set key {key!r}; valid keys: {', '.join(valid_keys(cfg))}")
        hint = typing.get_type_hints(type(sub))[name]
        changes.setdefault(section, {})[name] = _convert(key, text, hint)
    try:
        sections = {sec: dataclasses.replace(getattr(cfg, sec), **vals)
                    for sec, vals in changes.items()}
        return dataclasses.replace(cfg, **sections)
    except TypeError as exc:
        raise ConfigError(str(exc)) from None


def load_config_module(path):
    """Import a config file by path; it must define CONFIG and build_detector."""
    try:
        spec = importlib.util.spec_from_file_location("detbench_trainer_config", path)
        if spec is None or spec.loader is None:
            raise ConfigError(f"config {path}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except ConfigError:
        raise
    except Exception as exc:  # the config's own code failed
        raise ConfigError(f"config {path} does not build: {type(exc).__name__}: {exc}") from None
    for name in ("CONFIG", "build_detector"):
        if not hasattr(module, name):
            raise ConfigError(f"config {path} does not build: it defines no {name}")
    if not isinstance(module.CONFIG, Config):
        raise ConfigError(f"config {path} does not build: CONFIG is not a trainer Config")
    return module


def resolve_for_device(cfg, device_kind, cpu_capability=""):
    """The config with its device-dependent choices made for `device_kind` ("cpu" or "cuda"), so
    that what ran is what the run's META line says:
    - model.roi_align=auto becomes sparse on the CPU (with a fixed sampling ratio) and
      torchvision's kernel elsewhere;
    - train.channels_last=auto becomes true on a CPU whose torch kernels run at an AVX-512 level
      (`cpu_capability`, torch.backends.cpu.get_cpu_capability()), false elsewhere (AVX2, where no
      gain was measured, and GPUs, where none has been)."""
    m, t = cfg.model, cfg.train
    if m.roi_align == "auto":
        sparse = device_kind == "cpu" and m.roi_align_sampling_ratio >= 1
        m = dataclasses.replace(m, roi_align="sparse" if sparse else "torchvision")
    if t.channels_last == "auto":
        on = device_kind == "cpu" and cpu_capability in CHANNELS_LAST_CPU
        t = dataclasses.replace(t, channels_last="true" if on else "false")
    return dataclasses.replace(cfg, model=m, train=t)


def main(argv=None):
    """`python -m harness.trainer.config [--set KEY=VALUE ...]`: whether the trainer takes these
    overrides (each key, and its value's type, on the default config: no config file, no torch).
    Exit 0, or one line on stderr and exit 2, as train.py refuses them."""
    import argparse
    import sys
    parser = argparse.ArgumentParser(prog="python -m harness.trainer.config", description=main.__doc__)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        apply_overrides(Config(), args.overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
