"""A short real trial of each rival that runs on this host, through runner.py, its pinned
env and its own training code; the scraper must read every iteration it printed.

Needs the envs built by .ci/provision-rivals.sh (`detbench env build torchvision` /
`mmdetection` / `detectron2`): skipped with a reason without them, failed under DETBENCH_REQUIRE_SERVICES=1.
"""
import io
import json

import pytest

from harness.plan import datasets
from harness import jsonlog
from harness import run as run_mod
from harness.results.store import Store
from tests.support.services import need_env, need_service

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


@pytest.mark.parametrize("fw", ["torchvision", "mmdetection", "detectron2"])
def test_real_trial_is_scraped_iteration_by_iteration(fw, tmp_path):
    need_env(fw)
    ann, images = datasets.make_coco(tmp_path / "coco", images=4, size=(128, 128))
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(fw=fw, ann=ann, images=images))
    out = io.StringIO()
    run_id = run_mod.start(path, tmp_path / "results", out=out)
    store = Store(tmp_path / "results", create=False)
    (trial,) = store.trials(run_id)
    log = (store.trial_dir(trial["id"]) / "log.txt").read_text(errors="replace")
    assert trial["status"] == "done", "%s\n%s" % (trial["reason"], log[-3000:])
    # detectron2's own printer writes every 20th iteration and the last (its DefaultTrainer's PeriodicWriter),
    # its time the mean since its timer's 3rd iteration: here iteration 3 alone, not the whole window 2..3
    printed = [3] if fw == "detectron2" else [1, 2, 3]
    assert trial["records"] == len(printed) and trial["scrape_errors"] == 0, log[-3000:]
    assert trial["exact"] == (fw != "detectron2") and trial["throughput"] > 0
    iterations = store.iterations(trial["id"])
    assert [row[0] if not isinstance(row, dict) else row["iteration"] for row in iterations] == printed
    work = work_lines(log)
    assert [w["iteration"] for w in work] == [1, 2, 3], log[-3000:]
    assert all(set(w) == {"iteration", "positive_anchors"} and w["positive_anchors"] > 0 for w in work)
    if fw in ("torchvision", "mmdetection"):     # what each iteration drew, as its own loader drew it
        drawn = data_lines(log)
        assert [it for it, _, _ in drawn] == [1, 2, 3] and all(len(views) == 1 for _, _, views in drawn)
        ids = sorted(im["id"] for im in json.loads(open(ann).read())["images"])
        assert {i for _, _, views in drawn for i, _ in views} <= set(ids)
        [stored] = store.read_trials(run_id)
        assert stored.drawn["trial"]["draws"] == 3 and stored.drawn["window"]["images_per_iteration"] == 1


def data_lines(log):
    return [jsonlog.read_data(line[len(jsonlog.DATA_PREFIX):]) for line in log.splitlines()
            if line.startswith(jsonlog.DATA_PREFIX)]


def work_lines(log):
    return [json.loads(line[len(jsonlog.WORK_PREFIX):]) for line in log.splitlines()
            if line.startswith(jsonlog.WORK_PREFIX)]


EQUAL_WORK = """name: equal-work
matrix:
  framework: [detbench-trainer, torchvision, mmdetection]
  model: [{model}]
batch_per_gpu: 2
input_size: [128, 128]
data:
  annotations: {ann}
  images: {images}
weights:
  {model}: {weights}
warmup: 1
measure: 2
repeats: 1
timeout_s: 900
env:
  OMP_NUM_THREADS: "2"
options:
  detbench-trainer: {{data.workers: 0, data.shuffle: false, train.lr: 0.000008, train.warmup_iters: 0}}
  torchvision: {{workers: 0, flip: false, shuffle: false, lr: 0.000001, warmup_iters: 0}}
  mmdetection: {{workers: 0, flip: false, shuffle: false, lr: 0.000001, warmup_iters: 0}}
"""


@pytest.mark.parametrize("model", ["mask_rcnn"])
def test_the_three_frameworks_do_the_same_work_on_the_same_images(model, tmp_path):
    from harness.plan import weights
    for fw in ("torchvision", "mmdetection"):
        need_env(fw)
    need_service(weights.available(), "torch is not installed here: no weights file can be made")
    ann, images = datasets.make_coco(tmp_path / "coco", images=6, size=(128, 128))
    start = tmp_path / ("%s.pt" % model)
    weights.make(model, str(start), 0)   # one start for all three
    path = tmp_path / "s.yaml"
    path.write_text(EQUAL_WORK.format(model=model, ann=ann, images=images, weights=start))
    run_id = run_mod.start(path, tmp_path / "results", out=io.StringIO())
    store = Store(tmp_path / "results", create=False)
    work = {}
    for trial in store.trials(run_id):
        log = (store.trial_dir(trial["id"]) / "log.txt").read_text(errors="replace")
        assert trial["status"] == "done", "%s\n%s" % (trial["reason"], log[-3000:])
        work[trial["cell_key"].split("/")[0]] = work_lines(log)
    assert set(work) == {"detbench-trainer", "torchvision", "mmdetection"}
    # no flip, the file's order: the three drew the same images, and said so in their DATA lines
    drawn = {t.cell_key.split("/")[0]: t.drawn for t in store.read_trials(run_id)}
    assert all(d is not None for d in drawn.values()), drawn
    assert len({json.dumps(d, sort_keys=True) for d in drawn.values()}) == 1, drawn
    assert drawn["torchvision"]["trial"]["flips"] == 0 and drawn["torchvision"]["trial"]["draws"] == 6
    for fw, lines in work.items():
        assert [w["iteration"] for w in lines] == [1, 2, 3], fw
        assert all(set(w) == {"iteration", "proposals", "sampled_rois", "positive_rois", "mask_rois"}
                   for w in lines), fw
    # the same image, the same weights: the samplers fill the same quota, and NMS and IoU
    # matching differ only where anchors are rounded (trainer, torchvision) or not (mmdet)
    for i in range(3):
        seen = {fw: lines[i] for fw, lines in work.items()}
        assert len({w["sampled_rois"] for w in seen.values()}) == 1, seen
        proposals = [w["proposals"] for w in seen.values()]
        assert max(proposals) - min(proposals) <= 0.03 * max(proposals), seen
        for key in ("positive_rois", "mask_rois"):
            values = [w[key] for w in seen.values()]
            assert max(values) - min(values) <= max(2, 0.1 * max(values)), (key, seen)
