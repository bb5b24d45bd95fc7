"""Scaling efficiency: throughput on N devices / (N x throughput on 1), as points and Markdown."""
import pytest

from harness.report import markdown, scaling
from harness.report.model import ITERATION, THROUGHPUT, Column, Entry, Table


def test_efficiency_is_throughput_over_n_times_the_single_device_throughput():
    points = scaling.scaling_points([(4, 300.0), (1, 100.0), (2, 190.0), (8, 560.0)])
    assert [p.devices for p in points] == [1, 2, 4, 8]
    assert [p.efficiency for p in points] == pytest.approx([1.0, 0.95, 0.75, 0.70])
    devices, throughput, efficiency = points[2]
    assert (devices, throughput) == (4, 300.0) and efficiency == pytest.approx(0.75)


def test_without_a_single_device_run_the_smallest_run_is_the_baseline():
    points = scaling.scaling_points([(16, 1200.0), (8, 640.0)])
    assert [p.efficiency for p in points] == pytest.approx([1.0, 0.9375])


def test_no_positive_throughput_means_no_efficiency():
    assert [p.efficiency for p in scaling.scaling_points([(1, 0.0), (2, 0.0)])] == [None, None]
    with pytest.raises(ValueError):
        scaling.scaling_points([(0, 1.0)])


def table(gpus, nodes, throughput, form=THROUGHPUT, platform="P2", precision="fp32", na=None):
    entry = Entry(na=na) if na else Entry(throughput=throughput, iteration_ms=1000.0 * 2 * gpus * nodes / throughput)
    return Table(title="t", platform=platform, precision=precision, gpus=gpus, nodes=nodes, batch_per_gpu=2,
                 form=form, columns=[Column("simpledet", "simpledet")], models=["faster_rcnn"],
                 entries={("faster_rcnn", "simpledet"): entry})


def test_series_span_single_node_and_multi_node_cells_of_one_platform():
    tables = [table(1, 1, 20.0), table(1, 1, 20.0, form=ITERATION), table(8, 1, 144.0), table(8, 2, 256.0),
              table(2, 2, 0, na="excluded"), table(4, 1, 76.0, platform="P1")]
    series = scaling.scaling_series(tables)
    assert list(series) == [scaling.SeriesKey("P2", "fp32", 2, "faster_rcnn", "simpledet")]
    rows = series[list(series)[0]]
    assert [(l.nodes, l.gpus, p.devices) for l, p in rows] == [(1, 1, 1), (1, 8, 8), (2, 8, 16)]
    assert [p.efficiency for _, p in rows] == pytest.approx([1.0, 0.9, 0.8])


def test_markdown_table_shows_speedup_and_efficiency():
    text = markdown.scaling_text(scaling.scaling_series([table(1, 1, 20.0), table(2, 1, 36.0), table(8, 2, 256.0)]))
    assert "#### P2-FP32: simpledet Faster R-CNN w/ FPN\n" in text
    assert "Throughput on N devices / (N x throughput on 1 device)." in text
    assert "|1|1x1|20.0|1.00x|100%|\n" in text
    assert "|2|1x2|36.0|1.80x|90%|\n" in text
    assert "|16|2x8|256|12.80x|80%|\n" in text


def test_nothing_is_rendered_for_a_single_device_count():
    assert markdown.scaling_text(scaling.scaling_series([table(1, 1, 20.0), table(1, 1, 22.0, platform="P1")])) == ""


def test_published_columns_are_not_a_series():
    t = table(2, 1, 36.0)
    t.entries[("faster_rcnn", "published:simpledet")] = Entry(throughput=50.0, iteration_ms=80.0)
    series = scaling.scaling_series([table(1, 1, 20.0), t])
    assert [k.framework for k in series] == ["simpledet"]
