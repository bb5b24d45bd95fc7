"""`python -m harness.trainer.evaluate`: COCO AP through pycocotools, and its bad input."""
import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")
pytest.importorskip("pycocotools", reason="evaluation needs pycocotools (the trainer extra)")

from conftest import ROOT, config_path, env_for_subprocess  # noqa: E402

from harness.plan import learnable  # noqa: E402
from harness.trainer import cocometrics, evaluate  # noqa: E402


def run_eval(*args):
    return subprocess.run([sys.executable, "-m", "harness.trainer.evaluate"] + [str(a) for a in args],
                          cwd=ROOT, env=env_for_subprocess(), capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def learnable_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("learnable")
    return learnable.make_learnable(root, images=4, val_images=3, size=(64, 80), seed=1)


def ground_truth_detections(ann_file, shift=0.0):
    with open(ann_file) as fh:
        doc = json.load(fh)
    return [{"image_id": a["image_id"], "category_id": a["category_id"], "score": 0.9,
             "bbox": [a["bbox"][0] + shift * a["bbox"][2], a["bbox"][1], a["bbox"][2], a["bbox"][3]]}
            for a in doc["annotations"]]


def test_scores_perfect_detections_one_and_shifted_ones_lower(learnable_set):
    _, (val_ann, _) = learnable_set
    gt = cocometrics.ground_truth(str(val_ann))
    perfect = cocometrics.score(gt, ground_truth_detections(val_ann), ["bbox"])["bbox"]
    assert perfect["AP"] == pytest.approx(1.0) and perfect["AP50"] == pytest.approx(1.0)
    # shifted by 30% of the width: IoU 0.54, found at 0.5, missed from 0.55 up
    shifted = cocometrics.score(gt, ground_truth_detections(val_ann, 0.3), ["bbox"])["bbox"]
    assert shifted["AP50"] == pytest.approx(1.0) and shifted["AP75"] == 0.0 and 0 < shifted["AP"] < 0.2
    assert cocometrics.score(gt, [], ["bbox", "segm"]) == {t: {m: 0.0 for m in cocometrics.METRICS}
                                                           for t in ("bbox", "segm")}


def test_boxes_go_back_to_the_image_frame():
    result = {"boxes": torch.tensor([[10.0, 5.0, 30.0, 25.0], [50.0, 40.0, 70.0, 64.0]]),
              "scores": torch.tensor([0.9, 0.4]), "labels": torch.tensor([2, 1])}
    dets = evaluate._to_coco(result, 0.5, (100, 120), [3, 7], None, None)
    assert [d["bbox"] for d in dets] == [[20.0, 10.0, 40.0, 40.0], [100.0, 80.0, 20.0, 20.0]]  # clipped at 120 x 100
    assert [d["category_id"] for d in dets] == [7, 3]
    assert [d["score"] for d in dets] == [0.9, 0.4]


@pytest.fixture(scope="module")
def mask_weights(tmp_path_factory, learnable_set):
    (ann, images), _ = learnable_set
    folder = tmp_path_factory.mktemp("ck")
    proc = subprocess.run(
        [sys.executable, "-m", "harness.trainer.train", config_path("mask_tiny"), "--set", "data.source=coco",
         "--set", f"data.coco_json={ann}", "--set", f"data.coco_images={images}", "--set", "train.max_iter=2",
         "--set", "train.checkpoint_every=2", "--set", f"train.checkpoint_dir={folder}"],
        cwd=ROOT, env=env_for_subprocess(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return folder / "iter_0000002.pth"


def test_evaluates_a_trained_mask_rcnn_with_bbox_and_segm(learnable_set, mask_weights, tmp_path):
    _, (val_ann, val_images) = learnable_set
    out = tmp_path / "dets.json"
    proc = run_eval(config_path("mask_tiny"), "--weights", mask_weights, "--data", val_ann, val_images,
                    "--detections-out", out)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    (line,) = [json.loads(text) for text in lines if text.startswith("{")]
    assert line["model"] == "mask_rcnn" and line["images"] == 3
    for iou_type in ("bbox", "segm"):
        assert set(line[iou_type]) == set(cocometrics.METRICS)
        assert all(v is None or 0.0 <= v <= 1.0 for v in line[iou_type].values())
        assert any(text.startswith(iou_type + " ") for text in lines)       # the table
    dets = json.loads(out.read_text())
    assert len(dets) == line["detections"] and len(dets) <= 3 * 100
    assert all(d["segmentation"]["size"] == [64, 80] for d in dets)


def bad(tmp_path, doc, images=None):
    ann = tmp_path / "bad.json"
    ann.write_text(json.dumps(doc))
    img_dir = images or tmp_path
    return ann, img_dir


def one_image_doc(anns):
    return {"images": [{"id": 1, "file_name": "a.png", "height": 64, "width": 64}], "annotations": anns,
            "categories": [{"id": 1, "name": "x"}]}


def write_png(path):
    from PIL import Image
    Image.new("RGB", (64, 64), (90, 90, 90)).save(path)


@pytest.mark.parametrize("case, words", [
    ("short_polygon", "annotation id 7: polygon with 4 coordinates"),
    ("all_crowd", "has no object to learn or score: 1 images, 1 crowd annotations"),
    ("no_annotations", "has no object to learn or score: 1 images, 0 crowd"),
    ("undecodable", "cannot decode image"),
])
def test_bad_input_is_one_line_naming_the_file(tmp_path, mask_weights, case, words):
    box = {"id": 7, "image_id": 1, "category_id": 1, "bbox": [4, 4, 20, 20], "area": 400, "iscrowd": 0,
           "segmentation": [[4, 4, 24, 4, 24, 24, 4, 24]]}
    if case == "short_polygon":
        box["segmentation"] = [[4, 4, 24, 4]]
    if case == "all_crowd":
        box["iscrowd"] = 1
    doc = one_image_doc([] if case == "no_annotations" else [box])
    if case == "undecodable":
        (tmp_path / "a.png").write_bytes(b"not a png at all")
    else:
        write_png(tmp_path / "a.png")
    ann, images = bad(tmp_path, doc)
    proc = run_eval(config_path("mask_tiny"), "--weights", mask_weights, "--data", ann, images)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and words in err[0]
    assert (str(tmp_path / "a.png") if case == "undecodable" else str(ann)) in err[0]


def test_weights_of_another_model_are_one_line(learnable_set, mask_weights):
    _, (val_ann, val_images) = learnable_set
    proc = run_eval(config_path("retina_tiny"), "--weights", mask_weights, "--data", val_ann, val_images)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert str(mask_weights) in line and "mask" in line


def test_training_refuses_a_polygon_of_two_points(tmp_path):
    box = {"id": 9, "image_id": 1, "category_id": 1, "bbox": [4, 4, 20, 20], "area": 400, "iscrowd": 0,
           "segmentation": [[4, 4, 24, 4]]}
    write_png(tmp_path / "a.png")
    ann, images = bad(tmp_path, one_image_doc([box]))
    proc = subprocess.run([sys.executable, "-m", "harness.trainer.train", config_path("mask_tiny"),
                           "--set", "data.source=coco", "--set", f"data.coco_json={ann}",
                           "--set", f"data.coco_images={images}", "--set", "train.max_iter=1"],
                          cwd=ROOT, env=env_for_subprocess(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert str(ann) in line and "annotation id 9" in line


def test_a_checkpoint_brings_its_model_settings(learnable_set, tmp_path):
    """Weights trained with --set model.norm=gn evaluate under the plain config: the checkpoint
    says how its model was built."""
    (ann, images), (val_ann, val_images) = learnable_set
    proc = subprocess.run(
        [sys.executable, "-m", "harness.trainer.train", config_path("retina_tiny"), "--set", "data.source=coco",
         "--set", f"data.coco_json={ann}", "--set", f"data.coco_images={images}", "--set", "train.max_iter=1",
         "--set", "model.norm=gn", "--set", "model.frozen_stages=0",
         "--set", "train.checkpoint_every=1", "--set", f"train.checkpoint_dir={tmp_path}"],
        cwd=ROOT, env=env_for_subprocess(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    weights = tmp_path / "iter_0000001.pth"
    proc = run_eval(config_path("retina_tiny"), "--weights", weights, "--data", val_ann, val_images)
    assert proc.returncode == 0, proc.stderr
    # told to build another model, it refuses in one line
    proc = run_eval(config_path("retina_tiny"), "--weights", weights, "--data", val_ann, val_images,
                    "--set", "model.norm=frozen_bn")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert str(weights) in proc.stderr
