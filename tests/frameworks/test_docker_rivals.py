"""A short real trial of each rival that has an image built on the local base, in a container of
that image on a real Docker engine: its own training code runs there, and its scraper reads the
measured window from the log.

The images come from .ci/provision-docker.sh (`detbench image build torchvision`, `... effdet`) and
.ci/provision-rivals.sh (`... mmdetection`, which serves the mmcv wheel its env compiled); without an
engine or the image the test skips, or fails under DETBENCH_REQUIRE_SERVICES=1.
"""
import io
import json

import pytest

from harness import jsonlog
from harness import run as run_mod
from harness.launch import images
from harness.results.store import Store
from harness.plan import datasets
from tests.support.services import need_docker, need_image

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.e2e]

SCENARIO = """\
name: rival-{fw}-docker
backend: docker
matrix:
  framework: [{fw}]
  model: [{model}]
batch_per_gpu: 1
input_size: [128, {width}]
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
  {fw}:
    workers: 0
"""


@pytest.fixture(scope="module")
def client():
    c = need_docker()
    yield c
    c.close()


# framework, model, input width (EfficientDet's sides are multiples of 128), the figure its log gives
RIVALS = [("torchvision", "retinanet", 128, "exact"), ("effdet", "efficientdet_d0", 256, "exact-cumulative"),
          ("mmdetection", "faster_rcnn", 128, "exact")]


@pytest.mark.parametrize("fw, model, width, kind", RIVALS, ids=[r[0] for r in RIVALS])
def test_a_rival_trains_in_its_image_and_its_window_is_scraped(fw, model, width, kind, client, tmp_path):
    need_image(client, fw)
    ann, folder = datasets.make_coco(tmp_path / "coco", images=4, size=(128, width))
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(fw=fw, model=model, width=width, ann=ann, images=folder))
    run_id = run_mod.start(path, tmp_path / "results", out=io.StringIO())
    store = Store(tmp_path / "results", create=False)
    (trial,) = store.trials(run_id)
    trial_dir = store.trial_dir(trial["id"])
    log = (trial_dir / "log.txt").read_text(errors="replace")
    assert trial["status"] == "done", "%s\n%s" % (trial["reason"], log[-3000:])
    record = json.loads((trial_dir / "trial.json").read_text())
    assert record["container"]["recipe"] == fw
    assert record["argv"][0] == images.RECIPES[fw].python        # the image's interpreter, not the host's
    assert record["cwd"] == str(trial_dir / "work")               # its own writable folder, not the checkout
    assert trial["records"] == 3 and trial["scrape_errors"] == 0, log[-3000:]
    assert trial["figure_kind"] == kind and trial["throughput"] > 0
    assert [row[0] if not isinstance(row, dict) else row["iteration"]
            for row in store.iterations(trial["id"])] == [1, 2, 3]
    work = [json.loads(line[len(jsonlog.WORK_PREFIX):]) for line in log.splitlines()
            if line.startswith(jsonlog.WORK_PREFIX)]
    positives = "positive_anchors" if model in ("retinanet", "efficientdet_d0") else "positive_rois"
    assert [w["iteration"] for w in work] == [1, 2, 3] and all(w[positives] > 0 for w in work)
