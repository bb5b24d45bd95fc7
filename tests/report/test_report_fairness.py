"""What the report says about fairness: settings per model row, how exact each column's
figure is, the work each framework did per iteration, and memory measured one way.

Every table here comes from a store whose rows the test writes itself.
"""
import dataclasses
import json

import pytest

from harness.vocab import catalog
from harness.measure import flags, work
from harness.measure.result import TrialResult
from harness.frameworks import FRAMEWORKS as SPECS
from harness.report import build, export, figures, html, markdown, plots, rows
from harness.results.store import Store

FRAMEWORKS = ("detbench-trainer", "torchvision", "mmdetection")
MODELS = ("retinanet", "faster_rcnn", "mask_rcnn")
TITLES = " | ".join(SPECS[fw].title for fw in FRAMEWORKS)
FASTER, MASK = catalog.model_title("faster_rcnn"), catalog.model_title("mask_rcnn")
BASE_SETTINGS = {"images_per_device": 2, "rpn_post_nms_top_n": 2000, "frozen_bn": True}


def fill_store(root, trial_row, frameworks=FRAMEWORKS, models=MODELS, repeats=1, warmup=2, measure=6):
    """One run on P2 (fp32, one device, batch 2): a cell per framework x model, `repeats` trials
    each, finished with trial_row(framework, model, repeat) replacing fields of a plain done result."""
    store = Store(root)
    cells = [dict(cell_key="%s/%s/fp32/P2/1/1" % (fw, m), framework=fw, model=m, precision="fp32", platform="P2",
                  gpus=1, nodes=1, batch_per_gpu=2, images_per_iteration=2, excluded=None)
             for fw in frameworks for m in models]
    trials = [(i + 1, c["cell_key"], rep, ["true"]) for i, (rep, c) in enumerate(
        [(r, c) for r in range(1, repeats + 1) for c in cells])]
    scenario = json.dumps({"name": "fair", "warmup": warmup, "measure": measure})
    store.create_run("run-1", "fair", "s.yaml", scenario, "local", {}, cells, trials)
    for t in store.trials("run-1"):
        fw, model = t["cell_key"].split("/")[:2]
        result = TrialResult(status="done", throughput=2 / 0.5, observed=2 / 0.5, iteration_time_s=0.5,
                             data_time_s=0.01, exact=True, figure_kind="exact", window=(warmup + 1, warmup + measure),
                             records=warmup + measure, settings=BASE_SETTINGS)
        store.finish_trial(t["id"], dataclasses.replace(result, **trial_row(fw, model, t["repeat"])))
    return store


def report_of(store):
    return build.from_rows(rows.read(store, "P2"), "P2", ci=False)


def throughput_table(store):
    return [t for t in report_of(store).measured if t.form == "throughput"][0]


def cell_flags(table, model, fw):
    return table.entries[(model, fw)].flags


# ------------------------------------------------------------------ settings, per model row

def test_settings_are_compared_in_every_model_row_and_the_line_names_the_model(tmp_path):
    def row(fw, model, repeat):   # mmdetection keeps 1000 proposals for the two-stage models only
        if fw == "mmdetection" and model != "retinanet":
            return {"settings": dict(BASE_SETTINGS, rpn_post_nms_top_n=1000)}
        return {}
    notes = throughput_table(fill_store(tmp_path, row)).notes
    unlike = [n for n in notes if n.startswith("Not like for like")]
    assert unlike == [
        "Not like for like, %s: rpn_post_nms_top_n differs "
        "(detbench-trainer 2000, mmdetection 1000, torchvision 2000)." % FASTER,
        "Not like for like, %s: rpn_post_nms_top_n differs "
        "(detbench-trainer 2000, mmdetection 1000, torchvision 2000)." % MASK]


def test_repeats_that_ran_with_different_settings_are_named(tmp_path):
    def row(fw, model, repeat):
        if fw == "torchvision" and repeat == 2:
            return {"settings": dict(BASE_SETTINGS, frozen_bn=False)}
        return {}
    store = fill_store(tmp_path, row, frameworks=("detbench-trainer", "torchvision"), models=("retinanet",),
                       repeats=2)
    unlike = [n for n in throughput_table(store).notes if n.startswith("Not like for like")]
    assert unlike == ["Not like for like, RetinaNet: frozen_bn differs "
                      "(detbench-trainer true, torchvision true / false across repeats)."]


def test_equal_settings_give_no_line(tmp_path):
    notes = throughput_table(fill_store(tmp_path, lambda fw, m, r: {})).notes
    assert not [n for n in notes if n.startswith("Not like for like") or n.startswith("Not compared")]


def test_a_setting_only_some_frameworks_logged_is_named_as_not_compared(tmp_path):
    def row(fw, model, repeat):   # only two of the three say how they decay the rate
        if fw != "mmdetection" and model == "faster_rcnn":
            return {"settings": dict(BASE_SETTINGS, lr_decay="x0.1 at 800")}
        return {}
    notes = throughput_table(fill_store(tmp_path, row)).notes
    assert [n for n in notes if n.startswith("Not compared")] == [
        "Not compared, %s: lr_decay, logged by detbench-trainer, torchvision only." % FASTER]
    assert not [n for n in notes if n.startswith("Not like for like")]     # silence is not a difference


# ------------------------------------------------------------------ how exact each figure is

def test_each_column_says_how_its_figure_was_taken_and_where_its_window_widened(tmp_path):
    def row(fw, model, repeat):
        if fw == "mmdetection":   # stands in for a cumulative log printed every 20th iteration
            return {"figure_kind": "exact-cumulative", "window": (1, 20)}
        return {}
    table = throughput_table(fill_store(tmp_path, row, warmup=2, measure=15))
    line = [n for n in table.notes if n.startswith("Figures: ")]
    assert line == ["Figures: %s, torchvision: %s; mmdetection: %s (window widened to 1..20)."
                    % (SPECS["detbench-trainer"].title, figures.kind_text("exact"),
                       figures.kind_text("exact-cumulative"))]
    assert not any(flags.WINDOW_APPROXIMATE in e.flags for e in table.entries.values())   # both kinds are exact


def test_a_window_that_shrank_is_said_narrowed_and_a_figure_bounded_over_a_tenth_percent_not_exact(tmp_path):
    def row(fw, model, repeat):
        if fw == "mmdetection":   # a dllogger epoch's first ten batches in no running mean: 1011..2000 of 1001..2000
            return {"figure_kind": "exact-cumulative", "window": (1011, 2000), "exact": False}
        if fw == "torchvision":   # a running-mean difference of 4-decimal means, bounded to +-3.7%
            return {"figure_kind": "exact-cumulative", "exact": False}
        if fw == "detbench-trainer":   # windows moved to the records' edges
            return {"figure_kind": "exact-cumulative", "window": (991, 1990), "exact": False}
        return {}
    table = throughput_table(fill_store(tmp_path, row, frameworks=("detbench-trainer", "mmdetection", "torchvision"),
                                        warmup=1000, measure=1000))
    [line] = [n for n in table.notes if n.startswith("Figures: ")]
    bounded = figures.kind_text("exact-cumulative", exact=False)
    assert bounded.startswith("not exact (bounded to over 0.1% by the printed digits, or over another window): ")
    assert "exact: " not in line.replace("not exact (", "")
    assert "mmdetection: %s (window narrowed to 1011..2000)" % bounded in line
    assert "torchvision: %s" % bounded in line and "widened" not in line
    assert "%s: %s (window moved to 991..1990)" % (SPECS["detbench-trainer"].title, bounded) in line


@pytest.mark.parametrize("kind, exact, approximate", [
    ("exact", 1, False), ("exact-cumulative", 1, False), ("window-median", 1, True),
    ("global-mean", 0, True), ("throughput", 0, True), (None, 0, True), (None, 1, False)])
def test_the_approximate_flag_keys_on_the_figure_kind(tmp_path, kind, exact, approximate):
    store = fill_store(tmp_path, lambda fw, m, r: {"figure_kind": kind, "exact": bool(exact)},
                       frameworks=("torchvision",), models=("retinanet",))
    assert (flags.WINDOW_APPROXIMATE in cell_flags(throughput_table(store), "retinanet", "torchvision")) is approximate


def test_a_trial_stored_before_figure_kinds_shows_its_adapters_words(tmp_path):
    store = fill_store(tmp_path, lambda fw, m, r: {"figure_kind": None, "window": None},
                       frameworks=("torchvision",), models=("retinanet",))
    from harness.frameworks import FRAMEWORKS
    assert "Figures: torchvision: %s." % FRAMEWORKS["torchvision"].figures in throughput_table(store).notes


# ------------------------------------------------------------------ work per iteration

def work_row(proposals, positives):
    return {"work": {"proposals": proposals, "sampled_rois": 1024.0, "positive_rois": positives}}


@pytest.mark.parametrize("apart, flagged", [(0.04, False), (0.06, True)])
def test_unequal_work_flags_a_row_whose_frameworks_differ_by_more_than_5_percent(tmp_path, apart, flagged):
    def row(fw, model, repeat):
        positives = 100.0 * (1 + apart) if fw == "mmdetection" else 100.0
        return work_row(4000.0, positives) if model == "faster_rcnn" else work_row(4000.0, 100.0)
    table = throughput_table(fill_store(tmp_path, row))
    for fw in FRAMEWORKS:
        assert (flags.UNEQUAL_WORK in cell_flags(table, "faster_rcnn", fw)) is flagged
        assert flags.UNEQUAL_WORK not in cell_flags(table, "retinanet", fw)
    assert ("Work per iteration, %s (%s): proposals 4000 | 4000 | 4000; sampled RoIs 1024 | 1024 | 1024; "
            "positive RoIs 100 | 100 | %s." % (FASTER, TITLES, "%.0f" % (100 * (1 + apart)))) in table.notes
    text = markdown.render_table(table)
    assert ("unequal work: the frameworks of this row differ" in text) is flagged
    assert (flags.text(flags.UNEQUAL_WORK) in text) is flagged


def test_work_is_the_median_over_repeats_and_a_column_without_work_shows_a_dash(tmp_path):
    def row(fw, model, repeat):
        if fw == "mmdetection":
            return {}
        return work_row(4000.0, {1: 60.0, 2: 62.5, 3: 90.0}[repeat])
    table = throughput_table(fill_store(tmp_path, row, models=("faster_rcnn",), repeats=3))
    assert ("Work per iteration, %s (%s): proposals 4000 | 4000 | -; sampled RoIs 1024 | 1024 | -; "
            "positive RoIs 62.5 | 62.5 | -." % (FASTER, TITLES)) in table.notes
    assert not any(flags.UNEQUAL_WORK in e.flags for e in table.entries.values())


# ------------------------------------------------------------------ data drawn per trial

def drawn_row(views, flips, epochs=1.0, draws=12.0):
    window = {"views": views, "flips": flips, "draws": draws, "epochs": epochs, "images_per_iteration": 2.0}
    return {"drawn": {"window": window, "trial": dict(window, views=views + 4, draws=draws + 4)}}


@pytest.mark.parametrize("views, flagged", [(1960.0, False), (1080.0, True)])
def test_unequal_data_flags_a_row_whose_frameworks_drew_differently(tmp_path, views, flagged):
    # over 2000 draws, torchvision's distinct views 2% below the others' (within 5%) or near half of
    # them (a flip fixed per image gives fewer): far beyond what redrawn coins differ by
    def row(fw, model, repeat):
        mine = views if fw == "torchvision" and model == "mask_rcnn" else 2000.0
        return drawn_row(mine, 1000.0, draws=2000.0)
    table = throughput_table(fill_store(tmp_path, row))
    for fw in FRAMEWORKS:
        assert (flags.UNEQUAL_DATA in cell_flags(table, "mask_rcnn", fw)) is flagged
        assert flags.UNEQUAL_DATA not in cell_flags(table, "faster_rcnn", fw)
    line = [n for n in table.notes if n.startswith("Data drawn per trial, %s (%s): " % (MASK, TITLES))]
    assert line and "measured window: distinct views 2000 | %s | 2000; flips 1000 | 1000 | 1000" % work.number(
        views) in line[0]
    assert "whole trial: distinct views 2004 | %s | 2004" % work.number(views + 4) in line[0]
    assert (flags.text(flags.UNEQUAL_DATA) in markdown.render_table(table)) is flagged


@pytest.mark.parametrize("flips, flagged", [(108.0, False), (60.0, True)])
def test_flips_drawn_by_each_framework_are_flagged_only_beyond_chance(tmp_path, flips, flagged):
    # 200 draws each with a fair coin: 100 against 108 mirrored is 8% apart but well within what two
    # coins differ by (sd 10 for the difference); 60 is 4 such sds away
    def row(fw, model, repeat):
        mine = flips if fw == "torchvision" else 100.0
        return drawn_row(200.0, mine, draws=200.0)
    table = throughput_table(fill_store(tmp_path, row, models=("retinanet",)))
    assert (flags.UNEQUAL_DATA in cell_flags(table, "retinanet", "torchvision")) is flagged


def test_a_framework_that_logged_no_data_lines_is_not_observed_and_never_flagged(tmp_path):
    # an imported log or an older one: no DETBENCH_DATA lines, so no summary; the others agree
    def row(fw, model, repeat):
        return {} if fw == "mmdetection" else drawn_row(12.0, 6.0, epochs=0.0)
    table = throughput_table(fill_store(tmp_path, row, models=("retinanet",)))
    assert not any(flags.UNEQUAL_DATA in e.flags for e in table.entries.values())
    line = [n for n in table.notes if n.startswith("Data drawn per trial")]
    assert "distinct views 12 | 12 | -" in line[0] and "epochs started 0 | 0 | -" in line[0]


def test_epochs_started_differ_is_a_flag(tmp_path):
    def row(fw, model, repeat):
        return drawn_row(12.0, 6.0, epochs=2.0 if fw == "detbench-trainer" else 1.0)
    table = throughput_table(fill_store(tmp_path, row, models=("retinanet",)))
    assert all(flags.UNEQUAL_DATA in e.flags for e in table.entries.values())


def test_exports_carry_what_each_cell_drew(tmp_path):
    store = fill_store(tmp_path, lambda fw, model, repeat: drawn_row(12.0, 6.0), frameworks=("torchvision",),
                       models=("retinanet",))
    doc = json.loads(export.render_json(report_of(store)))
    assert doc["cells"][0]["drawn"]["window"]["views"] == 12.0 and doc["cells"][0]["drawn"]["trial"]["views"] == 16.0
    assert json.loads(doc["trials"][0]["drawn_json"])["window"]["flips"] == 6.0


def test_the_report_has_words_for_every_count_a_work_line_may_carry():
    from harness import jsonlog
    assert list(work.LABELS) == list(jsonlog.WORK_KEYS)


def test_unequal_keys_is_spread_over_median():
    assert flags.unequal_keys([{"proposals": 100.0}, {"proposals": 104.0}, {"proposals": 100.0}]) == []
    assert flags.unequal_keys([{"proposals": 100.0}, {"proposals": 106.0}, {"proposals": 100.0}]) == ["proposals"]
    assert flags.unequal_keys([{"proposals": 100.0}, None, {"positive_rois": 5.0}]) == []   # nothing to compare
    assert flags.unequal_keys([{"mask_rois": 0.0}, {"mask_rois": 3.0}]) == ["mask_rois"]


def test_exports_carry_figure_work_and_memory(tmp_path):
    def row(fw, model, repeat):
        return dict(work_row(4000.0, 61.0), peak_rss_mb=2100.0, peak_mem_mb=None)
    store = fill_store(tmp_path, row, frameworks=("torchvision",), models=("faster_rcnn",))
    doc = json.loads(export.render_json(report_of(store)))
    cell, trial = doc["cells"][0], doc["trials"][0]
    assert doc["schema_version"] == 2
    assert cell["figure_kinds"] == ["exact"] and cell["figure"] == figures.kind_text("exact")
    assert cell["work"] == {"proposals": 4000.0, "sampled_rois": 1024.0, "positive_rois": 61.0}
    assert cell["peak_rss_mb"] == 2100.0 and cell["peak_device_mb"] is None
    assert trial["figure_kind"] == "exact" and json.loads(trial["work_json"])["positive_rois"] == 61.0
    csv = export.render_csv(report_of(store))
    header, first = csv.splitlines()[:2]
    assert "figure_kinds" in header.split(",") and '""positive_rois"": 61.0' in first


# ------------------------------------------------------------------ memory, one way for all

def test_memory_chart_has_one_bar_per_framework_from_telemetry(tmp_path):
    rss = {"detbench-trainer": 2100.0, "torchvision": 2600.0, "mmdetection": 3300.0}

    def row(fw, model, repeat):   # only the bundled trainer logs its own peak
        return {"peak_rss_mb": rss[fw] + repeat, "peak_mem_mb": 1800.0 if fw == "detbench-trainer" else None}
    store = fill_store(tmp_path, row, models=("retinanet",), repeats=2)
    cells = sorted(store.cells(platform="P2"), key=lambda c: c["framework"])
    [(title, _, items)] = html.memory_series(build.memory_rows(rows.read(store, "P2"), cells))
    assert title == "Peak resident memory of the trial's process tree"
    assert items == [("detbench-trainer RetinaNet FP32 1x1", 2102.0, 1800.0),
                     ("mmdetection RetinaNet FP32 1x1", 3302.0, None),
                     ("torchvision RetinaNet FP32 1x1", 2602.0, None)]
    ax = plots.peak_memory_chart(items, title).axes[0]
    measured_colour = pytest.approx((0x4C / 255, 0x72 / 255, 0xB0 / 255))
    measured_bars = [p for p in ax.patches if p.get_facecolor()[:3] == measured_colour]
    assert [p.get_width() for p in measured_bars] == [2102.0, 3302.0, 2602.0]
    assert len(ax.patches) == 4                          # and one bar for the one logged figure
    assert [t.get_text() for t in ax.get_yticklabels()] == [label for label, _, _ in items]


def test_device_memory_is_charted_when_a_gpu_was_used_and_resident_memory_beside_it(tmp_path):
    def row(fw, model, repeat):
        return {"peak_rss_mb": 3000.0, "peak_device_mb": {"torchvision": 5200.0, "mmdetection": 6100.0}[fw],
                "peak_mem_mb": 4900.0 if fw == "torchvision" else None}
    store = fill_store(tmp_path, row, frameworks=("torchvision", "mmdetection"), models=("retinanet",))
    series = html.memory_series(build.memory_rows(rows.read(store, "P2"), store.cells(platform="P2")))
    assert [(title, [i[1:] for i in items]) for title, _, items in series] == [
        ("Peak device memory of the trial's processes", [(5200.0, 4900.0), (6100.0, None)]),
        ("Peak resident memory of the trial's process tree", [(3000.0, None), (3000.0, None)])]
