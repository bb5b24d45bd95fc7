"""An accuracy trial's MLLOG, written through mlperf_logging.mllog and read back by the round's checker."""
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.frameworks.accuracy import Schedule
from harness.launch import accuracy as accuracy_run
from harness.launch import mllog_write
from harness.measure import mllog

SCHEDULE = Schedule(iterations=300, eval_every=100, batch=4, input_size=(128, 128), lr_per_image=0.005,
                    warmup_iters=50, warmup_factor=0.001, lr_steps=(200,), gamma=0.1, weight_decay=1e-4,
                    flip=False, depth=18, precision="fp32", seed=3)


def rows(segm=False):
    return [{"iteration": i, "train_seconds": t, "bbox_ap": ap, "bbox_ap50": ap * 2,
             "segm_ap": ap * 0.9 if segm else None, "segm_ap50": None}
            for i, t, ap in ((100, 61.25, 0.05), (200, 122.5, 0.12), (300, 183.75, 0.2))]


def trial(tmp_path, model, target=0.15, metric="bbox_AP"):
    data = tmp_path / "data"
    (data / "annotations").mkdir(parents=True)
    for name, n in (("train", 600), ("val", 100)):
        (data / "annotations" / ("instances_%s.json" % name)).write_text(
            json.dumps({"images": [{"id": i} for i in range(n)], "annotations": [], "categories": []}))
    sc = SimpleNamespace(accuracy=SimpleNamespace(data=str(data),
                                                  targets={model: SimpleNamespace(metric=metric, value=target)}))
    cell = SimpleNamespace(model=model, platform="local")
    folder = tmp_path / "trial"
    folder.mkdir()
    accuracy_run.write_mllog(rows(segm=model == "mask_rcnn"), sc, cell, SCHEDULE, str(folder))
    return folder / mllog_write.FILE


@pytest.mark.parametrize("model, benchmark", [("retinanet", "ssd"), ("mask_rcnn", "maskrcnn")])
def test_the_log_passes_the_rounds_format_rules_and_reads_back(tmp_path, model, benchmark):
    path = trial(tmp_path, model)
    result = mllog.read_result(str(path), "2.1.0")
    assert result.compliance is None
    assert result.benchmark == benchmark and result.division == "open" and result.org == "detbench"
    assert result.seconds == pytest.approx(183.75)  # the schedule's training seconds, run_start to run_stop
    assert [p.seconds for p in result.curve] == pytest.approx([61.25, 122.5, 183.75])
    first = result.curve[0].accuracy
    assert first == ({"BBOX": 0.05, "SEGM": pytest.approx(0.045)} if model == "mask_rcnn" else {"": 0.05})
    assert [(e.first, e.count) for e in result.epochs] == pytest.approx([(0, 400 / 600.0), (400 / 600.0, 400 / 600.0),
                                                                         (800 / 600.0, 400 / 600.0)])
    assert result.status == "success"  # 0.2 reached the target 0.15
    assert result.global_batch == 4 and result.seed == 3


def test_a_target_never_reached_is_an_aborted_run(tmp_path):
    assert mllog.read_result(str(trial(tmp_path, "retinanet", target=0.5)), "2.1.0").status == "aborted"


def test_a_model_mlperf_lacks_keeps_its_name_and_the_checker_says_so(tmp_path):
    result = mllog.read_result(str(trial(tmp_path, "faster_rcnn")), "2.1.0")
    assert result.benchmark == "faster_rcnn"
    assert result.compliance == ("the round's rules do not cover this log: No such file or directory")


def test_header_states_what_ran(tmp_path):
    text = Path(trial(tmp_path, "retinanet")).read_text()
    records = {json.loads(line.split(":::MLLOG ", 1)[1])["key"]: json.loads(line.split(":::MLLOG ", 1)[1])["value"]
               for line in text.splitlines()}
    assert records["opt_base_learning_rate"] == pytest.approx(0.02)
    assert records["opt_learning_rate_decay_steps"] == [200]
    assert records["train_samples"] == 600 and records["eval_samples"] == 100
    assert records["cache_clear"] is False and records["submission_status"] == "research"
