"""detectron2's driver in its pinned env: two tiny iterations of each model, the work and settings
it logs, and the shared weights file mapped onto detectron2's names, checked by its backbone and
FPN computing what torchvision's compute from the same file on the same input.

Needs the env built by .ci/provision-rivals.sh (`detbench env build detectron2`); without it the
tests skip with the reason (and fail under DETBENCH_REQUIRE_SERVICES=1)."""
import json
import os
import subprocess

import pytest

from harness import jsonlog
from harness.frameworks import FRAMEWORKS
from harness.frameworks.base import TrialContext
from harness.launch import envs
from harness.plan import weights
from tests.support.services import need_env

FW = FRAMEWORKS["detectron2"]
DRIVERS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "harness", "drivers")
ENV = {"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"}
WORK_KEYS = {"retinanet": {"iteration", "positive_anchors"},
             "faster_rcnn": {"iteration", "proposals", "sampled_rois", "positive_rois"},
             "mask_rcnn": {"iteration", "proposals", "sampled_rois", "positive_rois", "mask_rois"}}


def python():
    need_env("detectron2")
    return envs.python_for(FW.env)


def lines(text, prefix):
    return [json.loads(l[len(prefix):]) for l in text.splitlines() if l.startswith(prefix)]


@pytest.fixture(scope="module")
def weights_files(tmp_path_factory):
    """`detbench weights make` files, one per model (torchvision's layout)."""
    if not weights.available():
        pytest.skip("torch is not installed in detbench's env: no weights file can be made")
    folder = tmp_path_factory.mktemp("weights")
    for m in WORK_KEYS:
        weights.make(m, folder / ("%s.pt" % m), seed=3)
    return {m: folder / ("%s.pt" % m) for m in WORK_KEYS}


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("model", sorted(WORK_KEYS))
def test_two_tiny_iterations_log_time_work_and_the_settings_as_run(model, weights_files):
    ctx = TrialContext(framework="detectron2", model=model, precision="fp32", gpus=1, nodes=1, batch_per_gpu=1,
                       input_size=(96, 128), iterations=2, data=None, python=python(), env=dict(ENV),
                       weights=str(weights_files[model]),
                       options={"workers": 0, "flip": False, "shuffle": False, "lr": 1e-6})
    out = subprocess.run(FW.argv(ctx), capture_output=True, text=True, timeout=900, env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "loaded weights %s" % weights_files[model] in out.stdout
    iters = lines(out.stdout, jsonlog.ITER_PREFIX)
    assert [i["iteration"] for i in iters] == [1, 2] and all(i["images"] == 1 and i["time_s"] > 0 for i in iters)
    work = lines(out.stdout, jsonlog.WORK_PREFIX)
    assert [w["iteration"] for w in work] == [1, 2]
    assert all(set(w) == WORK_KEYS[model] and all(v > 0 for v in w.values()) for w in work), work
    if model != "retinanet":       # RoI sampling: at most 512 per image, a quarter of them positive
        assert all(w["sampled_rois"] <= 512 and w["positive_rois"] <= 128 for w in work)
    [line] = lines(out.stdout, jsonlog.SETTINGS_PREFIX)
    declared = FW.settings(ctx)
    assert {k: line["settings"].get(k, "(missing)") for k in declared} == declared
    assert line["implementation"]["batch_norm"].startswith("frozen")
    if model == "mask_rcnn":
        assert line["implementation"]["mask_paste"] == ("bilinear over the float box "
                                                        "(detectron2.layers.mask_ops.paste_masks_in_image)")
    # the first log lines of the run are detbench's own: the scraper of the adapter reads them
    from harness.measure import scrapers
    records, errors = scrapers.get(FW.scraper)(out.stdout.splitlines(), **FW.scrape_options)
    assert errors == [] and [r.iteration for r in records] == [1, 2] and all(r.span == 1 for r in records)


PARITY = r"""
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import detectron2_driver as d2, torchvision_driver as tv, weights_map
model, path = sys.argv[2], sys.argv[3]
ref = tv.build_model(tv.parse_args(["--model", model, "--iterations", "1", "--device", "cpu"]), 128, 160)
weights_map.load(ref, path, model, "torchvision")
net = d2.build_model(d2.build_cfg(d2.parse_args(["--model", model, "--iterations", "1"]), 128, 160))
loaded = weights_map.load(net, path, model, "detectron2")
ref.eval(); net.eval()
torch.manual_seed(0)
images = torch.rand(2, 3, 128, 160)
out = {"tensors": loaded}
with torch.no_grad():
    ours = torch.stack([(i * 255 - net.pixel_mean) / net.pixel_std for i in images])
    theirs = torch.stack([ref.transform.normalize(i) for i in images])
    out["input"] = float((ours - theirs).abs().max())
    for dtype in ("float32", "float64"):
        x = theirs.to(getattr(torch, dtype))
        a = ref.to(x.dtype).backbone(x)
        b = net.to(x.dtype).backbone(x)
        out[dtype] = [[ka, kb, float((va - vb).abs().max()), float(va.abs().max())]
                      for (ka, va), (kb, vb) in zip(a.items(), b.items())]
print("PARITY " + json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.parametrize("model", ["retinanet", "mask_rcnn"])
def test_the_mapped_weights_give_torchvisions_backbone_and_fpn_features(model, weights_files):
    out = subprocess.run([python(), "-c", PARITY, DRIVERS, model, str(weights_files[model])],
                         capture_output=True, text=True, timeout=900, env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    [got] = [json.loads(l[len("PARITY "):]) for l in out.stdout.splitlines() if l.startswith("PARITY ")]
    assert got["tensors"] > 250
    assert got["input"] < 1e-5              # detectron2's pixel mean and std are torchvision's normalisation
    levels = ["p3", "p4", "p5", "p6", "p7"] if model == "retinanet" else ["p2", "p3", "p4", "p5", "p6"]
    assert [level[1] for level in got["float64"]] == levels
    # the same input through the same weights: equal up to rounding, in float64 far below 1e-5
    assert all(diff < 1e-5 for _, _, diff, _ in got["float64"]), got["float64"]
    # in float32 the two sum in other orders (FrozenBN as a product against batch_norm): within
    # 1e-5 of each level's largest value
    assert all(diff <= 1e-5 * top for _, _, diff, top in got["float32"]), got["float32"]


def _detectron2_names(model, state):
    """`state` renamed and reshaped by the detectron2 rules (the real model is checked in its env)."""
    import re
    from harness.drivers import weights_map
    hint = ["backbone.top_block.p6.weight"] if model == "retinanet" else []
    rules = [(re.compile(p + r"\Z"), t, weights_map.TRANSFORMS.get(f))
             for p, t, f in weights_map._rules("detectron2", hint)]
    out = {}
    for key, value in state.items():
        for pattern, template, transform in rules:  # noqa: B007 (the match's rule is read after the loop)
            m = pattern.match(key)
            if m:
                break
        else:
            raise AssertionError("no detectron2 rule for %s" % key)
        out[weights_map._fill(template, m.groups())] = transform(value, model, False) if transform else value
    return out


@pytest.mark.parametrize("model", ["retinanet", "mask_rcnn"])
def test_detectron2_names_map_back_exactly_with_retinanets_anchors_transposed(model):
    torch = pytest.importorskip("torch")
    from harness.drivers import weights_map
    from harness.trainer import weights as trainer_weights
    state = trainer_weights.make(model, 5)
    native = _detectron2_names(model, state)
    assert "backbone.bottom_up.res2.0.conv1.norm.running_var" in native
    if model == "retinanet":
        # torchvision's anchor a = ratio * 3 + scale holds classes 0..80 (background 0); detectron2's
        # anchor a' = scale * 3 + ratio holds classes 0..79
        theirs = state["head.classification_head.cls_logits.bias"].reshape(3, 3, 81)
        ours = native["head.cls_score.bias"].reshape(3, 3, 80)
        assert torch.equal(ours, theirs[:, :, 1:].transpose(0, 1))
        boxes = state["head.regression_head.bbox_reg.weight"].reshape(3, 3, 4, 256, 3, 3)
        assert torch.equal(native["head.bbox_pred.weight"].reshape(3, 3, 4, 256, 3, 3), boxes.transpose(0, 1))
        assert "backbone.fpn_lateral3.weight" in native and "backbone.top_block.p7.bias" in native
    else:
        assert torch.equal(native["roi_heads.box_predictor.cls_score.bias"][80],
                           state["roi_heads.box_predictor.cls_score.bias"][0])
        assert native["roi_heads.mask_head.predictor.weight"].shape[0] == 80
        assert "backbone.fpn_lateral2.weight" in native and "roi_heads.mask_head.mask_fcn4.weight" in native
    back = weights_map.from_framework(native, "detectron2", model, state)
    assert set(back) == set(state) and all(torch.equal(back[k], state[k]) for k in state)
