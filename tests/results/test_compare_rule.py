"""The decision rule of the regression gate and the baseline file format."""
import copy
import json

import pytest

from harness.results import baseline, compare
from harness.errors import UserError

BASE = [100.0, 100.4, 99.7, 100.2, 99.9, 100.1, 99.8]
RULE = compare.Rule(threshold=0.05, alpha=0.01)
KEY = "calibrate/retinanet/fp32/local/1/1"
HOST = {"cpu": {"model": "Xeon", "cores": 2, "threads": 2, "sockets": 1}, "gpus": None,
        "memory_gb": 23.5, "os": "Linux 6.1", "software": {"driver": None}}


def scaled(values, factor):
    return [v * factor for v in values]


def side(values, run_id="r1", settings=None, host=None, observed=None, key=KEY):
    return {"schema": baseline.SCHEMA, "schema_version": baseline.SCHEMA_VERSION,
            "run": {"id": run_id}, "host": copy.deepcopy(host if host is not None else HOST),
            "cells": {key: {"settings": dict(settings or {"iteration_ms": 20.0, "warmup": 3}),
                            "images_per_iteration": 2, "throughput": list(values),
                            "observed": list(observed if observed is not None else values), "failed": 0}}}


def verdict(base, cand, rule=RULE):
    return compare.decide(base, cand, rule)[0]


# ------------------------------------------------------------------ each verdict

def test_a_big_significant_drop_is_a_regression():
    assert verdict(BASE, scaled(BASE, 0.90)) == compare.REGRESSION


def test_a_big_drop_without_evidence_is_only_possible():
    noisy = [100, 70, 130, 100, 60, 140, 95]           # median 100 -> 95 would not be "big"
    cand = [85, 140, 60, 135, 90, 55, 125]             # median 90: a 10% drop, but all over the place
    base_med, cand_med = compare.stats.median(noisy), compare.stats.median(cand)
    assert 1 - cand_med / base_med >= 0.05
    assert verdict(noisy, cand) == compare.POSSIBLE


def test_a_small_but_significant_drop_is_only_possible():
    assert verdict(BASE, scaled(BASE, 0.97)) == compare.POSSIBLE


def test_a_big_significant_gain_is_an_improvement():
    assert verdict(BASE, scaled(BASE, 1.10)) == compare.IMPROVEMENT


def test_the_same_numbers_are_unchanged():
    assert verdict(BASE, list(reversed(BASE))) == compare.UNCHANGED
    assert verdict(BASE, scaled(BASE, 1.02)) == compare.UNCHANGED   # small gain: not an improvement


def test_the_threshold_and_alpha_are_the_users():
    assert verdict(BASE, scaled(BASE, 0.97), compare.Rule(threshold=0.02)) == compare.REGRESSION
    assert verdict(BASE, scaled(BASE, 0.90), compare.Rule(alpha=0.0001)) == compare.POSSIBLE
    with pytest.raises(UserError, match="threshold"):
        compare.Rule(threshold=5).check()
    with pytest.raises(UserError, match="alpha"):
        compare.Rule(alpha=0).check()


def test_too_few_repeats_can_never_fail_and_say_so():
    result = compare.compare(side(BASE[:3]), side(scaled(BASE[:3], 0.5), "r2"), RULE)
    cell = result.cells[0]
    assert cell.verdict == compare.POSSIBLE and result.exit_code() == 0
    assert any("can never give p < 0.01" in n for n in cell.notes)


# ------------------------------------------------------------------ whole comparisons

def test_missing_cells_on_either_side():
    base = side(BASE)
    cand = side(BASE, "r2", key="calibrate/faster_rcnn/fp32/local/1/1")
    result = compare.compare(base, cand, RULE)
    assert {c.key: c.verdict for c in result.cells} == {
        KEY: compare.MISSING_CANDIDATE, "calibrate/faster_rcnn/fp32/local/1/1": compare.MISSING_BASELINE}
    assert result.exit_code() == 0 and result.exit_code(strict=True) == 1


def test_a_cell_whose_repeats_all_failed_is_missing():
    cand = side([], "r2")
    cand["cells"][KEY]["failed"] = 7
    cell = compare.compare(side(BASE), cand, RULE).cells[0]
    assert cell.verdict == compare.MISSING_CANDIDATE
    assert "candidate: 7 failed trials" in cell.notes


def test_different_settings_are_not_comparable_and_named():
    cand = side(scaled(BASE, 0.5), "r2", settings={"iteration_ms": 40.0, "warmup": 3})
    result = compare.compare(side(BASE), cand, RULE)
    cell = result.cells[0]
    assert cell.verdict == compare.NOT_COMPARABLE and result.exit_code() == 0
    assert cell.notes == ["settings differ: iteration_ms 20.0 -> 40.0"]
    assert cell.ratio == pytest.approx(0.5)           # the figures are still shown


def test_a_key_present_on_one_side_only_differs():
    cand = side(BASE, "r2", settings={"iteration_ms": 20.0, "warmup": 3, "norm": "gn"})
    cell = compare.compare(side(BASE), cand, RULE).cells[0]
    assert cell.verdict == compare.NOT_COMPARABLE and "norm (absent) -> 'gn'" in cell.notes[0]


def test_ignored_settings_are_compared_but_reported():
    cand = side(scaled(BASE, 0.9), "r2", settings={"iteration_ms": 22.0, "warmup": 3})
    rule = compare.Rule(ignore_settings=("iteration_ms",))
    cell = compare.compare(side(BASE), cand, rule).cells[0]
    assert cell.verdict == compare.REGRESSION
    assert cell.notes == ["settings differ but ignored as asked: iteration_ms 20.0 -> 22.0"]


def test_other_hardware_is_not_comparable_but_another_kernel_is():
    other_cpu = copy.deepcopy(HOST)
    other_cpu["cpu"]["model"] = "EPYC"
    cell = compare.compare(side(BASE), side(BASE, "r2", host=other_cpu), RULE).cells[0]
    assert cell.verdict == compare.NOT_COMPARABLE and "cpu.model 'Xeon' -> 'EPYC'" in cell.notes[0]
    other_os = copy.deepcopy(HOST)
    other_os["os"] = "Linux 6.8"
    result = compare.compare(side(BASE), side(BASE, "r2", host=other_os), RULE)
    assert result.cells[0].verdict == compare.UNCHANGED
    assert result.notes == [
        "neither run's host record lists the CPU's instruction set: the same CPU model name can hide "
        "different instruction sets; save a new baseline to have it checked",
        "host differs (not blocking): os 'Linux 6.1' -> 'Linux 6.8'"]


def test_the_observed_estimator_is_judged_when_asked():
    cand = side(BASE, "r2", observed=scaled(BASE, 0.9))
    assert compare.compare(side(BASE), cand, RULE).cells[0].verdict == compare.UNCHANGED
    observed = compare.Rule(estimator="observed")
    assert compare.compare(side(BASE), cand, observed).cells[0].verdict == compare.REGRESSION


# ------------------------------------------------------------------ baseline files

def test_baseline_round_trip(tmp_path):
    original = side(BASE)
    path = tmp_path / "b.json"
    baseline.save(original, path)
    text = path.read_text()
    assert '"throughput": [100.0, 100.4, 99.7, 100.2, 99.9, 100.1, 99.8]' in text   # one line, diffable
    assert baseline.load(path) == original
    assert baseline.dumps(baseline.load(path)) == text                              # stable


@pytest.mark.parametrize("content,message", [
    ("{not json", "not valid JSON"),
    ('{"schema": "other"}', "not a detbench baseline"),
    ('{"schema": "detbench-baseline", "schema_version": 99, "cells": {}}', "schema_version 99"),
    ('{"schema": "detbench-baseline", "schema_version": 1, "cells": {"k": {"throughput": [1, -2]}}}',
     "cells.k.throughput: must be a list of positive numbers"),
])
def test_bad_baseline_files_are_user_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        baseline.load(path)


def test_a_saved_file_is_json_with_schema_and_version(tmp_path):
    path = tmp_path / "b.json"
    baseline.save(side(BASE), path)
    data = json.loads(path.read_text())
    assert data["schema"] == "detbench-baseline" and data["schema_version"] == 1


def test_with_host_facts_the_fingerprinted_facts_decide():
    facts = {"cpu": {"model": "Xeon", "sockets": 1, "cores": 2, "threads": 2}, "numa_nodes": 1,
             "memory_mb": 24105, "os": {"kernel": "6.1.0"}, "hostname": "node1", "gpus": [],
             "gpu_driver": None, "gpu_links": []}
    a = dict(HOST, facts=facts)
    renamed = dict(HOST, facts=dict(facts, hostname="node2"))          # an identical twin node
    verdict = compare.compare(side(BASE, host=a), side(BASE, "r2", host=renamed), RULE).cells[0].verdict
    assert verdict == compare.UNCHANGED
    upgraded = dict(HOST, facts=dict(facts, os={"kernel": "6.8.0"}))
    cell = compare.compare(side(BASE, host=a), side(BASE, "r2", host=upgraded), RULE).cells[0]
    assert cell.verdict == compare.NOT_COMPARABLE
    assert cell.notes == ["host differs: kernel '6.1.0' -> '6.8.0'"]


def test_a_slower_calibration_sentinel_points_at_the_machine():
    facts = {"cpu": {"model": "Xeon", "sockets": 1, "cores": 2, "threads": 2, "isa": ["avx2", "fma"]},
             "numa_nodes": 1, "memory_mb": 24105, "os": {"kernel": "6.1.0"}, "gpus": []}
    base = side(BASE, host=dict(HOST, facts=facts))      # a host record that lists its instruction set
    base["cells"]["detbench-trainer/retinanet/fp32/local/1/1"] = copy.deepcopy(base["cells"][KEY])
    cand = copy.deepcopy(base)
    cand["run"]["id"] = "r2"
    for cell in cand["cells"].values():
        cell["throughput"] = scaled(BASE, 0.9)
    result = compare.compare(base, cand, RULE)
    assert [c.verdict for c in result.cells] == [compare.REGRESSION, compare.REGRESSION]
    assert result.notes == ["the calibration sentinel %s slowed down too: its true speed is fixed, so suspect "
                            "the machine or the harness before the code" % KEY]
    assert compare.compare(base, copy.deepcopy(base), RULE).notes == []
