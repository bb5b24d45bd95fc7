"""Crowd annotations: never objects, and background boxes inside them are ignored, not negatives."""
import json

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from harness.trainer import coco  # noqa: E402
from harness.trainer.assign import ignore_crowd  # noqa: E402
from harness.trainer.augment import Augment  # noqa: E402


def test_background_inside_a_crowd_region_is_ignored_foreground_stays():
    anchors = torch.tensor([[0.0, 0, 10, 10], [2, 2, 8, 8], [40, 40, 50, 50], [5, 5, 25, 25]])
    labels = torch.tensor([[0, 1, 0, 0], [0, 0, 0, 0]])
    crowd = torch.tensor([[[0.0, 0, 12, 12]], [[0.0, 0, 0, 0]]])       # image 2: padding only
    out = ignore_crowd(labels, anchors, crowd)
    # anchor 0 fully inside -> ignored; 1 is foreground -> kept; 2 outside; 3 covers 49/400 -> stays
    assert out.tolist() == [[-1, 1, 0, 0], [0, 0, 0, 0]]
    per_image = anchors[None].expand(2, -1, -1)
    assert torch.equal(ignore_crowd(labels, per_image, crowd), out)
    assert ignore_crowd(labels, anchors, None) is labels


@pytest.fixture
def crowd_coco(tiny_coco, tmp_path):
    ann, images = tiny_coco
    doc = json.loads(open(ann).read())
    doc["annotations"].append({"id": 99, "image_id": 1, "category_id": 3, "bbox": [60, 50, 40, 30],
                               "area": 1200, "iscrowd": 1, "segmentation": {"counts": [96 * 128], "size": [96, 128]}})
    path = tmp_path / "crowd.json"
    path.write_text(json.dumps(doc))
    return str(path), images


def test_crowd_boxes_travel_with_the_batch_and_flip(crowd_coco):
    ann, images = crowd_coco
    records, _ = coco.load_annotations(ann, images)
    assert all(a["id"] != 99 for r in records for a in r["anns"])
    data = coco.CocoDataset(records, (128, 128), 100, False)
    item = data[0]
    assert item["crowd"].tolist() == [[60.0, 50.0, 100.0, 80.0]]
    assert len(data[1]["crowd"]) == 0
    flipped = coco.CocoDataset(records, (128, 128), 100, False, Augment(flip_prob=1.0))[(0, 0)]
    assert flipped["crowd"].tolist() == [[28.0, 50.0, 68.0, 80.0]]
    batch = coco.collate([data[1], item])
    assert batch["crowd"].shape == (2, 1, 4) and not batch["crowd"][0].any()
    plain, _ = coco.load_annotations(*_without_crowd(ann, images))
    assert "crowd" not in coco.collate([coco.CocoDataset(plain, (128, 128), 100, False)[0]])


def _without_crowd(ann, images):
    doc = json.loads(open(ann).read())
    doc["annotations"] = [a for a in doc["annotations"] if not a.get("iscrowd")]
    path = ann + ".plain.json"
    with open(path, "w") as fh:
        json.dump(doc, fh)
    return path, images


@pytest.mark.parametrize("config", ["retina_tiny", "mask_tiny"])
def test_training_with_crowd_regions_runs(train_inprocess, crowd_coco, config):
    ann, images = crowd_coco
    rc, iters, _, err = train_inprocess(config, "data.source=coco", f"data.coco_json={ann}",
                                        f"data.coco_images={images}", "train.max_iter=2")
    assert rc == 0, err
    assert len(iters) == 2
