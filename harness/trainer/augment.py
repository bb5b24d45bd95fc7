"""Training-time augmentation of COCO images: horizontal flip and multi-scale sizes.

`Augment.draw(position)` decides, for the `position`-th image a rank's sampler hands out
(counted over the whole run, so a resumed run draws what an uninterrupted one would), whether
it is mirrored left-right (probability data.flip_prob) and the length its shorter side is
resized to (one of data.scales, uniformly; the image still fits data.input_size). The draw
depends only on (seed, position), never on torch's global generator or the worker it runs in.
With both settings off nothing is drawn and the data path is the one without augmentation.
"""
import random
from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class Augment:
    flip_prob: float = 0.0
    scales: Tuple[int, ...] = ()
    seed: int = 0

    @property
    def active(self):
        return self.flip_prob > 0 or bool(self.scales)

    def draw(self, position):
        """(mirror or not, shorter side in pixels or None) for the image at `position`."""
        rng = random.Random(self.seed * 1_000_003 + position)
        flip = rng.random() < self.flip_prob
        short = self.scales[rng.randrange(len(self.scales))] if self.scales else None
        return flip, short


def fit_scale(height, width, size, short=None):
    """The factor an image of height x width is resized by: it fits size (H, W) keeping its
    aspect ratio, and, with `short`, its shorter side is at most `short` pixels."""
    scale = min(size[0] / height, size[1] / width)
    if short:
        scale = min(scale, short / min(height, width))
    return scale
