"""Feature pyramid neck: top-down lateral merge plus optional extra coarse levels."""
import torch.nn as nn
import torch.nn.functional as F


def strided_conv(conv, x):
    """`conv(x)` for the strided 3x3 convs of the extra levels, the same function with the same
    gradients. Where a side of `x` is one pixel wide, the kernel's taps on that axis other than
    the centre read only zero padding, so they are left out of the product and get no gradient.
    torch 2.14's CPU bf16 convolution (oneDNN, with or without AMX) returns a wrong weight
    gradient for a stride-2 3x3 conv over an input one pixel wide: P7 of a 64x64 image, whose P6
    is 1x1, trained RetinaNet's P7 with garbage (up to 1e28, or NaN) in most steps."""
    (kh, kw), (ph, pw) = conv.kernel_size, conv.padding
    h, w = x.shape[-2:]
    centred = (h != 1 or kh == 2 * ph + 1) and (w != 1 or kw == 2 * pw + 1)
    plain = conv.padding_mode != "zeros" or tuple(conv.dilation) != (1, 1)
    if (h != 1 and w != 1) or not centred or plain:
        return conv(x)
    weight = conv.weight
    if h == 1:
        weight, ph = weight[:, :, ph:ph + 1], 0
    if w == 1:
        weight, pw = weight[:, :, :, pw:pw + 1], 0
    return F.conv2d(x, weight, conv.bias, conv.stride, (ph, pw), conv.dilation, conv.groups)


class FPN(nn.Module):
    """extra='pool' adds one level by stride-2 subsampling of the last output (R-CNN, P6);
    extra='p6p7' adds two strided 3x3 convs on the last output (RetinaNet, P6 and P7)."""

    def __init__(self, *, in_channels, out_channels=256, extra="pool"):
        super().__init__()
        if extra not in ("pool", "p6p7", "none"):
            raise ValueError(f"unknown FPN extra levels {extra!r}")
        self.extra = extra
        self.lateral = nn.ModuleList(nn.Conv2d(c, out_channels, 1) for c in in_channels)
        self.output = nn.ModuleList(nn.Conv2d(out_channels, out_channels, 3, padding=1)
                                    for _ in in_channels)
        if extra == "p6p7":
            self.p6 = nn.Conv2d(out_channels, out_channels, 3, 2, 1)
            self.p7 = nn.Conv2d(out_channels, out_channels, 3, 2, 1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_uniform_(m.weight, a=1)
                nn.init.zeros_(m.bias)

    def forward(self, feats):
        last = self.lateral[-1](feats[-1])
        outs = [self.output[-1](last)]
        for i in range(len(feats) - 2, -1, -1):
            lat = self.lateral[i](feats[i])
            last = lat + F.interpolate(last, size=lat.shape[-2:], mode="nearest")
            outs.insert(0, self.output[i](last))
        if self.extra == "pool":
            outs.append(F.max_pool2d(outs[-1], 1, 2))
        elif self.extra == "p6p7":
            p6 = strided_conv(self.p6, outs[-1])
            outs.extend([p6, strided_conv(self.p7, F.relu(p6))])
        return outs
