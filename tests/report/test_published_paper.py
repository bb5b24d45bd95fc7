"""The SimpleDet paper's Table 1 as published figures: speed row, feature rows, notes, bad input."""
import pytest

from harness.errors import UserError
from harness.report import markdown, published
from harness.report.model import Table

NAME = "simpledet-paper"
ORDER = ["detectron", "tensorpack", "mmdetection", "maskrcnn-benchmark", "simpledet"]
FEATURES = {
    "FasterRCNN": ["✓", "✓", "✓", "✓", "✓"],
    "MaskRCNN": ["✓", "✓", "✓", "✓", "✓"],
    "RetinaNet": ["✓", "✗", "✓", "✓", "✓"],
    "Other Models": ["few", "few", "lots", "few", "some"],
    "Cross-GPU BN": ["✗", "✓", "✓", "✗", "✓"],
    "Mixed Precision Training": ["✗", "✗", "✓", "✓", "✓"],
    "Distributed Training": ["✗", "✓", "✓", "✗", "✓"],
    "Memory Checkpointing": ["✗", "✗", "✓", "✗", "✓"],
}


def rows_of(text):
    """{first cell: [other cells]} of every Markdown table row but headers and rules."""
    out = {}
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|-"):
            cells = line.strip("|").split("|")
            out[cells[0]] = cells[1:]
    return out


def test_the_paper_file_loads_with_five_frameworks_in_the_papers_order():
    pub = published.load(NAME)
    assert NAME in published.names()
    assert [f.title for f in pub.frameworks.values()] == ORDER
    (table,) = published.tables(pub, "P2")
    assert (table.platform, table.precision, table.gpus, table.batch_per_gpu, table.form) == (
        "P2", "fp32", 8, 2, published.SPEED)
    assert [c.title for c in table.columns] == ORDER
    assert published.tables(pub, "P1") == []


def test_speed_row_renders_the_five_figures_in_order():
    text = markdown.render_tables(published.tables(published.load(NAME)))
    assert "|model|detectron|tensorpack|mmdetection|maskrcnn-benchmark|simpledet|" in text
    assert "|Faster R-CNN w/ FPN|29|29|38|48|54|" in text
    assert text.index("|Faster R-CNN w/ FPN|") < text.index("|feature|")


def test_feature_rows_render_as_a_second_table_in_the_papers_order():
    text = markdown.render_tables(published.tables(published.load(NAME)))
    rows = rows_of(text)
    assert rows["feature"] == ORDER
    assert {k: rows[k] for k in FEATURES} == FEATURES
    names = [line.split("|")[1] for line in text.splitlines()
             if line.split("|")[1:2] and line.split("|")[1] in FEATURES]
    assert names == list(FEATURES)


def test_notes_carry_the_swapped_commits_and_the_inferred_setting():
    text = markdown.render_tables(published.tables(published.load(NAME)))
    assert "tensorpack = cda5fd as printed" in text and "mmdetection = d71184 as printed" in text
    note = [line for line in text.splitlines() if line.startswith("Commit note:")]
    assert len(note) == 1
    for words in ("cda5fd under tensorpack", "d71184 under mmdetection",
                  "d71184c41e622ba68d7028bc9d7e6c7fee2be8e2", "2019-08-31", "mmdetection@cda5fd"):
        assert words in note[0]
    assert "inferred" in text
    # notes end the table: every line but the last ends with a Markdown hard break
    tail = text.rstrip("\n").split("\n\n")[-1].splitlines()
    assert tail[0].startswith("Published in SimpleDet paper") and tail[-1] == note[0]
    assert all(line.endswith("  ") for line in tail[:-1]) and not tail[-1].endswith(" ")


def test_cli_renders_the_paper_table_without_results(tmp_path):
    from click.testing import CliRunner

    from harness.cli import main
    out = CliRunner().invoke(main, ["report", "--platform", "P2", "--published", NAME,
                                    "--results", str(tmp_path / "none")])
    assert out.exit_code == 0, out.output
    assert out.output.startswith("### Published: simpledet-paper\n\n#### Paper Table 1\n")
    assert "|Faster R-CNN w/ FPN|29|29|38|48|54|" in out.output


def test_tables_without_features_stay_plain_tables():
    for t in published.tables(published.load("simpledet-benchmark")):
        assert type(t) is Table


# ------------------------------------------------------------------ bad input
def bad_copy(tmp_path, old, new):
    text = (published.PUBLISHED_DIR / ("%s.yaml" % NAME)).read_text()
    assert old in text
    (tmp_path / ("%s.yaml" % NAME)).write_text(text.replace(old, new, 1))
    return tmp_path


def line_of(tmp_path, needle):
    lines = (tmp_path / ("%s.yaml" % NAME)).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip().startswith(needle))


@pytest.mark.parametrize("old, new, needle, field, words", [
    ("{detectron: few,", "{detectron: 3,", "{detectron: 3,", "tables.0.features.Other Models.detectron",
     "true, false or a short word"),
    ("{detectron: few,", "{detectron: '',", "{detectron: '',", "tables.0.features.Other Models.detectron",
     "true, false or a short word"),
    ("{detectron: few,", "{detectron: [few],", "{detectron: [few],", "tables.0.features.Other Models.detectron",
     "true, false or a short word"),
    ("{detectron: few,", "{caffe2: few,", "{caffe2: few,", "tables.0.features.Other Models.caffe2",
     "framework 'caffe2' is not listed under frameworks"),
    ("      Other Models:\n", "      Other Models: few\n      Other:\n", "Other Models: few",
     "tables.0.features.Other Models", "dictionary"),
    ("    notes:\n      - >-\n", "    notes:\n      - ''\n      - >-\n", "- ''", "tables.0.notes.0",
     "at least 1 character"),
    ("    notes:\n", "    note:\n", "note:", "tables.0.note", "unknown key"),
    ("    form: speed", "    form: speeds", "form:", "tables.0.form", "'speed'"),
    ("detectron: {throughput: 29}", "detectron: {throughput: 29, iteration_ms: 3}", "detectron: {throughput",
     "tables.0.rows.faster_rcnn.detectron", "throughput alone"),
    ("detectron: {throughput: 29}", "detectron: {data_ms: 3}", "detectron: {data_ms",
     "tables.0.rows.faster_rcnn.detectron", "throughput alone"),
])
def test_bad_input_is_one_located_line(tmp_path, old, new, needle, field, words):
    where = bad_copy(tmp_path, old, new)
    with pytest.raises(UserError) as err:
        published.load(NAME, where)
    message = str(err.value)
    assert "\n" not in message
    path = str(where / ("%s.yaml" % NAME))
    assert message.startswith("%s:%d: %s: " % (path, line_of(where, needle), field)), message
    assert words in message, message


def test_a_na_cell_is_allowed_in_a_speed_table(tmp_path):
    where = bad_copy(tmp_path, "detectron: {throughput: 29}", "detectron: {na: not measured}")
    text = markdown.render_tables(published.tables(published.load(NAME, where)))
    assert "|Faster R-CNN w/ FPN|NA¹|29|38|48|54|" in text
    assert "¹ NA: not measured" in text


def test_a_feature_missing_for_one_framework_renders_a_dash(tmp_path):
    where = bad_copy(tmp_path, "{detectron: few, ", "{")
    text = markdown.render_tables(published.tables(published.load(NAME, where)))
    assert "|Other Models|-|few|lots|few|some|" in text
