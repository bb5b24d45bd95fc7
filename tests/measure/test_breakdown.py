"""ingest: a trial's step breakdown from its DETBENCH_BREAKDOWN lines over the measured window,
against the step and data time its framework logged, and what the store keeps of it."""
import json

import pytest

from harness import jsonlog
from harness.measure import breakdown, ingest

WARMUP, MEASURE = 2, 4


def trial_folder(tmp_path, lines):
    (tmp_path / "log.txt").write_text("".join(line + "\n" for line in lines))
    (tmp_path / "trial.json").write_text(json.dumps({"exit_code": 0, "end_wall": 1.0}))
    return str(tmp_path)


def log(n, phases_of, step_of=lambda i: 0.5, data_s=0.05, first=()):
    """ITER lines of n iterations of 0.5 s (data 0.05 s), each after its BREAKDOWN line, as a
    program prints them: the breakdown at its optimizer step, the iteration's line after it."""
    out = list(first)
    for i in range(1, n + 1):
        phases = phases_of(i)
        if phases is not None:
            out.append(jsonlog.breakdown_line(i, step_of(i), phases))
        out.append(jsonlog.iter_line(i, 0.5, data_s, 2))
    return out


def analyse(folder):
    result = ingest.analyse(folder, "detbench-jsonl", WARMUP, MEASURE, 2)
    assert result.status == "done", result.reason
    return result


def steady(i):
    if i <= WARMUP:     # the warm-up's first steps are slow: they must not count
        return {"backbone forward": 5.0, "backbone backward": 5.0, "optimizer": 1.0}
    return {"backbone forward": 0.1, "backbone backward": 0.2, "optimizer": 0.05 + 0.01 * (i - WARMUP)}


def test_the_phases_are_window_means_and_data_and_rest_close_the_measured_step(tmp_path):
    result = analyse(trial_folder(tmp_path, log(WARMUP + MEASURE + 1, steady)))
    got = result.breakdown
    assert got["iterations"] == MEASURE and got["mismatch"] is None and got["idle"] == []
    assert got["phases"] == pytest.approx({
        "backbone forward": 0.1, "backbone backward": 0.2, "optimizer": 0.075, "data": 0.05, "rest": 0.075})
    assert breakdown.phase_sum(got) == pytest.approx(got["step_s"]) == pytest.approx(0.5)
    stored = json.loads(result.columns()["breakdown_json"])
    assert stored == json.loads(json.dumps(got))


def test_a_hooked_step_off_the_measured_one_by_more_than_3_percent_is_named(tmp_path):
    result = analyse(trial_folder(tmp_path, log(WARMUP + MEASURE, steady, step_of=lambda i: 0.514)))
    assert result.breakdown["mismatch"] is None      # off by 2.8%
    result = analyse(trial_folder(tmp_path, log(WARMUP + MEASURE, steady, step_of=lambda i: 0.55)))
    assert result.breakdown["mismatch"] == "the hooks timed a 0.55 s step against the 0.5 s measured (+10.0%)"


def test_phases_adding_up_to_more_than_the_step_are_named(tmp_path):
    def heavy(i):
        return {"backbone forward": 0.3, "backbone backward": 0.3}
    result = analyse(trial_folder(tmp_path, log(WARMUP + MEASURE, heavy)))
    assert result.breakdown["mismatch"] == "the phases add up to 0.65 s, more than the 0.5 s step"
    assert result.breakdown["phases"]["rest"] == 0.0


def test_a_named_phase_that_never_ran_is_idle_and_left_out(tmp_path):
    def without_mask(i):
        return dict(steady(i), **{"mask head forward": 0.0, "mask head backward": 0.0})
    got = analyse(trial_folder(tmp_path, log(WARMUP + MEASURE, without_mask))).breakdown
    assert got["idle"] == ["mask head"] and "mask head forward" not in got["phases"]


def test_a_hook_that_could_not_attach_keeps_the_trials_figures(tmp_path):
    why = "detectron2 mask_rcnn: no submodule 'roi_heads.mask_head' in the GeneralizedRCNN model"
    lines = log(WARMUP + MEASURE, lambda i: None, first=[jsonlog.breakdown_error_line(why)])
    result = analyse(trial_folder(tmp_path, lines))
    assert result.breakdown == {"error": why}
    assert result.throughput == pytest.approx(4.0)


def test_no_breakdown_lines_store_nothing_and_lines_outside_the_window_are_named(tmp_path):
    assert analyse(trial_folder(tmp_path, log(WARMUP + MEASURE, lambda i: None))).breakdown is None
    only_warmup = analyse(trial_folder(tmp_path, log(WARMUP + MEASURE, lambda i: steady(i) if i <= WARMUP else None)))
    assert only_warmup.breakdown == {"error": "no DETBENCH_BREAKDOWN line in the measured iterations 3-6"}


def test_unreadable_breakdown_lines_are_skipped(tmp_path):
    lines = log(WARMUP + MEASURE, steady) + [jsonlog.BREAKDOWN_PREFIX + "{not json",
                                             jsonlog.BREAKDOWN_PREFIX + '{"iteration": 4, "step_s": -1, "phases": {}}']
    got = analyse(trial_folder(tmp_path, lines)).breakdown
    assert got["iterations"] == MEASURE and got["phases"]["backbone forward"] == pytest.approx(0.1)
