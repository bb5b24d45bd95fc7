"""`train.cuda_graph=true`: the step a CUDA graph captures computes what the plain step computes.

No GPU is lent to these tests, and capturing needs one. What they check is everything around
the capture: the command line refuses the option where it cannot work, in one line; targets
padded to fixed slots, gradients zeroed and added into in place, inputs copied into the
captured tensors give the plain step's losses, iteration after iteration; the gradient
tensors never move (a replay writes where the capture wrote).
"""
import dataclasses
import json
import math
import os

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from conftest import config_path, record_losses, write_coco  # noqa: E402
from harness.trainer import data as trainer_data  # noqa: E402
from harness.trainer import engine, graphs  # noqa: E402
from harness.trainer.coco import DataError  # noqa: E402
from harness.trainer.config import apply_overrides, load_config_module, resolve_for_device  # noqa: E402


def build(config, sets):
    module = load_config_module(config_path(config))
    cfg = apply_overrides(module.CONFIG, ["train.device=cpu"] + list(sets))
    torch.manual_seed(0)
    return module, cfg, module.build_detector(cfg)


class Padded:
    """The batches with their targets padded to the captured step's slots, for the plain step."""

    def __init__(self, batches, slots):
        self.batches, self.slots = batches, slots

    def __getattr__(self, name):
        return getattr(self.batches, name)

    def __iter__(self):
        for images, targets in self.batches:
            yield images, graphs.pad_targets(targets, self.slots)


def losses_per_iteration(config, sets, iterations=6, padded=False):
    """Each iteration's losses of a seeded tiny run, and the step object when it is graphed.
    `padded`: the plain step gets the batches padded to the slots a graphed step pads them to."""
    module, cfg, model = build(config, list(sets) + ["train.max_iter=%d" % iterations])
    device = torch.device("cpu")
    model = engine.prepare_model(model, cfg, device, 1)
    batches = trainer_data.build_batches(cfg, device, 0, 1)
    if padded:
        batches = Padded(batches, graphs.target_slots(cfg, batches))
    recorded, steps = record_losses(model), []
    real_step = graphs.GraphedStep

    def keep(*args, **kwargs):
        step = real_step(*args, **kwargs)
        steps.append(step)
        return step
    graphs.GraphedStep = keep
    try:
        torch.manual_seed(0)
        engine.train(model, batches, cfg, device, 1, out=open("/dev/null", "w"))
    finally:
        graphs.GraphedStep = real_step
    return recorded, (steps[0] if steps else None)


def coco_with_crowd(root):
    """write_coco's images (objects reaching the bottom-right corner) with two crowd regions on
    the first image and none on the others."""
    ann_path, images = write_coco(root, [(96, 128), (128, 96), (112, 112), (128, 128)])
    with open(ann_path) as f:
        doc = json.load(f)
    for k in range(2):
        doc["annotations"].append({"id": 100 + k, "image_id": 1, "category_id": 1, "iscrowd": 1,
                                   "bbox": [5 + 40 * k, 5, 30, 30], "area": 900,
                                   "segmentation": [[5 + 40 * k, 5, 35 + 40 * k, 5, 35 + 40 * k, 35]]})
    with open(ann_path, "w") as f:
        json.dump(doc, f)
    return ann_path, images


CASES = {
    "retina_tiny": [],
    "faster_tiny": ["model.sync_free=true"],
    "mask_tiny": ["model.sync_free=true"],
}


@pytest.mark.parametrize("config", sorted(CASES))
def test_the_static_input_step_gives_the_plain_losses_on_synthetic_data(config):
    # the two-stage samplers draw one random number per candidate RoI, ground-truth slots
    # included (padded ones at zero weight): padding to the slot moves the random stream, so
    # there the plain step gets the same padded batches. RetinaNet samples nothing.
    plain, _ = losses_per_iteration(config, CASES[config], padded=config != "retina_tiny")
    fixed, step = losses_per_iteration(config, CASES[config] + ["train.cuda_graph=true"])
    assert step is not None and step.steps == 6 and step.inputs is not None and not step.capture
    assert_same(plain, fixed)


def test_padded_crowd_regions_and_mask_crops_give_the_plain_losses_on_coco(tmp_path):
    ann, images = coco_with_crowd(tmp_path)
    sets = ["model.sync_free=true", "data.source=coco", "data.coco_json=%s" % ann, "data.coco_images=%s" % images,
            "data.input_size=128x128", "data.workers=0", "data.shuffle=false", "data.mask_crop=24",
            "data.max_gt=6", "model.num_classes=2"]
    plain, _ = losses_per_iteration("mask_tiny", sets, padded=True)
    fixed, step = losses_per_iteration("mask_tiny", sets + ["train.cuda_graph=true"])
    assert step.slots == {"objects": 6, "crowd": 2, "crop": (25, 25)}
    static = step.inputs[1]
    assert static["boxes"].shape[1] == 6 and static["crowd"].shape[1] == 2
    assert tuple(static["mask_crops"].shape[1:]) == (6, 25, 25)
    assert_same(plain, fixed)


def assert_same(plain, fixed):
    assert len(plain) == len(fixed) == 6
    for it, (a, b) in enumerate(zip(plain, fixed)):
        assert set(a) == set(b)
        for name in a:
            assert b[name] == pytest.approx(a[name], rel=1e-5, abs=1e-6), (it, name, a[name], b[name])


def test_the_gradient_tensors_never_move():
    module, cfg, model = build("retina_tiny", ["train.cuda_graph=true"])
    device = torch.device("cpu")
    optimizer, _ = engine.make_optimizer(model, cfg, 1)
    step = graphs.GraphedStep(model, optimizer, None, lambda: engine.autocast_for("fp32", device, cache=False),
                              device, graphs.target_slots(cfg, None), capture=False)
    batches = iter(trainer_data.build_batches(cfg, device, 0, 1))
    places = []
    for _ in range(graphs.WARMUP + 3):
        step(*next(batches))
        optimizer.step()
        places.append([p.grad.data_ptr() for p in step.params])
    assert all(p == places[0] for p in places)
    assert step.inputs is not None


def test_a_batch_over_a_slot_is_refused_in_one_line():
    targets = {"boxes": torch.zeros(2, 9, 4), "labels": torch.ones(2, 9, dtype=torch.int64)}
    with pytest.raises(DataError, match=r"a batch has objects 9, over the 8 slot of the captured step"):
        graphs.pad_targets(targets, {"objects": 8})
    padded = graphs.pad_targets({"boxes": torch.ones(2, 3, 4), "labels": torch.ones(2, 3, dtype=torch.int64),
                                 "mask_crops": torch.ones(2, 3, 5, 7, dtype=torch.uint8),
                                 "mask_affine": torch.full((2, 3, 4), 2.0)}, {"objects": 8, "crop": (9, 9)})
    assert padded["labels"][:, 3:].eq(0).all() and padded["boxes"][:, 3:].eq(0).all()
    assert tuple(padded["mask_crops"].shape) == (2, 8, 9, 9) and int(padded["mask_crops"].sum()) == 2 * 3 * 5 * 7
    assert padded["mask_affine"][:, 3:].tolist() == [[[1.0, 1.0, 0.0, 0.0]] * 5] * 2


def test_cuda_graphs_on_the_cpu_are_refused_before_training(train_inprocess):
    rc, iters, _, err = train_inprocess("retina_tiny", "train.device=cpu", "train.cuda_graph=true",
                                        "train.max_iter=2")
    assert rc == 2 and not iters
    assert err.strip() == ("error: train.cuda_graph=true needs a CUDA device: a CUDA graph replays CUDA kernels, "
                           "and this run is on the CPU")


def test_each_setting_a_graph_cannot_capture_is_named():
    _, cfg, _ = build("mask_tiny", ["train.cuda_graph=true", "model.sync_free=true"])

    def with_(section, **values):
        return dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), **values)})
    assert graphs.refusal(cfg, "cuda", 1) is None
    assert graphs.refusal(with_("train", cuda_graph=False), "cpu", 1) is None
    assert "runs on one GPU" in graphs.refusal(cfg, "cuda", 2)
    assert "needs model.sync_free=true for mask" in graphs.refusal(with_("model", sync_free=False), "cuda", 1)
    assert "compile_backbone" in graphs.refusal(with_("train", compile_backbone=True), "cuda", 1)
    assert "checkpoint_backbone" in graphs.refusal(with_("train", checkpoint_backbone=True), "cuda", 1)
    coco = with_("data", source="coco", coco_json="x.json", coco_images="x")
    assert "needs data.mask_crop" in graphs.refusal(coco, "cuda", 1)
    batch = dataclasses.replace(coco, data=dataclasses.replace(coco.data, canvas="batch", mask_crop=64))
    assert "needs data.canvas=fixed" in graphs.refusal(batch, "cuda", 1)


@pytest.mark.parametrize("mask_crop", [0, 24])
def test_mask_targets_from_crops_padded_to_the_slot_are_the_same(tmp_path, mask_crop):
    from harness.trainer import masks
    ann, images = write_coco(tmp_path, [(96, 128), (128, 96), (112, 112), (128, 128)])
    _, cfg, _ = build("mask_tiny", ["data.source=coco", "data.coco_json=%s" % ann, "data.coco_images=%s" % images,
                                    "data.input_size=128x128", "data.workers=0", "data.shuffle=false",
                                    "data.mask_crop=%d" % mask_crop, "model.num_classes=2"])
    gen = torch.Generator().manual_seed(0)
    for _, (_, targets) in zip(range(2), trainer_data.build_batches(cfg, torch.device("cpu"), 0, 1)):
        b, g = targets["labels"].shape
        objects = torch.arange(b * g).repeat(20)
        # RoIs around each object, reaching past it (and past the canvas's bottom-right corner,
        # which write_coco's second object touches)
        boxes = (targets["boxes"].view(-1, 4)[objects] + (torch.rand(len(objects), 4, generator=gen) - 0.5) * 20)
        boxes = boxes.clamp(0, 128)
        boxes[:, 2:] = torch.maximum(boxes[:, 2:], boxes[:, :2] + 1)
        crops = targets["mask_crops"]
        padded = graphs.pad_targets(targets, {"objects": g + 3, "crop": (crops.shape[2] + 7, crops.shape[3] + 5)})
        moved = objects // g * (g + 3) + objects % g
        padded_targets = masks.roi_targets(padded["mask_crops"], padded["mask_affine"], moved, boxes, 28, share=False)
        assert torch.equal(padded_targets,
                           masks.roi_targets(crops, targets["mask_affine"], objects, boxes, 28, share=False))


def host_data_ops(config, sets):
    """aten ops of a second training step (the first makes the per-shape constants) that turn
    Python data into a tensor: on a GPU each is a copy from pageable host memory, which stream
    capture refuses."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func._schema.name == "aten::lift_fresh":
                self.seen.append(func._schema.name)
            return func(*args, **(kwargs or {}))

    _, cfg, model = build(config, sets)
    model.train()
    batches = iter(trainer_data.build_batches(cfg, torch.device("cpu"), 0, 1))
    sum(model(*next(batches)).values()).backward()
    images, targets = next(batches)          # made before recording: the loader's work is not the step's
    recorder = Recorder()
    with recorder:
        sum(model(images, targets).values()).backward()
    return recorder.seen


@pytest.mark.parametrize("config", sorted(CASES))
def test_a_captured_step_makes_no_tensor_from_host_data(config):
    assert host_data_ops(config, CASES[config]) == []


UNPATCHED_STEP = graphs.GraphedStep


def step_losses_on_the_gpu(config, sets, precision, capture, monkeypatch, iterations=8):
    """Each iteration's losses, read after the step returns (never inside a capture), of a
    seeded tiny run on the GPU through the static-input step, captured as a graph or not."""
    module = load_config_module(config_path(config))
    cfg = apply_overrides(module.CONFIG, ["train.device=cuda", "train.cuda_graph=true", "train.precision=" + precision,
                                          "train.max_iter=%d" % iterations] + list(sets))
    cfg = resolve_for_device(cfg, "cuda")
    device = torch.device("cuda", torch.cuda.current_device())
    torch.manual_seed(0)
    model = engine.prepare_model(module.build_detector(cfg), cfg, device, 1)
    batches = trainer_data.build_batches(cfg, device, 0, 1)
    recorded = []

    class Recording(UNPATCHED_STEP):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **dict(kwargs, capture=capture))

        def __call__(self, images, targets):
            losses, total = super().__call__(images, targets)
            recorded.append({k: float(v.detach()) for k, v in losses.items()})
            return losses, total
    monkeypatch.setattr(graphs, "GraphedStep", Recording)
    torch.manual_seed(1)
    with open(os.devnull, "w") as out:
        try:
            engine.train(model, batches, cfg, device, 1, out=out)
        except engine.NonFiniteLoss as exc:
            pytest.fail("%s, capture=%s, %s: %s; the losses before: %s" % (config, capture, precision, exc, recorded))
    return recorded


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("config", sorted(CASES))
def test_replays_of_the_captured_step_track_the_uncaptured_step_on_the_gpu(config, precision, monkeypatch):
    # the warm-up steps run eagerly in both and draw the same random numbers; from the capture
    # on, a replay draws from the graph's own offsets of the generator, so other RoIs are
    # sampled. A box-regression term over a few sampled positives moves by a third with them
    # (and, in bf16, with a rounding that picks another proposal), so the iterations' total
    # loss is compared: each warm-up step's, and the mean of the replayed steps'.
    uncaptured = step_losses_on_the_gpu(config, CASES[config], precision, False, monkeypatch)
    replayed = step_losses_on_the_gpu(config, CASES[config], precision, True, monkeypatch)
    assert len(uncaptured) == len(replayed) == 8
    for it, losses in enumerate(replayed):
        assert set(losses) == set(uncaptured[it]) and all(math.isfinite(v) for v in losses.values()), (it + 1, losses)
    totals = [[sum(losses.values()) for losses in run] for run in (uncaptured, replayed)]
    w = graphs.WARMUP
    assert totals[1][:w] == pytest.approx(totals[0][:w], rel=0.05), totals
    assert sum(totals[1][w:]) == pytest.approx(sum(totals[0][w:]), rel=0.15), totals
