"""detectron2's own tools/train_net.py in its pinned env, started by the launcher: a few tiny
iterations of each model, detectron2's own CommonMetricPrinter lines read by the detectron2 scraper,
the work, data and settings lines its appended hook prints, the script it ran byte for byte the
archive's, and the shared weights file mapped onto detectron2's names, checked by its backbone and
FPN computing what torchvision's compute from the same file on the same input.

Needs the env built by .ci/provision-rivals.sh (`detbench env build detectron2`); without it the
tests skip with the reason (and fail under DETBENCH_REQUIRE_SERVICES=1)."""
import hashlib
import json
import os
import subprocess
import tarfile

import pytest

from harness import jsonlog
from harness.frameworks import FRAMEWORKS, detectron2
from harness.frameworks.base import TrialContext
from harness.launch import envs
from harness.plan import trialfiles
from harness.plan import datasets, weights
from harness.vocab.sources import cached_archive
from tests.support.services import need_env

FW = FRAMEWORKS["detectron2"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRIVERS = os.path.join(ROOT, "harness", "drivers")
ENV = {"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"}
WORK_KEYS = {"retinanet": {"iteration", "positive_anchors"},
             "faster_rcnn": {"iteration", "proposals", "sampled_rois", "positive_rois"},
             "mask_rcnn": {"iteration", "proposals", "sampled_rois", "positive_rois", "mask_rois"}}


def python():
    need_env("detectron2")
    return envs.python_for(FW.env)


def lines(text, prefix):
    return [json.loads(line[len(prefix):]) for line in text.splitlines() if line.startswith(prefix)]


@pytest.fixture(scope="module")
def weights_files(tmp_path_factory):
    """`detbench weights make` files, one per model (torchvision's layout): made here where detbench's
    env has torch, else by the same tool in detectron2's env, which has torch and torchvision too."""
    folder = tmp_path_factory.mktemp("weights")
    for m in WORK_KEYS:
        if weights.available():
            weights.make(m, folder / ("%s.pt" % m), seed=3)
        else:
            subprocess.run([python(), "-m", "harness.trainer.weights", "make", m, "--out", str(folder / ("%s.pt" % m)),
                            "--seed", "3"], cwd=ROOT, check=True, capture_output=True, timeout=600)
    return {m: folder / ("%s.pt" % m) for m in WORK_KEYS}


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    ann, images = datasets.make_coco(tmp_path_factory.mktemp("coco"), images=3, size=(96, 128))
    return str(ann), str(images)


def trial(tmp_path, model, iterations, weights_file, coco, precision="fp32", flip=True):
    """Run a trial's argv with its files in a trial folder, as a launcher does; (process, context)."""
    ctx = TrialContext(framework="detectron2", model=model, precision=precision, gpus=1, nodes=1, batch_per_gpu=2,
                       input_size=(96, 128), iterations=iterations, python=python(), env=dict(ENV),
                       weights=str(weights_file), data={"annotations": coco[0], "images": coco[1]},
                       options={"workers": 0, "flip": flip, "lr": 1e-6})
    argv = trialfiles.prepare(tmp_path, FW.argv(ctx), FW.trial_files(ctx))
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=ENV, cwd=str(tmp_path))
    return out, ctx


def published_script():
    with tarfile.open(cached_archive(detectron2.DETECTRON2)) as tar:
        [member] = [m for m in tar if m.isfile() and m.name.endswith("/" + detectron2.SCRIPT)]
        return tar.extractfile(member).read()


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("model, iterations", [
    pytest.param("faster_rcnn", 21, marks=pytest.mark.nightly),   # two printed lines: 20 and 21
    ("retinanet", 3), ("mask_rcnn", 3)])
def test_train_net_trains_and_its_own_lines_give_the_figures(model, iterations, weights_files, coco, tmp_path):
    out, ctx = trial(tmp_path, model, iterations, weights_files[model], coco)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    log = out.stdout + out.stderr
    # the script run is the archive's tools/train_net.py, byte for byte, with its own command line
    [ran] = [line for line in log.splitlines() if line.startswith("detbench: running ")]
    assert ran.startswith("detbench: running %s (sha256 %s) --config-file " % (
        tmp_path / "train_net.py", hashlib.sha256(published_script()).hexdigest())), ran
    # detectron2's checkpointer loaded the mapped weights file, every tensor of the model found in it
    assert "detbench_initial_weights.pth" in log and "not found in the checkpoint" not in log, log[-4000:]
    assert "Starting training from iteration 0" in log
    # the printer's lines, as its PeriodicWriter writes them (every 20th iteration and the last)
    from harness.measure import scrapers
    records, errors = scrapers.get(FW.scraper)(log.splitlines(), **FW.scrape_options)
    assert errors == [] and [r.iteration for r in records] == ([20, 21] if iterations == 21 else [iterations])
    assert all(r.time_s > 0 and r.loss is not None for r in records)
    work = lines(out.stdout, jsonlog.WORK_PREFIX)
    assert [w["iteration"] for w in work] == list(range(1, iterations + 1))
    assert all(set(w) == WORK_KEYS[model] and all(v > 0 for v in w.values()) for w in work), work
    if model != "retinanet":       # RoI sampling: at most 512 per image, a quarter of them positive
        assert all(w["sampled_rois"] <= 2 * 512 and w["positive_rois"] <= 2 * 128 for w in work)
    # what its own loader drew: two images an iteration, each of the data set, a flip drawn for each
    doc = json.loads(open(coco[0]).read())
    ids = {a["image_id"] for a in doc["annotations"] if not a.get("iscrowd")}   # its loader keeps these
    data = lines(out.stdout, jsonlog.DATA_PREFIX)
    assert [d["iteration"] for d in data] == list(range(1, iterations + 1))
    assert all(len(d["views"]) == 2 and all(v[0] in ids and v[1] in (0, 1) for v in d["views"]) for d in data)
    # TrainingSampler: each pass goes through the whole set once, so the first pass holds every image
    first = [v[0] for d in data for v in d["views"]][:len(ids)]
    if iterations > 3:
        assert sorted(first) == sorted(ids) and data[0]["epoch"] == 0 and data[-1]["epoch"] >= 10
        flips = [v[1] for d in data for v in d["views"]]
        assert 0 < sum(flips) < len(flips)       # RandomFlip(0.5) drawn at every draw
    [said] = lines(out.stdout, jsonlog.SETTINGS_PREFIX)
    declared = FW.settings(ctx)
    differs = {k: (said["settings"].get(k, "(missing)"), v) for k, v in declared.items()
               if said["settings"].get(k, "(missing)") != v}
    assert set(differs) <= {"input_size"}, differs     # ResizeShortestEdge: the short side, the long side's cap
    assert said["implementation"]["batch_norm"].startswith("frozen")
    assert said["implementation"]["training_code"].startswith("detectron2's own tools/train_net.py; added: ")
    assert "DefaultTrainer.build_hooks wrapped" in said["implementation"]["training_code"]
    if model == "mask_rcnn":
        assert said["implementation"]["mask_paste"] == ("bilinear over the float box "
                                                        "(detectron2.layers.mask_ops.paste_masks_in_image)")


@pytest.mark.slow
@pytest.mark.e2e
def test_a_weights_file_that_does_not_fit_stops_the_trial_in_one_line(weights_files, coco, tmp_path):
    out, _ = trial(tmp_path, "faster_rcnn", 1, weights_files["retinanet"], coco)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith("error: ") and "retinanet" in out.stderr


def test_a_script_from_an_archive_of_another_commit_is_not_run(tmp_path):
    """The launcher, given the archive itself (as the accuracy recipe does), checks its commit first."""
    archive = tmp_path / "other.tar"
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT, pax_headers={"comment": "3" * 40}) as tar:
        info = tarfile.TarInfo("tools/train_net.py")
        tar.addfile(info)
    proc = subprocess.run([python(), os.path.join(DRIVERS, "detectron2_launch.py"), "--source-archive", str(archive),
                           "--commit", detectron2.COMMIT, "--model", "retinanet", "--iterations", "1",
                           "--data", str(tmp_path / "a.json"), "--images", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: detectron2: %s: the archive is of commit %s, not the pinned %s" % (
        archive, "3" * 40, detectron2.COMMIT)


def test_a_config_option_its_config_does_not_take_stops_before_training_in_one_line(tmp_path):
    proc = subprocess.run([python(), os.path.join(DRIVERS, "detectron2_launch.py"), "--source-archive",
                           str(cached_archive(detectron2.DETECTRON2)), "--commit", detectron2.COMMIT,
                           "--model", "retinanet", "--iterations", "1", "--data", str(tmp_path / "a.json"),
                           "--images", str(tmp_path), "SOLVER.NO_SUCH_KEY", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    # the last line (the imports before it may warn): detectron2's own config refusing the key
    assert proc.stderr.strip().splitlines()[-1] == ("error: detectron2: config options SOLVER.NO_SUCH_KEY 1: "
                                                    "Non-existent key: SOLVER.NO_SUCH_KEY")
    assert "Starting training" not in proc.stdout


BF16 = r"""
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import detectron2_launch as d2
model = d2.build_model(d2.build_cfg(d2.parse_args(["--model", "faster_rcnn", "--iterations", "1",
                                                 "--input-size", "64x64"]))).eval()
seen = []
model.backbone.register_forward_hook(lambda m, a, out: seen.append(str(out["p2"].dtype)))
d2.bf16_forward(model)
with torch.no_grad():
    model([{"image": torch.rand(3, 64, 64) * 255}])
print("BF16 " + json.dumps({"backbone": seen, "autocast_after": torch.is_autocast_enabled("cpu")}))
"""


def test_the_bf16_shim_runs_the_models_forward_in_bfloat16_and_leaves_autocast_after_it():
    out = subprocess.run([python(), "-c", BF16, DRIVERS], capture_output=True, text=True, timeout=600, env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    [got] = [json.loads(line[len("BF16 "):]) for line in out.stdout.splitlines() if line.startswith("BF16 ")]
    assert got == {"backbone": ["torch.bfloat16"], "autocast_after": False}


PARITY = r"""
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import detectron2_launch as d2, torchvision_driver as tv, weights_map
model, path = sys.argv[2], sys.argv[3]
ref = tv.build_model(tv.parse_args(["--model", model, "--iterations", "1", "--device", "cpu"]), 128, 160)
weights_map.load(ref, path, model, "torchvision")
net = d2.build_model(d2.build_cfg(d2.parse_args(["--model", model, "--iterations", "1", "--input-size", "128x160"])))
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
