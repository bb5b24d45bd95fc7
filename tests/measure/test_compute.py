"""How close to the machine's limit: the measured peak, the counted work per image, and the
compute figures (achieved TFLOP/s, share of peak) every report gives a cell."""
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.measure import compute
from harness.report import measured
from harness.vocab import catalog
from tests.support.storerows import rows

ROOT = Path(__file__).resolve().parents[2]
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


def test_the_peak_is_the_best_call_of_each_shape_timed_at_least_five_times():
    result = module_json("harness.trainer.peak", "--seconds", "0")
    fp32 = result["precisions"]["fp32"]
    assert result["method"] == compute.PEAK_METHOD and result["device"] in ("cpu", "cuda")
    for name, spread in fp32["spread"].items():
        assert spread["calls"] >= 5 and spread["best"] >= spread["median"] >= spread["worst"] > 0, name
        assert fp32["shapes_gflops"][name] == spread["best"]
    assert fp32["peak_gflops"] == max(fp32["shapes_gflops"].values()) == fp32["shapes_gflops"][fp32["peak_shape"]]
    # the shapes the detectors run: backbone stages and heads as convolutions, the box head's fc layers
    names = " ".join(fp32["spread"])
    for part in ("stem conv7x7", "conv3x3 64ch", "conv3x3 512ch", "conv1x1", "head conv3x3", "mask conv3x3",
                 "box fc6", "gemm"):
        assert part in names


class FakeClock:
    """A clock that moves `step` seconds for each call of the operation it times."""

    def __init__(self, step):
        self.now, self.step, self.calls = 0.0, step, 0

    def __call__(self):
        return self.now

    def run(self):
        self.calls += 1
        self.now += self.step(self.calls)


def test_each_shape_is_warmed_up_then_timed_five_times_or_for_the_time_asked_and_its_best_call_kept():
    from harness.trainer import peak
    # the warmup calls are slow and not timed; then calls of 0.2 s, one of them 0.1 s
    clock = FakeClock(lambda n: 1.0 if n <= peak.WARMUP_CALLS else (0.1 if n == peak.WARMUP_CALLS + 3 else 0.2))
    times = peak.timed_calls(clock.run, lambda: None, seconds=0.0, clock=clock)
    assert clock.calls == peak.WARMUP_CALLS + 5 and len(times) == 5
    assert peak.spread(1e9, times) == {"best": 10.0, "median": 5.0, "worst": 5.0, "calls": 5}
    clock = FakeClock(lambda n: 0.2)
    assert len(peak.timed_calls(clock.run, lambda: None, seconds=3.0, clock=clock)) == 15
    # a device whose calls return at once is timed in samples of back-to-back calls
    clock = FakeClock(lambda n: 0.001)
    times = peak.timed_calls(clock.run, lambda: None, seconds=0.0, clock=clock, sample_s=0.01)
    assert len(times) == 5 and clock.calls == peak.WARMUP_CALLS + 50
    assert times == pytest.approx([0.001] * 5)


def test_a_peak_that_cannot_be_measured_is_one_line_and_exit_2(monkeypatch, capsys):
    pytest.importorskip("torch")
    from harness.trainer import peak

    def broken(torch, kind, shape, dtype, device):
        def run():
            raise RuntimeError("could not create a primitive\nmore lines of the backend's own")
        return run
    monkeypatch.setattr(peak, "operation", broken)
    assert peak.main(["--device", "cpu", "--seconds", "0"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "error: cannot time fp32 gemm 2048 on this cpu: could not create a primitive\n"
    assert peak.main(["--seconds", "nan"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_platform_peak_prints_each_shapes_spread_and_a_failure_in_one_line(monkeypatch):
    measured = {"method": 2, "name": "cpu", "threads": 2, "torch": "2.x", "isa": "AVX512", "amx": True,
                "precisions": {"fp32": {"peak_gflops": 150.0, "peak_shape": "gemm 2048",
                                        "shapes_gflops": {"gemm 2048": 150.0, "conv3x3 64ch 80x80": 90.0},
                                        "spread": {"gemm 2048": {"best": 150.0, "median": 140.0, "worst": 100.0,
                                                                 "calls": 7},
                                                   "conv3x3 64ch 80x80": {"best": 90.0, "median": 80.5,
                                                                          "worst": 60.0, "calls": 5}}},
                               "bf16": {"skipped": "no bf16 kernels on this cpu"}}}
    monkeypatch.setattr(compute, "peak", lambda fingerprint, env=None, refresh=False: measured)
    out = CliRunner().invoke(main, ["platform", "peak"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert "AVX512 with AMX tiles" in lines[0]
    assert lines[1].split() == ["bf16", "no", "bf16", "kernels", "on", "this", "cpu"]
    assert lines[2].split() == ["fp32", "150.0", "(gemm", "2048)"]
    assert lines[3].split() == ["gemm", "2048", "150.0", "140.0", "100.0", "(7", "calls)"]
    assert lines[4].split() == ["conv3x3", "64ch", "80x80", "90.0", "80.5", "60.0", "(5", "calls)"]
    monkeypatch.setattr(compute, "peak", lambda fingerprint, env=None, refresh=False:
                        {"error": "cannot time fp32 gemm 2048 on this cpu: out of memory"})
    out = CliRunner().invoke(main, ["platform", "peak"])
    assert out.exit_code == 2 and out.output.count("\n") == 1
    assert "cannot time fp32 gemm 2048 on this cpu: out of memory" in out.output


def test_a_peak_cached_by_the_older_method_is_measured_again(tmp_path, monkeypatch):
    monkeypatch.setenv("DETBENCH_CACHE", str(tmp_path))
    path = compute.peak_path("fp1-a", "2")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"threads": 2, "precisions": {"fp32": {"peak_gflops": 30.0}}}))
    ran = []
    fresh = {"method": compute.PEAK_METHOD, "threads": 2, "precisions": {"fp32": {"peak_gflops": 40.0}}}
    monkeypatch.setattr(compute, "_module", lambda args, env=None: ran.append(args) or fresh)
    assert compute.peak("fp1-a", {"OMP_NUM_THREADS": "2"}) == fresh and len(ran) == 1
    assert compute.peak("fp1-a", {"OMP_NUM_THREADS": "2"}) == fresh and len(ran) == 1     # now cached


SMALL = ["--set", "data.source=synthetic", "--set", "data.images_per_device=2"]


@pytest.fixture(scope="module")
def small_work():
    """The tiny RetinaNet's training work at 128x128, counted once for the tests that read it."""
    return module_json("harness.trainer.flops", str(TINY), *SMALL, "--set", "data.input_size=128x128")


def test_the_fixed_work_grows_with_the_pixels(small_work):
    large = module_json("harness.trainer.flops", str(TINY), *SMALL, "--set", "data.input_size=256x256")
    assert small_work["fixed_flops"] > 0 and small_work["images_per_device"] == 2
    # RetinaNet's heads run over every anchor: nothing of its step grows with a logged count
    assert small_work["unit_flops"] == {} and small_work["fixed_flops"] == small_work["counted"]["step_flops"]
    # convolutions dominate: four times the pixels is close to four times the work
    assert 3.0 < large["fixed_flops"] / small_work["fixed_flops"] < 4.5


def test_inference_work_is_the_test_time_forward_alone(small_work):
    infer = module_json("harness.trainer.flops", str(TINY), *SMALL, "--set", "data.input_size=128x128",
                        "--mode", "inference")
    assert infer["mode"] == "inference" and 0 < infer["flops_per_image"] < small_work["fixed_flops"] / 2


def test_a_module_that_cannot_run_is_a_reason_not_a_crash():
    assert "error" in compute._module(["harness.trainer.no_such_module"])


def test_calibration_runs_store_no_limits_and_inference_says_why(write_scenario):
    from harness import launch
    from harness.plan import scenario
    sc = launch.load_scenario(write_scenario())
    assert compute.for_run(sc, [p.cell for p in scenario.plan(sc)], "fp1-x") is None


def test_a_run_says_before_its_trials_which_compute_figures_it_could_not_get():
    bounds = {"peak": {"error": "torch is not installed"},
              "work": {"detbench-trainer/retinanet/fp32/local/1/1": {"error": "no bundled model"},
                       "detbench-trainer/faster_rcnn/fp32/local/1/1": MASK_WORK}}
    lines = compute.unmeasured(bounds)
    assert lines == ["no compute peak for this run (no share of peak in its reports): torch is not installed",
                     "no counted work for detbench-trainer/retinanet/fp32/local/1/1 (no share of peak for it): "
                     "no bundled model"]
    assert compute.unmeasured({"peak": {"fp32": {"gflops": 100.0}}, "work": {"k": MASK_WORK}}) == []
    assert compute.unmeasured(None) == []


def test_a_count_or_peak_not_cached_yet_is_announced_before_it_starts_and_counts_on_every_core(tmp_path, monkeypatch):
    monkeypatch.setenv("DETBENCH_CACHE", str(tmp_path))
    heard, ran = [], []
    monkeypatch.setattr(compute, "_module", lambda args, env=None: ran.append((args[0], env)) or {"fixed_flops": 1.0})
    first = compute.counted_work("mask_rcnn", (800, 1333), 8, {}, note=heard.append)
    again = compute.counted_work("mask_rcnn", (800, 1333), 8, {}, note=heard.append)
    assert first == again == {"fixed_flops": 1.0}
    assert heard == ["counting the work of mask_rcnn train at 800x1333, batch 8 on the CPU (once: then cached)"]
    assert ran == [("harness.trainer.flops", {"OMP_NUM_THREADS": str(os.cpu_count() or 1)})]
    monkeypatch.setattr(compute, "_module", lambda args, env=None: {"method": compute.PEAK_METHOD})
    compute.peak("fp1-x", {"OMP_NUM_THREADS": "2"}, note=heard.append)
    compute.peak("fp1-x", {"OMP_NUM_THREADS": "2"}, note=heard.append)
    assert heard[1:] == ["measuring this host's peak at 2 threads (once: then cached)"]


def cell_row(key="detbench-trainer/mask_rcnn/fp32/local/1/1", precision="fp32"):
    return {"cell_key": key, "precision": precision}


MASK_WORK = {"fixed_flops": 2.0e11, "unit_flops": {"sampled_rois": 8.0e7, "mask_rois": 3.0e9},
             "images_per_device": 2}


def test_a_cells_work_is_its_fixed_part_plus_each_unit_times_the_counts_its_own_trials_logged():
    bounds = {"work": {"detbench-trainer/mask_rcnn/fp32/local/1/1": MASK_WORK,
                       "torchvision/mask_rcnn/fp32/local/1/1": MASK_WORK,
                       "detbench-trainer/mask_rcnn/bf16/local/1/1": MASK_WORK,
                       "mmdetection/mask_rcnn/fp32/local/1/1": {"error": "no bundled x to count"},
                       "detbench-trainer/retinanet/fp32/local/1/1": {"fixed_flops": 1.5e11, "unit_flops": {},
                                                                     "images_per_device": 2}},
              "peak": {"precisions": {"fp32": {"peak_gflops": 200.0}, "bf16": {"skipped": "no bf16 kernels"}}}}
    ours = measured.cell_limits(cell_row(), bounds, {"proposals": 4000, "sampled_rois": 1024, "mask_rois": 15.5})
    per_iteration = 2.0e11 + 1024 * 8.0e7 + 15.5 * 3.0e9
    assert ours == {"flops_per_iteration": per_iteration, "flops_per_image": per_iteration / 2,
                    "work_basis": "logged", "peak_gflops": 200.0, "peak_stored_gflops": None, "limit_note": None}
    # the same model, a rival's own counts: fewer mask RoIs, less work
    theirs = measured.cell_limits(cell_row("torchvision/mask_rcnn/fp32/local/1/1"), bounds,
                                  {"sampled_rois": 1024, "mask_rois": 6})
    assert theirs["flops_per_iteration"] == per_iteration - 9.5 * 3.0e9
    # a count the work depends on that the trials did not log: no figure, and why
    missing = measured.cell_limits(cell_row("torchvision/mask_rcnn/fp32/local/1/1"), bounds, {"sampled_rois": 1024})
    assert "flops_per_image" not in missing
    assert missing["limit_note"] == "work not counted: the trials logged no mask RoIs (DETBENCH_WORK), which the " \
                                    "work depends on"
    # RetinaNet's work depends on no count: a framework that logs none still has its figure
    retina = measured.cell_limits(cell_row("detbench-trainer/retinanet/fp32/local/1/1"), bounds, None)
    assert retina["flops_per_image"] == 0.75e11 and retina["limit_note"] is None
    bf16 = measured.cell_limits(cell_row("detbench-trainer/mask_rcnn/bf16/local/1/1", "bf16"), bounds,
                                {"sampled_rois": 1024, "mask_rois": 6})
    assert bf16["peak_gflops"] is None and "no measured bf16 peak: no bf16 kernels" == bf16["limit_note"]
    failed = measured.cell_limits(cell_row("mmdetection/mask_rcnn/fp32/local/1/1"), bounds, {})
    assert "flops_per_image" not in failed and failed["limit_note"] == "work not counted: no bundled x to count"
    assert measured.cell_limits(cell_row("calibrate/retinanet/fp32/local/1/1"), bounds) == {}


def test_a_run_stored_before_work_models_reports_its_per_image_figure_as_stored():
    bounds = {"work": {"detbench-trainer/mask_rcnn/fp32/local/1/1": {"flops_per_image": 2.44e11}},
              "peak": {"precisions": {"fp32": {"peak_gflops": 200.0}}}}
    old = measured.cell_limits(cell_row(), bounds, {"sampled_rois": 1024, "mask_rois": 15})
    assert old["flops_per_image"] == 2.44e11 and old["work_basis"] == "synthetic"
    assert "flops_per_iteration" not in old and old["limit_note"] is None


def test_rival_cells_are_counted_with_the_frozen_stages_their_settings_declare(write_scenario):
    from harness import launch
    from harness.plan import scenario

    def cells(text):
        sc = launch.load_scenario(write_scenario(text.replace("[calibrate, detbench-trainer]",
                                                              "[detbench-trainer, torchvision]")))
        return sc, {p.cell.framework: p.cell for p in scenario.plan(sc)}
    sc, planned = cells(TRAINER.replace("    model.num_classes: 4\n", "    model.num_classes: 4\n"
                                        "    model.roi_align: sparse\n    model.roi_batch_per_image: 64\n"))
    # the trainer's options that change its architecture, not those that change how it computes
    # the same work or only what it logs
    assert compute.cell_options(sc, planned["detbench-trainer"]) == {
        "model.block": "basic", "model.layers": "1,1,1,1", "model.base_width": 16, "model.fpn_channels": 32,
        "model.num_classes": 4, "model.frozen_stages": 1}
    assert compute.cell_options(sc, planned["torchvision"]) == {"model.frozen_stages": 1}   # its 3 trainable stages
    sc, planned = cells(TRAINER.replace("options:\n", "options:\n  torchvision:\n    trainable_layers: 2\n"))
    assert compute.cell_options(sc, planned["torchvision"]) == {"model.frozen_stages": 2}


MASK_TRAINER = TRAINER.replace("model: [retinanet]", "model: [mask_rcnn]").replace(
    "    model.num_classes: 4\n", "    model.num_classes: 4\n    model.fc_dim: 64\n    model.mask_conv_dim: 32\n"
    "    model.rpn_pre_nms_top_n_train: 200\n    model.rpn_post_nms_top_n_train: 100\n"
    "    model.roi_batch_per_image: 64\n    model.mask_max_rois_per_image: 16\n")


def test_a_real_run_reports_its_own_counted_work_and_the_share_of_peak(write_scenario, tmp_path, monkeypatch):
    results = tmp_path / "results"
    out = CliRunner().invoke(main, ["run", "--scenario", str(write_scenario(MASK_TRAINER)), "--results", str(results)])
    assert out.exit_code == 0, out.output
    key = "detbench-trainer/mask_rcnn/fp32/local/1/1"
    [(stored,)] = rows(results, "SELECT limits_json FROM runs")
    bounds = json.loads(stored)
    model = bounds["work"][key]
    assert "calibrate/mask_rcnn/fp32/local/1/1" not in bounds["work"]
    assert model["images_per_device"] == 2 and model["fixed_flops"] > 0
    assert set(model["unit_flops"]) == {"sampled_rois", "mask_rois"}
    peak = bounds["peak"]["precisions"]["fp32"]["peak_gflops"]
    # the report's ceiling: the stored peak, or a higher one cached here for this machine and thread count
    used = compute.best_peak(bounds, bounds["peak_of"]["fingerprint"], "2")["peak"]["precisions"]["fp32"]["peak_gflops"]
    assert used >= peak
    [(throughput, logged)] = rows(results, "SELECT throughput, work_json FROM trials WHERE cell_key = ?", key)
    counts = json.loads(logged)
    # the work of this trial's own iterations: its mean counts over the measured window
    per_iteration = model["fixed_flops"] + sum(cost * counts[k] for k, cost in model["unit_flops"].items())
    tflops = throughput * per_iteration / 2 / 1e12
    report = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results)])
    assert report.exit_code == 0, report.output
    title = catalog.model_title("mask_rcnn")
    line = next(l for l in report.output.splitlines() if l.startswith("Compute, " + title))
    assert line.startswith("Compute, %s (calibrate | detbench-trainer (PyTorch)): - | %.3f TFLOP/s (%.0f%%)"
                           % (title, tflops, 100 * tflops * 1000 / used)), line
    assert "times the counts that column's trials logged" in report.output

    def json_cell():
        doc = json.loads(CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results),
                                                   "--format", "json"]).output)
        return next(c for c in doc["cells"] if c["framework"] == "detbench-trainer")
    cell = json_cell()
    assert cell["flops_per_iteration"] == pytest.approx(per_iteration) and cell["work_basis"] == "logged"
    assert cell["mfu"] == pytest.approx(tflops * 1000 / used) and cell["peak_gflops"] == used
    page = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results), "--format", "html"])
    assert "% of peak</span>" in page.output

    # the peak is measured again later, on a quieter machine, and comes out twice as high: reports
    # of the run, which stored the lower one, use the higher ceiling and give the shares against both
    of = bounds["peak_of"]
    assert of["threads"] == "2" and of["fingerprint"]
    higher = json.loads(compute.peak_path(of["fingerprint"], "2").read_text())
    higher["precisions"]["fp32"]["peak_gflops"] = 2 * peak
    monkeypatch.setenv("DETBENCH_CACHE", str(tmp_path / "cache"))      # not the real cache
    cached = compute.peak_path(of["fingerprint"], "2")
    cached.parent.mkdir(parents=True)
    cached.write_text(json.dumps(higher))
    cell = json_cell()
    assert cell["peak_gflops"] == 2 * peak and cell["peak_stored_gflops"] == peak
    assert cell["mfu"] == pytest.approx(tflops * 1000 / (2 * peak))
    assert cell["mfu_stored"] == pytest.approx(tflops * 1000 / peak)
    text = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results)]).output
    assert "The run stored a lower peak (%.0f GFLOP/s)" % peak in text
    assert "Against the stored one the shares read: %s - | %.0f%%." % (title, 100 * cell["mfu_stored"]) in text

    # a run stored before work models: its one figure per image, counted on a synthetic batch, still reports
    old = dict(bounds, work={key: {"flops_per_image": 2.5e9}})
    db = sqlite3.connect(str(results / "detbench.sqlite"))
    with db:
        db.execute("UPDATE runs SET limits_json = ?", (json.dumps(old),))
    db.close()
    cell = json_cell()
    assert cell["flops_per_image"] == 2.5e9 and cell["work_basis"] == "synthetic"
    assert cell["flops_per_iteration"] is None
    assert cell["tflops"] == pytest.approx(throughput * 2.5e9 / 1e12)
    text = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results)]).output
    assert "Work of detbench-trainer (PyTorch) %s: one figure per image counted on a synthetic batch" % title in text


def test_only_a_higher_peak_cached_for_the_same_machine_and_threads_replaces_the_stored_one(tmp_path, monkeypatch):
    monkeypatch.setenv("DETBENCH_CACHE", str(tmp_path))
    bounds = {"work": {}, "peak": {"precisions": {"fp32": {"peak_gflops": 30.0}, "bf16": {"skipped": "no kernels"}}}}
    assert compute.best_peak(bounds, "fp1-a", "2") is bounds            # nothing cached: as stored
    path = compute.peak_path("fp1-a", "2")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"precisions": {"fp32": {"peak_gflops": 159.4}, "bf16": {"peak_gflops": 600.0}}}))
    raised = compute.best_peak(bounds, "fp1-a", "2")
    assert raised["peak"]["precisions"]["fp32"] == {"peak_gflops": 159.4, "stored_gflops": 30.0}
    assert raised["peak"]["precisions"]["bf16"] == {"skipped": "no kernels"}   # the run had no figure to raise
    assert bounds["peak"]["precisions"]["fp32"] == {"peak_gflops": 30.0}       # the stored limits untouched
    assert compute.best_peak(bounds, "fp1-a", "4") is bounds            # other thread count
    assert compute.best_peak(bounds, "fp1-b", "2") is bounds            # other machine
    high = {"work": {}, "peak": {"precisions": {"fp32": {"peak_gflops": 200.0}}}}
    assert compute.best_peak(high, "fp1-a", "2") is high                # a lower cached figure never lowers it
    path.write_text("{not json")
    assert compute.best_peak(bounds, "fp1-a", "2") is bounds
    # an unset OMP_NUM_THREADS is cached as "default"; where that measurement ran torch at the
    # run's thread count, it is the same ceiling
    ran = {"work": {}, "peak": {"threads": 2, "precisions": {"fp32": {"peak_gflops": 30.0}}}}
    compute.peak_path("fp1-a", "default").write_text(json.dumps(
        {"threads": 2, "precisions": {"fp32": {"peak_gflops": 159.4}}}))
    compute.peak_path("fp1-a", "4").write_text(json.dumps(
        {"threads": 4, "precisions": {"fp32": {"peak_gflops": 300.0}}}))
    assert compute.best_peak(ran, "fp1-a", "2")["peak"]["precisions"]["fp32"] == {
        "peak_gflops": 159.4, "stored_gflops": 30.0}
    four = {"work": {}, "peak": {"threads": 4, "precisions": {"fp32": {"peak_gflops": 30.0}}}}
    assert compute.best_peak(four, "fp1-a", "4")["peak"]["precisions"]["fp32"]["peak_gflops"] == 300.0


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


def test_a_report_says_when_the_stored_peak_would_change_what_it_says():
    from harness.report.model import Column, Detail, Entry

    def entry(stored, best):
        fields = dict(n=3, failed=0, minimum=5.0, maximum=5.0, iqr=0.0, ci=None, cv=0.0, observed=None,
                      outliers=0, settings={}, settings_variants=(), kinds=("exact",), windows=(),
                      nominal_window=None, work=None, peak_rss_mb=None, peak_device_mb=None, peak_mem_mb=None,
                      run_id="r", median=5.0, flops_per_image=2e10, flops_per_iteration=4e10, work_basis="logged",
                      peak_gflops=best, peak_stored_gflops=stored)
        return Entry(throughput=5.0, iteration_ms=400.0, detail=Detail(**fields))

    columns = [Column("detbench-trainer", "trainer"), Column("torchvision", "torchvision")]
    # 0.1 TFLOP/s each: 80% of a 125 GFLOP/s peak the run stored, 50% of 200 measured since
    cells = {("retinanet", "detbench-trainer"): entry(125.0, 200.0), ("retinanet", "torchvision"): entry(125.0, 200.0)}
    lines = measured.compute_lines(cells, columns, ["retinanet"], "fp32")
    assert lines[0].startswith("Compute, RetinaNet (trainer | torchvision): 0.100 TFLOP/s (50%) | 0.100 TFLOP/s (50%)")
    assert lines[2].startswith("Work per iteration: each column's own, the bundled model's fixed part")
    assert "Against the stored one the shares read: RetinaNet 80% | 80%." in lines[3]
    assert not any("changes what this report says" in line for line in lines)
    # against a stored peak of 80 GFLOP/s the shares read 125%: a peak measured low, which the
    # report says of a share above 100%; against the one used they read 50%
    cells = {("retinanet", "detbench-trainer"): entry(80.0, 200.0)}
    lines = measured.compute_lines(cells, columns, ["retinanet"], "fp32")
    assert lines[4] == ("Which peak is used changes what this report says of trainer RetinaNet (125% against the "
                        "stored peak, 50% against the one used): a share above 100% says the peak was measured low, "
                        "and only one of the two peaks gives one.")
    assert len(lines) == 5
