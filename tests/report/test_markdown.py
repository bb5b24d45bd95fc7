"""The Markdown renderer, checked against the seed's own tables and stored reference text."""
import re
from pathlib import Path

import pytest

from harness.report import markdown, published
from harness.report.model import ITERATION, THROUGHPUT, Column, Entry, Table
from tests.support.entries import detail

REF = Path(__file__).resolve().parents[1] / "reference"
MARKS = "".join(markdown.MARKS)


def parse_tables(text):
    """{title: {row title: [cell, ...]}} with footnote marks and spacing removed."""
    tables, title = {}, None
    for line in text.splitlines():
        if line.startswith("#### "):
            title = line[5:].strip()
            tables[title] = {}
        elif line.startswith("|") and title and not line.startswith("|model") and not line.startswith("|-"):
            cells = [c.strip().rstrip(MARKS) for c in line.strip().strip("|").split("|")]
            tables[title][cells[0]] = cells[1:]
    return tables


def test_published_tables_reproduce_the_seed_cell_for_cell():
    seed = parse_tables((REF / "seed_benchmark_tables.md").read_text())
    pub = published.load("simpledet-benchmark")
    rendered = parse_tables(markdown.render_tables(published.tables(pub)))
    assert list(rendered) == list(seed) == ["P1-FP32", "P2-FP32", "P2-FP16(Mixed Precision)", "P2-FP32-1card"]
    assert rendered == seed


@pytest.mark.parametrize("platform", ["P1", "P2"])
def test_published_rendering_matches_reference_text(platform):
    pub = published.load("simpledet-benchmark")
    assert markdown.render_tables(published.tables(pub, platform)) == (REF / ("published_%s.md" % platform)).read_text()


def test_na_reason_is_a_footnote():
    pub = published.load("simpledet-benchmark")
    text = markdown.render_tables([t for t in published.tables(pub, "P2") if t.precision == "fp16"])
    assert "|RetinaNet|72.5(221ms)|46.8(342ms)|NA¹|" in text
    assert "¹ NA: RetinaNet in FP16 is not supported by maskrcnn-benchmark@24c8c9" in text


def table(entries, form=THROUGHPUT, notes=("Measured: something.",), details=()):
    return Table(title="local-FP32", platform="local", precision="fp32", gpus=1, nodes=1, batch_per_gpu=2,
                 form=form, columns=[Column("a", "a"), Column("b", "b")], models=["retinanet", "mask_rcnn"],
                 entries=entries, notes=list(notes), details=list(details))


def measured(throughput, iteration_ms, data_ms, spread=0.01, flags=()):
    """A measured cell whose repeats lie within `spread` of its figure."""
    return Entry(throughput, iteration_ms, data_ms, flags=list(flags),
                 detail=detail(minimum=throughput * (1 - spread), maximum=throughput * (1 + spread)))


def test_cell_forms_flag_footnotes_and_a_verdict_per_row():
    entries = {("retinanet", "a"): measured(40.0, 50.0, 5.0),
               ("retinanet", "b"): measured(12.345, 162.0, 30.0, flags=["unstable", "data-bound"]),
               ("mask_rcnn", "a"): Entry(na="needs a GPU"),
               ("mask_rcnn", "b"): measured(0.8071, 2478.4, None, flags=["unstable"])}
    expected = (
        "#### local-FP32\n"
        "Throughput in **images/s**, iteration time in parentheses.\n\n"
        "|model|a|b|\n"
        "|-----|---|---|\n"
        "|RetinaNet|40.0(50.0ms)|12.3(162ms)¹²|\n"
        "|Mask R-CNN w/ FPN|NA³|0.807(2478ms)¹|\n\n"
        "¹ unstable: repeats spread more than 7% ((max - min) / min)  \n"
        "² data-bound: data time is more than 10% of iteration time  \n"
        "³ NA: needs a GPU  \n"
        "Verdict, RetinaNet: a 40.0 images/s; 3.24x b.  \n"
        "Verdict, Mask R-CNN w/ FPN: b 0.807 images/s, the only one measured.  \n"
        "Measured: something.\n")
    assert markdown.render_table(table(entries)) == expected
    single = markdown.render_table(table(entries, ITERATION))
    assert "|RetinaNet|50.0ms(5.00ms)|162ms(30.0ms)¹²|" in single
    assert "|Mask R-CNN w/ FPN|NA³|2478ms(?ms)¹|" in single
    assert "Verdict" not in single   # the single-card form repeats the throughput table's cells
    assert re.search(r"^\|model\|a\|b\|$", single, re.M)


def test_a_published_cell_keeps_its_source_s_form_beside_measured_ones():
    entries = {("retinanet", "a"): measured(0.8071, 2478.4, 3.0), ("retinanet", "b"): Entry(36.0, 445.0, 40.0)}
    text = markdown.render_table(table(entries))
    assert "|RetinaNet|0.807(2478ms)|36.0(445ms)|" in text
    assert "Verdict, RetinaNet: a 0.807 images/s, the only one measured." in text   # published is no rival here
    assert "|RetinaNet|2478ms(3.00ms)|445ms(40ms)|" in markdown.render_table(table(entries, ITERATION))


def test_columns_whose_repeats_overlap_are_level_not_ranked():
    entries = {("retinanet", "a"): measured(10.2, 196.0, 1.0, spread=0.03),
               ("retinanet", "b"): measured(10.0, 200.0, 1.0, spread=0.03)}
    text = markdown.render_table(table(entries))
    assert "Verdict, RetinaNet: a 10.2 images/s; level with b (repeats overlap)." in text


def test_detail_notes_are_left_out_only_when_asked():
    entries = {("retinanet", "a"): measured(40.0, 50.0, 5.0)}
    notes = ["Measured: 1 device.", "Implementation, RetinaNet: a: RoIAlign x.", "Compute: 1%.", "Place: none."]
    shown = table(entries, notes=notes, details=[notes[0], notes[1], notes[3]])
    brief = markdown.render_table(shown, details=False)
    assert brief.endswith("Verdict, RetinaNet: a 40.0 images/s, the only one measured.  \nCompute: 1%.\n")
    assert not any(n in brief for n in (notes[0], notes[1], notes[3]))
    full = markdown.render_table(shown)
    assert full.endswith("the only one measured.  \n" + "  \n".join(notes) + "\n")
