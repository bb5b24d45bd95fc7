"""The trainer's mask paste: each probability map laid exactly over its float box, read bilinearly
at pixel centres with zeros past the map's edge, binarised at 0.5."""
import math

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")

from harness.trainer.postprocess import paste_masks  # noqa: E402


def reference(prob, box, height, width, threshold=0.5):
    """Pixel by pixel: the map's value at the pixel's centre, cell i spanning the box's i-th part,
    bilinear between the four cells around it, a cell past the map reading zero."""
    m = len(prob)
    x0, y0, x1, y1 = box
    out = [[False] * width for _ in range(height)]
    for r in range(height):
        for c in range(width):
            u = (c + 0.5 - x0) / (x1 - x0) * m - 0.5
            v = (r + 0.5 - y0) / (y1 - y0) * m - 0.5
            i0, j0 = math.floor(v), math.floor(u)
            total = 0.0
            for i, wi in ((i0, 1 - (v - i0)), (i0 + 1, v - i0)):
                for j, wj in ((j0, 1 - (u - j0)), (j0 + 1, u - j0)):
                    if 0 <= i < m and 0 <= j < m:
                        total += wi * wj * prob[i][j]
            out[r][c] = total >= threshold
    return out


def test_a_certain_map_on_a_box_with_whole_pixel_corners_paints_exactly_the_box():
    probs = torch.full((1, 28, 28), 0.99)
    masks = paste_masks(probs, torch.tensor([[10.0, 6.0, 30.0, 21.0]]), 40, 50)
    expected = torch.zeros((40, 50), dtype=torch.bool)
    expected[6:21, 10:30] = True
    assert torch.equal(masks[0], expected)


def test_a_box_moved_by_a_fraction_of_a_pixel_moves_its_mask():
    probs = torch.full((1, 28, 28), 0.99)
    left = paste_masks(probs, torch.tensor([[10.4, 5.0, 20.0, 15.0]]), 24, 24)[0]
    right = paste_masks(probs, torch.tensor([[10.6, 5.0, 20.0, 15.0]]), 24, 24)[0]
    assert left[10, 10] and not right[10, 10]       # column 10's centre, 10.5, lies between the two
    assert torch.equal(left[:, 11:], right[:, 11:])


@pytest.mark.parametrize("seed", range(4))
def test_every_pixel_reads_the_map_at_its_centre(seed):
    g = torch.Generator().manual_seed(seed)
    n, m, height, width = 5, 7, 23, 31
    probs = torch.rand((n, m, m), generator=g)
    corner = torch.rand((n, 2), generator=g) * torch.tensor([width - 4.0, height - 4.0]) - 2.0
    side = 1.5 + torch.rand((n, 2), generator=g) * torch.tensor([width / 2.0, height / 2.0])
    boxes = torch.cat([corner, corner + side], 1)       # some reach past the image's edges
    masks = paste_masks(probs, boxes, height, width)
    for k in range(n):
        expected = torch.tensor(reference(probs[k].tolist(), boxes[k].tolist(), height, width))
        assert (masks[k] != expected).sum() <= 1, k     # a value within rounding of 0.5 may differ
        assert masks[k].any() or not expected.any()


def test_no_detections_paste_nothing():
    assert paste_masks(None, torch.zeros((0, 4)), 8, 9).shape == (0, 8, 9)


def test_a_box_outside_the_image_pastes_nothing():
    probs = torch.full((1, 28, 28), 0.99)
    assert not paste_masks(probs, torch.tensor([[50.0, 50.0, 60.0, 60.0]]), 20, 20).any()
