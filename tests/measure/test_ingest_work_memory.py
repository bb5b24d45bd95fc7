"""ingest: work per iteration from DETBENCH_WORK lines, memory peaks from runner.py's telemetry,
and the TrialResult the store writes."""
import json

import pytest

from harness.measure import ingest, work
from harness import jsonlog
from harness.results.store import Store

WARMUP, MEASURE = 2, 4


def trial_folder(tmp_path, lines, telemetry=None):
    (tmp_path / "log.txt").write_text("".join(line + "\n" for line in lines))
    record = {"exit_code": 0, "end_wall": 1.0, "start_mono": 0.0, "end_mono": 1.0}
    if telemetry is not None:
        record["telemetry"] = telemetry
    (tmp_path / "trial.json").write_text(json.dumps(record))
    return str(tmp_path)


def iteration_lines(n, work_of=None):
    """ITER lines of n iterations of 0.5 s, each followed by its WORK line where work_of gives one."""
    out = []
    for i in range(1, n + 1):
        out.append(jsonlog.iter_line(i, 0.5, 0.01, 2))
        if work_of is not None and work_of(i) is not None:
            out.append(jsonlog.work_line(i, **work_of(i)))
    return out


def analyse(folder):
    result = ingest.analyse(folder, "detbench-jsonl", WARMUP, MEASURE, 2)
    assert result.status == "done", result.reason
    return result


def test_work_is_the_mean_over_the_measured_window_only(tmp_path):
    # warmup iterations 1-2 and iteration 7 after the window do far more work: they must not count
    def work_of(i):
        busy = i <= WARMUP or i > WARMUP + MEASURE
        return {"proposals": 4000, "sampled_rois": 1024, "positive_rois": 500 if busy else 40 + i}
    result = analyse(trial_folder(tmp_path, iteration_lines(7, work_of)))
    assert json.loads(result.columns()["work_json"]) == {
        "proposals": 4000, "sampled_rois": 1024, "positive_rois": pytest.approx(sum(40 + i for i in range(3, 7)) / 4)}


def test_work_lines_behind_a_rank_prefix_count_for_rank_0_only(tmp_path):
    lines = iteration_lines(WARMUP + MEASURE)
    for i in range(WARMUP + 1, WARMUP + MEASURE + 1):
        lines.append("[default0]:" + jsonlog.work_line(i, positive_anchors=30))
        lines.append("[default1]:" + jsonlog.work_line(i, positive_anchors=9000))
    result = analyse(trial_folder(tmp_path, lines))
    assert json.loads(result.columns()["work_json"]) == {"positive_anchors": 30}


def test_no_work_lines_or_unreadable_ones_store_nothing(tmp_path):
    lines = iteration_lines(WARMUP + MEASURE) + [
        jsonlog.WORK_PREFIX + "{not json", jsonlog.WORK_PREFIX + '{"iteration": true, "proposals": 5}',
        jsonlog.WORK_PREFIX + '{"iteration": 3, "proposals": -1, "mask_rois": "many"}']
    result = analyse(trial_folder(tmp_path, lines))
    assert result.work is None and result.columns()["work_json"] is None


def test_a_key_missing_in_some_iterations_is_averaged_over_those_that_have_it(tmp_path):
    path = tmp_path / "log.txt"
    path.write_text("\n".join([jsonlog.work_line(3, mask_rois=10), jsonlog.work_line(4),
                               jsonlog.work_line(5, mask_rois=20), jsonlog.work_line(5, mask_rois=30)]) + "\n")
    assert work.window_means(str(path), 3, 6) == {"mask_rois": 20.0}   # iteration 5 counted once, its last line


def summary(**figures):
    base = {"samples": 5}
    base.update({k: {"mean": v / 2, "min": 0.0, "max": v} for k, v in figures.items()})
    return base


@pytest.mark.parametrize("telemetry, rss, device", [
    (summary(tree_rss_mb=2500.0, tree_pss_mb=1900.0), 1900.0, None),   # shared pages once
    (summary(tree_rss_mb=2500.0), 2500.0, None),                      # a kernel without smaps_rollup
    (summary(tree_rss_mb=2500.0, tree_pss_mb=1900.0, tree_device_mb=6100.0), 1900.0, 6100.0),
    (summary(tree_rss_mb=2500.0, tree_device_mb=0.0), 2500.0, None),  # the GPU answered, the trial used none
    (None, None, None),
])
def test_memory_peaks_come_from_the_telemetry_summary(tmp_path, telemetry, rss, device):
    result = analyse(trial_folder(tmp_path, iteration_lines(WARMUP + MEASURE), telemetry))
    assert (result.peak_rss_mb, result.peak_device_mb) == (rss, device)
    assert result.peak_mem_mb is None          # the framework's own figure: these ITER lines carry none


def test_the_store_writes_every_field_of_a_result_and_reads_it_back_column_for_column(tmp_path):
    lines = iteration_lines(WARMUP + MEASURE, lambda i: {"proposals": 100 + i})
    result = ingest.analyse(trial_folder(tmp_path, lines, summary(tree_rss_mb=2500.0)), "detbench-jsonl",
                            WARMUP, MEASURE, 2, settings={"input_size": [800, 1333], "devices": 1})
    assert result.status == "done" and result.window == (WARMUP + 1, WARMUP + MEASURE) and result.exact is True
    key = "calibrate/retinanet/fp32/local/1/1"
    store = Store(tmp_path / "results")
    store.create_run("r", "s", None, "{}", "local", {}, [dict(
        cell_key=key, framework="calibrate", model="retinanet", precision="fp32", platform="local", gpus=1,
        nodes=1, batch_per_gpu=2, images_per_iteration=2, excluded=None)], [(1, key, 1, ["true"])])
    store.finish_trial("r-0001", result)
    [row] = store.trials("r")
    columns = result.columns()
    assert set(row.keys()) - set(columns) == {"id", "run_id", "seq", "cell_key", "repeat", "started", "argv_json"}
    assert {c: row[c] for c in columns} == columns
    # the log prints no DETBENCH_SETTINGS line: the declared settings, marked as such
    assert row["settings_json"] == '{"devices": 1, "input_size": [800, 1333], "settings_source": "declared"}'
    assert json.loads(row["window_json"]) == [WARMUP + 1, WARMUP + MEASURE]
    assert json.loads(row["work_json"]) == {"proposals": 100 + (WARMUP + 1 + WARMUP + MEASURE) / 2}
    assert json.loads(row["telemetry_json"]) == summary(tree_rss_mb=2500.0) and row["peak_rss_mb"] == 2500.0
    assert [tuple(it) for it in store.iterations("r-0001")] == list(result.iterations)
    assert len(result.iterations) == WARMUP + MEASURE
    store.close()


def test_work_comes_from_the_run_the_figure_comes_from_in_a_restarted_log(tmp_path):
    # the first process dies at iteration 5 and a resume starts again from iteration 1: the window
    # 3..6 is the second run's, and the first run's far larger counts of 3..5 must not blend in
    first = iteration_lines(5, lambda i: {"proposals": 9000})
    second = iteration_lines(WARMUP + MEASURE, lambda i: {"proposals": 100 + i})
    result = analyse(trial_folder(tmp_path, first + ["Traceback (most recent call last):"] + second))
    assert json.loads(result.columns()["work_json"]) == {"proposals": 100 + (WARMUP + 1 + WARMUP + MEASURE) / 2}
    assert len(result.iterations) == 5 + WARMUP + MEASURE   # the store still gets every record of both runs


def test_work_lines_of_the_earlier_run_count_when_its_figure_does(tmp_path):
    # the restarted process dies before the window ends: the figure and the work are the first run's
    first = iteration_lines(WARMUP + MEASURE, lambda i: {"proposals": 100 + i})
    second = iteration_lines(3, lambda i: {"proposals": 9000})
    result = analyse(trial_folder(tmp_path, first + second))
    assert json.loads(result.columns()["work_json"]) == {"proposals": 100 + (WARMUP + 1 + WARMUP + MEASURE) / 2}


def test_ingest_keeps_the_records_near_the_window_not_the_whole_log(tmp_path):
    lines = iteration_lines(5000)
    folder = trial_folder(tmp_path, lines)
    scraped = ingest._scrape("detbench-jsonl", folder + "/log.txt", None, (WARMUP + 1, WARMUP + MEASURE), [])
    assert scraped.count == 5000 and len(scraped.iterations) == 5000
    assert len(scraped.records) <= MEASURE + 4 + 2 * 8   # the window, two either side, each run's edges
    result = ingest.analyse(folder, "detbench-jsonl", WARMUP, MEASURE, 2)
    assert result.status == "done" and result.window == (WARMUP + 1, WARMUP + MEASURE) and result.records == 5000


def test_records_of_two_processes_without_rank_prefixes_fail_the_trial_saying_so(tmp_path):
    # two processes print every iteration, each its own time, and nothing tells rank 0's lines
    lines = []
    for i in range(1, WARMUP + MEASURE + 1):
        lines += [jsonlog.iter_line(i, 0.5, 0.01, 2), jsonlog.iter_line(i, 0.7, 0.01, 2)]
    result = ingest.analyse(trial_folder(tmp_path, lines), "detbench-jsonl", WARMUP, MEASURE, 2)
    assert result.status == "failed"
    assert result.reason.startswith("log.txt line 4: records of several processes: iteration 1 on lines 1 and 2")
