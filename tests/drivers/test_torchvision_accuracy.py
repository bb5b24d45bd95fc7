"""The torchvision driver's accuracy path: checkpoints every N iterations, a resume that trains
on exactly as the uninterrupted run did (same draws, same RNG), and the val-split dump in COCO's
result format that the shared COCOeval reads."""
import json
import sys

import pytest

pytest.importorskip("torchvision")

from harness.drivers import torchvision_driver, torchvision_eval  # noqa: E402
from harness.plan import learnable  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tvdata")
    (ann, images), (val_ann, val_images) = learnable.make_learnable(root, images=4, val_images=2, size=(64, 64))
    return str(ann), str(images), str(val_ann), str(val_images)


def train(data, folder, capsys, *extra):
    ann, images, _, _ = data
    code = torchvision_driver.main(["--model", "retinanet", "--depth", "18", "--iterations", "4", "--batch-size", "1",
                                    "--input-size", "64x64", "--trainable-layers", "5", "--lr", "0.002",
                                    "--data", ann, "--images", images, "--checkpoint-every", "2",
                                    "--checkpoint-dir", str(folder), "--device", "cpu"] + list(extra))
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    losses = [line.split("  loss: ")[1].split()[0] for line in lines if line.startswith("Epoch: [0]  [")]
    return lines, losses


def test_resume_trains_on_as_the_whole_run_did(data, tmp_path, capsys):
    lines, whole = train(data, tmp_path / "a", capsys)
    assert [line for line in lines if line.startswith("checkpoint ")] == [
        "checkpoint %s" % (tmp_path / "a" / "iter_2.pth"), "checkpoint %s" % (tmp_path / "a" / "iter_4.pth")]
    lines, resumed = train(data, tmp_path / "b", capsys, "--resume", str(tmp_path / "a" / "iter_2.pth"))
    assert "resuming %s after iteration 2" % (tmp_path / "a" / "iter_2.pth") in lines
    assert len(whole) == 4 and len(resumed) == 2
    assert resumed == whole[2:]


def test_lr_steps_decay_after_warmup():
    args = torchvision_driver.parse_args(["--model", "retinanet", "--iterations", "10", "--lr", "0.1",
                                          "--warmup-iters", "2", "--lr-steps", "5,8", "--gamma", "0.5"])
    rates = [torchvision_driver.lr_at(i, args) for i in range(10)]
    assert rates[2:5] == [0.1] * 3 and rates[5:8] == [0.05] * 3 and rates[8:] == [0.025] * 2
    assert rates[0] == pytest.approx(0.1 / 3)


def test_dump_writes_coco_results_of_the_val_split(data, tmp_path, capsys):
    train(data, tmp_path / "a", capsys)
    _, _, val_ann, val_images = data
    out = tmp_path / "dets.json"
    assert torchvision_eval.main(["--model", "retinanet", "--depth", "18", "--checkpoint",
                                  str(tmp_path / "a" / "iter_4.pth"), "--data", val_ann, "--images", val_images,
                                  "--input-size", "64x64", "--out", str(out)]) == 0
    dets = json.loads(out.read_text())
    assert isinstance(dets, list)
    cats = {c["id"] for c in json.loads(open(val_ann).read())["categories"]}
    assert all(d["category_id"] in cats and len(d["bbox"]) == 4 for d in dets)


def test_rle_runs_are_column_major_zeros_first():
    import torch
    mask = torch.tensor([[1, 0], [1, 1]], dtype=torch.bool)     # columns: (1, 1), (0, 1)
    assert torchvision_eval.rle(mask) == {"size": [2, 2], "counts": [0, 2, 1, 1]}
    assert sys.modules["harness.drivers.torchvision_eval"].rle(torch.zeros(2, 3, dtype=torch.bool))["counts"] == [6]


def test_a_diverged_run_stops_as_torchvisions_reference_does(data, tmp_path, capsys):
    ann, images, _, _ = data
    code = torchvision_driver.main(["--model", "retinanet", "--depth", "18", "--iterations", "6", "--batch-size", "1",
                                    "--input-size", "64x64", "--trainable-layers", "5", "--lr", "1e12",
                                    "--warmup-iters", "0", "--data", ann, "--images", images, "--device", "cpu"])
    out = capsys.readouterr().out
    assert code == 1
    assert "stopping training" in out
    assert out.count("Epoch: [0]  [") < 6    # it did not train on past the first non-finite loss


def test_polygon_masks_are_pycocotools_rasterisation_scaled_as_the_images():
    """The driver's training masks are the ones torchvision's references/detection makes: the
    polygons scaled with the image (here x2 across, x1.5 down) and rasterised by pycocotools
    (pixel centres), an RLE decoded and scaled at pixel centres, a box where there is no
    segmentation."""
    import numpy as np
    import torch
    mask_utils = pytest.importorskip("pycocotools.mask")
    poly = [3.2, 4.7, 20.9, 2.1, 25.3, 17.6, 9.4, 21.8, 2.6, 12.2]
    scaled = [v * (2.0 if k % 2 == 0 else 1.5) for k, v in enumerate(poly)]
    blob = np.zeros((32, 32), np.uint8)
    blob[5:12, 20:31] = 1
    rle = mask_utils.encode(np.asfortranarray(blob))
    anns = [{"segmentation": [poly], "bbox": [2.6, 2.1, 22.7, 19.7]},
            {"segmentation": {"counts": rle["counts"].decode("ascii"), "size": [32, 32]}, "bbox": [20, 5, 11, 7]},
            {"bbox": [4.1, 6.2, 10.5, 8.0]}]
    masks = torchvision_driver.polygon_masks(anns, 2.0, 1.5, 48, 64)
    assert masks.shape == (3, 48, 64) and masks.dtype == torch.uint8
    truth = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects([scaled], 48, 64)))
    assert np.array_equal(masks[0].numpy(), truth)
    rows, cols = np.flatnonzero(masks[1].numpy().any(1)), np.flatnonzero(masks[1].numpy().any(0))
    # blob rows 5..11 x1.5 -> centres 7.5..17.5 -> rows 7..17; columns 20..30 x2 -> 40..61
    assert (rows[0], rows[-1], cols[0], cols[-1]) == (7, 17, 40, 61) and masks[1].sum() == 11 * 22
    # box x 8.2..29.2, y 9.3..21.3: the pixels whose centres lie in it
    rows, cols = np.flatnonzero(masks[2].numpy().any(1)), np.flatnonzero(masks[2].numpy().any(0))
    assert (rows[0], rows[-1], cols[0], cols[-1]) == (9, 20, 8, 28) and masks[2].sum() == 12 * 21
