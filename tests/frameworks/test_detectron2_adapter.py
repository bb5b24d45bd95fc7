"""The detectron2 adapter that runs here: its command (the launcher of the commit's own
tools/train_net.py, which the trial folder gets from the pinned commit's archive), its declared
settings (the work every framework here is set to), and what `detbench validate` refuses at its
line: an option that would download or that train_net.py does not take, a precision it cannot run,
a model-zoo config that does not exist, a source archive that is missing or of another commit. The
0.3-era CUDA recipe stays as detectron2-cuda."""
import io
import os
import re
import tarfile

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.frameworks import settings as normalized
from harness.errors import UserError
from harness.frameworks import FRAMEWORKS, detectron2
from harness.frameworks.base import NEEDS_GPU, RUNS_HERE, TRIAL_DIR, TrialContext

FW = FRAMEWORKS["detectron2"]
COCO = {"annotations": "/d/ann.json", "images": "/d/img"}
SCRIPT = b"# the commit's tools/train_net.py\nprint('train_net')\n"


def git_archive(path, commit, prefix="detectron2-%s/", script=SCRIPT):
    """A tarball laid out as `git archive` (GitHub's archive/<commit>.tar.gz) writes one: a global pax
    header whose comment is the commit ID, then the tree under one folder."""
    prefix = prefix % commit if "%s" in prefix else prefix
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": commit}) as tar:
        for name, data in (("setup.py", b"# setup\n"), ("tools/train_net.py", script),
                           ("tools/plain_train_net.py", b"# plain\n")):
            if data is None:
                continue
            info = tarfile.TarInfo(prefix + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """DETBENCH_CACHE with the pinned commit's archive where an env build keeps it."""
    root = tmp_path / "cache"
    (root / "sources").mkdir(parents=True)
    git_archive(root / "sources" / ("detectron2-%s.tar" % detectron2.COMMIT), detectron2.COMMIT)
    monkeypatch.setenv("DETBENCH_CACHE", str(root))
    return root


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


def test_the_command_runs_the_commits_train_net_from_the_trial_folder_with_the_scenario():
    argv = FW.argv(ctx(options={"workers": 0, "flip": False, "lr": 1e-6}))
    assert argv[0] == "/env/bin/python" and argv[1].endswith("harness/drivers/detectron2_launch.py")
    assert flag(argv, "--script") == TRIAL_DIR + "/train_net.py"
    assert flag(argv, "--config") == "COCO-Detection/faster_rcnn_R_50_FPN_1x.yaml"
    assert (flag(argv, "--iterations"), flag(argv, "--batch-size"), flag(argv, "--input-size")) == \
        ("10", "2", "320x320")
    assert (flag(argv, "--lr"), flag(argv, "--weights"), flag(argv, "--data")) == ("1e-06", "/w/faster_rcnn.pt",
                                                                                  "/d/ann.json")
    assert "--no-flip" in argv
    assert (flag(argv, "--rpn-pre-nms-train"), flag(argv, "--rpn-post-nms-train")) == ("2000", "2000")
    assert FW.scraper == "detectron2"        # its own CommonMetricPrinter lines give the figures


def test_the_trial_folder_gets_the_script_byte_for_byte_from_the_pinned_archive(cache):
    assert FW.trial_files(ctx()) == {"train_net.py": SCRIPT.decode()}


def test_a_missing_archive_or_one_of_another_commit_is_refused_naming_detectron2(cache):
    archive = cache / "sources" / ("detectron2-%s.tar" % detectron2.COMMIT)
    git_archive(archive, "1" * 40)
    with pytest.raises(UserError, match=r"^detectron2: .*: the archive is of commit 1{40}, not the pinned %s$"
                       % detectron2.COMMIT):
        FW.trial_files(ctx())
    archive.unlink()
    with pytest.raises(UserError, match=r"^detectron2: its training script comes from the source archive of "
                                        r"commit %s, which is not at " % detectron2.COMMIT):
        FW.trial_files(ctx())


def test_an_archive_without_train_net_is_refused(cache, tmp_path):
    archive = git_archive(tmp_path / "a.tar.gz", detectron2.COMMIT, script=None)
    with pytest.raises(UserError, match=r"detectron2: .*a\.tar\.gz: the archive holds no tools/train_net\.py"):
        detectron2.script_text(archive)


def test_an_unshuffled_loader_is_not_an_option_of_its_own_script():
    with pytest.raises(UserError, match=r"^detectron2: options\.shuffle false is not a setting of its train_net\.py"):
        FW.argv(ctx(options={"shuffle": False}))


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
data:
  annotations: {ann}
  images: {images}
warmup: 1
measure: 2
repeats: 1
{options}"""


def validate(tmp_path, precision="fp32", options=""):
    path = tmp_path / "seed.yaml"
    (tmp_path / "img").mkdir(exist_ok=True)
    (tmp_path / "ann.json").write_text('{"images": [], "annotations": [], "categories": []}')
    path.write_text(SCENARIO.format(precision=precision, options=options, ann=tmp_path / "ann.json",
                                    images=tmp_path / "img"))
    result = CliRunner().invoke(main, ["validate", str(path)])
    return result.exit_code, result.output.strip()


def test_a_valid_scenario_validates(tmp_path, cache):
    options = "options:\n  detectron2:\n    config: COCO-Detection/faster_rcnn_R_50_FPN_3x.yaml\n"
    said = "%s: ok: 1 cells (0 excluded), 1 trials" % (tmp_path / "seed.yaml")
    assert validate(tmp_path, options=options) == (0, said)


@pytest.mark.parametrize("precision, options, line, said", [
    ("fp16", "", 5, r"matrix\.precision\.0: detectron2 cannot run faster_rcnn fp16"),
    ("fp32", "options:\n  detectron2:\n    shuffle: false\n", 14,
     r"detectron2: options\.shuffle false is not a setting of its train_net\.py"),
    ("fp32", "options:\n  detectron2:\n    config: COCO-Detection/faster_rcnn_R_101_FPN_9x.yaml\n", 14,
     r"options\.config 'COCO-Detection/faster_rcnn_R_101_FPN_9x\.yaml' is not a model-zoo config of faster_rcnn "
     r"at commit 02b5c4e295e9 \(known: COCO-Detection/faster_rcnn_R_50_FPN_1x\.yaml, "),
    ("fp32", "options:\n  detectron2:\n    config: https://dl.fbaipublicfiles.com/detectron2/x.yaml\n", 14,
     r"detectron2 would download https://dl\.fbaipublicfiles\.com/detectron2/x\.yaml at start \(options\.config\)"),
    ("fp32", "options:\n  detectron2:\n    weights: detectron2://ImageNetPretrained/MSRA/R-50.pkl\n", 14,
     r"unknown options weights"),
])
def test_validate_refuses_in_one_line_at_the_line(tmp_path, cache, precision, options, line, said):
    code, out = validate(tmp_path, precision, options)
    assert code == 2 and out.count("\n") == 0, out
    assert out.startswith("detbench: error: ") and re.search(r"/seed\.yaml:%d: " % line, out), out
    assert re.search(said, out), out


def test_an_override_that_would_download_weights_is_refused():
    with pytest.raises(UserError, match="detectron2 would download detectron2://ImageNetPretrained"):
        FW.argv(ctx(extra_args=("MODEL.WEIGHTS", "detectron2://ImageNetPretrained/MSRA/R-50.pkl")))


def test_validate_refuses_a_scenario_whose_archive_is_of_another_commit(tmp_path, cache):
    git_archive(cache / "sources" / ("detectron2-%s.tar" % detectron2.COMMIT), "2" * 40)
    code, out = validate(tmp_path)
    assert code == 2 and out.count("\n") == 0, out
    assert re.search(r"detectron2: .*: the archive is of commit 2{40}, not the pinned %s" % detectron2.COMMIT, out), out


def test_the_accuracy_recipe_reads_losses_and_checkpoints_from_detectron2s_own_lines():
    from harness.frameworks import accuracy as recipes
    fixtures = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scrapers", "fixtures")
    with open(os.path.join(fixtures, "detectron2.log"), encoding="utf-8") as fh:
        printed = [recipes.loss_of_line(line) for line in fh if "iter: " in line]
    assert printed[:2] == [(20, 1.104), (40, 0.9912)]       # iter counts from 0; total_loss, not a term
    assert recipes.loss_of_line("[12/01 20:00:00 d2.engine.hooks]: Overall training speed: 19 iterations") is None
    argv = recipes.train_argv("detectron2", "retinanet", recipes.Schedule(
        iterations=4, eval_every=2, batch=1, input_size=(64, 64), lr_per_image=0.01, warmup_iters=0,
        warmup_factor=1.0, lr_steps=(), gamma=0.1, weight_decay=0.0, flip=True, depth=18, precision="fp32",
        seed=0), ("a.json", "img"), "w.pt", "/ck", python="/env/bin/python")
    assert argv[1].endswith("harness/drivers/detectron2_launch.py")
    assert flag(argv, "--source-archive").endswith("/sources/detectron2-%s.tar" % detectron2.COMMIT)
    assert flag(argv, "--commit") == detectron2.COMMIT and flag(argv, "--checkpoint-dir") == "/ck"
