"""The report's lines on repeats: an adaptive run's repeats per cell and the cells short of the target, and
each bimodal cell's two groups with their medians, in every renderer of the one Report."""

from harness.measure import flags
from harness.report import build, html, markdown, rows
from tests.support.reportstore import store_run

KEYS = ("calibrate/retinanet/fp32/P2/1/1", "calibrate/faster_rcnn/fp32/P2/1/1")


def fill(root, figures, repeats):
    """One run on P2 of two calibrate cells; figures[key] lists each repeat's images/s."""
    return store_run(root, {key: figures[key] for key in KEYS},
                     {"name": "rep", "warmup": 2, "measure": 6, "repeats": repeats})


def report_of(store):
    return build.from_rows(rows.read(store, "P2"), "P2", ci=False)


def notes_of(report):
    return [n for t in report.measured if t.form == "throughput" for n in t.notes]


QUIET = [100.0, 100.1, 99.9, 100.05, 99.95, 100.02]
TWO_GROUPS = [100.0, 90.0, 100.2, 90.1, 99.9, 90.3]


def test_an_adaptive_run_says_how_many_repeats_each_cell_got_and_which_missed_the_target(tmp_path):
    store = fill(tmp_path, {KEYS[0]: QUIET, KEYS[1]: TWO_GROUPS}, {"min": 6, "max": 9, "half_width": 0.01})
    # faster_rcnn: 95% interval of the median [90.0, 100.2] (6 values: the extremes) around 95.1: +-5.36%
    report = report_of(store)
    line = [n for n in notes_of(report) if n.startswith("Repeats (run run-1")]
    assert line == ["Repeats (run run-1, adaptive: 6 to 9 rounds until the 95% interval of each median is within "
                    "+-1%): faster_rcnn calibrate 6, retinanet calibrate 6. Did not reach +-1%: faster_rcnn "
                    "calibrate (+-5.36%)."]
    for text in (markdown.render(report), html.render(report)):
        assert "Did not reach +-1%: faster_rcnn calibrate (+-5.36%)." in text


def test_a_bimodal_cell_is_flagged_with_both_groups_medians(tmp_path):
    store = fill(tmp_path, {KEYS[0]: QUIET, KEYS[1]: TWO_GROUPS}, 6)
    report = report_of(store)
    table = [t for t in report.measured if t.form == "throughput"][0]
    assert flags.BIMODAL in table.entries[("faster_rcnn", "calibrate")].flags
    assert flags.BIMODAL not in table.entries[("retinanet", "calibrate")].flags
    assert "Bimodal faster_rcnn calibrate: two groups of repeats, median 90.1 images/s (3 repeats) and 100 " \
           "images/s (3 repeats)." in notes_of(report)
    assert not any(n.startswith("Repeats (") for n in notes_of(report))    # a fixed count: no line
    for text in (markdown.render(report), html.render(report)):
        assert "bimodal: the repeats fall into two groups" in text and "median 90.1 images/s (3 repeats)" in text


def test_a_store_without_adaptive_repeats_reads_as_before(tmp_path):
    store = fill(tmp_path, {KEYS[0]: QUIET, KEYS[1]: QUIET}, 6)
    assert not any("Repeats (" in n or "Bimodal" in n for n in notes_of(report_of(store)))

