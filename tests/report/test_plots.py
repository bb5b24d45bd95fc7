"""The report's figures hold the bars and points their data call for."""
import struct

import pytest
from matplotlib.container import BarContainer
from matplotlib.patches import Rectangle

from harness.report import plots
from harness.report.model import THROUGHPUT, Column, Entry, Table
from tests.support.entries import detail


def table(columns, entries, models=("retinanet", "faster_rcnn"), gpus=8):
    return Table(title="P2-FP32", platform="P2", precision="fp32", gpus=gpus, nodes=1, batch_per_gpu=2,
                 form=THROUGHPUT, columns=[Column(k, t) for k, t in columns], models=list(models),
                 entries=entries)


def bars(ax):
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() > 0]


def test_grouped_bars_put_frameworks_side_by_side_for_each_model():
    t = table([("simpledet", "SimpleDet"), ("mmdet", "mmdetection"), ("published:simpledet", "SimpleDet (published)")],
              {("retinanet", "simpledet"): Entry(throughput=55.5, iteration_ms=288, detail=detail(ci=(54.0, 56.0))),
               ("retinanet", "mmdet"): Entry(throughput=49.7, iteration_ms=322),
               ("retinanet", "published:simpledet"): Entry(throughput=55.0, iteration_ms=290),
               ("faster_rcnn", "simpledet"): Entry(throughput=62.2, iteration_ms=257),
               ("faster_rcnn", "mmdet"): Entry(na="cannot run"),
               ("faster_rcnn", "published:simpledet"): Entry(throughput=61.0, iteration_ms=262)})
    fig = plots.throughput_bars(t)
    ax = fig.axes[0]
    patches = bars(ax)
    assert len(patches) == 6                                  # 3 columns x 2 models, NA drawn at height 0
    by_x = sorted((round(p.get_x() + p.get_width() / 2, 3), p.get_height()) for p in patches)
    heights = [h for _, h in by_x]
    assert heights == [55.5, 49.7, 55.0, 62.2, 0.0, 61.0]      # model by model, columns in order
    assert all(-0.5 < x < 0.5 for x, _ in by_x[:3]) and all(0.5 < x < 1.5 for x, _ in by_x[3:])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["RetinaNet", "Faster R-CNN w/ FPN"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["SimpleDet", "mmdetection", "SimpleDet (published)"]
    hatched = [p.get_hatch() for p in patches]
    assert hatched.count(plots.PUBLISHED_HATCH) == 2
    assert "NA" in [t.get_text() for t in ax.texts]
    # the published bars share their framework's colour
    colours = {}
    containers = [c for c in ax.containers if isinstance(c, BarContainer)]
    for p, label in zip(containers, ["SimpleDet", "mmdetection", "SimpleDet (published)"]):
        colours[label] = p.patches[0].get_facecolor()[:3]
    assert colours["SimpleDet"] == colours["SimpleDet (published)"] != colours["mmdetection"]


def test_merged_chart_rows_are_model_and_device_count():
    one = table([("calibrate", "calibrate")], {("retinanet", "calibrate"): Entry(throughput=40.0, iteration_ms=50)},
                models=["retinanet"], gpus=1)
    two = table([("calibrate", "calibrate")], {("retinanet", "calibrate"): Entry(throughput=78.0, iteration_ms=51)},
                models=["retinanet"], gpus=2)
    merged, labels = plots.merge_for_chart([two, one], "t")
    ax = plots.throughput_bars(merged, labels).axes[0]
    assert sorted(p.get_height() for p in bars(ax)) == [40.0, 78.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["RetinaNet\n2 devices", "RetinaNet\n1 device"]


def test_scaling_chart_has_a_point_per_device_count_and_the_linear_line():
    eff = {1: 1.0, 2: 0.95, 4: 0.9, 8: 0.8}
    fig = plots.scaling_chart({"simpledet Mask R-CNN": eff, "mmdet Mask R-CNN": {1: 1.0, 8: 0.5}})
    ax = fig.axes[0]
    lines = {l.get_label(): l for l in ax.get_lines()}
    assert list(lines["simpledet Mask R-CNN (8: 80%)"].get_xdata()) == [1, 2, 4, 8]
    assert list(lines["simpledet Mask R-CNN (8: 80%)"].get_ydata()) == pytest.approx([100, 95, 90, 80])
    assert list(lines["mmdet Mask R-CNN (8: 50%)"].get_ydata()) == pytest.approx([100, 50])
    assert list(lines["linear scaling"].get_ydata()) == [100, 100]


def test_peak_memory_has_one_bar_per_configuration():
    ax = plots.peak_memory_chart([("torchvision Faster R-CNN FP32", 7800.0, None),
                                  ("torchvision Faster R-CNN FP16", 4100.0, None)]).axes[0]
    assert [p.get_width() for p in bars(ax)] == [7800.0, 4100.0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["torchvision Faster R-CNN FP32",
                                                            "torchvision Faster R-CNN FP16"]
    assert ax.get_legend() is None                     # nothing logged: no second series to tell apart


def test_peak_memory_puts_the_logged_figure_beside_the_measured_one():
    ax = plots.peak_memory_chart([("a", 3000.0, 2500.0), ("b", 4000.0, None)]).axes[0]
    measured, logged = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [p.get_width() for p in measured] == [3000.0, 4000.0] and [p.get_width() for p in logged] == [2500.0]
    assert logged[0].get_y() > measured[0].get_y()      # just below the measured bar of its row
    assert logged[0].get_y() < measured[1].get_y()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["measured", "the framework's own logged peak"]


def test_iteration_trace_draws_each_trial_and_shades_the_window():
    slow_start = [(i, 0.2 if i <= 3 else 0.05, 0.005, None) for i in range(1, 31)]
    steady = [(i, 0.05, None, None) for i in range(1, 31)]
    ax = plots.iteration_trace("cell", [("repeat 1", slow_start), ("repeat 2", steady)], warmup=5, measure=20).axes[0]
    solid = [l for l in ax.get_lines() if l.get_linestyle() == "-"]
    assert [l.get_label() for l in solid] == ["repeat 1", "repeat 2"]
    assert list(solid[0].get_ydata()[:4]) == pytest.approx([200, 200, 200, 50])
    dotted = [l for l in ax.get_lines() if l.get_linestyle() == ":"]
    assert len(dotted) == 1 and list(dotted[0].get_ydata()) == pytest.approx([5] * 30)  # repeat 2 has no data time
    span = [p for p in ax.patches if p.get_label() == "measured window"][0]
    x0, x1 = span.get_x(), span.get_x() + span.get_width()   # data coordinates (matplotlib >= 3.9)
    assert (x0, x1) == pytest.approx((5.5, 25.5))


def test_data_share_bars_are_percent_of_iteration_time():
    ax = plots.data_share_chart([("a", 50.0, 5.0), ("b", 100.0, 40.0)]).axes[0]
    data, rest = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [p.get_width() for p in data] == pytest.approx([10.0, 40.0])
    assert [p.get_width() for p in rest] == pytest.approx([90.0, 60.0])
    assert [p.get_x() for p in rest] == pytest.approx([10.0, 40.0])


def test_png_bytes_is_a_png_of_the_figure_size():
    png = plots.png_bytes(plots.scaling_chart({"x": {1: 1.0, 2: 0.9}}), dpi=50)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert 250 < width < 600 and 100 < height < 300
