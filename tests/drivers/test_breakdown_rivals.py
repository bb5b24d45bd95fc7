"""A scenario with `breakdown: true` run through runner.py: each rival's own training code in its
pinned env, the hooks attached by the driver's one call (mmdetection's through its mmengine hook),
and the stored breakdown names that framework's own parts and adds up to its measured step.

Needs the envs built by .ci/provision-rivals.sh: skipped with a reason without them, failed under
DETBENCH_REQUIRE_SERVICES=1.
"""
import io

import pytest

from harness.plan import datasets
from harness import run as run_mod
from harness.measure import breakdown
from harness.results.store import Store
from tests.drivers import test_rivals_real as rivals_real
from tests.support.services import need_env

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

# test_rivals_real's trial, of Faster R-CNN (proposals, RoI sampling and pooling to time), with the breakdown
SCENARIO = rivals_real.SCENARIO.replace("model: [retinanet]", "model: [faster_rcnn]").replace(
    "name: rival-", "name: parts-") + "breakdown: true\n"


@pytest.mark.parametrize("fw", ["torchvision", "detectron2", "mmdetection"])
def test_a_rival_breaks_its_step_down_through_its_own_modules(fw, tmp_path):
    need_env(fw)
    ann, images = datasets.make_coco(tmp_path / "coco", images=4, size=(128, 128))
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(fw=fw, ann=ann, images=images))
    run_id = run_mod.start(path, tmp_path / "results", out=io.StringIO())
    store = Store(tmp_path / "results", create=False)
    (trial,) = store.read_trials(run_id)
    log = (store.trial_dir(trial.id) / "log.txt").read_text(errors="replace")
    assert trial.status == "done", "%s\n%s" % (trial.reason, log[-3000:])
    # its own log format still reads line for line (detectron2's printer writes every 20th iteration and the last)
    assert trial.scrape_errors == 0 and trial.records == (1 if fw == "detectron2" else 3)
    got = trial.breakdown
    assert got and not got.get("error"), log[-3000:]
    for name in ("backbone", "fpn", "rpn", "roi pooling", "box head"):
        assert got["phases"].get(name + " forward", 0) > 0, (name, got)
    assert got["phases"]["backbone backward"] > 0 and got["phases"]["optimizer"] > 0
    assert got["mismatch"] is None, got
    assert breakdown.phase_sum(got) == pytest.approx(trial.iteration_time_s)
