"""The trainer's mask paste gives the masks mmdetection's and detectron2's own pastes give, run in
their pinned envs on the same probability maps and boxes (torchvision's differs on purpose: it
widens each box by a cell and truncates it to whole pixels).

Needs each framework's env (`detbench env build NAME`): skipped with a reason without it, failed
under DETBENCH_REQUIRE_SERVICES=1 (detectron2 skips where its source cannot be had)."""
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")

from harness.frameworks import FRAMEWORKS  # noqa: E402
from harness.launch import envs  # noqa: E402
from harness.trainer.postprocess import paste_masks  # noqa: E402
from tests.support.services import need_env  # noqa: E402

pytestmark = pytest.mark.e2e

HEIGHT, WIDTH = 61, 83

# reads probs [N, M, M] and boxes [N, 4] from an .npz, writes the framework's binary masks
PASTE = {
    "mmdetection": """
import sys, numpy as np, torch
from mmdet.models.roi_heads.mask_heads.fcn_mask_head import _do_paste_mask
src = np.load(sys.argv[1])
masks, _ = _do_paste_mask(torch.from_numpy(src["probs"])[:, None], torch.from_numpy(src["boxes"]),
                          int(sys.argv[3]), int(sys.argv[4]), skip_empty=False)
np.save(sys.argv[2], (masks >= 0.5).numpy())
""",
    "detectron2": """
import sys, numpy as np, torch
from detectron2.layers.mask_ops import paste_masks_in_image
from detectron2.structures import Boxes
src = np.load(sys.argv[1])
masks = paste_masks_in_image(torch.from_numpy(src["probs"]), Boxes(torch.from_numpy(src["boxes"])),
                             (int(sys.argv[3]), int(sys.argv[4])), threshold=0.5)
np.save(sys.argv[2], masks.numpy().astype(bool))
""",
}


def maps_and_boxes(n=40, m=28, seed=3):
    """Smooth maps (a blob per map, as a trained mask head gives) on boxes of 3 to 50 pixels,
    with float corners, some reaching past the image's edges."""
    g = torch.Generator().manual_seed(seed)
    ys, xs = torch.meshgrid(torch.arange(m) + 0.5, torch.arange(m) + 0.5, indexing="ij")
    centre = m * (0.3 + 0.4 * torch.rand((n, 2), generator=g))
    radius = m * (0.2 + 0.3 * torch.rand((n, 1, 1), generator=g))
    dist = ((xs - centre[:, 0, None, None]) ** 2 + (ys - centre[:, 1, None, None]) ** 2).sqrt()
    probs = torch.sigmoid((radius - dist) / 1.5)
    corner = torch.rand((n, 2), generator=g) * torch.tensor([WIDTH - 10.0, HEIGHT - 10.0]) - 4.0
    side = 3.0 + torch.rand((n, 2), generator=g) * 47.0
    return probs, torch.cat([corner, corner + side], 1)


@pytest.mark.parametrize("framework", sorted(PASTE))
def test_the_trainers_paste_equals_the_frameworks(tmp_path, framework):
    need_env(framework)
    probs, boxes = maps_and_boxes()
    src, dst = tmp_path / "in.npz", tmp_path / "out.npy"
    np.savez(src, probs=probs.numpy(), boxes=boxes.numpy())
    out = subprocess.run([envs.python_for(FRAMEWORKS[framework].env), "-c", PASTE[framework], str(src), str(dst),
                          str(HEIGHT), str(WIDTH)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    theirs = torch.from_numpy(np.load(dst))
    ours = paste_masks(probs, boxes, HEIGHT, WIDTH)
    assert theirs.shape == ours.shape == (len(boxes), HEIGHT, WIDTH)
    assert ours.flatten(1).any(1).float().mean() > 0.8           # the blobs were pasted
    # a pixel whose value lies within float rounding of 0.5 may fall either way
    assert int((ours != theirs).sum()) <= 3, int((ours != theirs).sum())
