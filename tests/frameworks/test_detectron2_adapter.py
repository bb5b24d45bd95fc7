"""The detectron2 adapter that runs here: its command, its declared settings (the work every
framework here is set to), and what `detbench validate` refuses at its line: an option that would
download, a precision it cannot run, a model-zoo config that does not exist. The 0.3-era CUDA
recipe stays as detectron2-cuda."""
import re

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.frameworks import settings as normalized
from harness.errors import UserError
from harness.frameworks import FRAMEWORKS, detectron2
from harness.frameworks.base import NEEDS_GPU, RUNS_HERE, TrialContext

FW = FRAMEWORKS["detectron2"]
COCO = {"annotations": "/d/ann.json", "images": "/d/img"}


def ctx(model="faster_rcnn", precision="fp32", options=None, **kw):
    base = dict(framework="detectron2", model=model, precision=precision, gpus=1, nodes=1, batch_per_gpu=2,
                input_size=(320, 320), iterations=10, data=COCO, options=dict(options or {}),
                python="/env/bin/python", weights="/w/%s.pt" % model)
    base.update(kw)
    return TrialContext(**base)


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_it_runs_here_in_its_pinned_env_and_the_cuda_recipe_keeps_its_own_name():
    assert FW.status == RUNS_HERE and FW.env is not None and FW.env.framework == "detectron2"
    assert FW.pins["detectron2"] == detectron2.COMMIT and len(detectron2.COMMIT) == 40
    assert FW.env.pins["torch"] == FRAMEWORKS["torchvision"].env.pins["torch"] == \
        FRAMEWORKS["mmdetection"].env.pins["torch"]
    cuda = FRAMEWORKS["detectron2-cuda"]
    assert cuda.status == NEEDS_GPU and cuda.images[0].name == "detectron2-cuda"
    assert FW.images[0].name == "detectron2" and FW.images[0].base_recipe == "torchvision" and FW.images[0].host_wheels


def test_the_command_passes_the_scenario_to_the_driver():
    argv = FW.argv(ctx(options={"workers": 0, "flip": False, "shuffle": False, "lr": 1e-6}))
    assert argv[0] == "/env/bin/python" and argv[1].endswith("harness/drivers/detectron2_driver.py")
    assert flag(argv, "--config") == "COCO-Detection/faster_rcnn_R_50_FPN_1x.yaml"
    assert (flag(argv, "--iterations"), flag(argv, "--batch-size"), flag(argv, "--input-size")) == \
        ("10", "2", "320x320")
    assert (flag(argv, "--lr"), flag(argv, "--weights"), flag(argv, "--data")) == ("1e-06", "/w/faster_rcnn.pt",
                                                                                  "/d/ann.json")
    assert "--no-flip" in argv and "--no-shuffle" in argv
    assert (flag(argv, "--rpn-pre-nms-train"), flag(argv, "--rpn-post-nms-train")) == ("2000", "2000")


@pytest.mark.parametrize("model", ["retinanet", "faster_rcnn", "mask_rcnn"])
def test_the_declared_settings_equal_torchvisions_on_every_shared_key(model):
    ours = FW.settings(ctx(model))
    tv = dict(ctx(model).__dict__, framework="torchvision", options={})
    theirs = FRAMEWORKS["torchvision"].settings(TrialContext(**tv))
    # torchvision's warmup is its recipe's, over the data set's batches per epoch: not declared for COCO data
    assert {k: v for k, v in ours.items() if k != "warmup"} == theirs
    if model != "retinanet":
        assert (ours["rpn_pre_nms_train"], ours["rpn_post_nms_train"]) == (normalized.RPN_PRE_NMS_TRAIN, 2000)
        assert (ours["roi_align_sampling_ratio"], ours["roi_align_aligned"]) == (2, False)
    assert ours["frozen_stages"] == 1 and ours["norm"] == "frozen_bn" and ours["init"] == "file:%s.pt" % model


def test_fp16_and_a_second_device_are_not_claimed():
    assert FW.supports("mask_rcnn", "bf16") and not FW.supports("mask_rcnn", "fp16")
    with pytest.raises(UserError, match="one device only"):
        FW.argv(ctx(gpus=2))


SCENARIO = """\
name: d2
matrix:
  framework: [detectron2]
  model: [faster_rcnn]
  precision: [{precision}]
input_size: [320, 320]
warmup: 1
measure: 2
repeats: 1
{options}"""


def validate(tmp_path, precision="fp32", options=""):
    path = tmp_path / "seed.yaml"
    path.write_text(SCENARIO.format(precision=precision, options=options))
    result = CliRunner().invoke(main, ["validate", str(path)])
    return result.exit_code, result.output.strip()


def test_a_valid_scenario_validates(tmp_path):
    options = "options:\n  detectron2:\n    config: COCO-Detection/faster_rcnn_R_50_FPN_3x.yaml\n"
    said = "%s: ok: 1 cells (0 excluded), 1 trials" % (tmp_path / "seed.yaml")
    assert validate(tmp_path, options=options) == (0, said)


@pytest.mark.parametrize("precision, options, line, said", [
    ("fp16", "", 5, r"matrix\.precision\.0: detectron2 cannot run faster_rcnn fp16"),
    ("fp32", "options:\n  detectron2:\n    config: COCO-Detection/faster_rcnn_R_101_FPN_9x.yaml\n", 11,
     r"options\.config 'COCO-Detection/faster_rcnn_R_101_FPN_9x\.yaml' is not a model-zoo config of faster_rcnn "
     r"at commit 02b5c4e295e9 \(known: COCO-Detection/faster_rcnn_R_50_FPN_1x\.yaml, "),
    ("fp32", "options:\n  detectron2:\n    config: https://dl.fbaipublicfiles.com/detectron2/x.yaml\n", 11,
     r"detectron2 would download https://dl\.fbaipublicfiles\.com/detectron2/x\.yaml at start \(options\.config\)"),
    ("fp32", "options:\n  detectron2:\n    weights: detectron2://ImageNetPretrained/MSRA/R-50.pkl\n", 11,
     r"unknown options weights"),
])
def test_validate_refuses_in_one_line_at_the_line(tmp_path, precision, options, line, said):
    code, out = validate(tmp_path, precision, options)
    assert code == 2 and out.count("\n") == 0, out
    assert out.startswith("detbench: error: ") and re.search(r"/seed\.yaml:%d: " % line, out), out
    assert re.search(said, out), out


def test_an_override_that_would_download_weights_is_refused():
    with pytest.raises(UserError, match="detectron2 would download detectron2://ImageNetPretrained"):
        FW.argv(ctx(extra_args=("MODEL.WEIGHTS", "detectron2://ImageNetPretrained/MSRA/R-50.pkl")))
