"""`detbench dataset make-coco --learnable`: class decides shape and colour, two splits, deterministic."""
import hashlib
import json

from click.testing import CliRunner

from harness.cli import main
from harness.plan import learnable
from tests.plan.test_datasets import decode_png

CORNERS = {"square": 4, "disc": 24, "triangle": 3, "diamond": 4}


def digest(root):
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())
    return h.hexdigest()


def pixels(path):
    (width, height, *_), raw = decode_png(path.read_bytes())
    stride = 1 + width * 3
    return lambda x, y: tuple(raw[y * stride + 1 + x * 3:y * stride + 4 + x * 3])


def make(root, **kw):
    kw.setdefault("images", 40)
    kw.setdefault("val_images", 10)
    kw.setdefault("size", (96, 128))
    return learnable.make_learnable(root, **kw)


def test_same_arguments_same_bytes_and_seed_changes_them(tmp_path):
    make(tmp_path / "a", seed=3)
    make(tmp_path / "b", seed=3)
    make(tmp_path / "c", seed=4)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert digest(tmp_path / "a") != digest(tmp_path / "c")


def test_two_splits_with_their_own_files_and_images(tmp_path):
    (train_ann, train_img), (val_ann, val_img) = make(tmp_path / "d", images=12, val_images=5)
    assert train_ann != val_ann and train_img != val_img
    train, val = json.loads(train_ann.read_text()), json.loads(val_ann.read_text())
    assert len(train["images"]) == 12 and len(val["images"]) == 5
    assert sorted(p.name for p in val_img.iterdir()) == [im["file_name"] for im in val["images"]]
    assert sorted(p.name for p in train_img.iterdir()) == [im["file_name"] for im in train["images"]]
    # held out: the val images are not copies of the train images
    train_bytes = {(train_img / im["file_name"]).read_bytes() for im in train["images"]}
    assert not any((val_img / im["file_name"]).read_bytes() in train_bytes for im in val["images"])
    assert train["categories"] == val["categories"] and len(train["categories"]) == len(learnable.CLASSES)


def test_class_decides_shape_and_colour(tmp_path):
    (ann, images), _ = make(tmp_path / "e", images=30, val_images=1)
    doc = json.loads(ann.read_text())
    by_image = {}
    for a in doc["annotations"]:
        by_image.setdefault(a["image_id"], []).append(a)
    names = {im["id"]: im["file_name"] for im in doc["images"]}
    seen = set()
    for image_id, anns in by_image.items():
        at = pixels(images / names[image_id])
        for k, a in enumerate(anns):
            shape, colour = learnable.CLASSES[a["category_id"] - 1]
            (points,) = a["segmentation"]
            assert len(points) == 2 * CORNERS[shape]
            x, y, w, h = a["bbox"]
            cx, cy = int(x + w / 2), int(y + h * 0.6)     # inside every shape, triangles included
            covered = any(later["bbox"][0] <= cx <= later["bbox"][0] + later["bbox"][2]
                          and later["bbox"][1] <= cy <= later["bbox"][1] + later["bbox"][3]
                          for later in anns[k + 1:])
            if covered:
                continue
            assert all(abs(p - c) <= 20 for p, c in zip(at(cx, cy), colour)), (a["id"], at(cx, cy), colour)
            seen.add(a["category_id"])
    assert seen == {1, 2, 3, 4}


def test_several_sizes_and_some_overlaps(tmp_path):
    (ann, _), _ = make(tmp_path / "f", images=60, val_images=1)
    anns = json.loads(ann.read_text())["annotations"]
    sides = sorted(max(a["bbox"][2], a["bbox"][3]) for a in anns)
    assert sides[0] < 0.3 * 96 and sides[-1] > 0.45 * 96
    overlaps, by_image = 0, {}
    for a in anns:
        by_image.setdefault(a["image_id"], []).append(a["bbox"])
    for boxes in by_image.values():
        for i in range(len(boxes)):
            for j in range(i):
                iou = learnable.box_iou(boxes[i], boxes[j])
                assert iou <= learnable.OVERLAP + 0.02      # rounded coordinates
                overlaps += iou > 0
    assert overlaps > 0


def test_cli_learnable_and_default_unchanged(tmp_path):
    runner = CliRunner()
    out = runner.invoke(main, ["dataset", "make-coco", str(tmp_path / "l"), "--learnable", "--images", "3",
                               "--val-images", "2", "--size", "64x64"])
    assert out.exit_code == 0, out.output
    assert "val annotations:" in out.output
    assert (tmp_path / "l" / learnable.VAL_ANNOTATIONS).is_file()
    plain = runner.invoke(main, ["dataset", "make-coco", str(tmp_path / "p"), "--images", "2", "--size", "64x64"])
    assert plain.exit_code == 0 and "val" not in plain.output
    assert not (tmp_path / "p" / learnable.VAL_ANNOTATIONS).exists()
    from harness.plan import datasets
    datasets.make_coco(tmp_path / "q", images=2, size=(64, 64))
    assert digest(tmp_path / "p") == digest(tmp_path / "q")


def test_cli_refuses_val_images_without_learnable_and_zero_val(tmp_path):
    runner = CliRunner()
    out = runner.invoke(main, ["dataset", "make-coco", str(tmp_path / "x"), "--val-images", "3"])
    assert out.exit_code == 2 and "--val-images needs --learnable" in out.output
    out = runner.invoke(main, ["dataset", "make-coco", str(tmp_path / "y"), "--learnable", "--val-images", "0"])
    assert out.exit_code == 2 and "--val-images must be at least 1" in out.output


def test_png_is_valid(tmp_path):
    (_, images), _ = make(tmp_path / "g", images=1, val_images=1, size=(40, 50))
    (width, height, *_), raw = decode_png((images / "000001.png").read_bytes())
    assert (width, height) == (50, 40) and len(raw) == 40 * (1 + 50 * 3)   # every chunk's CRC checked
