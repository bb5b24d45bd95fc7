"""The Markdown renderer, checked against the seed's own tables and stored reference text."""
import re
from pathlib import Path

import pytest

from harness.report import markdown, published
from harness.report.model import ITERATION, THROUGHPUT, Column, Entry, Table

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


def table(entries, form=THROUGHPUT):
    return Table(title="local-FP32", platform="local", precision="fp32", gpus=1, nodes=1, batch_per_gpu=2,
                 form=form, columns=[Column("a", "a"), Column("b", "b")], models=["retinanet", "mask_rcnn"],
                 entries=entries, notes=["Measured: something."])


def test_cell_forms_and_flag_footnotes():
    entries = {("retinanet", "a"): Entry(40.0, 50.0, 5.0),
               ("retinanet", "b"): Entry(12.345, 162.0, 30.0, flags=["unstable", "data-bound"]),
               ("mask_rcnn", "a"): Entry(na="needs a GPU"),
               ("mask_rcnn", "b"): Entry(9.96, 200.8, None, flags=["unstable"])}
    expected = (
        "#### local-FP32\n"
        "Throughput in **images/s**, iteration time in parentheses.\n\n"
        "|model|a|b|\n"
        "|-----|---|---|\n"
        "|RetinaNet|40.0(50ms)|12.3(162ms)¹²|\n"
        "|Mask R-CNN w/ FPN|NA³|10.0(201ms)¹|\n\n"
        "¹ unstable: repeats spread more than 7% ((max - min) / min)  \n"
        "² data-bound: data time is more than 10% of iteration time  \n"
        "³ NA: needs a GPU  \n"
        "Measured: something.\n")
    assert markdown.render_table(table(entries)) == expected
    single = markdown.render_table(table(entries, ITERATION))
    assert "|RetinaNet|50ms(5ms)|162ms(30ms)¹²|" in single
    assert "|Mask R-CNN w/ FPN|NA³|201ms(?ms)¹|" in single
    assert re.search(r"^\|model\|a\|b\|$", single, re.M)
