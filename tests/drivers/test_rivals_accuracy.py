"""The rivals' accuracy recipes run for real in their pinned envs (mmdetection, detectron2): the
schedule the recipe gives (ResNet-18, warmup, an LR step, a checkpoint every N iterations and at
the end, each announced by one `checkpoint PATH` line), the shared weights file loaded once and not
again on a resume, a resume that trains only the iterations left (detectron2's through its own
train_net.py --resume), and a val-split dump in COCO's result format that the shared COCOeval
scores (boxes, and masks for Mask R-CNN). mmengine logs every iteration here; detectron2's
CommonMetricPrinter every 20th and the last, as its DefaultTrainer writes it.

Needs each framework's env (`detbench env build NAME`): skipped with a reason without it, failed
under DETBENCH_REQUIRE_SERVICES=1 (detectron2 skips where its source cannot be had)."""
import json
import re
import subprocess
import sys

import pytest

from harness import jsonlog
from harness.frameworks import FRAMEWORKS
from harness.frameworks import accuracy as recipes
from harness.launch import envs
from harness.plan import learnable
from harness.plan import weights as weights_tool
from tests.support.cliproc import ROOT
from tests.support.services import need_env

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

LR = 0.004


RIVALS = ["mmdetection", "detectron2"]
DETECTIONS_PER_IMAGE = 100          # the shared test-time setting every dump applies


def schedule(iterations, every, steps=()):
    return recipes.Schedule(iterations=iterations, eval_every=every, batch=1, input_size=(64, 64),
                            lr_per_image=LR, warmup_iters=2, warmup_factor=0.5, lr_steps=tuple(steps), gamma=0.1,
                            weight_decay=1e-4, flip=True, depth=18, precision="fp32", seed=0, workers=0)


def python_of(framework):
    need_env(framework)
    return envs.python_for(FRAMEWORKS[framework].env)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("mmacc")
    (ann, images), (val_ann, val_images) = learnable.make_learnable(root, images=4, val_images=2, size=(64, 64))
    return (str(ann), str(images)), (str(val_ann), str(val_images)), root


def weights(root, model, framework):
    """The shared weights file: made by `detbench weights make`, or where detbench's env has no torch by
    the same tool in the rival's env (which has torch and torchvision)."""
    path = root / ("%s-r18.pt" % model)
    if not path.exists():
        argv = [sys.executable, "-m", "harness.cli", "weights", "make", model] if weights_tool.available() else \
            [python_of(framework), "-m", "harness.trainer.weights", "make", model]
        subprocess.run(argv + ["--out", str(path), "--depth", "18", "--seed", "0"], cwd=str(ROOT), check=True,
                       capture_output=True, timeout=300)
    return str(path)


def train(framework, model, s, data, folder, resume=None):
    (train_split, _, root) = data
    argv = recipes.train_argv(framework, model, s, train_split, weights(root, model, framework), str(folder),
                              resume=resume, python=python_of(framework))
    proc = subprocess.run(argv, cwd=str(ROOT), capture_output=True, text=True, timeout=600,
                          env=dict(__import__("os").environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    lines = proc.stdout.splitlines() + proc.stderr.splitlines()
    return lines


def lrs(lines):
    """iteration -> the learning rate the framework logged for it (mmengine's line; detectron2's
    CommonMetricPrinter, whose iter counts from 0)."""
    out = {}
    for line in lines:
        m = re.search(r"Iter\(train\) \[\s*(\d+)/\d+\]\s+(?:base_lr: \S+\s+)?lr: (\S+)", line)
        if m:
            out[int(m.group(1))] = float(m.group(2))
            continue
        m = re.search(r"\biter: (\d+)  total_loss: .*  lr: (\S+)", line)
        if m:
            out[int(m.group(1)) + 1] = float(m.group(2))
    return out


def printed(framework, iterations):
    """The iterations whose loss the framework's own log prints (detectron2: every 20th and the last)."""
    return iterations if framework != "detectron2" else [i for i in iterations if i % 20 == 0 or i == iterations[-1]]


def weights_loads(lines):
    """How often the shared weights file was loaded: mmdetection's hook says so; detectron2's
    checkpointer names the mapped file it loads as MODEL.WEIGHTS."""
    return sum("loaded weights" in line or ("[DetectionCheckpointer] Loading from" in line
                                           and "detbench_initial_weights" in line) for line in lines)


@pytest.mark.parametrize("framework", RIVALS)
def test_checkpoints_the_schedule_and_a_resume_that_trains_only_what_is_left(framework, data, tmp_path):
    s = schedule(4, 2, steps=[3])
    lines = train(framework, "retinanet", s, data, tmp_path / "a")
    losses = [recipes.loss_of_line(line) for line in lines]
    losses = [p for p in losses if p is not None]
    assert [i for i, _ in losses] == printed(framework, [1, 2, 3, 4]), "\n".join(lines[-40:])
    assert all(0 < loss < 100 for _, loss in losses)
    checkpoints = [recipes.checkpoint_of_line(line) for line in lines]
    assert [c for c in checkpoints if c] == [(2, str(tmp_path / "a" / "iter_2.pth")),
                                              (4, str(tmp_path / "a" / "iter_4.pth"))]
    assert weights_loads(lines) == 1
    rates = lrs(lines)
    # linear warmup from half the rate over 2 iterations, full rate at 3, x0.1 after iteration 3
    if framework != "detectron2":
        assert rates[1] == pytest.approx(LR * 0.5, rel=1e-3) and rates[3] == pytest.approx(LR, rel=1e-3)
    assert rates[4] == pytest.approx(LR * 0.1, rel=1e-3)
    # and the settings line says that step, read from the framework's own scheduler config
    [said] = [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith(jsonlog.SETTINGS_PREFIX)]
    assert said["settings"]["lr_decay"] == "x0.1 at 3"

    resumed = train(framework, "retinanet", s, data, tmp_path / "b", resume=str(tmp_path / "a" / "iter_2.pth"))
    points = [p for p in map(recipes.loss_of_line, resumed) if p is not None]
    assert [i for i, _ in points] == printed(framework, [3, 4]), "\n".join(resumed[-40:])
    assert weights_loads(resumed) == 0    # the checkpoint's weights, not the file's
    assert [c for c in map(recipes.checkpoint_of_line, resumed) if c] == [(4, str(tmp_path / "b" / "iter_4.pth"))]
    assert lrs(resumed)[4] == pytest.approx(LR * 0.1, rel=1e-3)     # the schedulers resumed too
    if framework == "detectron2":       # its trainer says where it went on from
        assert any("Starting training from iteration 2" in line for line in resumed)


@pytest.mark.parametrize("framework", RIVALS)
@pytest.mark.parametrize("model", ["retinanet", "mask_rcnn"])
def test_the_dump_is_scored_by_the_shared_cocoeval(framework, data, tmp_path, model):
    pytest.importorskip("pycocotools")
    s = schedule(2, 2)
    lines = train(framework, model, s, data, tmp_path / "ck")
    if model == "mask_rcnn":    # the settings line names the paste its test time runs: the exact one
        [said] = [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith(jsonlog.SETTINGS_PREFIX)]
        assert said["implementation"]["mask_paste"].startswith("bilinear over the float box ("), said
    _, (val_ann, val_images), _ = data
    out = tmp_path / "dets.json"
    argv = recipes.dump_argv(framework, model, s, str(tmp_path / "ck" / "iter_2.pth"), (val_ann, val_images),
                             str(out), python=python_of(framework))
    # two iterations from the file leave every score near its prior, under the shared 0.05: take them all
    dump = subprocess.run(argv + ["--score-threshold", "0"], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=600)
    assert dump.returncode == 0, (dump.stdout + dump.stderr)[-3000:]
    said = json.loads(dump.stdout.splitlines()[-1])
    dets = json.loads(out.read_text())
    assert said["images"] == 2 and said["detections"] == len(dets)
    doc = json.loads(open(val_ann).read())
    cats, ids = {c["id"] for c in doc["categories"]}, {im["id"] for im in doc["images"]}
    assert dets and {d["image_id"] for d in dets} == ids
    assert all(d["category_id"] in cats and len(d["bbox"]) == 4 for d in dets)
    assert len(dets) <= 2 * DETECTIONS_PER_IMAGE
    assert all(("segmentation" in d) == (model == "mask_rcnn") for d in dets)
    score = subprocess.run(recipes.score_argv(model, val_ann, str(out)), cwd=str(ROOT), capture_output=True,
                           text=True, timeout=300)
    assert score.returncode == 0, score.stderr[-2000:]
    figures = json.loads([x for x in score.stdout.splitlines() if x.startswith("{")][-1])
    assert 0 <= figures["bbox"]["AP50"] <= 1
    assert ("segm" in figures) == (model == "mask_rcnn")


@pytest.mark.parametrize("framework", RIVALS)
def test_a_file_that_is_not_a_checkpoint_is_refused_in_one_line(framework, data, tmp_path):
    _, (val_ann, val_images), _ = data
    bad = tmp_path / "iter_2.pth"
    bad.write_text("not a checkpoint")
    proc = subprocess.run(recipes.dump_argv(framework, "retinanet", schedule(2, 2), str(bad),
                                            (val_ann, val_images), str(tmp_path / "d.json"),
                                            python=python_of(framework)),
                          cwd=str(ROOT), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert [line for line in proc.stderr.splitlines() if line.strip()][-1].startswith("error: ")
