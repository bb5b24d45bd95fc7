"""The container rivals honour a cell or refuse it, end on their own once the window is
logged, evaluate nothing and download nothing.

simpledet-mxnet and mmdetection-v1 take batch, devices, precision and iteration count only
from their Python configs: the derived configs are run here against small stand-ins of the
pinned configs (the same edited lines), so what they set and when they stop is observed,
not just their text.
"""
import dataclasses
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from harness import launch
from harness.errors import UserError
from harness.frameworks import FRAMEWORKS
from harness.frameworks import mmdetection_v1, simpledet_mxnet
from harness.frameworks.base import TrialContext
from harness.plan import trialfiles
from harness.launch.local import LocalLauncher

COCO = {"annotations": "/d/ann.json", "images": "/d/img"}


def ctx(framework, model="faster_rcnn", precision="fp32", gpus=1, nodes=1, batch=2, iterations=25,
        data=COCO, options=None):
    return TrialContext(framework=framework, model=model, precision=precision, gpus=gpus, nodes=nodes,
                        batch_per_gpu=batch, input_size=(800, 1333), iterations=iterations, data=data,
                        options=dict(options or {}), python="/env/bin/python")


# ------------------------------------------------------------------ simpledet-mxnet

PINNED_SIMPLEDET = '''\
def get_config(is_train):
    class General:
        log_frequency = 10
        batch_image = 2 if is_train else 1
        fp16 = False

    class KvstoreParam:
        batch_image = General.batch_image
        gpus        = [0, 1, 2, 3, 4, 5, 6, 7]
        fp16        = General.fp16

    class ModelParam:
        from_scratch = False

        class pretrain:
            prefix = "pretrain_model/resnet-v1-50"
            epoch = 0

    return General, KvstoreParam, None, None, None, None, ModelParam, None, None, [], [], [], []
'''


def run_simpledet_config(tmp_path, context, pinned=PINNED_SIMPLEDET):
    base = tmp_path / "pinned_config.py"
    base.write_text(pinned)
    text = simpledet_mxnet.files(context)[simpledet_mxnet.DERIVED]
    text = text.replace(simpledet_mxnet.WORKDIR + "/" + simpledet_mxnet.CONFIGS[context.model], str(base))
    namespace = {"__name__": "detbench_simpledet"}
    exec(compile(text, "detbench_simpledet.py", "exec"), namespace)
    return namespace["get_config"](True)


def test_simpledet_config_sets_batch_gpus_precision_and_random_weights(tmp_path):
    general, kv, *_, model, _opt, _test, _t, _d, _l, _m = run_simpledet_config(
        tmp_path, ctx("simpledet-mxnet", precision="fp16", gpus=4, batch=3))
    assert general.batch_image == 3 and kv.batch_image == 3
    assert kv.gpus == [0, 1, 2, 3]
    assert general.fp16 is True and kv.fp16 is True
    assert model.from_scratch is True


def test_simpledet_config_starts_from_a_mounted_checkpoint_when_given(tmp_path):
    parts = run_simpledet_config(tmp_path, ctx("simpledet-mxnet", options={"weights": "/w/r50-0003.params"}))
    model = parts[6]
    assert model.from_scratch is False
    assert model.pretrain.prefix == "/w/r50" and model.pretrain.epoch == 3
    settings = FRAMEWORKS["simpledet-mxnet"].settings(ctx("simpledet-mxnet", options={"weights": "/w/r50-0003.params"}))
    assert settings["init"] == "file:r50-0003.params"
    assert FRAMEWORKS["simpledet-mxnet"].settings(ctx("simpledet-mxnet"))["init"] == "random"


def test_simpledet_config_refuses_to_start_when_the_pinned_config_differs(tmp_path):
    with pytest.raises(SystemExit, match="expected one line matching"):
        run_simpledet_config(tmp_path, ctx("simpledet-mxnet"), PINNED_SIMPLEDET.replace("fp16 = False", "fp16 = 0"))


def test_simpledet_stops_right_after_the_speedometer_logs_the_window_end(tmp_path, monkeypatch):
    exits = []
    monkeypatch.setattr(os, "_exit", exits.append)
    model = run_simpledet_config(tmp_path, ctx("simpledet-mxnet", iterations=25))[6]
    stop = model.batch_end_callbacks[-1]
    nbatch = 0
    while not exits and nbatch < 100:
        stop(types.SimpleNamespace(nbatch=nbatch))    # MXNet's BatchEndParam, 0-based
        nbatch += 1
    # the Speedometer prints batch 30 (iteration 31): the first record at or after iteration 25
    assert exits == [0] and nbatch - 1 == 30
    assert simpledet_mxnet.stop_iteration(ctx("simpledet-mxnet", iterations=25)) == 31


def test_simpledet_launch_runs_detection_train_in_the_trial_folder(tmp_path):
    checkout = tmp_path / "simpledet"
    (checkout / "data").mkdir(parents=True)
    (checkout / "detection_train.py").write_text(
        "import importlib, os, sys\n"
        "name = sys.argv[sys.argv.index('--config') + 1]\n"
        "config = importlib.import_module(name.replace('.py', '').replace('/', '.'))\n"
        "print('cwd', os.getcwd(), 'value', config.VALUE, 'data', os.path.isdir('data'))\n")
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "derived.py").write_text("VALUE = 7\n")
    out = subprocess.run([sys.executable, str(simpledet_mxnet.LAUNCH), "--trial-dir", str(trial),
                          "--config", "derived.py", "--simpledet", str(checkout)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cwd", str(trial / "simpledet"), "value", "7", "data", "True"]


# ------------------------------------------------------------------ mmdetection-v1

PINNED_MMDET_V1 = '''\
model = dict(type='FasterRCNN', pretrained='modelzoo://resnet50')
data = dict(imgs_per_gpu=2, workers_per_gpu=2,
            train=dict(ann_file='data/coco/annotations/instances_train2017.json', img_prefix='data/coco/train2017/'))
log_config = dict(interval=50, hooks=[dict(type='TextLoggerHook')])
total_epochs = 12
'''


class FakeHook:
    """mmcv 0.2's Hook: every_n_inner_iters counts iterations within the epoch."""

    def every_n_inner_iters(self, runner, n):
        return (runner.inner_iter + 1) % n == 0 if n > 0 else False


def run_mmdet_v1_config(tmp_path, monkeypatch, context):
    base = tmp_path / "pinned.py"
    base.write_text(PINNED_MMDET_V1)
    runner_mod = types.ModuleType("mmcv.runner")
    runner_mod.Hook = FakeHook
    monkeypatch.setitem(sys.modules, "mmcv", types.ModuleType("mmcv"))
    monkeypatch.setitem(sys.modules, "mmcv.runner", runner_mod)
    text = mmdetection_v1.files(context)[mmdetection_v1.DERIVED]
    text = text.replace("/opt/mmdetection/configs/" + mmdetection_v1.CONFIGS[context.model], str(base))
    namespace = {}
    exec(compile(text, "detbench_mmdet_v1.py", "exec"), namespace)
    return namespace


def test_mmdet_v1_config_sets_the_batch_the_data_and_random_weights(tmp_path, monkeypatch):
    cfg = run_mmdet_v1_config(tmp_path, monkeypatch, ctx("mmdetection-v1", batch=4))
    assert cfg["data"]["imgs_per_gpu"] == 4
    assert cfg["data"]["train"]["ann_file"] == "/d/ann.json" and cfg["data"]["train"]["img_prefix"] == "/d/img/"
    assert cfg["model"]["pretrained"] is None                   # no modelzoo:// download
    assert cfg["log_config"]["interval"] == mmdetection_v1.LOG_INTERVAL
    assert not any(name.startswith("_") for name in cfg if name != "__builtins__")
    weighted = run_mmdet_v1_config(tmp_path, monkeypatch, ctx("mmdetection-v1", options={"weights": "/w/r50.pth"}))
    assert weighted["model"]["pretrained"] == "/w/r50.pth"


def test_mmdet_v1_stops_every_rank_after_the_logger_prints_the_window_end(tmp_path, monkeypatch):
    cfg = run_mmdet_v1_config(tmp_path, monkeypatch, ctx("mmdetection-v1", iterations=25))
    info = cfg["log_config"]["hooks"][-1]
    hook = info["type"](stop_at=info["stop_at"], interval=cfg["log_config"]["interval"])
    runner = types.SimpleNamespace(iter=0, inner_iter=0, logger=types.SimpleNamespace(info=lambda *a: None))
    with pytest.raises(SystemExit) as stopped:
        for i in range(100):
            runner.iter, runner.inner_iter = i, i          # mmcv: iter counts the iterations done before
            hook.after_train_iter(runner)
    assert stopped.value.code == 0 and runner.iter + 1 == 30    # logged at 10, 20, 30: 30 >= 25


# ------------------------------------------------------------------ effdet

FAKE_EFFDET_TRAIN = """\
import argparse, sys
parser = argparse.ArgumentParser()
parser.add_argument('data')
parser.add_argument('--local_rank', default=0, type=int)


def EfficientDet(config, norm_kwargs=None, pretrained_backbone=True):
    print('model pretrained_backbone', pretrained_backbone)


def train_epoch(epoch, model, loader, optimizer, args):
    for batch_idx, batch in enumerate(loader):
        print('Train: %d [%d/%d] batch %s' % (epoch, batch_idx, len(loader), batch))


def validate():
    print('evaluated')


def main():
    args = parser.parse_args()
    print('rank', args.local_rank, 'data', args.data)
    model = EfficientDet({})
    for epoch in range(3):
        train_epoch(epoch, model, list(range(100)), None, args)
        validate()
"""


def upstream(**kw):
    """A cell of effdet's train.py path (options.effdet.trainer: upstream) at its 512x512."""
    return dataclasses.replace(ctx("effdet", model="efficientdet_d0", options={"trainer": "upstream"}, **kw),
                               input_size=(512, 512))


def test_effdet_trains_the_window_from_random_weights_and_evaluates_nothing(tmp_path):
    (tmp_path / "train.py").write_text(FAKE_EFFDET_TRAIN)
    launch = FRAMEWORKS["effdet"].command(upstream())[1]
    out = subprocess.run([sys.executable, launch, "--effdet", str(tmp_path), "--stop-after", "5", "--", "/coco"],
                         capture_output=True, text=True, timeout=60, env=dict(os.environ, LOCAL_RANK="3"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["rank 3 data /coco", "model pretrained_backbone False"]
    assert lines[2:] == ["Train: 0 [%d/5] batch %d" % (i, i) for i in range(5)]     # no evaluation after


def test_effdet_command_goes_through_the_launcher_with_the_window_length():
    coco = {"annotations": "/coco/annotations/instances_train2017.json", "images": "/coco/train2017"}
    argv = FRAMEWORKS["effdet"].command(upstream(iterations=120, data=coco))
    assert argv[1].endswith("harness/drivers/effdet_launch.py")
    assert argv[argv.index("--stop-after") + 1] == "120" and argv[argv.index("--") + 1] == "/coco"
    assert argv[argv.index("--output") + 1] == "{trial_dir}/output"
    assert FRAMEWORKS["effdet"].settings(upstream())["init"] == "random"


# ------------------------------------------------------------------ evaluation and downloads

def test_maskrcnn_benchmark_skips_the_test_and_starts_from_random_weights():
    argv = FRAMEWORKS["maskrcnn-benchmark"].command(ctx("maskrcnn-benchmark"))
    assert "--skip-test" in argv and argv.index("--skip-test") < argv.index("SOLVER.MAX_ITER")
    assert argv[argv.index("MODEL.WEIGHT") + 1] == ""
    assert argv[argv.index("OUTPUT_DIR") + 1] == "{trial_dir}/output"
    given = FRAMEWORKS["maskrcnn-benchmark"].command(ctx("maskrcnn-benchmark", options={"weights": "/w/r50.pkl"}))
    assert given[given.index("MODEL.WEIGHT") + 1] == "/w/r50.pkl"


def test_detectron2_cuda_has_no_test_dataset_and_starts_from_random_weights():
    argv = FRAMEWORKS["detectron2-cuda"].command(ctx("detectron2-cuda"))
    assert argv[argv.index("DATASETS.TEST") + 1] == "()"
    assert argv[argv.index("TEST.EVAL_PERIOD") + 1] == "0"
    assert argv[argv.index("MODEL.WEIGHTS") + 1] == ""
    assert FRAMEWORKS["detectron2-cuda"].settings(ctx("detectron2-cuda"))["init"] == "random"


@pytest.mark.parametrize("name", ["simpledet-mxnet", "mmdetection-v1", "maskrcnn-benchmark"])
def test_a_relative_weights_path_is_refused(name):
    with pytest.raises(UserError, match="absolute path"):
        FRAMEWORKS[name].command(ctx(name, options={"weights": "r50.pth"}))


# ------------------------------------------------------------------ refused at validate time

SCENARIO = """\
name: seed
matrix:
  framework: [%s]
  model: [faster_rcnn]
  platform: [P1]
  gpus: [8]
  nodes: [%d]
%s"""


@pytest.mark.parametrize("name", ["simpledet-mxnet", "mmdetection-v1", "maskrcnn-benchmark"])
def test_a_cell_on_two_nodes_is_refused_at_its_line(name):
    with pytest.raises(UserError) as err:
        launch.loads_scenario_text(SCENARIO % (name, 2, ""), name="seed.yaml")
    message = str(err.value)
    assert re.search(r"/seed\.yaml:3: matrix\.framework\.0: ", message) and "nodes must be 1" in message


def test_an_unknown_option_is_refused_at_its_line():
    text = SCENARIO % ("simpledet-mxnet", 1, "options:\n  simpledet-mxnet:\n    wieghts: /w/a-0000.params\n")
    with pytest.raises(UserError) as err:
        launch.loads_scenario_text(text, name="seed.yaml")
    assert re.search(r"/seed\.yaml:9: options\.simpledet-mxnet: .*unknown options wieghts", str(err.value))


def test_a_simpledet_weights_file_that_is_no_mxnet_checkpoint_is_refused_at_its_line(tmp_path):
    (tmp_path / "r50.pth").write_bytes(b"")
    text = SCENARIO % ("simpledet-mxnet", 1, "options:\n  simpledet-mxnet:\n    weights: %s\n" % (tmp_path / "r50.pth"))
    with pytest.raises(UserError) as err:
        launch.loads_scenario_text(text, name="seed.yaml")
    assert re.search(r"/seed\.yaml:9: options\.simpledet-mxnet: .*PREFIX-EPOCH\.params", str(err.value))


def test_a_rivals_weights_file_that_does_not_exist_is_refused_at_its_line():
    text = SCENARIO % ("simpledet-mxnet", 1, "options:\n  simpledet-mxnet:\n    weights: /w/r50-0003.params\n")
    with pytest.raises(UserError) as err:
        launch.loads_scenario_text(text, name="seed.yaml")
    assert re.search(r"/seed\.yaml:10: options\.simpledet-mxnet\.weights: no such file: /w/r50-0003\.params$",
                     str(err.value))


# ------------------------------------------------------------------ one interface for every launcher

def test_trial_files_are_written_and_the_trial_folder_filled_into_the_argv(tmp_path):
    argv = trialfiles.prepare(tmp_path, ["x", "{trial_dir}/a.py", "--out={trial_dir}"], {"a.py": "A = 1\n"})
    assert argv == ["x", str(tmp_path.absolute()) + "/a.py", "--out=" + str(tmp_path.absolute())]
    assert (tmp_path / "a.py").read_text() == "A = 1\n"
    with pytest.raises(ValueError):
        trialfiles.prepare(tmp_path, [], {"../escape.py": ""})


def test_the_local_launcher_runs_a_command_on_its_trial_file(tmp_path):
    trial = tmp_path / "trial"
    code = LocalLauncher().run(trial, [sys.executable, "{trial_dir}/derived.py"], {}, 60,
                               files={"derived.py": "print('derived config ran')\n"})
    assert code == 0
    assert "derived config ran" in (trial / "log.txt").read_text()
    assert Path(trial / "derived.py").is_file()


def test_what_runs_inside_the_old_framework_images_needs_no_newer_python(tmp_path):
    """SimpleDet's image has Python 3.5 and mmdetection v1's 3.6: the launcher and the derived
    configs must parse and run there (checked statically with vermin)."""
    pytest.importorskip("vermin", reason="vermin is not installed (pip install -e .[dev])")
    exe = str(Path(sys.executable).with_name("vermin"))
    derived = []
    for name, module in (("simpledet-mxnet", simpledet_mxnet), ("mmdetection-v1", mmdetection_v1)):
        for model in sorted(module.CONFIGS):
            for precision in ("fp32", "fp16"):
                path = tmp_path / ("%s-%s-%s.py" % (name, model, precision))
                path.write_text(module.files(ctx(name, model=model, precision=precision))[module.DERIVED])
                derived.append(str(path))
    out = subprocess.run([exe, "--no-tips", "-t=3.5-", "--violations", str(simpledet_mxnet.LAUNCH)] + derived,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
