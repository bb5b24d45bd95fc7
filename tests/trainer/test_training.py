"""End-to-end training behaviour of the tiny configs (in-process, CPU)."""
import math

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from conftest import ITER_KEYS  # noqa: E402

# losses of the first iteration with train.seed=0 on synthetic data (torch 2.14 on CPU), with the
# anchors' corners exact (the default) and rounded to whole pixels (model.anchor_corners=whole-pixel);
# mask_tiny's loss_mask with aligned mask targets (masks.py; unaligned they gave 0.855006 and 0.886975)
EXPECTED_STEP0 = {
    "retina_tiny": {"loss_retina_cls": 1.129513, "loss_retina_bbox": 0.639873},
    "faster_tiny": {"loss_rpn_cls": 0.692474, "loss_rpn_bbox": 0.010919,
                    "loss_rcnn_cls": 1.605537, "loss_rcnn_bbox": 0.179812},
    "mask_tiny": {"loss_rpn_cls": 0.692474, "loss_rpn_bbox": 0.010919,
                  "loss_rcnn_cls": 1.605537, "loss_rcnn_bbox": 0.179812, "loss_mask": 0.858479},
}
EXPECTED_STEP0_WHOLE_PIXEL = {
    "retina_tiny": {"loss_retina_cls": 1.129377, "loss_retina_bbox": 0.642632},
    "faster_tiny": {"loss_rpn_cls": 0.692484, "loss_rpn_bbox": 0.015498,
                    "loss_rcnn_cls": 1.605627, "loss_rcnn_bbox": 0.130078},
    "mask_tiny": {"loss_rpn_cls": 0.692484, "loss_rpn_bbox": 0.015498,
                  "loss_rcnn_cls": 1.605627, "loss_rcnn_bbox": 0.130078, "loss_mask": 0.889667},
}
MODELS = sorted(EXPECTED_STEP0)


@pytest.mark.parametrize("corners", ["exact", "whole-pixel"])
@pytest.mark.parametrize("config", MODELS)
def test_seeded_step0_losses(train_inprocess, config, corners):
    rc, iters, metas, err = train_inprocess(config, "train.max_iter=1", "train.seed=0",
                                            "model.anchor_corners=" + corners)
    assert rc == 0, err
    got = iters[0]["losses"]
    expected = (EXPECTED_STEP0 if corners == "exact" else EXPECTED_STEP0_WHOLE_PIXEL)[config]
    assert set(got) == set(expected)
    for name, want in expected.items():
        assert got[name] == pytest.approx(want, rel=2e-3, abs=2e-4), name
    assert iters[0]["loss"] == pytest.approx(sum(got.values()), rel=1e-4)


@pytest.mark.parametrize("config", MODELS)
def test_loss_goes_down_on_fixed_images(train_inprocess, config):
    rc, iters, _, err = train_inprocess(config, "train.max_iter=30", "data.synthetic_pool=2",
                                        "train.lr=0.01", "train.warmup_iters=5")
    assert rc == 0, err
    losses = [r["loss"] for r in iters]
    assert len(losses) == 30
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert last < 0.8 * first, losses


def test_mask_loss_trains(train_inprocess):
    rc, iters, _, err = train_inprocess("mask_tiny", "train.max_iter=30", "data.synthetic_pool=2",
                                        "train.lr=0.01", "train.warmup_iters=5")
    assert rc == 0, err
    mask = [r["losses"]["loss_mask"] for r in iters]
    assert sum(mask[-3:]) / 3 < 0.9 * sum(mask[:3]) / 3, mask


@pytest.mark.parametrize("config", MODELS)
def test_images_without_boxes_train(train_inprocess, config):
    rc, iters, _, err = train_inprocess(config, "train.max_iter=3", "data.synthetic_max_boxes=0")
    assert rc == 0, err
    for r in iters:
        assert all(math.isfinite(v) for v in r["losses"].values())
        # nothing to regress: box losses are exactly zero
        assert all(v == 0 for k, v in r["losses"].items() if k.endswith("bbox"))


def cpu_has_bf16_kernels():
    import torch
    from harness.trainer.peak import supported
    return supported(torch, "bf16", torch.device("cpu"))


@pytest.mark.parametrize("config", MODELS)
def test_bf16_trains_on_the_cpu_s_kernels_and_emulated_only_when_a_test_asks(train_inprocess, config):
    """The two-stage configs pool with the sparse RoIAlign on the CPU (roi_align=auto). Where the
    CPU has bf16 kernels, bf16 trains on them; where it only emulates bf16, training refuses in
    one line instead of timing the emulation, and trains only with train.allow_emulated_bf16,
    saying so in its META line."""
    bf16 = ("train.max_iter=2", "train.device=cpu", "train.precision=bf16")
    rc, iters, metas, err = train_inprocess(config, *bf16)
    if cpu_has_bf16_kernels():
        assert rc == 0, err
        assert metas[0]["emulated_bf16"] is False
    else:
        assert rc == 2 and not iters and not metas
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(errors) == 1
        assert "train.precision=bf16 on a CPU without bf16 kernels" in errors[0] and "use fp32 here" in errors[0]
        rc, iters, metas, err = train_inprocess(config, *bf16, "train.allow_emulated_bf16=true")
        assert rc == 0, err
        assert metas[0]["emulated_bf16"] is True and metas[0]["allow_emulated_bf16"] is True
    assert metas[0]["precision"] == "bf16"
    if config != "retina_tiny":
        assert metas[0]["roi_align"] == "sparse"
    assert len(iters) == 2 and all(math.isfinite(r["loss"]) for r in iters)


def test_iter_and_meta_lines(train_inprocess):
    rc, iters, metas, err = train_inprocess("faster_tiny", "train.max_iter=3", "data.images_per_device=3",
                                            "data.input_size=96x128")
    assert rc == 0, err
    assert [r["iteration"] for r in iters] == [1, 2, 3]
    for r in iters:
        assert set(r) == ITER_KEYS
        assert r["images"] == 3
        assert r["time_s"] >= r["data_time_s"] >= 0
        assert r["peak_mem_mb"] > 0
    meta = metas[0]
    assert meta["input_size"] == [96, 128]
    assert meta["images_per_device"] == 3 and meta["world_size"] == 1
    for key in ("model", "precision", "frozen_stages", "norm", "workers", "data", "device", "torch",
                "torchvision", "rpn_pre_nms_top_n_train", "rpn_post_nms_top_n_train"):
        assert key in meta


@pytest.mark.parametrize("config", MODELS)
def test_coco_source_trains(train_inprocess, tiny_coco, config):
    ann, images = tiny_coco
    rc, iters, metas, err = train_inprocess(
        config, "train.max_iter=4", "data.source=coco", f"data.coco_json={ann}",
        f"data.coco_images={images}", "data.workers=1")
    assert rc == 0, err
    assert metas[0]["data"] == "coco" and metas[0]["workers"] == 1
    assert len(iters) == 4 and all(math.isfinite(r["loss"]) for r in iters)


@pytest.mark.parametrize("sets", [("model.norm=gn",), ("train.checkpoint_backbone=true",),
                                  ("train.channels_last=true",), ("model.frozen_stages=0",)])
def test_options_run(train_inprocess, sets):
    rc, iters, _, err = train_inprocess("faster_tiny", "train.max_iter=2", *sets)
    assert rc == 0, err
    assert all(math.isfinite(r["loss"]) for r in iters)
