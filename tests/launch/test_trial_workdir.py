"""What a trial finds where it runs: its own writable working directory inside its folder, the
dataset where its framework's own config looks (links the launchers make there), and a refusal,
before the run starts, of anything that would make a framework download a file."""
import os
import re
import sys

import pytest

from harness import launch
from harness.errors import UserError
from harness.frameworks import FRAMEWORKS
from harness.frameworks.base import WORKDIR, Link, TrialContext
from harness.plan import trialfiles
from harness.launch.local import LocalLauncher
from runner import WORKDIR as RUNNER_WORKDIR


def ctx(framework, data=None, extra_args=(), options=None, model="faster_rcnn"):
    return TrialContext(framework=framework, model=model, precision="fp32", gpus=1, nodes=1,
                        batch_per_gpu=2, input_size=(800, 1333), iterations=25, data=data,
                        extra_args=tuple(extra_args), options=dict(options or {}), python="/env/bin/python")


def coco(tmp_path):
    images = tmp_path / "coco" / "images"
    images.mkdir(parents=True)
    (images / "a.jpg").write_bytes(b"jpeg")
    annotations = tmp_path / "coco" / "instances.json"
    annotations.write_text("{}")
    return {"annotations": str(annotations), "images": str(images)}


def test_runner_and_launchers_agree_on_the_working_directory():
    assert RUNNER_WORKDIR == WORKDIR == trialfiles.WORKDIR


def test_a_trial_folder_holds_the_files_trialfiles_names(tmp_path):
    """runner.py writes every file under the name the harness reads it by, and no other."""
    trial = tmp_path / "trial"
    code = LocalLauncher().run(trial, [sys.executable, "-c", "import time; print('x'); time.sleep(0.3)"],
                               {}, 60)
    assert code == 0
    assert {p.name for p in trial.iterdir()} == {
        trialfiles.LOG, trialfiles.LOG_TIMES, trialfiles.RECORD, trialfiles.TELEMETRY, trialfiles.PIDFILE,
        trialfiles.WORKDIR, trialfiles.RUNNER_ERR}
    assert (trial / trialfiles.LOG).read_text() == "x\n"
    assert len((trial / trialfiles.LOG_TIMES).read_text().splitlines()) == 1
    assert trialfiles.read_trial_json(trial)["exit_code"] == 0


def test_a_trial_runs_in_its_own_folder_not_in_the_checkout(tmp_path):
    trial = tmp_path / "trial"
    code = LocalLauncher().run(trial, [sys.executable, "-c", "import os; open('left.txt', 'w'); print(os.getcwd())"],
                               {}, 60)
    assert code == 0
    assert (trial / "log.txt").read_text().strip() == str(trial / WORKDIR)
    assert (trial / WORKDIR / "left.txt").exists()


@pytest.mark.parametrize("name, images, annotations, train_set", [
    ("maskrcnn-benchmark", "datasets/coco/train2014", "datasets/coco/annotations/instances_train2014.json",
     '("coco_2014_train",)'),
    ("detectron2-cuda", "datasets/coco/train2017", "datasets/coco/annotations/instances_train2017.json",
     '("coco_2017_train",)'),
])
def test_the_dataset_is_linked_where_the_frameworks_catalog_looks(tmp_path, name, images, annotations, train_set):
    data = coco(tmp_path)
    fw = FRAMEWORKS[name]
    c = ctx(name, data=data)
    argv = fw.argv(c)
    assert argv[argv.index("DATASETS.TRAIN") + 1] == train_set      # the one set the links make
    trial = tmp_path / "trial"
    trial.mkdir()
    trialfiles.prepare(trial, argv, fw.trial_files(c))
    work = trial / WORKDIR
    assert os.readlink(str(work / images)) == data["images"]
    assert os.readlink(str(work / annotations)) == data["annotations"]
    assert (work / images / "a.jpg").read_bytes() == b"jpeg"


@pytest.mark.parametrize("name", ["maskrcnn-benchmark", "detectron2-cuda", "mmdetection"])
def test_a_framework_that_reads_coco_files_only_refuses_synthetic_data(name):
    with pytest.raises(UserError, match="%s reads COCO files only" % name):
        FRAMEWORKS[name].argv(ctx(name))


@pytest.mark.parametrize("name, where", [
    ("nothing", "datasets/x"), ("work/../../escape", "/abs"), ("/abs/work/x", "/abs"), ("work", "/abs"),
])
def test_a_link_stays_inside_the_working_directory_and_points_at_an_absolute_path(tmp_path, name, where):
    with pytest.raises(ValueError):
        trialfiles.prepare(tmp_path, [], {name: Link(where)})
    with pytest.raises(ValueError):
        trialfiles.prepare(tmp_path, [], {"work/datasets/x": Link("relative/path")})


@pytest.mark.parametrize("name, arg", [
    ("maskrcnn-benchmark", "catalog://ImageNetPretrained/MSRA/R-50"),
    ("detectron2-cuda", "detectron2://ImageNetPretrained/MSRA/R-50.pkl"),
    ("detectron2", "detectron2://ImageNetPretrained/MSRA/R-50.pkl"),
    ("mmdetection-v1", "torchvision://resnet50"),
    ("torchvision", "https://download.pytorch.org/models/resnet50-0676ba61.pth"),
])
def test_an_override_that_would_download_is_refused_naming_what_to_give(tmp_path, name, arg):
    with pytest.raises(UserError) as err:
        FRAMEWORKS[name].argv(ctx(name, data=coco(tmp_path), extra_args=["MODEL.WEIGHT", arg]))
    message = str(err.value)
    assert message == ("%s would download %s at start, and trials run without a network: give the file "
                       "(as options.%s.weights for initial weights, or a mounted path) instead" % (name, arg, name))


def test_a_weights_option_that_is_a_url_is_refused_the_same_way(tmp_path):
    with pytest.raises(UserError, match="would download https://x/r50.pkl at start"):
        FRAMEWORKS["maskrcnn-benchmark"].argv(ctx("maskrcnn-benchmark", data=coco(tmp_path),
                                                  options={"weights": "https://x/r50.pkl"}))


SCENARIO = """\
name: fetches
matrix:
  framework: [maskrcnn-benchmark]
  model: [faster_rcnn]
  platform: [P1]
  gpus: [8]
data:
  annotations: {annotations}
  images: {images}
extra_args:
  maskrcnn-benchmark: [MODEL.WEIGHT, "catalog://ImageNetPretrained/MSRA/R-50"]
"""


def test_a_scenario_that_would_download_is_refused_at_its_line(tmp_path):
    with pytest.raises(UserError) as err:
        launch.loads_scenario_text(SCENARIO.format(**coco(tmp_path)), name="fetches.yaml")
    line = str(err.value)
    assert re.search(r"/fetches\.yaml:11: extra_args\.maskrcnn-benchmark: maskrcnn-benchmark would download "
                     r"catalog://ImageNetPretrained/MSRA/R-50 at start", line) and "\n" not in line
