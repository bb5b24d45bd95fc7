"""The counted work of a training run: the work model harness.trainer.flops fits on a synthetic
batch, multiplied out with the counts a real run logged, against torch's FLOP counter over
that same run."""
import io

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from conftest import config_path, write_coco  # noqa: E402

from harness.measure import work  # noqa: E402

ITERATIONS = 3


def test_the_counted_work_of_a_real_run_equals_torchs_flop_counter_over_that_run(tmp_path):
    from torch.utils.flop_counter import FlopCounterMode

    from harness.trainer import data, engine, flops
    from harness.trainer.config import apply_overrides, load_config_module
    module = load_config_module(config_path("mask_tiny"))
    # the work model, counted once on a synthetic batch, as a run's limits count it
    model_of_work = flops.train_work(apply_overrides(module.CONFIG, ["data.source=synthetic"]),
                                     module.build_detector)
    assert set(model_of_work["unit_flops"]) == {"sampled_rois", "mask_rois"}

    # a real run on a small COCO set, whose images hold fewer objects than the synthetic batch;
    # RoIAlign as torchvision's kernel, which the counter sees no matrix work in
    annotations, images = write_coco(tmp_path, [(120, 128), (128, 100), (96, 128), (128, 128)])
    cfg = apply_overrides(module.CONFIG, ["train.max_iter=%d" % ITERATIONS, "data.source=coco",
                                          "data.coco_json=" + annotations, "data.coco_images=" + images,
                                          "model.roi_align=torchvision"])
    torch.manual_seed(0)
    device = torch.device("cpu")
    model = engine.prepare_model(module.build_detector(cfg), cfg, device, 1)
    log = io.StringIO()
    counter = FlopCounterMode(display=False)
    with counter:
        engine.train(model, data.build_batches(cfg, device, 0, 1), cfg, device, 1, out=log)
    path = tmp_path / "log.txt"
    path.write_text(log.getvalue())

    # the report's figure: the work model with the run's mean counts over its iterations
    counts = work.window_means(path, 1, ITERATIONS)
    per_iteration, why = work.iteration_flops(model_of_work, counts)
    assert why is None
    assert counts["mask_rois"] != model_of_work["counted"]["mask_rois"]   # not the synthetic batch's counts
    assert per_iteration * ITERATIONS == pytest.approx(counter.get_total_flops(), rel=0.02)


def test_levers_that_compute_the_same_work_another_way_change_nothing_counted():
    from harness.trainer import flops
    from harness.trainer.config import apply_overrides, load_config_module
    module = load_config_module(config_path("mask_tiny"))
    sets = ["data.source=synthetic"]
    plain = flops.train_work(apply_overrides(module.CONFIG, sets + ["model.mask_target_class_only=false"]),
                             module.build_detector)
    levers = flops.train_work(apply_overrides(module.CONFIG, sets + ["model.roi_align=sparse"]),
                              module.build_detector)
    assert plain == levers
