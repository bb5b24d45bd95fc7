"""The one COCOeval every accuracy trial is scored by (`python -m harness.trainer.cocometrics`),
on hand-made ground truth and detections whose AP is known."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pycocotools")

ROOT = Path(__file__).resolve().parents[2]


def square_mask_rle(h, w, x0, y0, x1, y1):
    """Uncompressed RLE (column-major runs, zeros first) of a filled rectangle, written by hand."""
    counts, last, run = [], 0, 0
    for x in range(w):
        for y in range(h):
            v = 1 if x0 <= x < x1 and y0 <= y < y1 else 0
            if v == last:
                run += 1
            else:
                counts.append(run)
                last, run = v, 1
    counts.append(run)
    return {"size": [h, w], "counts": counts}


@pytest.fixture
def ground_truth(tmp_path):
    poly = lambda x, y, s: [[x, y, x + s, y, x + s, y + s, x, y + s]]    # noqa: E731
    doc = {"images": [{"id": 1, "file_name": "a.png", "height": 64, "width": 64}],
           "categories": [{"id": 1, "name": "person"}],
           "annotations": [
               {"id": 1, "image_id": 1, "category_id": 1, "bbox": [4, 4, 20, 20], "area": 400, "iscrowd": 0,
                "segmentation": poly(4, 4, 20)},
               {"id": 2, "image_id": 1, "category_id": 1, "bbox": [36, 36, 20, 20], "area": 400, "iscrowd": 0,
                "segmentation": poly(36, 36, 20)}]}
    path = tmp_path / "gt.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def score(gt, dets, tmp_path, iou="bbox"):
    path = tmp_path / "dets.json"
    path.write_text(json.dumps(dets), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "harness.trainer.cocometrics", str(gt), str(path), "--iou", iou],
                         cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout, out.stderr


def test_one_of_two_objects_found_first_gives_ap_51_of_101(ground_truth, tmp_path):
    # the exact box of object 1 ranks first, a box on nothing second, object 2 is missed: precision 1 up to
    # recall 0.5 and no recall beyond, so 51 of COCO's 101 recall points have precision 1 at every IoU
    dets = [{"image_id": 1, "category_id": 1, "bbox": [4, 4, 20, 20], "score": 0.9},
            {"image_id": 1, "category_id": 1, "bbox": [40, 2, 10, 10], "score": 0.8}]
    code, out, err = score(ground_truth, dets, tmp_path)
    assert code == 0, err
    figures = json.loads(out)
    assert figures["bbox"]["AP50"] == pytest.approx(51 / 101, abs=1e-4)
    assert figures["bbox"]["AP"] == pytest.approx(51 / 101, abs=1e-4)
    assert figures["detections"] == 2


def test_a_false_positive_ranked_first_halves_the_precision(ground_truth, tmp_path):
    # the miss first, then both objects: precision 1/2 at recall 0.5 and 2/3 at recall 1; COCO's precision
    # envelope makes it 2/3 at every recall point
    dets = [{"image_id": 1, "category_id": 1, "bbox": [40, 2, 10, 10], "score": 0.9},
            {"image_id": 1, "category_id": 1, "bbox": [4, 4, 20, 20], "score": 0.8},
            {"image_id": 1, "category_id": 1, "bbox": [36, 36, 20, 20], "score": 0.7}]
    code, out, err = score(ground_truth, dets, tmp_path)
    assert code == 0, err
    assert json.loads(out)["bbox"]["AP50"] == pytest.approx(2 / 3, abs=1e-4)


def test_uncompressed_rle_masks_are_scored_as_segm(ground_truth, tmp_path):
    dets = [{"image_id": 1, "category_id": 1, "bbox": [4, 4, 20, 20], "score": 0.9,
             "segmentation": square_mask_rle(64, 64, 4, 4, 24, 24)},
            {"image_id": 1, "category_id": 1, "bbox": [36, 36, 20, 20], "score": 0.8,
             "segmentation": square_mask_rle(64, 64, 36, 36, 56, 56)}]
    code, out, err = score(ground_truth, dets, tmp_path, iou="bbox,segm")
    assert code == 0, err
    figures = json.loads(out)
    assert figures["bbox"]["AP"] == pytest.approx(1.0)
    assert figures["segm"]["AP50"] == pytest.approx(1.0)


def test_a_file_that_is_not_a_detections_list_exits_2(ground_truth, tmp_path):
    code, _, err = score(ground_truth, {"not": "a list"}, tmp_path)
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1
