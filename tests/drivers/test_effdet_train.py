"""EfficientDet-D0 training through the effdet library (harness/drivers/effdet_driver.py): the
adapter's two paths and what it refuses, and a short real trial in effdet's pinned env whose
log the effdet scraper reads over the measured window.

The real trial needs the env of `detbench env build effdet` (.ci/provision-rivals.sh): skipped
with a reason without it, failed under DETBENCH_REQUIRE_SERVICES=1.
"""
import dataclasses
import io
import json
import re

import pytest

from harness import jsonlog
from harness import launch
from harness import run as run_mod
from harness.errors import UserError
from harness.frameworks import FRAMEWORKS
from harness.frameworks.base import TrialContext
from harness.measure import scrapers
from harness.results.store import Store
from harness.plan import datasets
from tests.support.services import need_env

EFFDET = FRAMEWORKS["effdet"]
COCO = {"annotations": "/d/coco/annotations/instances_train.json", "images": "/d/coco/images"}


def ctx(**kw):
    base = dict(framework="effdet", model="efficientdet_d0", precision="fp32", gpus=1, nodes=1, batch_per_gpu=2,
                input_size=(256, 384), iterations=7, data=None, python="/env/bin/python",
                env={"OMP_NUM_THREADS": "2"})
    base.update(kw)
    return TrialContext(**base)


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_the_library_driver_is_the_default_and_takes_the_cells_settings():
    argv = EFFDET.command(ctx(precision="bf16", data=COCO, options={"workers": 0, "lr": 0.001}))
    assert argv[:2] == ["/env/bin/python", str(EFFDET.command.__globals__["DRIVER"])]
    assert argv[1].endswith("harness/drivers/effdet_driver.py")
    assert (flag(argv, "--iterations"), flag(argv, "--batch-size"), flag(argv, "--input-size"),
            flag(argv, "--precision"), flag(argv, "--workers"), flag(argv, "--lr")) == \
        ("7", "2", "256x384", "bf16", "0", "0.001")
    assert (flag(argv, "--data"), flag(argv, "--images")) == (COCO["annotations"], COCO["images"])
    assert "--data" not in EFFDET.command(ctx())          # synthetic: the driver's own images
    s = EFFDET.settings(ctx(precision="bf16", options={"workers": 0, "lr": 0.001}))
    assert (s["input_size"], s["precision"], s["data"], s["loader_workers"], s["lr"], s["init"], s["threads"]) == \
        ([256, 384], "bf16", "synthetic", 0, 0.001, "random", 2)
    assert s["trainer"] == "effdet 0.4.1 library"


def test_its_own_weights_file_reaches_the_driver_and_the_shared_one_is_refused():
    argv = EFFDET.command(ctx(options={"weights": "/w/d0.pt"}))
    assert flag(argv, "--weights") == "/w/d0.pt"
    assert EFFDET.settings(ctx(options={"weights": "/w/d0.pt"}))["init"] == "file:d0.pt"
    with pytest.raises(UserError, match="shared initial weights"):
        EFFDET.command(ctx(weights="/w/retinanet.pt"))


@pytest.mark.parametrize("change, words", [
    (dict(input_size=(320, 320)), "multiples of 128, got 320x320"),
    (dict(input_size=(256, 200)), "multiples of 128, got 256x200"),
    (dict(gpus=2), "one device"),
    (dict(options={"trainer": "tf2"}), "options.trainer is one of library, upstream"),
    (dict(options={"workers": "many"}), "options.workers"),
    (dict(options={"lr": 0}), "options.lr above 0"),
    (dict(options={"wokers": 0}), "unknown options wokers"),
])
def test_the_library_path_refuses_what_it_cannot_honour(change, words):
    with pytest.raises(UserError, match=re.escape(words)):
        EFFDET.command(ctx(**change))


def test_train_py_stays_for_gpus_and_refuses_what_it_cannot_do():
    up = ctx(options={"trainer": "upstream"}, input_size=(512, 512), gpus=4, precision="fp16", data=COCO)
    argv = EFFDET.command(up)
    assert argv[1:5] == ["-m", "torch.distributed.run", "--nproc_per_node", "4"]
    assert argv[6].endswith("harness/drivers/effdet_launch.py") and "--amp" in argv
    assert EFFDET.settings(up)["trainer"].startswith("train.py@") and EFFDET.settings(up)["input_size"] == [512, 512]
    for change, words in ((dict(precision="bf16"), "fp32 and fp16 (--amp) only"),
                          (dict(input_size=(256, 256)), "model config's 512x512"),
                          (dict(options={"trainer": "upstream", "lr": 0.1}), "options.effdet.lr")):
        with pytest.raises(UserError, match=re.escape(words)):
            EFFDET.command(dataclasses.replace(up, **change))


BAD_SIZE = """\
name: effdet-bad
matrix:
  framework: [effdet]
  model: [efficientdet_d0]
  precision: [fp32]
batch_per_gpu: 2
input_size: [320, 320]
data: synthetic
warmup: 1
measure: 2
repeats: 1
"""


def test_an_input_size_not_a_multiple_of_128_is_one_line_at_validate(write_scenario):
    path = write_scenario(BAD_SIZE)
    with pytest.raises(UserError) as info:
        launch.load_scenario(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("%s:3: matrix.framework.0: " % path), message
    assert "multiples of 128, got 320x320" in message


def test_the_effdet_scenario_validates():
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "scenarios" / "effdet-cpu.yaml"
    from harness.plan.scenario import plan
    cells = plan(launch.load_scenario(path))
    assert {(c.cell.framework, c.cell.model, c.excluded) for c in cells} == {("effdet", "efficientdet_d0", None)}
    assert {c.cell.precision for c in cells} == {"fp32", "bf16"}


# ------------------------------------------------------------------ a real trial

SCENARIO = """\
name: effdet-real
matrix:
  framework: [effdet]
  model: [efficientdet_d0]
  precision: [fp32]
batch_per_gpu: 2
input_size: [128, 256]
data:
  annotations: {ann}
  images: {images}
warmup: 1
measure: 2
repeats: 1
timeout_s: 900
env:
  OMP_NUM_THREADS: "2"
options:
  effdet: {{workers: 0}}
"""

VALUE = re.compile(r"Time: (\d+\.\d{3})s, ")


@pytest.mark.slow
@pytest.mark.e2e
def test_a_real_trial_is_scraped_over_its_window(tmp_path):
    need_env("effdet")
    ann, images = datasets.make_coco(tmp_path / "coco", images=4, size=(128, 256))
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(ann=ann, images=images))
    run_id = run_mod.start(path, tmp_path / "results", out=io.StringIO())
    store = Store(tmp_path / "results", create=False)
    (trial,) = store.trials(run_id)
    log = (store.trial_dir(trial["id"]) / "log.txt").read_text(errors="replace")
    assert trial["status"] == "done", "%s\n%s" % (trial["reason"], log[-3000:])
    assert trial["records"] == 3 and trial["scrape_errors"] == 0, log[-3000:]
    assert trial["figure_kind"] == "exact-cumulative" and trial["throughput"] > 0
    # the window mean the scraper differenced from the running means is the mean of the
    # iterations' own values that the driver printed beside them (3 decimals each)
    own = [float(v) for v in VALUE.findall(log)]
    assert len(own) == 3
    assert trial["iteration_time_s"] == pytest.approx(sum(own[1:]) / 2, abs=0.003)
    assert trial["throughput"] == pytest.approx(2 / trial["iteration_time_s"], rel=0.01)
    work = [json.loads(line[len(jsonlog.WORK_PREFIX):]) for line in log.splitlines()
            if line.startswith(jsonlog.WORK_PREFIX)]
    assert [w["iteration"] for w in work] == [1, 2, 3], log[-3000:]
    assert all(set(w) == {"iteration", "positive_anchors"} and w["positive_anchors"] > 0 for w in work)
    settings = json.loads(trial["settings_json"])
    assert settings["input_size"] == [128, 256] and settings["data"] == "coco"
    # the same lines read straight from the log, by the framework's scraper and options
    records, errors = scrapers.get(EFFDET.scraper)(log.splitlines(), **EFFDET.scrape_options)
    assert not errors and [r.iteration for r in records] == [1, 2, 3]
