"""Masks as per-object crops (masks.py): RLE decoding, the mask targets and loss against the
full-canvas masks the loader used to ship, and what a batch weighs."""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")
mask_utils = pytest.importorskip("pycocotools.mask", reason="the trainer extra has pycocotools")

from PIL import Image, ImageDraw  # noqa: E402

from conftest import config_path, write_coco  # noqa: E402
from harness.trainer import coco, masks  # noqa: E402
from harness.trainer.augment import Augment  # noqa: E402
from harness.trainer.config import apply_overrides, load_config_module  # noqa: E402

CANVAS = (128, 128)
# shapes whose content fills the canvas's height, its width, both, or neither
EDGE_SHAPES = [(128, 128), (64, 128), (128, 96), (96, 100), (128, 64), (100, 128)]


# --- the full-canvas path this replaced, as a reference -------------------------------------

def canvas_mask(ann, scale, box, content, flip):
    """One object's mask on the whole canvas, rasterised by pycocotools as COCOeval rasterises
    the ground truth, cut to the image's content and mirrored within the image's columns."""
    seg = ann.get("segmentation")
    if isinstance(seg, list) and seg:
        polygons = [[float(v) * scale for v in poly] for poly in seg]
    else:
        x0, y0, x1, y1 = box
        polygons = [[x0, y0, x1, y0, x1, y1, x0, y1]]
    mask = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects(polygons, *CANVAS))).astype(np.uint8)
    mask[content[0]:], mask[:, content[1]:] = 0, 0
    if flip:
        mask[:, :content[1]] = mask[:, :content[1]][:, ::-1]
    return torch.from_numpy(np.ascontiguousarray(mask))


def canvas_masks(dataset, keys):
    """[B, G, H, W] full-canvas masks of the dataset's items `keys` (index, position)."""
    out = []
    for i, position in keys:
        rec = dataset.records[i]
        flip, short = dataset.augment.draw(position)
        _, scale, content, _ = coco.load_image(rec["path"], dataset.size, flip, short, pad=False)
        per_object = []
        for ann in rec["anns"]:
            x, y, bw, bh = (float(v) * scale for v in ann["bbox"])
            if bw >= 1 and bh >= 1:
                per_object.append(canvas_mask(ann, scale, [x, y, x + bw, y + bh], content, flip))
        out.append(torch.stack(per_object))
    g = max(len(m) for m in out)
    full = torch.zeros((len(out), g) + CANVAS, dtype=torch.uint8)
    for i, m in enumerate(out):
        full[i, :len(m)] = m
    return full


def as_crops(full):
    """Full-canvas masks in the crop format: each crop the whole canvas, the identity map."""
    b, g = full.shape[:2]
    return full * masks.INSIDE, torch.tensor([1.0, 1.0, 0.0, 0.0]).repeat(b, g, 1)


def near_boxes(boxes, labels, n, seed):
    """RoIs like the sampled positives: each ground-truth box, and `n` jittered copies of it
    with IoU >= 0.5, clipped to the canvas; (object index [K], boxes [K, 4])."""
    from torchvision.ops import box_iou
    gen = torch.Generator().manual_seed(seed)
    objects, rois = [], []
    for obj in (labels.view(-1) > 0).nonzero()[:, 0].tolist():
        gt = boxes.view(-1, 4)[obj]
        size = (gt[2:] - gt[:2]).repeat(2)
        jitter = gt + (torch.rand((4 * n, 4), generator=gen) - 0.5) * 0.6 * size
        jitter[:, 0::2] = jitter[:, 0::2].clamp(0, CANVAS[1])
        jitter[:, 1::2] = jitter[:, 1::2].clamp(0, CANVAS[0])
        ok = (box_iou(jitter, gt[None])[:, 0] >= 0.5) & (jitter[:, 2:] > jitter[:, :2]).all(1)
        picked = torch.cat([gt[None], jitter[ok][:n]])
        rois.append(picked)
        objects += [obj] * len(picked)
    return torch.tensor(objects), torch.cat(rois)


def batch_of(dataset, keys):
    return coco.collate([dataset[k] for k in keys], canvas=CANVAS)


@pytest.fixture
def edge_coco(tmp_path):
    return write_coco(tmp_path / "edges", EDGE_SHAPES, seed=5)


@pytest.mark.parametrize("flip", [False, True])
def test_crop_targets_equal_the_full_canvas_targets(edge_coco, flip):
    """The 28x28 RoIAlign targets from the crops equal those from full-canvas masks, for RoIs
    at IoU >= 0.5 with their object, at the image's and the canvas's edges, mirrored or not."""
    records, _ = coco.load_annotations(*edge_coco)
    dataset = coco.CocoDataset(records, CANVAS, 100, True, Augment(flip_prob=1.0 if flip else 0.0))
    keys = [(i, i) for i in range(len(records))]
    batch = batch_of(dataset, keys)
    full = canvas_masks(dataset, keys)
    assert torch.equal(masks.full_masks(batch["mask_crops"], batch["mask_affine"], *CANVAS), full)
    objects, rois = near_boxes(batch["boxes"], batch["labels"], 12, seed=1)
    assert len(rois) > 100
    new = masks.roi_targets(batch["mask_crops"], batch["mask_affine"], objects, rois, 28)
    old = masks.roi_targets(*as_crops(full), objects, rois, 28)
    assert old.sum() > 0
    # float32 rounding of the sample positions only
    assert float((new - old).abs().max()) < 1e-5


def random_polygon(rng, size):
    """A star-shaped polygon of 12 float vertices, 12 to 50 pixels across, inside a size x size image."""
    cx, cy = rng.uniform(20, size - 20, 2)
    rx, ry = rng.uniform(6, 25, 2)
    t = np.sort(rng.uniform(0, 2 * np.pi, 12))
    r = rng.uniform(0.7, 1.0, 12)
    return np.stack([cx + rx * r * np.cos(t), cy + ry * r * np.sin(t)], 1).clip(0, size).reshape(-1).tolist()


@pytest.mark.parametrize("flip", [False, True])
def test_a_target_pasted_back_over_its_box_is_the_mask_cocoeval_scores_against(flip):
    """A polygon through the training path (crop, 28x28 target over its own box) and back through
    the inference paste over that box lands on pycocotools' rasterisation of the same polygon:
    centred to a twentieth of a pixel on average, at mask IoU 0.99 on average. A half-pixel
    shift between target and paste, or a rasteriser that counts the pixels an edge touches,
    caps the IoU of a perfect prediction near 0.9 for objects of this size."""
    from harness.trainer import postprocess
    rng = np.random.default_rng(7)
    ious, dx, dy = [], [], []
    for _ in range(30):
        poly = random_polygon(rng, 128)
        seen = [128 - v if k % 2 == 0 else v for k, v in enumerate(poly)] if flip else poly
        truth = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects([seen], *CANVAS))).astype(bool)
        box = [min(seen[0::2]), min(seen[1::2]), max(seen[0::2]), max(seen[1::2])]
        unflipped = [128 - box[2], box[1], 128 - box[0], box[3]] if flip else box
        crop = masks.object_crop({"segmentation": [poly]}, 1.0, CANVAS, CANVAS, flip, unflipped, 0)
        crops, affine = masks.pack([[crop]], [CANVAS], CANVAS)
        target = masks.roi_targets(crops, affine, torch.tensor([0]), torch.tensor([box]), 28)
        pasted = postprocess.paste_masks(target, torch.tensor([box]), *CANVAS)[0].numpy()
        ious.append((pasted & truth).sum() / (pasted | truth).sum())
        (py, px), (ty, tx) = (np.nonzero(m) for m in (pasted, truth))
        dx.append(px.mean() - tx.mean())
        dy.append(py.mean() - ty.mean())
    assert abs(np.mean(dx)) < 0.05 and abs(np.mean(dy)) < 0.05, (np.mean(dx), np.mean(dy))
    assert np.mean(ious) > 0.99 and min(ious) > 0.95, (np.mean(ious), min(ious))


def test_an_object_without_a_segmentation_is_its_box_at_pixel_centres():
    """The box (12.3, 5.2)-(40.7, 20.2) covers the pixels whose centres lie in it: columns 12..40,
    rows 5..19, as pycocotools rasterises that box as a polygon."""
    crop = masks.object_crop({}, 1.0, CANVAS, CANVAS, False, (12.3, 5.2, 40.7, 20.2), 0)
    crops, affine = masks.pack([[crop]], [CANVAS], CANVAS)
    full = masks.full_masks(crops, affine, *CANVAS)[0, 0].numpy()
    rows, cols = np.flatnonzero(full.any(1)), np.flatnonzero(full.any(0))
    assert (rows[0], rows[-1], cols[0], cols[-1]) == (5, 19, 12, 40)
    assert full.sum() == 15 * 29


def test_crop_targets_of_the_sync_free_path_are_the_same(edge_coco):
    records, _ = coco.load_annotations(*edge_coco)
    dataset = coco.CocoDataset(records, CANVAS, 100, True)
    batch = batch_of(dataset, [(0, 0), (1, 1), (2, 2)])
    objects, rois = near_boxes(batch["boxes"], batch["labels"], 6, seed=2)
    shared = masks.roi_targets(batch["mask_crops"], batch["mask_affine"], objects, rois, 28)
    every = masks.roi_targets(batch["mask_crops"], batch["mask_affine"], objects, rois, 28, share=False)
    assert torch.equal(shared, every)


def test_crops_of_objects_past_the_limit_are_averaged_down(edge_coco):
    """With crops of at most 24 pixels a side (the objects here are up to 90), the targets
    stay within a few hundredths of the full-resolution ones on average."""
    records, _ = coco.load_annotations(*edge_coco)
    keys = [(i, i) for i in range(len(records))]
    exact = batch_of(coco.CocoDataset(records, CANVAS, 100, True), keys)
    small = batch_of(coco.CocoDataset(records, CANVAS, 100, True, mask_crop=24), keys)
    assert max(small["mask_crops"].shape[-2:]) <= 25 < max(exact["mask_crops"].shape[-2:])
    objects, rois = near_boxes(exact["boxes"], exact["labels"], 12, seed=3)
    a = masks.roi_targets(exact["mask_crops"], exact["mask_affine"], objects, rois, 28)
    b = masks.roi_targets(small["mask_crops"], small["mask_affine"], objects, rois, 28)
    diff = (a - b).abs()
    assert float(diff.mean()) < 0.03 and float((diff > 0.5).float().mean()) < 0.03


def mask_losses(cfg, module, images, targets):
    torch.manual_seed(0)
    model = module.build_detector(cfg).train()
    torch.manual_seed(1)
    return model(images, targets)


def test_mask_loss_equals_the_full_canvas_path(edge_coco):
    """One mask_tiny step on the same batch and the same sampling: with the crops, and with
    the full-canvas masks the loader used to ship (every loss term alike, the mask loss
    within 1e-6)."""
    from harness.trainer.data import _MEAN, _STD
    module = load_config_module(config_path("mask_tiny"))
    cfg = apply_overrides(module.CONFIG, ["model.num_classes=2"])
    records, _ = coco.load_annotations(*edge_coco)
    dataset = coco.CocoDataset(records, CANVAS, 100, True, Augment(flip_prob=0.5, seed=1))
    keys = [(i, i) for i in range(len(records))]
    batch = batch_of(dataset, keys)
    batch.pop("pixels")
    images = (batch.pop("images").float() - torch.tensor(_MEAN).view(1, 3, 1, 1)) / torch.tensor(_STD).view(1, 3, 1, 1)
    new = mask_losses(cfg, module, images, batch)
    full = dict(batch)
    full["mask_crops"], full["mask_affine"] = as_crops(canvas_masks(dataset, keys))
    old = mask_losses(cfg, module, images, full)
    assert set(new) == set(old)
    for name in new:
        assert float(new[name].detach()) == pytest.approx(float(old[name].detach()), rel=1e-6, abs=1e-7), name


def test_a_batch_weighs_its_crops_not_its_canvas(edge_coco):
    records, _ = coco.load_annotations(*edge_coco)
    batch = batch_of(coco.CocoDataset(records, CANVAS, 100, True), [(0, 0), (1, 1)])
    b, g = batch["labels"].shape
    crops = batch["mask_crops"].nbytes + batch["mask_affine"].nbytes
    assert crops * 2 < b * g * CANVAS[0] * CANVAS[1]     # what the full-canvas masks weighed


def test_synthetic_crops_are_the_full_canvas_ellipses():
    from harness.trainer.data import SyntheticBatches
    module = load_config_module(config_path("mask_tiny"))
    cfg = module.CONFIG.data
    images, targets = SyntheticBatches(cfg, 4, True, torch.device("cpu"), 0, 1, seed=3).batch(0)
    h, w = images.shape[-2:]
    full = masks.full_masks(targets["mask_crops"], targets["mask_affine"], h, w)
    boxes, labels = targets["boxes"], targets["labels"]
    ys = torch.arange(h, dtype=torch.float32)[None, :, None] + 0.5
    xs = torch.arange(w, dtype=torch.float32)[None, None, :] + 0.5
    for i in range(len(boxes)):
        n = int((labels[i] > 0).sum())
        c = (boxes[i, :n, :2] + boxes[i, :n, 2:]) / 2
        half = (boxes[i, :n, 2:] - boxes[i, :n, :2]) / 2
        inside = (((xs - c[:, 0, None, None]) / half[:, 0, None, None]) ** 2
                  + ((ys - c[:, 1, None, None]) / half[:, 1, None, None]) ** 2) <= 1
        assert torch.equal(full[i, :n].bool(), inside)
    objects, rois = near_boxes(boxes, labels, 8, seed=4)
    new = masks.roi_targets(targets["mask_crops"], targets["mask_affine"], objects, rois, 28)
    old = masks.roi_targets(*as_crops(full), objects, rois, 28)
    assert float((new - old).abs().max()) < 1e-5


# --- RLE ------------------------------------------------------------------------------------

def uncompressed(mask):
    """COCO's uncompressed RLE of a 0/1 [h, w] mask: run lengths in column-major order,
    starting with a run of zeros."""
    flat = mask.flatten(order="F")
    counts, current, run = [], 0, 0
    for v in flat:
        if v != current:
            counts.append(run)
            current, run = v, 0
        run += 1
    counts.append(run)
    return {"counts": [int(c) for c in counts], "size": list(mask.shape)}


def compressed(mask):
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"counts": rle["counts"].decode("ascii"), "size": [int(v) for v in rle["size"]]}


def blob(h, w, seed):
    rng = np.random.default_rng(seed)
    im = Image.new("L", (w, h), 0)
    x, y = rng.uniform(0.1, 0.5) * w, rng.uniform(0.1, 0.5) * h
    ImageDraw.Draw(im).ellipse([x, y, x + 0.4 * w, y + 0.4 * h], fill=1)
    ImageDraw.Draw(im).rectangle([x, y, x + 0.1 * w, y + 0.45 * h], fill=1)
    return np.array(im, dtype=np.uint8)


@pytest.fixture
def rle_coco(tiny_coco, tmp_path):
    """tiny_coco with its image 1 (96 x 128) objects given as RLE masks: one compressed, one
    uncompressed."""
    ann, images = tiny_coco
    doc = json.loads(open(ann).read())
    drawn = {}
    for k, a in enumerate(a for a in doc["annotations"] if a["image_id"] == 1):
        m = blob(96, 128, k)
        drawn[a["id"]] = m
        a["segmentation"] = compressed(m) if k == 0 else uncompressed(m)
        rows, cols = np.flatnonzero(m.any(1)), np.flatnonzero(m.any(0))
        a["bbox"] = [int(cols[0]), int(rows[0]), int(cols[-1] - cols[0] + 1), int(rows[-1] - rows[0] + 1)]
    path = tmp_path / "rle.json"
    path.write_text(json.dumps(doc))
    return str(path), images, drawn


def test_uncompressed_rle_is_what_pycocotools_reads():
    m = blob(40, 30, 7)
    assert np.array_equal(masks.decode_rle(uncompressed(m)), m)
    assert np.array_equal(masks.decode_rle(compressed(m)), m)


@pytest.mark.parametrize("size, flip", [((128, 128), False), ((128, 128), True), ((64, 64), False)])
def test_rle_masks_are_decoded_not_boxes(rle_coco, size, flip):
    ann, images, drawn = rle_coco
    records, _ = coco.load_annotations(ann, images)
    item = coco.CocoDataset(records, size, 100, True, Augment(flip_prob=1.0 if flip else 0.0))[(0, 0)]
    batch = coco.collate([item], canvas=size)
    full = masks.full_masks(batch["mask_crops"], batch["mask_affine"], *size)[0]
    rec = records[0]
    for k, a in enumerate(rec["anns"]):
        want = drawn[a["id"]]
        if size != (128, 128):   # scale 0.5: nearest pixel centres
            want = want[1::2, 1::2]
        if flip:
            want = want[:, ::-1]
        h, w = want.shape
        assert torch.equal(full[k, :h, :w], torch.from_numpy(np.ascontiguousarray(want))), a["id"]
        assert not full[k, h:].any() and not full[k, :, w:].any()
        assert full[k].sum() < 0.9 * (batch["boxes"][0, k, 2:] - batch["boxes"][0, k, :2]).prod()  # not a box


def test_training_on_rle_masks_runs(train_inprocess, rle_coco):
    ann, images, _ = rle_coco
    rc, iters, _, err = train_inprocess("mask_tiny", "data.source=coco", f"data.coco_json={ann}",
                                        f"data.coco_images={images}", "train.max_iter=2", "data.workers=1")
    assert rc == 0, err
    assert len(iters) == 2 and all(np.isfinite(r["losses"]["loss_mask"]) for r in iters)


@pytest.mark.parametrize("kind, edit, words", [
    ("compressed", lambda seg: {**seg, "size": [128, 96]}, "RLE of size 128x96 on an image of 96x128"),
    ("uncompressed", lambda seg: {**seg, "size": [48, 256]}, "RLE of size 48x256 on an image of 96x128"),
    ("uncompressed", lambda seg: {**seg, "counts": seg["counts"] + [5]}, "counts summing to 12293"),
])
def test_an_rle_of_the_wrong_size_is_one_line_naming_file_and_annotation(
        train_inprocess, rle_coco, tmp_path, kind, edit, words):
    ann, images, _ = rle_coco
    doc = json.loads(open(ann).read())
    target = next(a for a in doc["annotations"]
                  if isinstance(a["segmentation"], dict)
                  and isinstance(a["segmentation"]["counts"], list) == (kind == "uncompressed"))
    target["segmentation"] = edit(target["segmentation"])
    bad = tmp_path / "bad_rle.json"
    bad.write_text(json.dumps(doc))
    rc, iters, _, err = train_inprocess("mask_tiny", "data.source=coco", f"data.coco_json={bad}",
                                        f"data.coco_images={images}", "train.max_iter=1")
    assert rc == 2 and not iters
    lines = [ln for ln in err.strip().splitlines() if ln]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {bad}: annotation id {target['id']}: ") and words in lines[0], lines[0]


def test_bad_mask_crop_settings():
    from harness.trainer.config import ConfigError, DataConfig
    with pytest.raises(ConfigError, match=r"data.mask_crop=4 must be 0 \(full resolution\) or >= 8"):
        DataConfig(mask_crop=4)
    assert DataConfig().mask_crop == 0
