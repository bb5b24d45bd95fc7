"""The regression gate's verdicts rendered: JUnit XML, the Markdown summary and the terminal table."""
import copy
import xml.etree.ElementTree as ET

from harness.report import compare_render
from harness.results import compare
from tests.results.test_compare_rule import BASE, KEY, RULE, scaled, side


def two_cell_result():
    base = side(BASE)
    base["cells"]["calibrate/faster_rcnn/fp32/local/1/1"] = copy.deepcopy(base["cells"][KEY])
    cand = copy.deepcopy(base)
    cand["run"]["id"] = "r2"
    cand["cells"][KEY]["throughput"] = scaled(BASE, 0.9)
    return compare.compare(base, cand, RULE)


def test_junit_has_one_testcase_per_cell_and_fails_regressions():
    root = ET.fromstring(compare_render.junit(two_cell_result()).split("\n", 1)[1])
    assert root.tag == "testsuite" and root.get("tests") == "2" and root.get("failures") == "1"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == {KEY, "calibrate/faster_rcnn/fp32/local/1/1"}
    failure = cases[KEY].find("failure")
    assert failure is not None and failure.get("message").startswith("regression: 100.00 -> 90.00")
    assert cases["calibrate/faster_rcnn/fp32/local/1/1"].find("failure") is None


def test_markdown_summary_names_the_regression():
    md = compare_render.markdown(two_cell_result())
    assert md.startswith("## detbench compare: regression\n")
    assert "FAIL: 1 regression, 1 unchanged (baseline r1, candidate r2" in md
    row = next(line for line in md.splitlines() if line.startswith("| " + KEY))
    cols = [c.strip() for c in row.strip("|").split("|")]
    assert cols[1:4] == ["100.00", "90.00", "0.900 (-10.0%)"] and cols[-1] == "❌ regression"


def test_text_table_lists_every_column():
    out = compare_render.text(two_cell_result())
    header = out.splitlines()[2]
    for column in compare_render.COLUMNS:
        assert column in header
    assert out.startswith("FAIL: 1 regression")
