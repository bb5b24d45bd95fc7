"""ResNet v1 backbone built from torchvision's residual blocks; freezing and norms are ours.

Frozen batch norm is folded into the preceding convolution: the conv runs with weights
scaled per output channel and the shift as its bias, which is the same arithmetic as
conv -> affine but skips one full pass over every activation map.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from torchvision.models.resnet import BasicBlock, Bottleneck


class FrozenBatchNorm2d(nn.Module):
    """Batch norm with fixed statistics and affine parameters (buffers, never trained)."""

    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def scale_shift(self):
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        return scale, self.bias - self.running_mean * scale

    def forward(self, x):
        scale, shift = self.scale_shift()
        return x * scale.view(1, -1, 1, 1).to(x.dtype) + shift.view(1, -1, 1, 1).to(x.dtype)


class ConvFrozenBN(nn.Module):
    """A convolution followed by a frozen batch norm, run as a single convolution."""

    def __init__(self, conv: nn.Conv2d, norm: FrozenBatchNorm2d):
        super().__init__()
        self.conv = conv
        self.norm = norm

    def forward(self, x):
        scale, shift = self.norm.scale_shift()
        weight = self.conv.weight * scale.view(-1, 1, 1, 1)
        c = self.conv
        return F.conv2d(x, weight, shift, c.stride, c.padding, c.dilation, c.groups)


def norm_factory(kind):
    if kind == "frozen_bn":
        return FrozenBatchNorm2d
    if kind == "gn":
        return lambda c: nn.GroupNorm(math.gcd(32, c), c)
    if kind == "syncbn":
        return nn.SyncBatchNorm
    if kind == "bn":
        return nn.BatchNorm2d
    raise ValueError(f"unknown norm {kind!r}")


def fold_frozen_norms(module: nn.Module):
    """Replace every (conv, FrozenBatchNorm2d) pair inside residual blocks and the stem."""
    pairs = [("conv1", "bn1"), ("conv2", "bn2"), ("conv3", "bn3")]
    for block in module.modules():
        for conv_name, bn_name in pairs:
            conv, bn = getattr(block, conv_name, None), getattr(block, bn_name, None)
            if isinstance(conv, nn.Conv2d) and isinstance(bn, FrozenBatchNorm2d):
                setattr(block, conv_name, ConvFrozenBN(conv, bn))
                setattr(block, bn_name, nn.Identity())
        down = getattr(block, "downsample", None)
        if isinstance(down, nn.Sequential) and len(down) == 2 and isinstance(down[1], FrozenBatchNorm2d):
            block.downsample = nn.Sequential(ConvFrozenBN(down[0], down[1]))


class ResNet(nn.Module):
    """Stem plus four residual stages; returns the outputs of the stages in `out_stages` (2..5)."""

    def __init__(self, *, block="bottleneck", layers=(3, 4, 6, 3), base_width=64,
                 norm="frozen_bn", frozen_stages=1, out_stages=(2, 3, 4, 5),
                 checkpoint_stages=False):
        super().__init__()
        block_cls = Bottleneck if block == "bottleneck" else BasicBlock
        norm_layer = norm_factory(norm)
        self.out_stages = tuple(out_stages)
        self.checkpoint_stages = checkpoint_stages
        self.frozen_stages = frozen_stages
        self.stem = nn.Sequential(
            nn.Conv2d(3, base_width, 7, 2, 3, bias=False), norm_layer(base_width),
            nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        inplanes = base_width
        self.stages = nn.ModuleList()
        self.out_channels = []
        for i, depth in enumerate(layers):
            planes = base_width * 2 ** i
            stride = 1 if i == 0 else 2
            blocks = []
            for j in range(depth):
                down = None
                if j == 0 and (stride != 1 or inplanes != planes * block_cls.expansion):
                    down = nn.Sequential(
                        nn.Conv2d(inplanes, planes * block_cls.expansion, 1, stride, bias=False),
                        norm_layer(planes * block_cls.expansion))
                blocks.append(block_cls(inplanes, planes, stride if j == 0 else 1, down,
                                        norm_layer=norm_layer))
                inplanes = planes * block_cls.expansion
            self.stages.append(nn.Sequential(*blocks))
            self.out_channels.append(inplanes)
        self._init_weights()
        if norm == "frozen_bn":
            self.stem = nn.Sequential(ConvFrozenBN(self.stem[0], self.stem[1]), *self.stem[2:])
            fold_frozen_norms(self)
        self._freeze()

    def _init_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _freeze(self):
        frozen = [self.stem] + list(self.stages[: self.frozen_stages]) if self.frozen_stages else []
        for part in frozen:
            for p in part.parameters():
                p.requires_grad_(False)

    def channels(self):
        return [self.out_channels[s - 2] for s in self.out_stages]

    def forward(self, x):
        x = self.stem(x)
        outs = []
        for i, stage in enumerate(self.stages):
            trainable = i >= self.frozen_stages
            if self.checkpoint_stages and trainable and self.training and torch.is_grad_enabled():
                x = checkpoint(stage, x, use_reentrant=False)
            else:
                x = stage(x)
            if i + 2 in self.out_stages:
                outs.append(x)
        return outs
