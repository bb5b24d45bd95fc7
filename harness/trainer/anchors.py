"""Anchor grids for feature pyramids, built on the device and cached per shape."""
import math

import torch


def pyramid_sizes(base_sizes, scales_per_octave=1):
    """((32,), (64,), ...) or, with 3 scales per octave, (32, 40.3, 50.8) per level."""
    return tuple(tuple(s * 2 ** (i / scales_per_octave) for i in range(scales_per_octave))
                 for s in base_sizes)


class AnchorGenerator:
    """Anchors ordered (level, y, x, cell anchor) to match heads' flattened outputs. A cell
    anchor of size s and ratio r (height / width) is s / sqrt(r) wide and s * sqrt(r) high,
    centred on its cell's corner; `whole_pixel` rounds its corners to whole pixels."""

    def __init__(self, sizes, aspect_ratios=(0.5, 1.0, 2.0), whole_pixel=False):
        self.sizes = sizes
        self.aspect_ratios = tuple(aspect_ratios)
        self.whole_pixel = whole_pixel
        self._cache = {}

    def cell_corners(self):
        """Each level's cell anchors (x1, y1, x2, y2) as they are placed, on the CPU."""
        return [self._cell(sizes, "cpu") for sizes in self.sizes]

    def num_cell_anchors(self):
        return len(self.sizes[0]) * len(self.aspect_ratios)

    def _cell(self, sizes, device):
        cells = []
        for r in self.aspect_ratios:
            hr = math.sqrt(r)
            for s in sizes:
                w, h = s / hr, s * hr
                cells.append([-w / 2, -h / 2, w / 2, h / 2])
        corners = torch.tensor(cells, dtype=torch.float32, device=device)
        return corners.round() if self.whole_pixel else corners

    def __call__(self, image_size, feature_shapes, device):
        key = (tuple(image_size), tuple(tuple(s) for s in feature_shapes), str(device))
        if key not in self._cache:
            levels = []
            for sizes, (fh, fw) in zip(self.sizes, feature_shapes):
                sy, sx = image_size[0] // fh, image_size[1] // fw
                ys = torch.arange(fh, device=device, dtype=torch.float32) * sy
                xs = torch.arange(fw, device=device, dtype=torch.float32) * sx
                yy, xx = torch.meshgrid(ys, xs, indexing="ij")
                shifts = torch.stack((xx, yy, xx, yy), dim=-1).reshape(-1, 1, 4)
                levels.append((shifts + self._cell(sizes, device)[None]).reshape(-1, 4))
            self._cache[key] = (torch.cat(levels), [len(a) for a in levels])
        return self._cache[key]


def flatten_head(outputs, channels_per_anchor):
    """Per-level head maps [B, A*C, H, W] -> one [B, sum(H*W*A), C] tensor."""
    flat = []
    for x in outputs:
        b, _, h, w = x.shape
        flat.append(x.permute(0, 2, 3, 1).reshape(b, -1, channels_per_anchor))
    return torch.cat(flat, dim=1)
