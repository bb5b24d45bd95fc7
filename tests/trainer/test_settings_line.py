"""The trainer's DETBENCH_SETTINGS line: the settings it trains with, in the rivals' keys, read
from its resolved config, the detector it built and the optimizer its engine makes."""
import json

import pytest

from harness import jsonlog
from harness.frameworks import FRAMEWORKS
from harness.frameworks.base import TrialContext
from harness.drivers import asrun
from tests.trainer.conftest import config_path

torch = pytest.importorskip("torch")

TRAINER = FRAMEWORKS["detbench-trainer"]


def settings_lines(capsys, config, *sets):
    from harness.trainer import train
    args = [config_path(config), "--set", "train.device=cpu", "--set", "train.max_iter=1"]
    for s in sets:
        args += ["--set", s]
    capsys.readouterr()
    assert train.main(args) == 0
    out = capsys.readouterr().out.splitlines()
    found = [i for i, line in enumerate(out) if line.startswith(jsonlog.SETTINGS_PREFIX)]
    first_iter = min(i for i, line in enumerate(out) if line.startswith(jsonlog.ITER_PREFIX))
    assert len(found) == 1 and found[0] < first_iter, out
    return json.loads(out[found[0]][len(jsonlog.SETTINGS_PREFIX):])


def test_the_line_follows_what_the_trainer_built_not_its_adapter(capsys):
    obj = settings_lines(capsys, "mask_tiny", "model.rpn_pre_nms_top_n_train=300", "train.weight_decay=0.001",
                         "model.roi_align=torchvision", "train.fused_sgd=false", "model.mask_target_class_only=false",
                         "model.frozen_stages=2", "data.images_per_device=1", "train.momentum=0.8",
                         "train.channels_last=false")
    s, impl = obj["settings"], obj["implementation"]
    assert s["rpn_pre_nms_train"] == 300 and s["rpn_post_nms_train"] == 100 and s["images_per_device"] == 1
    assert s["frozen_stages"] == 2 and s["momentum"] == 0.8
    assert s["weight_decay"] == "0.001, none on biases and norms"
    assert s["mask_rois_per_image_max"] == 16 and s["mask_head"] == "4 conv 32, 14x14 RoIs to 28x28 masks"
    assert impl == {"roi_align": asrun.ROI_ALIGN_TORCHVISION, "batch_norm": "frozen, folded into the convolutions",
                    "optimizer": "SGD, per-parameter loop", "mask_logits": "all 5 classes",
                    "memory_format": asrun.MEMORY_NCHW,
                    "mask_paste": "bilinear over the float box (harness.trainer.postprocess.paste_masks)",
                    "mask_targets": "RoIAlign with the half-pixel offset (aligned), fractions kept "
                                    "(harness.trainer.masks.roi_targets)"}


def test_the_line_names_the_levers_that_ran(capsys):
    obj = settings_lines(capsys, "mask_tiny", "model.roi_align=sparse", "model.mask_target_class_only=true",
                         "model.norm=gn")
    impl = obj["implementation"]
    assert impl["roi_align"] == asrun.ROI_ALIGN_SPARSE and impl["mask_logits"] == "target class only"
    assert obj["settings"]["norm"] == "gn" and impl["batch_norm"] == "trained GroupNorm"
    retina = settings_lines(capsys, "retina_tiny")
    assert retina["settings"]["cls_loss"] == "focal(alpha 0.25, gamma 2)"
    assert "roi_align" not in retina["implementation"]


def test_the_line_names_the_layout_the_convolutions_ran_in(capsys):
    """Read from the built model's weights after the engine prepared it, not from the config."""
    for model in ("retina_tiny", "faster_tiny"):
        nhwc = settings_lines(capsys, model, "train.channels_last=true")
        assert nhwc["implementation"]["memory_format"] == asrun.MEMORY_CHANNELS_LAST
        assert settings_lines(capsys, model, "train.channels_last=off")["implementation"]["memory_format"] == \
            asrun.MEMORY_NCHW


def test_the_layout_is_read_from_the_first_spatial_convolution():
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 1), torch.nn.Conv2d(8, 8, 3), torch.nn.Conv2d(8, 4, 3))
    assert asrun.memory_format(net.modules()) == asrun.MEMORY_NCHW
    net[1].to(memory_format=torch.channels_last)      # the 1x1 before it reads the same either way
    assert asrun.memory_format(net.modules()) == asrun.MEMORY_CHANNELS_LAST
    assert asrun.memory_format(torch.nn.Linear(4, 4).modules()) == asrun.MEMORY_NCHW


@pytest.mark.parametrize("model", ["retinanet", "faster_rcnn", "mask_rcnn"])
def test_the_r50_configs_run_the_settings_their_adapter_declares(model):
    """The full configs as the adapter's command sets them (built, not trained)."""
    from harness.trainer import engine
    from harness.trainer.config import apply_overrides, load_config_module, resolve_for_device
    c = TrialContext(framework=TRAINER.name, model=model, precision="fp32", gpus=1, nodes=1, batch_per_gpu=2,
                     input_size=(128, 160), iterations=3, data=None, env={"OMP_NUM_THREADS": "2"})
    argv = TRAINER.command(c)
    sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    module = load_config_module(argv[argv.index("harness.trainer.train") + 1])
    cfg = resolve_for_device(apply_overrides(module.CONFIG, sets), "cpu")
    net = module.build_detector(cfg).train()
    settings, implementation = asrun.trainer(cfg, net, 1, engine.make_optimizer(net, cfg, 1)[0], 2)
    declared = TRAINER.settings(c)
    assert {k: settings.get(k, "(missing)") for k in declared} == declared
    assert settings["weight_decay"] == 1e-4      # on every parameter in a trial, as the rivals decay them
    assert implementation["batch_norm"] == "frozen, folded into the convolutions"
    if model != "retinanet":
        assert implementation["roi_align"] == asrun.ROI_ALIGN_SPARSE     # auto on the CPU


def test_the_anchors_say_when_their_corners_were_rounded_to_whole_pixels(capsys):
    exact = settings_lines(capsys, "faster_tiny")["settings"]["anchors"]
    rounded = settings_lines(capsys, "faster_tiny", "model.anchor_corners=whole-pixel")["settings"]["anchors"]
    assert exact == "sizes 32, 64, 128, 256, 512; ratios 0.5, 1, 2"
    assert rounded == exact + "; corners rounded to whole pixels"


def test_the_anchor_text_reads_the_corners_a_generator_holds():
    from torchvision.models.detection.faster_rcnn import _default_anchorgen

    from harness.drivers import torchvision_driver
    sizes, ratios = ((32,), (64,)), (0.5, 1.0, 2.0)
    held = _default_anchorgen().cell_anchors                    # torchvision's own, rounded
    assert asrun.anchors(sizes, ratios, held[:2]).endswith("; " + asrun.WHOLE_PIXEL_CORNERS)
    exact = torchvision_driver.rpn_anchors("exact").cell_anchors
    assert asrun.anchors(sizes, ratios, exact[:2]) == "sizes 32, 64; ratios 0.5, 1, 2"
    # square anchors of even sizes are whole either way: nothing to say
    assert asrun.anchors(sizes, (1.0,), [[[-16, -16, 16, 16]], [[-32, -32, 32, 32]]]) == "sizes 32, 64; ratios 1"


@pytest.mark.parametrize("sets, decay", [
    (("train.schedule=step", "train.steps=800,900", "train.max_iter=1000"), "x0.1 at 800, 900"),
    (("train.schedule=step", "train.max_iter=12", "train.gamma=0.5"), "x0.5 at 8, 11"),   # the 1x steps
    (("train.schedule=constant",), "none"),
    (("train.schedule=cosine", "train.max_iter=300"), "cosine to 0 over 300 iterations"),
])
def test_the_line_says_the_decay_the_trainer_trains_with(sets, decay):
    from harness.trainer.config import apply_overrides, load_config_module
    from harness.trainer.schedule import decay_setting
    cfg = apply_overrides(load_config_module(config_path("faster_tiny")).CONFIG, list(sets))
    assert asrun.normalized.schedule(0.01, 0, 1.0, True, decay_setting(cfg.train))["lr_decay"] == decay


def test_the_trainer_logs_its_decay(capsys):
    said = settings_lines(capsys, "faster_tiny", "train.schedule=step", "train.steps=1", "train.max_iter=2")
    assert said["settings"]["lr_decay"] == "x0.1 at 1"
