"""One seeded weights file, loaded by every framework of a cell, gives the same network.

A file made by `detbench weights make` (torchvision's layout) is loaded into torchvision's
model and into the bundled trainer's; on the same input both give the same backbone+FPN
features and the same head outputs. Mapping a state to a framework and back changes
nothing, in both directions. A file that does not fit is refused with one line naming
the file and the first offending key. mmdetection's side runs inside its pinned env.
"""
import json
import os
import re
import subprocess

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from click.testing import CliRunner  # noqa: E402
from conftest import ROOT, config_path, env_for_subprocess, run_module  # noqa: E402

from harness.launch import envs  # noqa: E402
from harness.cli import main as cli  # noqa: E402
from harness.frameworks import FRAMEWORKS  # noqa: E402
from harness.drivers import torchvision_driver, weights_map  # noqa: E402
from harness.drivers.weights_map import WeightsError  # noqa: E402
from harness.trainer import weights  # noqa: E402
from harness.trainer.config import load_config_module  # noqa: E402
from tests.support.services import need_service  # noqa: E402

TRAINER_CONFIGS = {"retinanet": "retina_r50v1_fpn_1x", "faster_rcnn": "faster_r50v1_fpn_1x",
                   "mask_rcnn": "mask_r50v1_fpn_1x"}
SEED = 7
RTOL = 1e-4


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """{model: (path, state)} of made files, written once for the module."""
    folder = tmp_path_factory.mktemp("weights")
    cache = {}

    def get(model):
        if model not in cache:
            state = weights.make(model, SEED)
            path = str(folder / ("%s.pt" % model))
            weights.save(path, model, SEED, state)
            cache[model] = (path, state)
        return cache[model]
    return get


def trainer_model(model, config=None):
    module = load_config_module(config_path(config or TRAINER_CONFIGS[model]))
    return module.build_detector(module.CONFIG)


def image(seed=0, size=(64, 96)):
    return torch.rand(1, 3, *size, generator=torch.Generator().manual_seed(seed))


def rel_error(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-12))


def features(model, tv, bt, x):
    with torch.no_grad():
        return list(tv.backbone(x).values()), bt.neck(bt.backbone(x))


def loaded_pair(made, model):
    path, _ = made(model)
    tv, bt = weights.reference_model(model), trainer_model(model)
    weights.load_into(tv, path, model, "torchvision")
    weights.load_into(bt, path, model, "detbench-trainer")
    return tv.eval(), bt.eval()


@pytest.mark.parametrize("model", ["retinanet", "mask_rcnn"])
def test_trainer_and_torchvision_compute_the_same_features_from_one_file(made, model):
    tv, bt = loaded_pair(made, model)
    ours, theirs = features(model, tv, bt, image())
    assert len(ours) == len(theirs) == 5
    for a, b in zip(theirs, ours):
        assert a.shape == b.shape
        assert rel_error(a, b) < RTOL


def test_retinanet_heads_agree_class_for_class(made):
    tv, bt = loaded_pair(made, "retinanet")
    feats, _ = features("retinanet", tv, bt, image(1))
    with torch.no_grad():
        tv_cls = tv.head.classification_head(feats)           # [B, N, 81]: background channel first
        tv_box = tv.head.regression_head(feats)
        bt_cls, bt_box = bt.head(feats)                        # [B, N, 80]
    assert bt_cls.shape[-1] == 80 and tv_cls.shape[-1] == 81
    assert rel_error(tv_cls[..., 1:], bt_cls) < RTOL
    assert rel_error(tv_box, bt_box) < RTOL


def test_rpn_box_and_mask_heads_agree(made):
    tv, bt = loaded_pair(made, "mask_rcnn")
    feats, _ = features("mask_rcnn", tv, bt, image(2))
    g = torch.Generator().manual_seed(3)
    box_in, mask_in = torch.rand(6, 256, 7, 7, generator=g), torch.rand(6, 256, 14, 14, generator=g)
    with torch.no_grad():
        tv_obj, tv_deltas = tv.rpn.head(feats)
        bt_obj, bt_deltas = bt.rpn.head(feats)
        tv_scores, tv_boxes = tv.roi_heads.box_predictor(tv.roi_heads.box_head(box_in))
        bt_scores, bt_boxes = bt.roi_heads.box_head(box_in)
        tv_masks = tv.roi_heads.mask_predictor(tv.roi_heads.mask_head(mask_in))
        bt_masks = bt.roi_heads.mask_head(mask_in)
    for a, b in zip(tv_obj + tv_deltas, bt_obj + bt_deltas):
        assert rel_error(a, b) < RTOL
    assert rel_error(tv_scores, bt_scores) < RTOL
    assert rel_error(tv_boxes.view(6, 81, 4), bt_boxes) < RTOL
    assert rel_error(tv_masks, bt_masks) < RTOL


def test_a_wrong_batch_norm_mapping_would_show_in_the_features(made):
    """The file's frozen statistics are not the identity, so swapping two norms changes the output."""
    path, state = made("retinanet")
    assert not torch.allclose(state["backbone.body.layer2.0.bn1.running_var"], torch.ones(128))
    swapped = dict(state)
    for field in ("weight", "bias", "running_mean", "running_var"):
        swapped["backbone.body.layer2.0.bn1." + field] = state["backbone.body.layer2.1.bn1." + field]
        swapped["backbone.body.layer2.1.bn1." + field] = state["backbone.body.layer2.0.bn1." + field]
    tv, bt = loaded_pair(made, "retinanet")
    bt.load_state_dict(weights_map.to_framework(swapped, "detbench-trainer", "retinanet", bt.state_dict()))
    right, wrong = features("retinanet", tv, bt, image())
    assert rel_error(wrong[0], right[0]) > 1e-3


@pytest.mark.parametrize("framework", ["torchvision", "detbench-trainer"])
def test_a_made_file_survives_the_round_trip_through_a_framework(made, framework):
    path, state = made("mask_rcnn")
    net = weights.reference_model("mask_rcnn") if framework == "torchvision" else trainer_model("mask_rcnn")
    weights.load_into(net, path, "mask_rcnn", framework)
    back = weights.export(net, framework, "mask_rcnn")
    assert set(back) == set(state)
    assert all(torch.equal(back[k], state[k]) for k in state)


@pytest.mark.parametrize("model", ["retinanet", "faster_rcnn"])
def test_a_trainer_state_survives_the_round_trip_through_torchvision_s_layout(model):
    """The other direction: the trainer's own initialisation -> torchvision's names -> back."""
    torch.manual_seed(0)
    bt = trainer_model(model)
    native = bt.state_dict()
    reference = weights.reference_model(model).state_dict()
    tv_layout = weights_map.from_framework(native, "detbench-trainer", model, reference)
    again = weights_map.to_framework(tv_layout, "detbench-trainer", model, native)
    assert set(again) == set(native)
    assert all(torch.equal(again[k], native[k]) for k in native)


MMDET_KEYS = {   # mmdet 3.3's names and shapes for Faster R-CNN R50-FPN (80 classes)
    "backbone.conv1.weight": (64, 3, 7, 7), "backbone.bn1.running_var": (64,),
    "backbone.layer3.5.bn3.weight": (1024,), "backbone.layer4.0.downsample.0.weight": (2048, 1024, 1, 1),
    "neck.lateral_convs.0.conv.weight": (256, 256, 1, 1), "neck.fpn_convs.3.conv.bias": (256,),
    "rpn_head.rpn_conv.weight": (256, 256, 3, 3), "rpn_head.rpn_cls.weight": (3, 256, 1, 1),
    "rpn_head.rpn_reg.bias": (12,), "roi_head.bbox_head.shared_fcs.0.weight": (1024, 12544),
    "roi_head.bbox_head.fc_cls.weight": (81, 1024), "roi_head.bbox_head.fc_reg.weight": (320, 1024),
}


def test_mmdetection_names_cover_its_faster_rcnn_and_map_back_exactly():
    """mmdet's side without mmdet: known keys and shapes; background last in fc_cls; none in fc_reg."""
    state = weights.make("faster_rcnn", SEED)
    native = _mmdet_names("faster_rcnn", state)
    for key, shape in MMDET_KEYS.items():
        assert tuple(native[key].shape) == shape, key
    cls_bias = native["roi_head.bbox_head.fc_cls.bias"]
    assert torch.equal(cls_bias[80], state["roi_heads.box_predictor.cls_score.bias"][0])
    assert torch.equal(cls_bias[:80], state["roi_heads.box_predictor.cls_score.bias"][1:])
    assert torch.equal(native["roi_head.bbox_head.fc_reg.bias"], state["roi_heads.box_predictor.bbox_pred.bias"][4:])
    back = weights_map.from_framework(native, "mmdetection", "faster_rcnn", state)
    assert all(torch.equal(back[k], state[k]) for k in state)


def _mmdet_names(model, state):
    """`state` renamed and reshaped by the mmdet rules (the real model is checked in its env)."""
    rules = [(re.compile(p + r"\Z"), t, weights_map.TRANSFORMS.get(f)) for p, t, f in weights_map._MMDET]
    out = {}
    for key, value in state.items():
        pattern, template, transform = next(r for r in rules if r[0].match(key))
        out[weights_map._fill(template, pattern.match(key).groups())] = (
            transform(value, model, False) if transform else value)
    return out


# --- refusals ----------------------------------------------------------------------------------

def test_a_file_of_another_model_is_refused_naming_the_file(made):
    path, _ = made("retinanet")
    bt = trainer_model("mask_rcnn")
    with pytest.raises(WeightsError, match="%s: holds retinanet weights, but this trial trains mask_rcnn"
                       % path.replace(".", r"\.")):
        weights.load_into(bt, path, "mask_rcnn", "detbench-trainer")


def test_a_file_of_another_shape_is_refused_at_its_first_key(made):
    path, _ = made("retinanet")
    tiny = trainer_model("retinanet", "retina_tiny")
    with pytest.raises(WeightsError) as err:
        weights.load_into(tiny, path, "retinanet", "detbench-trainer")
    assert str(err.value).startswith(path + ": key backbone.body.conv1.weight has shape [64, 3, 7, 7]")


def test_a_file_missing_a_key_is_refused_naming_it(made, tmp_path):
    _, state = made("retinanet")
    partial = {k: v for k, v in state.items() if k != "head.regression_head.bbox_reg.bias"}
    path = str(tmp_path / "partial.pt")
    weights.save(path, "retinanet", SEED, partial)
    with pytest.raises(WeightsError, match="no value for detbench-trainer's head.box_deltas.bias"):
        weights.load_into(trainer_model("retinanet"), path, "retinanet", "detbench-trainer")
    with pytest.raises(WeightsError, match="no value for torchvision's head.regression_head.bbox_reg.bias"):
        weights.check(path, "retinanet")


def test_a_file_that_is_not_a_weights_file_is_refused(tmp_path):
    junk = tmp_path / "junk.pt"
    junk.write_bytes(os.urandom(256))
    with pytest.raises(WeightsError, match="junk.pt: not a detbench weights file"):
        weights.check(str(junk), "retinanet")
    plain = tmp_path / "plain.pt"
    torch.save({"conv.weight": torch.zeros(1)}, str(plain))
    with pytest.raises(WeightsError, match="plain.pt: not a detbench weights file"):
        weights.check(str(plain), "retinanet")
    empty = tmp_path / "empty.pt"           # torch's EOFError says nothing: the line says what it is
    empty.write_bytes(b"")
    with pytest.raises(WeightsError, match=r"empty.pt: not a detbench weights file \(the file is empty\)"):
        weights.check(str(empty), "retinanet")


def test_weights_make_refuses_an_unknown_model_and_an_unwritable_path(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["weights", "make", "yolo", "--out", str(tmp_path / "w.pt")])
    assert res.exit_code == 2 and "unknown model 'yolo'" in res.output
    (tmp_path / "file").write_text("")
    res = runner.invoke(cli, ["weights", "make", "retinanet", "--out", str(tmp_path / "file" / "w.pt")])
    assert res.exit_code == 2
    assert res.output.strip().count("\n") == 0
    assert "file/w.pt: cannot write: %s is not a folder" % (tmp_path / "file") in res.output
    assert os.listdir(tmp_path) == ["file"]


def test_weights_make_writes_a_file_every_framework_loads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                      # a relative path means the caller's folder
    out = tmp_path / "made" / "retina.pt"            # and its folder is made
    res = CliRunner().invoke(cli, ["weights", "make", "retinanet", "--out", "made/retina.pt", "--seed", "3"])
    assert res.exit_code == 0, res.output
    assert weights.check(str(out), "retinanet") == len(weights.reference_model("retinanet").state_dict())
    again = weights.make("retinanet", 3)
    stored = weights_map.read(str(out), "retinanet")
    assert all(torch.equal(stored[k], again[k]) for k in again)   # the seed alone decides the file
    assert [p.name for p in out.parent.iterdir()] == ["retina.pt"]


# --- each framework's own entry point -----------------------------------------------------------

def test_the_trainer_starts_from_the_file_or_refuses_it_in_one_line(made):
    path, _ = made("retinanet")
    sets = ["--set", "train.max_iter=1", "--set", "data.input_size=64x64", "--set", "data.images_per_device=1",
            "--set", "train.device=cpu"]
    ok = run_module([config_path("retina_r50v1_fpn_1x"), "--weights", path] + sets)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "loaded weights %s: 301 tensors" % path in ok.stdout
    bad = run_module([config_path("mask_r50v1_fpn_1x"), "--weights", path] + sets)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "error: %s: holds retinanet weights, but this trial trains mask_rcnn" % path


def test_the_torchvision_driver_starts_from_the_file_or_refuses_it(made, capsys):
    path, _ = made("retinanet")
    args = ["--iterations", "1", "--batch-size", "1", "--input-size", "64x64", "--device", "cpu",
            "--weights", path]
    assert torchvision_driver.main(["--model", "retinanet"] + args) == 0
    assert "loaded weights %s: 301 tensors" % path in capsys.readouterr().out
    assert torchvision_driver.main(["--model", "faster_rcnn"] + args) == 2
    assert capsys.readouterr().err.strip() == (
        "error: %s: holds retinanet weights, but this trial trains faster_rcnn" % path)


def test_a_scenario_names_one_file_per_model_and_validate_checks_it(made, tmp_path):
    path, _ = made("retinanet")
    text = ("name: w\nmatrix:\n  framework: [detbench-trainer, torchvision]\n  model: [retinanet, mask_rcnn]\n"
            "weights:\n  retinanet: %s\n  mask_rcnn: %s\n" % (path, path))
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text)
    res = CliRunner().invoke(cli, ["validate", str(scenario)])
    assert res.exit_code == 2
    assert res.output.strip() == ("detbench: error: %s:7: weights.mask_rcnn: %s: holds retinanet weights, "
                                  "but this trial trains mask_rcnn" % (scenario, path))


def test_every_framework_of_a_cell_gets_the_same_file_and_says_so(made, tmp_path):
    from harness import launch
    from harness.plan import scenario as scenario_mod
    path, _ = made("retinanet")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: w\nmatrix:\n  framework: [detbench-trainer, torchvision]\n  model: [retinanet]\n"
                        "weights:\n  retinanet: %s\n" % path)
    sc = launch.load_scenario(scenario)
    for name in ("detbench-trainer", "torchvision"):
        cell = scenario_mod.Cell(name, "retinanet", "fp32", "local", 1, 1)
        ctx = scenario_mod.context(sc, cell)
        argv = FRAMEWORKS[name].command(ctx)
        assert argv[argv.index("--weights") + 1] == path
        assert FRAMEWORKS[name].settings(ctx)["init"] == "file:" + os.path.basename(path)


# --- mmdetection, inside its pinned env ----------------------------------------------------------

MMDET_PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mmdet_weights_probe.py")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["retinanet", "mask_rcnn"])
def test_mmdetection_computes_torchvision_s_features_from_the_file(made, model):
    spec = FRAMEWORKS["mmdetection"].env
    need_service(envs.is_built(spec), "the mmdetection env is not built (run `detbench env build mmdetection`)")
    path, _ = made(model)
    proc = subprocess.run([envs.python_for(spec, require=True), MMDET_PROBE, model, path], cwd=ROOT,
                          env=env_for_subprocess(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    assert errors.pop("round_trip_exact") is True
    assert errors and all(err < RTOL for err in errors.values()), errors

