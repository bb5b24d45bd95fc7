"""A short real trial of each rival that runs on this host, through runner.py, its pinned
env and its own training code; the scraper must read every iteration it printed.

Needs the envs built by .ci/provision-rivals.sh (`detbench env build torchvision` /
`mmdetection`): skipped with a reason without them, failed under DETBENCH_REQUIRE_SERVICES=1.
"""
import io

import pytest

from harness import datasets, envs
from harness import run as run_mod
from harness.frameworks import FRAMEWORKS
from harness.store import Store
from tests.conftest import need_service

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

SCENARIO = """\
name: rival-{fw}
matrix:
  framework: [{fw}]
  model: [retinanet]
batch_per_gpu: 1
input_size: [128, 128]
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


@pytest.mark.parametrize("fw", ["torchvision", "mmdetection"])
def test_real_trial_is_scraped_iteration_by_iteration(fw, tmp_path):
    spec = FRAMEWORKS[fw].env
    need_service(envs.is_built(spec), "the %s env is not built (run `detbench env build %s`)" % (fw, fw))
    ann, images = datasets.make_coco(tmp_path / "coco", images=4, size=(128, 128))
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(fw=fw, ann=ann, images=images))
    out = io.StringIO()
    run_id = run_mod.start(path, tmp_path / "results", out=out)
    store = Store(tmp_path / "results", create=False)
    (trial,) = store.trials(run_id)
    log = (store.trial_dir(trial["id"]) / "log.txt").read_text(errors="replace")
    assert trial["status"] == "done", "%s\n%s" % (trial["reason"], log[-3000:])
    assert trial["records"] == 3 and trial["scrape_errors"] == 0, log[-3000:]
    assert trial["exact"] == 1 and trial["throughput"] > 0
    iterations = store.iterations(trial["id"])
    assert [row[0] if not isinstance(row, dict) else row["iteration"] for row in iterations] == [1, 2, 3]
