"""How close to the machine's limit: the measured peak, the counted work per image, and the
compute figures (achieved TFLOP/s, share of peak) every report gives a cell."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.launch import limits
from harness.report import measured
from tests.storerows import rows

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "harness" / "trainer" / "configs" / "retina_tiny.py"

TRAINER = """\
name: limits
matrix:
  framework: [calibrate, detbench-trainer]
  model: [retinanet]
batch_per_gpu: 2
input_size: [128, 128]
warmup: 1
measure: 2
repeats: 1
env:
  OMP_NUM_THREADS: "2"
options:
  detbench-trainer:
    train.device: cpu
    model.block: basic
    model.layers: "1,1,1,1"
    model.base_width: 16
    model.fpn_channels: 32
    model.num_classes: 4
calibrate:
  iteration_ms: 20
  data_ms: 1
"""


def module_json(*args):
    out = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=str(ROOT), timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_peak_is_the_best_of_its_shapes_per_precision():
    result = module_json("harness.trainer.peak", "--seconds", "0.01")
    fp32 = result["precisions"]["fp32"]
    assert fp32["peak_gflops"] == max(fp32["shapes_gflops"].values()) > 0
    assert len(fp32["shapes_gflops"]) >= 4 and result["device"] in ("cpu", "cuda")


def test_work_per_image_grows_with_the_pixels():
    sets = ["--set", "data.source=synthetic", "--set", "data.images_per_device=2"]
    small = module_json("harness.trainer.flops", str(TINY), *sets, "--set", "data.input_size=128x128")
    large = module_json("harness.trainer.flops", str(TINY), *sets, "--set", "data.input_size=256x256")
    assert small["flops_per_image"] > 0
    # convolutions dominate: four times the pixels is close to four times the work
    assert 3.0 < large["flops_per_image"] / small["flops_per_image"] < 4.5


def test_inference_work_is_the_test_time_forward_alone():
    sets = ["--set", "data.source=synthetic", "--set", "data.images_per_device=2", "--set", "data.input_size=128x128"]
    train = module_json("harness.trainer.flops", str(TINY), *sets)
    infer = module_json("harness.trainer.flops", str(TINY), *sets, "--mode", "inference")
    assert infer["mode"] == "inference" and 0 < infer["flops_per_image"] < train["flops_per_image"]


def test_a_module_that_cannot_run_is_a_reason_not_a_crash():
    assert "error" in limits._module(["harness.trainer.no_such_module"])


def test_calibration_runs_store_no_limits_and_inference_says_why(write_scenario):
    from harness import launch
    from harness.spec import scenario
    sc = launch.load_scenario(write_scenario())
    assert limits.for_run(sc, [p.cell for p in scenario.plan(sc)], "fp1-x") is None


def cell_row(key="detbench-trainer/retinanet/fp32/local/1/1", precision="fp32"):
    return {"cell_key": key, "precision": precision}


def test_cell_limits_read_the_runs_figures_and_name_what_is_missing():
    bounds = {"work": {"detbench-trainer/retinanet/fp32/local/1/1": {"flops_per_image": 2e11},
                       "detbench-trainer/retinanet/fp16/local/1/1": {"flops_per_image": 2e11},
                       "torchvision/retinanet/fp32/local/1/1": {"error": "no bundled x to count"}},
              "peak": {"precisions": {"fp32": {"peak_gflops": 200.0}, "bf16": {"skipped": "no bf16 kernels"}}}}
    assert measured.cell_limits(cell_row(), bounds) == (2e11, 200.0, None, None)
    flops, peak, why, _ = measured.cell_limits(cell_row("detbench-trainer/retinanet/fp16/local/1/1", "fp16"), bounds)
    assert peak is None and "no measured fp16 peak" in why
    flops, peak, why, _ = measured.cell_limits(cell_row("torchvision/retinanet/fp32/local/1/1"), bounds)
    assert flops is None and "no bundled x to count" in why
    assert measured.cell_limits(cell_row("calibrate/retinanet/fp32/local/1/1"), bounds) == (None, None, None, None)


def test_a_real_run_reports_achieved_tflops_and_the_share_of_peak(write_scenario, tmp_path, monkeypatch):
    results = tmp_path / "results"
    out = CliRunner().invoke(main, ["run", "--scenario", str(write_scenario(TRAINER)), "--results", str(results)])
    assert out.exit_code == 0, out.output
    [(stored,)] = rows(results, "SELECT limits_json FROM runs")
    bounds = json.loads(stored)
    work = bounds["work"]["detbench-trainer/retinanet/fp32/local/1/1"]
    assert work["flops_per_image"] > 0 and "calibrate/retinanet/fp32/local/1/1" not in bounds["work"]
    peak = bounds["peak"]["precisions"]["fp32"]["peak_gflops"]
    # the report's ceiling: the stored peak, or a higher one cached here for this machine and thread count
    used = limits.best_peak(bounds, bounds["peak_of"]["fingerprint"], "2")["peak"]["precisions"]["fp32"]["peak_gflops"]
    assert used >= peak
    [(throughput,)] = rows(results, "SELECT throughput FROM trials WHERE cell_key LIKE 'detbench-trainer/%'")
    report = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results)])
    assert report.exit_code == 0, report.output
    tflops = throughput * work["flops_per_image"] / 1e12
    line = next(l for l in report.output.splitlines() if l.startswith("Compute, RetinaNet"))
    assert line.startswith("Compute, RetinaNet (calibrate | detbench-trainer (PyTorch)): - | %.3f TFLOP/s (%.0f%%)"
                           % (tflops, 100 * tflops * 1000 / used)), line
    doc = json.loads(CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results),
                                               "--format", "json"]).output)
    cell = next(c for c in doc["cells"] if c["framework"] == "detbench-trainer")
    assert cell["mfu"] == pytest.approx(tflops * 1000 / used) and cell["peak_gflops"] == used
    page = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results), "--format", "html"])
    assert "% of peak</span>" in page.output

    # the peak is measured again later, on a quieter machine, and comes out twice as high: reports
    # of the run, which stored the lower one, use the higher ceiling and say so
    of = bounds["peak_of"]
    assert of["threads"] == "2" and of["fingerprint"]
    higher = json.loads(limits.peak_path(of["fingerprint"], "2").read_text())
    higher["precisions"]["fp32"]["peak_gflops"] = 2 * peak
    monkeypatch.setenv("DETBENCH_CACHE", str(tmp_path / "cache"))      # not the real cache
    cached = limits.peak_path(of["fingerprint"], "2")
    cached.parent.mkdir(parents=True)
    cached.write_text(json.dumps(higher))
    doc = json.loads(CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results),
                                               "--format", "json"]).output)
    cell = next(c for c in doc["cells"] if c["framework"] == "detbench-trainer")
    assert cell["peak_gflops"] == 2 * peak and cell["peak_stored_gflops"] == peak
    assert cell["mfu"] == pytest.approx(tflops * 1000 / (2 * peak))
    text = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results)]).output
    assert "The run stored a lower peak (%.0f GFLOP/s)" % peak in text


def test_only_a_higher_peak_cached_for_the_same_machine_and_threads_replaces_the_stored_one(tmp_path, monkeypatch):
    monkeypatch.setenv("DETBENCH_CACHE", str(tmp_path))
    bounds = {"work": {}, "peak": {"precisions": {"fp32": {"peak_gflops": 30.0}, "bf16": {"skipped": "no kernels"}}}}
    assert limits.best_peak(bounds, "fp1-a", "2") is bounds            # nothing cached: as stored
    path = limits.peak_path("fp1-a", "2")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"precisions": {"fp32": {"peak_gflops": 159.4}, "bf16": {"peak_gflops": 600.0}}}))
    raised = limits.best_peak(bounds, "fp1-a", "2")
    assert raised["peak"]["precisions"]["fp32"] == {"peak_gflops": 159.4, "stored_gflops": 30.0}
    assert raised["peak"]["precisions"]["bf16"] == {"skipped": "no kernels"}   # the run had no figure to raise
    assert bounds["peak"]["precisions"]["fp32"] == {"peak_gflops": 30.0}       # the stored limits untouched
    assert limits.best_peak(bounds, "fp1-a", "4") is bounds            # other thread count
    assert limits.best_peak(bounds, "fp1-b", "2") is bounds            # other machine
    high = {"work": {}, "peak": {"precisions": {"fp32": {"peak_gflops": 200.0}}}}
    assert limits.best_peak(high, "fp1-a", "2") is high                # a lower cached figure never lowers it
    path.write_text("{not json")
    assert limits.best_peak(bounds, "fp1-a", "2") is bounds
    # an unset OMP_NUM_THREADS is cached as "default"; where that measurement ran torch at the
    # run's thread count, it is the same ceiling
    ran = {"work": {}, "peak": {"threads": 2, "precisions": {"fp32": {"peak_gflops": 30.0}}}}
    limits.peak_path("fp1-a", "default").write_text(json.dumps(
        {"threads": 2, "precisions": {"fp32": {"peak_gflops": 159.4}}}))
    limits.peak_path("fp1-a", "4").write_text(json.dumps(
        {"threads": 4, "precisions": {"fp32": {"peak_gflops": 300.0}}}))
    assert limits.best_peak(ran, "fp1-a", "2")["peak"]["precisions"]["fp32"] == {
        "peak_gflops": 159.4, "stored_gflops": 30.0}
    four = {"work": {}, "peak": {"threads": 4, "precisions": {"fp32": {"peak_gflops": 30.0}}}}
    assert limits.best_peak(four, "fp1-a", "4")["peak"]["precisions"]["fp32"]["peak_gflops"] == 300.0


def test_a_table_says_why_it_has_no_compute_figure():
    from harness.report.model import Column, Detail, Entry

    def entry(**over):
        fields = dict(n=3, failed=0, minimum=5.0, maximum=5.0, iqr=0.0, ci=None, cv=0.0, observed=None,
                      outliers=0, settings={}, settings_variants=(), kinds=("exact",), windows=(),
                      nominal_window=None, work=None, peak_rss_mb=None, peak_device_mb=None, peak_mem_mb=None,
                      run_id="r", median=5.0)
        fields.update(over)
        return Entry(throughput=5.0, iteration_ms=400.0, detail=Detail(**fields))

    columns = [Column("detbench-trainer", "trainer"), Column("torchvision", "torchvision")]
    missing = {("retinanet", "detbench-trainer"): entry(flops_per_image=2e11, limit_note="no measured bf16 peak: x")}
    assert measured.compute_lines(missing, columns, ["retinanet"], "bf16") == [
        "No compute figures: no measured bf16 peak: x."]
    full = {("retinanet", "detbench-trainer"): entry(flops_per_image=2e11, peak_gflops=100.0)}
    lines = measured.compute_lines(full, columns, ["retinanet"], "fp32")
    assert lines[0] == "Compute, RetinaNet (trainer | torchvision): 1.000 TFLOP/s (1000%) | -, in parentheses " \
                       "the share of the peak." and lines[1].startswith("Peak: 100 GFLOP/s")
    assert lines[2].startswith("A share above 100% means the peak was measured low")     # 1000% is no MFU
    within = {("retinanet", "detbench-trainer"): entry(flops_per_image=2e11, peak_gflops=2000.0)}
    assert len(measured.compute_lines(within, columns, ["retinanet"], "fp32")) == 2
