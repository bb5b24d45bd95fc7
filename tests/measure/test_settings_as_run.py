"""Settings as run: the DETBENCH_SETTINGS line a framework prints becomes its trial's settings,
and the report compares those and names how each column's framework ran.

The line's producers (the drivers and the bundled trainer) are tested in
tests/drivers/test_rivals_settings.py and tests/trainer/test_settings_line.py.
"""
import json

import pytest

from harness import jsonlog
from harness.measure import ingest
from harness.report import html, markdown
from harness.results import baseline, records
from harness.drivers import asrun
from tests.support.htmlpage import Page
from tests.measure.test_ingest_work_memory import MEASURE, WARMUP, iteration_lines, trial_folder
from tests.report.test_report_fairness import FASTER, TITLES, fill_store, report_of, throughput_table

DECLARED = {"images_per_device": 2, "rpn_post_nms_train": 2000, "threads": "default"}
RAN = {"images_per_device": 2, "rpn_post_nms_train": 1000, "threads": 2}
IMPLEMENTATION = {"roi_align": asrun.ROI_ALIGN_MMCV, "batch_norm": "frozen, BatchNorm2d modules in eval mode",
                  "optimizer": "SGD, per-parameter loop"}


def analyse(folder, settings=DECLARED):
    result = ingest.analyse(folder, "detbench-jsonl", WARMUP, MEASURE, 2, settings=settings)
    assert result.status == "done", result.reason
    return result


def test_a_settings_line_names_only_known_implementation_parts():
    with pytest.raises(ValueError, match="unknown implementation parts"):
        jsonlog.settings_line(RAN, {"kernel": "mine"})


# ------------------------------------------------------------------ ingest

@pytest.mark.parametrize("line", [
    "DETBENCH_SETTINGS {not json", 'DETBENCH_SETTINGS {"settings": []}', "iter 3/8 loss 1.0",
    'DETBENCH_SETTINGS {"settings": {}, "implementation": {"warp_drive": "on"}}',
])
def test_a_line_that_is_not_a_whole_settings_line_parses_to_nothing(line):
    assert jsonlog.parse_settings_line(line) is None


def test_a_settings_line_parses_back_to_what_was_printed():
    settings, implementation = {"lr": 0.01, "clip_grad_norm": 35.0}, {"optimizer": "SGD (fused)"}
    line = jsonlog.settings_line(settings, implementation) + "\n"
    assert jsonlog.parse_settings_line(line) == (settings, implementation)


def test_ingest_takes_the_settings_the_log_printed_over_the_declared_ones(tmp_path):
    lines = ["starting", jsonlog.settings_line(RAN, IMPLEMENTATION)] + iteration_lines(WARMUP + MEASURE)
    result = analyse(trial_folder(tmp_path, lines))
    assert result.settings == dict(RAN, settings_source="logged", implementation=IMPLEMENTATION)
    assert json.loads(result.columns()["settings_json"]) == result.settings


def test_the_first_line_of_rank_0_is_the_one_taken(tmp_path):
    other = dict(RAN, rpn_post_nms_train=5)
    lines = (["[rank1]: " + jsonlog.settings_line(other, {}), "[rank0]: " + jsonlog.settings_line(RAN, {}),
              jsonlog.settings_line(other, {})] + iteration_lines(WARMUP + MEASURE))
    assert analyse(trial_folder(tmp_path, lines)).settings["rpn_post_nms_train"] == 1000


def test_a_log_without_the_line_keeps_the_declared_settings_and_says_so(tmp_path):
    settings = analyse(trial_folder(tmp_path, iteration_lines(WARMUP + MEASURE))).settings
    assert settings == dict(DECLARED, settings_source="declared")


@pytest.mark.parametrize("text,problem", [
    ("{not json", "line 2: the DETBENCH_SETTINGS line is not JSON"),
    ('{"settings": [1]}', "line 2: the DETBENCH_SETTINGS line is not {'settings'"),
    ('{"settings": {}, "implementation": {"kernel": "x"}}', "line 2: the DETBENCH_SETTINGS line is not"),
    ('{"settings": {"settings_source": "logged"}}', "line 2: the settings hold a key reserved for the store"),
])
def test_a_damaged_line_keeps_the_declared_settings_and_names_the_line(tmp_path, text, problem):
    lines = ["starting", jsonlog.SETTINGS_PREFIX + text] + iteration_lines(WARMUP + MEASURE)
    result = analyse(trial_folder(tmp_path, lines))       # the figure stands: only the settings are unknown
    assert result.settings["settings_source"] == "declared" and result.settings["rpn_post_nms_train"] == 2000
    assert problem in result.settings["settings_problem"]


def test_a_log_made_elsewhere_gets_no_settings_from_its_lines(tmp_path):
    lines = [jsonlog.settings_line(RAN, IMPLEMENTATION)] + iteration_lines(WARMUP + MEASURE)
    assert analyse(trial_folder(tmp_path, lines), settings=None).settings is None


def test_a_baseline_compares_settings_only(tmp_path):
    key = "mmdetection/faster_rcnn/fp32/P2/1/1"
    trial = records.trial_of({"id": "r-0001", "run_id": "r", "cell_key": key, "status": "done", "settings_json":
                              json.dumps(dict(RAN, settings_source="logged", implementation=IMPLEMENTATION,
                                              settings_problem="x"))})
    cell = records.cell_of(dict(run_id="r", cell_key=key, framework="mmdetection", model="faster_rcnn",
                                precision="fp32", platform="P2", gpus=1, nodes=1, batch_per_gpu=2,
                                images_per_iteration=2))
    got = baseline.cell_settings(records.scenario("{}"), cell, [trial])
    assert {k: got[k] for k in RAN} == RAN
    assert not set(ingest.NOT_SETTINGS) & set(got)


# ------------------------------------------------------------------ report

def logged(fw, **changes):
    impl = {"roi_align": {"detbench-trainer": asrun.ROI_ALIGN_SPARSE, "torchvision": asrun.ROI_ALIGN_TORCHVISION,
                          "mmdetection": asrun.ROI_ALIGN_MMCV}[fw],
            "optimizer": "SGD, fused kernel" if fw == "detbench-trainer" else "SGD, per-parameter loop",
            "memory_format": asrun.MEMORY_CHANNELS_LAST if fw == "detbench-trainer" else asrun.MEMORY_NCHW}
    return dict(DECLARED, threads=2, settings_source="logged", implementation=impl, **changes)


def two_stage_store(tmp_path, row):
    return fill_store(tmp_path, row, models=("faster_rcnn",))


def test_a_setting_that_ran_differently_is_not_like_for_like_and_each_column_names_its_implementation(tmp_path):
    def row(fw, model, repeat):   # mmdetection declared 2000 but its config kept 1000
        return {"settings": logged(fw, **({"rpn_post_nms_train": 1000} if fw == "mmdetection" else {}))}
    table = throughput_table(two_stage_store(tmp_path, row))
    unlike = [n for n in table.notes if n.startswith("Not like for like")]
    # the implementations and the source differ too, but they are not settings
    assert unlike == ["Not like for like, %s: rpn_post_nms_train differs "
                      "(detbench-trainer 2000, mmdetection 1000, torchvision 2000)." % FASTER]
    [impl] = [n for n in table.notes if n.startswith("Implementation")]
    assert impl == ("Implementation, %s (%s): RoIAlign %s; optimizer SGD, fused kernel; layout channels-last (NHWC) | "
                    "RoIAlign %s; optimizer SGD, per-parameter loop; layout NCHW | RoIAlign %s; optimizer SGD, "
                    "per-parameter loop; layout NCHW."
                    % (FASTER, TITLES, asrun.ROI_ALIGN_SPARSE, asrun.ROI_ALIGN_TORCHVISION, asrun.ROI_ALIGN_MMCV))
    assert not [n for n in table.notes if n.startswith("Settings as declared")]
    report = report_of(two_stage_store(tmp_path / "again", row))
    assert impl in markdown.render(report)
    assert impl in Page(html.render(report)).notes     # as a browser reads the escaped page


def test_the_implementation_line_names_a_rivals_own_script_and_what_was_added_to_it(tmp_path):
    said = "detectron2's own tools/train_net.py; added: hooks: DefaultTrainer.build_hooks wrapped"

    def row(fw, model, repeat):
        run = logged(fw)
        if fw == "mmdetection":
            run["implementation"] = dict(run["implementation"], training_code=said)
        return {"settings": run}
    table = throughput_table(two_stage_store(tmp_path, row))
    [impl] = [n for n in table.notes if n.startswith("Implementation")]
    assert impl.endswith("layout NCHW; training code %s." % said) and impl.count("training code") == 1


def test_a_column_whose_log_printed_no_settings_is_named_and_shows_no_implementation(tmp_path):
    def row(fw, model, repeat):
        if fw == "mmdetection":
            return {"settings": dict(DECLARED, settings_source="declared")}
        return {"settings": logged(fw)}
    table = throughput_table(two_stage_store(tmp_path, row))
    assert "Settings as declared, not as run, %s: mmdetection (no usable DETBENCH_SETTINGS line in the log)." \
        % FASTER in table.notes
    [impl] = [n for n in table.notes if n.startswith("Implementation")]
    assert impl.endswith("| -.")                  # mmdetection is the last column
    unlike = [n for n in table.notes if n.startswith("Not like for like")]
    assert unlike == ["Not like for like, %s: threads differs "
                      "(detbench-trainer 2, mmdetection \"default\", torchvision 2)." % FASTER]


def test_a_store_written_before_settings_were_logged_reads_as_before(tmp_path):
    table = throughput_table(fill_store(tmp_path, lambda fw, model, repeat: {}))
    assert not [n for n in table.notes if n.startswith(("Implementation", "Settings as declared", "Not like"))]


def test_repeats_that_ran_with_different_implementations_are_not_unlike_settings(tmp_path):
    def row(fw, model, repeat):
        s = logged(fw)
        if fw == "torchvision" and repeat == 2:
            s = dict(s, implementation=dict(s["implementation"], optimizer="SGD, foreach"))
        return {"settings": s}
    store = fill_store(tmp_path, row, frameworks=("detbench-trainer", "torchvision"), models=("faster_rcnn",),
                       repeats=2)
    assert not [n for n in throughput_table(store).notes if n.startswith("Not like for like")]


def test_what_ingest_read_from_a_log_is_what_the_report_compares(tmp_path):
    folder = tmp_path / "trial"
    folder.mkdir()
    lines = [jsonlog.settings_line(RAN, IMPLEMENTATION)] + iteration_lines(WARMUP + MEASURE)
    ingested = analyse(trial_folder(folder, lines)).settings     # mmdetection's trial, declared 2000

    def row(fw, model, repeat):
        return {"settings": ingested if fw == "mmdetection" else logged(fw)}
    notes = throughput_table(fill_store(tmp_path / "store", row, models=("faster_rcnn",))).notes
    assert "Not like for like, %s: rpn_post_nms_train differs (detbench-trainer 2000, mmdetection 1000, " \
        "torchvision 2000)." % FASTER in notes
    assert any(n.startswith("Implementation") and n.endswith(
        "RoIAlign %s; BN frozen, BatchNorm2d modules in eval mode; optimizer SGD, per-parameter loop." %
        asrun.ROI_ALIGN_MMCV) for n in notes)
