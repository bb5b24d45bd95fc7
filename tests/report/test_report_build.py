"""One Report, built once from the store: every renderer is a function of it alone."""
import ast
import dataclasses
from pathlib import Path

import pytest

from harness.report import build, export, html, markdown
from tests.report.test_report_html import synthetic_store

REPORT = Path(build.__file__).resolve().parent
RENDERERS = (markdown.render, html.render, export.render_csv, export.render_json)


def imported(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update([node.module] + ["%s.%s" % (node.module, a.name) for a in node.names])
    return names


# what a report module may take from results/ without reading the store: the comparison it renders
RENDERED_FROM_RESULTS = {"compare_render.py": "harness.results.compare"}
# and, in any report module, the types of the records the builder hands it (decoded rows, no store)
RECORD_TYPES = "harness.results.records"


def test_only_the_builder_opens_the_store():
    for path in sorted(REPORT.glob("*.py")):
        allowed = RENDERED_FROM_RESULTS.get(path.name)
        reads = any(n.startswith("harness.results") and not (allowed and n.startswith(allowed))
                    and not n.startswith(RECORD_TYPES) for n in imported(path))
        assert reads is (path.name == "build.py"), path.name
        assert "sqlite3" not in imported(path) or path.name == "build.py", path.name


def test_renderers_neither_change_the_report_nor_read_the_clock(tmp_path):
    synthetic_store(tmp_path / "results")
    report = build.report(tmp_path / "results", "P2", published="simpledet-benchmark")
    first = [render(report) for render in RENDERERS]
    assert [render(report) for render in RENDERERS] == first
    assert not any(c.key.startswith("published:") for t in report.measured for c in t.columns)
    assert any(c.key.startswith("published:") for t in report.shown for c in t.columns)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.platform = "P1"


def test_csv_rows_are_a_field_of_the_report(tmp_path):
    synthetic_store(tmp_path / "results")
    cells = build.report(tmp_path / "results", "P2", ci=False)
    trials = dataclasses.replace(cells, rows="trials")
    assert export.render_csv(cells).splitlines()[0].startswith("source,table,")
    assert export.render_csv(trials).splitlines()[0].startswith("trial_id,run_id,")
    assert len(export.render_csv(trials).splitlines()) == 1 + len(cells.trials) == 1 + 8


def test_a_table_from_runs_of_different_code_names_each_run_s_code():
    from types import SimpleNamespace

    from harness.report import measured

    def run(commit, dirty=False):
        return SimpleNamespace(host={"code": {"version": "0.1.0", "commit": commit, "dirty": dirty}})

    runs = {"r1": run("a" * 40), "r2": run("b" * 40), "r3": run("a" * 40), "old": SimpleNamespace(host={})}
    assert measured.code_lines(runs, ["r1", "r3", "old"]) == []          # one revision (and one run that kept none)
    assert measured.code_lines(runs, ["r2", "r1"]) == [
        "Code: run r1 ran detbench 0.1.0 at aaaaaaaaaaaa; run r2 ran detbench 0.1.0 at bbbbbbbbbbbb."]
    runs["r4"] = run("a" * 40, dirty=True)
    assert measured.code_lines(runs, ["r1", "r4"]) == [
        "Code: run r1 ran detbench 0.1.0 at aaaaaaaaaaaa; run r4 ran detbench 0.1.0 at aaaaaaaaaaaa with "
        "uncommitted changes."]
