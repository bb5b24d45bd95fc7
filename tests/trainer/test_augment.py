"""Horizontal flip and multi-scale sizes of COCO training images (augment.py, coco.py, data.py)."""
import json

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from harness.trainer import coco, masks  # noqa: E402
from harness.trainer.augment import Augment  # noqa: E402
from harness.trainer.config import ConfigError, DataConfig  # noqa: E402
from harness.trainer.data import InfiniteShardedSampler  # noqa: E402


def dataset(tiny_coco, augment=None, size=(128, 128)):
    ann, images = tiny_coco
    records, _ = coco.load_annotations(ann, images)
    return coco.CocoDataset(records, size, 100, True, augment)


def on_canvas(item, size=(128, 128)):
    """One item as the fixed-canvas loader batches it: (image [3, H, W], masks [G, H, W])."""
    batch = coco.collate([item], canvas=size)
    return batch["images"][0], masks.full_masks(batch["mask_crops"], batch["mask_affine"], *size)[0]


def test_flip_mirrors_image_boxes_and_masks(tiny_coco):
    plain_image, plain_masks = on_canvas(dataset(tiny_coco)[0])
    flipped_item = dataset(tiny_coco, Augment(flip_prob=1.0))[(0, 5)]
    flipped_image, flipped_masks = on_canvas(flipped_item)
    h, w = 96, 128                      # image 0 is 96 x 128, fitted into 128 x 128 at scale 1
    assert torch.equal(flipped_image[:, :h, :w], plain_image[:, :h, :w].flip(-1))
    plain = dataset(tiny_coco)[0]
    mirrored = plain["boxes"].clone()
    mirrored[:, 0], mirrored[:, 2] = w - plain["boxes"][:, 2], w - plain["boxes"][:, 0]
    assert torch.allclose(flipped_item["boxes"], mirrored)
    assert torch.equal(flipped_item["labels"], plain["labels"])
    assert plain_masks.any()
    assert torch.equal(flipped_masks[:, :, :w], plain_masks[:, :, :w].flip(-1))
    assert not flipped_masks[:, :, w:].any()


def test_scales_resize_the_shorter_side_and_keep_the_canvas(tiny_coco):
    plain = dataset(tiny_coco)[0]
    small = dataset(tiny_coco, Augment(scales=(48,)))[(0, 0)]
    image, _ = on_canvas(small)
    assert image.shape == on_canvas(plain)[0].shape == (3, 128, 128)
    assert torch.allclose(small["boxes"], plain["boxes"] * 0.5)       # shorter side 96 -> 48
    assert small["image"].shape == (3, 48, 64)
    assert not image[:, 48:, :].any() and not image[:, :, 64:].any()
    assert image[:, :48, :64].any()


def test_the_draw_depends_on_seed_and_position_only():
    a = Augment(flip_prob=0.5, scales=(64, 96, 128), seed=3)
    draws = [a.draw(p) for p in range(200)]
    assert draws == [Augment(flip_prob=0.5, scales=(64, 96, 128), seed=3).draw(p) for p in range(200)]
    assert draws != [Augment(flip_prob=0.5, scales=(64, 96, 128), seed=4).draw(p) for p in range(200)]
    flips = sum(f for f, _ in draws)
    assert 60 < flips < 140
    assert {s for _, s in draws} == {64, 96, 128}
    assert Augment().draw(7) == (False, None) and not Augment().active


def test_positions_are_unique_over_ranks_and_survive_a_resume():
    def take(rank, start, n):
        it = iter(InfiniteShardedSampler(10, rank, 2, seed=1, start=start, positions=True))
        return [next(it) for _ in range(n)]
    whole = take(0, 0, 12)
    assert take(0, 5, 7) == whole[5:]
    other = take(1, 0, 12)
    assert not {p for _, p in whole} & {p for _, p in other}
    plain = iter(InfiniteShardedSampler(10, 0, 2, seed=1))
    assert [next(plain) for _ in range(12)] == [i for i, _ in whole]


@pytest.mark.parametrize("field, value, words", [("flip_prob", 1.5, "between 0 and 1"),
                                                 ("scales", (64, 8), "each must be >= 16")])
def test_bad_augmentation_settings(field, value, words):
    with pytest.raises(ConfigError, match=words):
        DataConfig(**{field: value})


def test_training_with_flip_and_scales_runs(train_inprocess, tiny_coco):
    ann, images = tiny_coco
    rc, iters, metas, err = train_inprocess(
        "mask_tiny", "data.source=coco", f"data.coco_json={ann}", f"data.coco_images={images}",
        "train.max_iter=3", "data.flip_prob=0.5", "data.scales=64,96,128")
    assert rc == 0, err
    assert len(iters) == 3
    assert metas[0]["flip_prob"] == 0.5 and metas[0]["scales"] == [64, 96, 128]
    json.dumps(metas[0])


def test_augmentation_is_off_by_default(train_inprocess, tiny_coco):
    ann, images = tiny_coco
    rc, _, metas, err = train_inprocess("faster_tiny", "data.source=coco", f"data.coco_json={ann}",
                                        f"data.coco_images={images}", "train.max_iter=1")
    assert rc == 0, err
    assert "flip_prob" not in metas[0] and "scales" not in metas[0]


def test_each_batch_says_what_it_drew_and_from_which_epoch(tiny_coco):
    from harness.trainer.data import CocoBatches
    ann, images = tiny_coco
    cfg = DataConfig(source="coco", coco_json=ann, coco_images=images, images_per_device=2, workers=0,
                     input_size=(64, 64), flip_prob=0.5)
    batches = CocoBatches(cfg, 80, False, torch.device("cpu"), 0, 1, seed=3)
    ids = sorted(im["id"] for im in json.load(open(ann))["images"])
    drawn = []
    for _, _ in zip(range(4 * len(ids) // 2), batches):     # 4 epochs
        drawn.append((batches.epoch, batches.views))
    assert [e for e, _ in drawn] == [k // (len(ids) // 2) for k in range(len(drawn))]
    for epoch in range(4):     # each epoch hands every image out once
        assert sorted(i for e, views in drawn if e == epoch for i, _ in views) == ids
    mirrored = {}
    for _, views in drawn:
        for image, flipped in views:
            mirrored.setdefault(image, set()).add(flipped)
    assert any(seen == {True, False} for seen in mirrored.values())   # drawn per draw, not per image


def test_training_prints_one_data_line_per_iteration(tiny_coco, capsys):
    from harness import jsonlog
    from harness.trainer import train
    from tests.trainer.conftest import config_path
    ann, images = tiny_coco
    args = [config_path("retina_tiny")]
    for s in ("data.source=coco", f"data.coco_json={ann}", f"data.coco_images={images}", "train.max_iter=3",
              "data.flip_prob=0.5", "data.workers=0", "data.images_per_device=2"):
        args += ["--set", s]
    assert train.main(args) == 0
    lines = [jsonlog.read_data(line[len(jsonlog.DATA_PREFIX):]) for line in capsys.readouterr().out.splitlines()
             if line.startswith(jsonlog.DATA_PREFIX)]
    assert [(it, epoch, len(views)) for it, epoch, views in lines] == [(1, 0, 2), (2, 0, 2), (3, 1, 2)]
