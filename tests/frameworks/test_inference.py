"""Inference scenarios: validation, exact latency figures on the calibration workload, the
seed-form tables, and the regression gate on a latency percentile."""
import json
import random
import re

import numpy as np
import pytest
from click.testing import CliRunner

from harness import launch
from harness.cli import main
from harness.errors import UserError
from harness.measure import latency
from harness.results import baseline, compare
from harness.results.store import Store
from harness.plan import scenario as scenario_mod
from tests.support.deadlines import assert_on_deadlines, designed_ms
from tests.support.storerows import rows

INFERENCE = """\
name: infer
mode: inference
matrix:
  framework: [calibrate]
  model: [retinanet]
  precision: [fp32]
batch_sizes: [1, 4]
input_size: [320, 320]
warmup: 2
measure: 40
repeats: 2
percentiles: [50, 80, 95]
timeout_s: 60
calibrate:
  iteration_ms: 10
  data_ms: 2
  post_ms: 1
  tail_every: 10
  tail_ms: 20
"""


def replace(old, new, text=INFERENCE):
    assert old in text
    return text.replace(old, new)


CASES = [
    ("batch-not-positive", replace("[1, 4]", "[0, 4]"), 7, "batch_sizes", "whole numbers from 1"),
    ("batch-not-integer", replace("[1, 4]", "[1.5, 4]"), 7, "batch_sizes.0", "integer"),
    ("batch-twice", replace("[1, 4]", "[4, 4]"), 7, "batch_sizes", "twice"),
    ("percentile-100", replace("[50, 80, 95]", "[50, 100]"), 12, "percentiles", "strictly between 0 and 100"),
    ("percentile-0", replace("[50, 80, 95]", "[0, 50]"), 12, "percentiles", "strictly between 0 and 100"),
    ("too-few-batches", replace("[50, 80, 95]", "[50, 99]"), 12, "percentiles.1",
     "99% latency needs at least 100 measured batches; measure is 40"),
    ("training-key", INFERENCE + "batch_per_gpu: 2\n", 20, "batch_per_gpu", "a training key"),
    ("no-batch-sizes", replace("batch_sizes: [1, 4]\n", ""), 2, "mode", "lists its batch sizes"),
    ("two-gpus", replace("  precision: [fp32]", "  precision: [fp32]\n  gpus: [1, 2]"), 7, "matrix.gpus",
     "one device"),
    ("inference-key-in-training", replace("mode: inference\n", "").replace("percentiles: [50, 80, 95]\n", ""),
     6, "batch_sizes", "an inference key"),
    ("no-inference-path", replace("[calibrate]", "[calibrate, simpledet-mxnet]"), 4,
     "matrix.framework.1", "simpledet-mxnet has no inference path"),
    ("exclude-batch-in-training", "name: t\nmatrix:\n  framework: [calibrate]\n  model: [retinanet]\n"
     "exclude:\n  - {framework: calibrate, batch: 2, reason: x}\n", 6, "exclude.0.batch", "an inference key"),
]


@pytest.mark.parametrize("text,line,field,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_inference_scenario_names_file_line_and_field(write_scenario, text, line, field, words):
    path = write_scenario(text)
    with pytest.raises(UserError) as info:
        launch.load_scenario(path)
    message = str(info.value)
    prefix = "%s:%d: %s: " % (path, line, field)
    assert "\n" not in message and message.startswith(prefix), message
    assert words in message, message


def test_bad_inference_scenario_exits_2_and_writes_nothing(write_scenario, tmp_path):
    path = write_scenario(replace("[50, 80, 95]", "[50, 99]"))
    results = tmp_path / "results"
    result = CliRunner().invoke(main, ["run", "--scenario", str(path), "--results", str(results)])
    assert result.exit_code == 2
    assert re.match(r"detbench: error: .*:12: percentiles.1: ", result.output.strip())
    assert not results.exists()


def test_batch_sizes_are_the_last_axis_of_the_cells(write_scenario):
    sc = launch.load_scenario(write_scenario(INFERENCE))
    cells = [p.cell for p in scenario_mod.plan(sc)]
    assert [c.key for c in cells] == ["calibrate/retinanet/fp32/local/1/1/b1", "calibrate/retinanet/fp32/local/1/1/b4"]
    assert all(scenario_mod.Cell.from_key(c.key) == c for c in cells)
    ctx = scenario_mod.context(sc, cells[1])
    assert ctx.batch_per_gpu == 4 and ctx.iterations == 42 and ctx.inference["detections_per_image"] == 100
    # training cells keep their six-part keys
    assert scenario_mod.Cell.from_key("calibrate/retinanet/fp32/local/1/1").batch == 0


def test_percentiles_interpolate_like_numpy_and_refuse_unsupported_ones():
    rng = random.Random(7)
    for n in (20, 37, 100, 250):
        values = [rng.lognormvariate(0, 0.5) for _ in range(n)]
        for p in (50, 90, 95, 99):
            got = latency.percentile(values, p)
            if n < scenario_mod.batches_needed(p):
                assert got is None
            else:
                assert got == pytest.approx(float(np.percentile(values, p)), rel=1e-12)
    assert [scenario_mod.batches_needed(p) for p in (50, 90, 95, 99, 99.9)] == [2, 10, 20, 100, 1000]


@pytest.mark.timing
def test_calibration_inference_figures_match_the_truth_within_1_percent(write_scenario, tmp_path):
    results = tmp_path / "results"
    result = CliRunner().invoke(main, ["run", "--scenario", str(write_scenario(INFERENCE)), "--results", str(results)])
    assert result.exit_code == 0, result.output
    truth = designed_ms(2, 40, 10.0, 10, 20.0)
    trials = rows(results, "SELECT id, cell_key, throughput, latency_json FROM trials ORDER BY seq")
    assert len(trials) == 4
    for trial_id, key, throughput, latency_json in trials:
        batch = scenario_mod.Cell.from_key(key).batch
        fig = json.loads(latency_json)
        assert fig["batches"] == 40
        # exactly the figures of the batch times the trial logged (batches 3..42)...
        times = [t for (t,) in rows(results, "SELECT time_s FROM iterations WHERE trial_id = ? AND iteration "
                                             "BETWEEN 3 AND 42 ORDER BY iteration", trial_id)]
        assert len(times) == 40
        for p in (50, 80, 95):
            assert fig["p%d_s" % p] == pytest.approx(float(np.percentile(times, p)), rel=1e-9), p
        # ...which are the designed ones, each batch ending on its deadline: the mean exactly, and
        # the median is the plain batch's (a late wake-up moves a higher order statistic by as much)
        assert_on_deadlines(times, truth)
        assert fig["mean_s"] * 1000 == pytest.approx(np.mean(truth), rel=0.01)
        assert fig["p50_s"] * 1000 == pytest.approx(np.percentile(truth, 50), abs=0.5)
        assert throughput == pytest.approx(batch * 40 / (sum(truth) / 1000), rel=0.01)
        # the parts end on sleeps, not deadlines: a loaded machine may stretch one a little
        assert fig["pre_s"] * 1000 == pytest.approx(2.0, rel=0.25)
        assert fig["post_s"] * 1000 == pytest.approx(1.0, rel=0.25)
        assert (fig["pre_s"] + fig["net_s"] + fig["post_s"]) <= fig["mean_s"]
    report = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results)])
    assert report.exit_code == 0, report.output
    text = report.output
    assert "| Batch size | Throughput Avg | Latency Avg (ms) | Latency 50% (ms) | Latency 80% (ms) | " \
           "Latency 95% (ms) |" in text
    row = re.search(r"^\| 4 \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \|$", text, re.M)
    assert row, text
    thr, avg, p50, p80, p95 = map(float, row.groups())
    # the row's p95 is the batch-4 trials' own (their median, printed to 0.1 ms)
    p95s = [json.loads(f)["p95_s"] * 1000 for _, key, _, f in trials if scenario_mod.Cell.from_key(key).batch == 4]
    assert avg == pytest.approx(np.mean(truth), rel=0.01) and min(p95s) - 0.06 <= p95 <= max(p95s) + 0.06
    assert thr == pytest.approx(4 * 40 / (sum(truth) / 1000), rel=0.01)
    assert "#### local-FP32 inference, batch 4" in text      # side by side at the largest batch
    exports = {}
    for fmt in ("csv", "json", "html"):
        out = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results),
                                        "--format", fmt])
        assert out.exit_code == 0, out.output
        exports[fmt] = out.output
    page = exports["html"]
    assert '<section id="inference">' in page and page.count('class="histogram"') == 2
    assert 'alt="latency against throughput, local FP32 RetinaNet"' in page
    cells = json.loads(exports["json"])["cells"]
    assert sorted(c["batch_per_gpu"] for c in cells) == [1, 4]
    for c in cells:
        assert c["latency_avg_ms"] == pytest.approx(np.mean(truth), rel=0.01)
        assert c["latency_percentiles_ms"]["95"] == pytest.approx(20.0, abs=0.5)
    assert "latency_p50_ms" in exports["csv"].splitlines()[0].split(",")


def gate_scenario(name, iteration_ms, tail_ms):
    return INFERENCE.replace("name: infer", "name: %s" % name).replace("repeats: 2", "repeats: 5").replace(
        "batch_sizes: [1, 4]", "batch_sizes: [2]").replace("iteration_ms: 10", "iteration_ms: %g" % iteration_ms
                                                           ).replace("tail_ms: 20", "tail_ms: %g" % tail_ms)


@pytest.mark.timing
def test_the_gate_catches_a_10_percent_rise_at_p95_and_not_a_repeat(write_scenario, tmp_path):
    results = tmp_path / "results"
    ids = []
    for name, it, tail in (("a", 10, 20), ("a2", 10, 20), ("b", 11, 22)):
        path = write_scenario(gate_scenario(name, it, tail), name + ".yaml")
        out = CliRunner().invoke(main, ["run", "--scenario", str(path), "--results", str(results)])
        assert out.exit_code == 0, out.output
        ids.append(re.search(r"run (\S+): ", out.output).group(1))
    store = Store(results, create=False)
    a, a2, b = (baseline.from_store(store, r) for r in ids)
    store.close()
    cell = a["cells"]["calibrate/retinanet/fp32/local/1/1/b2"]
    assert sorted(cell["latency_ms"]) == ["mean", "p50", "p80", "p95"] and len(cell["latency_ms"]["p95"]) == 5
    rule = compare.Rule(metric="p95", ignore_settings=("iteration_ms", "tail_ms"))
    slower = compare.compare(a, b, rule).cells[0]
    assert slower.verdict == compare.REGRESSION and slower.ratio == pytest.approx(1.10, rel=0.01)
    same = compare.compare(a, a2, rule).cells[0]
    assert same.verdict == compare.UNCHANGED
    faster = compare.compare(b, a, rule).cells[0]
    assert faster.verdict == compare.IMPROVEMENT
    cli = CliRunner().invoke(main, ["compare", "--baseline", ids[0], "--candidate", ids[2], "--results",
                                    str(results), "--metric", "p95", "--ignore-setting", "iteration_ms",
                                    "--ignore-setting", "tail_ms"])
    assert cli.exit_code == 1 and "95% latency" in cli.output and "regression" in cli.output
    bad = CliRunner().invoke(main, ["compare", "--baseline", ids[0], "--candidate", ids[2], "--results",
                                    str(results), "--metric", "p100"])
    assert bad.exit_code == 2 and "--metric" in bad.output


def test_a_latency_metric_on_a_training_cell_says_why_it_has_nothing():
    side = {"cells": {"k": {"throughput": [10.0, 11.0], "settings": {}}}}
    result = compare.compare(side, side, compare.Rule(metric="p95")).cells[0]
    assert result.verdict in (compare.MISSING_BASELINE, compare.MISSING_CANDIDATE)
    assert "not an inference cell" in result.notes[0]


def test_frameworks_that_keep_different_detections_are_flagged():
    from harness.report import inference
    from harness.report.model import Column, Entry, Latency

    def entry(detections):
        lat = Latency(batch=8, mean_ms=100.0, percentiles=((90.0, 110.0),), p50_ms=100.0, batches=10, phases_ms={},
                      detections_per_image=detections, mean_spread_ms=(100.0, 100.0))
        return Entry(throughput=80.0, iteration_ms=100.0, latency=lat)
    columns = [Column("a", "A"), Column("b", "B")]
    same, lines = inference.detection_lines({("retinanet", "a"): entry(20.0), ("retinanet", "b"): entry(20.5)},
                                            columns, ["retinanet"])
    assert lines == ["Detections kept per image, RetinaNet (A | B): 20.0 | 20.5."]
    assert not any(e.flags for e in same.values())
    apart, lines = inference.detection_lines({("retinanet", "a"): entry(0.0), ("retinanet", "b"): entry(21.9)},
                                             columns, ["retinanet"])
    assert "Not the same post-processing work" in lines[0]
    assert all(e.flags == ["unequal-work"] for e in apart.values())
