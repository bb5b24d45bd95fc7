"""The report's step breakdown: per cell a table (phase, ms, share of step, share of peak where
the work model counts its work) and a stacked bar per framework in HTML, the median over repeats;
one line for each cell whose breakdown is missing, off or could not attach; harness.api's frame."""
import json

import pytest

from harness import api
from harness.measure.result import TrialResult
from harness.report import build, html, markdown
from harness.results.store import Store

SCENARIO = {"name": "parts", "breakdown": True, "warmup": 2, "measure": 6}
TV = "torchvision/faster_rcnn/fp32/local/1/1"
TR = "detbench-trainer/faster_rcnn/fp32/local/1/1"
D2 = "detectron2/faster_rcnn/fp32/local/1/1"
MM = "mmdetection/faster_rcnn/fp32/local/1/1"


def parts(backbone, data=0.05, step=1.0, **extra):
    phases = {"backbone forward": backbone, "backbone backward": 2 * backbone, "box head forward": 0.05,
              "box head backward": 0.1, "optimizer": 0.05, "data": data}
    phases["rest"] = step - sum(phases.values())
    return dict({"phases": phases, "step_s": step, "hooked_step_s": step, "iterations": 6, "idle": [],
                 "mismatch": None}, **extra)


BREAKDOWNS = {
    TV: [parts(0.2), parts(0.25), parts(0.3)],
    TR: [parts(0.05, step=0.5), parts(0.05, step=0.5, mismatch="the hooks timed a 0.6 s step against the 0.5 s "
                                                                   "measured (+20.0%)"), parts(0.05, step=0.5)],
    D2: [{"error": "detectron2 faster_rcnn: no submodule 'roi_heads.box_pooler' in the GeneralizedRCNN model"}] * 3,
    MM: [None] * 3,
}
# the run's counted work and the host's peak: fixed 200 GFLOP per step, 2 MFLOP per sampled RoI
LIMITS = {"peak": {"precisions": {"fp32": {"peak_gflops": 1000.0}}},
          "work": {key: {"fixed_flops": 200e9, "unit_flops": {"sampled_rois": 2e6}, "images_per_device": 2}
                   for key in BREAKDOWNS}}


@pytest.fixture
def results(tmp_path):
    root = tmp_path / "results"
    cells = []
    for key in BREAKDOWNS:
        framework, model, precision, platform, gpus, nodes = key.split("/")
        cells.append(dict(cell_key=key, framework=framework, model=model, precision=precision, platform=platform,
                          gpus=1, nodes=1, batch_per_gpu=2, images_per_iteration=2, excluded=None))
    trials = [(seq, key, r, ["true"]) for seq, (r, key) in enumerate(
        [(r, key) for r in (1, 2, 3) for key in BREAKDOWNS], 1)]
    store = Store(root)
    store.create_run("run-1", "parts", "s.yaml", json.dumps(SCENARIO), "local", {}, cells, trials, limits=LIMITS)
    for t in store.trials("run-1"):
        b = BREAKDOWNS[t["cell_key"]][t["repeat"] - 1]
        step = b["step_s"] if b and "step_s" in b else 1.0
        store.finish_trial(t["id"], TrialResult(
            status="done", throughput=2 / step, observed=2 / step, iteration_time_s=step, data_time_s=0.05,
            exact=True, figure_kind="exact", window=(3, 8), records=8, work={"sampled_rois": 512.0},
            breakdown=b, peak_rss_mb=1000.0 + t["seq"]))
    return root


def test_each_cell_gets_the_median_of_its_repeats_with_rest_closing_the_step(results):
    report = build.report(results, "local")
    by_fw = {b.framework: b for b in report.breakdowns}
    assert set(by_fw) == {"torchvision", "detbench-trainer"}
    tv = {r.phase: r for r in by_fw["torchvision"].phases}
    assert tv["backbone forward"].seconds == pytest.approx(0.25)
    assert tv["backbone backward"].seconds == pytest.approx(0.5)
    assert tv["backbone forward"].share_of_step == pytest.approx(0.25)
    assert sum(r.seconds for r in by_fw["torchvision"].phases) == pytest.approx(by_fw["torchvision"].step_s)
    assert [r.phase for r in by_fw["torchvision"].phases] == [
        "data", "backbone forward", "box head forward", "backbone backward", "box head backward", "optimizer", "rest"]


def test_shares_of_the_peak_where_the_work_model_counts_the_work(results):
    report = build.report(results, "local")
    b = next(b for b in report.breakdowns if b.framework == "torchvision")
    counted = {r.phase: r for r in b.counted}
    # fixed 200 GFLOP over the backbone's 0.75 s at a 1000 GFLOP/s peak; the box head 512 x 2 MFLOP over 0.15 s
    assert counted["backbone, fpn, rpn / head (counted together)"].share_of_peak == pytest.approx(200 / 0.75 / 1000)
    assert counted["box head (counted)"].share_of_peak == pytest.approx(512 * 2e6 / 0.15 / 1e12)
    assert counted["step"].seconds == pytest.approx(1.0)


def test_cells_without_a_good_breakdown_get_one_line_each_and_the_others_keep_theirs(results):
    report = build.report(results, "local")
    notes = "\n".join(report.breakdown_notes)
    assert ("Breakdown, detectron2 Faster R-CNN w/ FPN FP32 (%s): detectron2 faster_rcnn: no submodule "
            "'roi_heads.box_pooler' in the GeneralizedRCNN model." % D2) in notes
    assert "Breakdown, mmdetection Faster R-CNN w/ FPN FP32 (%s): its log has no DETBENCH_BREAKDOWN line." % MM in notes
    assert "(%s): the phases do not add up to the step: the hooks timed a 0.6 s step" % TR in notes
    assert len(report.breakdown_notes) == 3


def test_markdown_and_html_show_the_tables_the_bars_and_the_lines(results):
    report = build.report(results, "local")
    text = markdown.render(report)
    assert "### Where the step time goes on local" in text
    assert "| backbone forward | 250 | 25.0% | - |" in text
    assert "Peak memory, Faster R-CNN" in text and "resident 1009 MiB, device -" in text
    page = html.render(report)
    assert 'id="breakdown"' in page and 'alt="step breakdown, faster r-cnn w/ fpn fp32"' in page
    assert "<td>backbone forward</td><td>250</td><td>25.0%</td>" in page
    assert "no submodule &#39;roi_heads.box_pooler&#39;" in page
    # each cell's highest repeat: the trainer's third repeat is the run's 10th trial
    assert "Peak memory, Faster R-CNN w/ FPN (" in page and "resident 1010 MiB, device -" in page


def test_the_api_returns_a_row_per_phase_of_each_trial(results):
    pytest.importorskip("pandas")
    with api.open(str(results)) as r:
        frame = r.breakdowns()
    tv = frame[(frame.framework == "torchvision") & (frame.repeat == 2)]
    assert dict(zip(tv.phase, tv.ms)) == pytest.approx(
        {"backbone forward": 250.0, "backbone backward": 500.0, "box head forward": 50.0,
         "box head backward": 100.0, "optimizer": 50.0, "data": 50.0, "rest": 0.0}, abs=1e-9)
    assert tv.share_of_step.sum() == pytest.approx(1.0)
    errors = frame[frame.framework == "detectron2"]
    assert len(errors) == 3 and errors.phase.isna().all() and errors.error.str.contains("box_pooler").all()
    assert str(frame.ms.dtype) == "float64" and str(frame.phase.dtype) == "string"
