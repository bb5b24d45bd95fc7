"""CSV and JSON exports of a real calibration run carry the Markdown table's numbers."""
import io
import json
import re
import sqlite3

import pandas as pd
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.report import export
from harness.report.digits import figure

pytestmark = pytest.mark.e2e

SCENARIO = """\
name: export-check
matrix:
  framework: [calibrate]
  model: [retinanet, faster_rcnn]
  precision: [fp32]
  platform: [local]
  gpus: [1, 2]
batch_per_gpu: 2
input_size: [320, 320]
warmup: 2
measure: 8
repeats: 2
timeout_s: 60
exclude:
  - {model: faster_rcnn, gpus: 2, reason: not on two devices}
calibrate:
  iteration_ms: 20
  data_ms: 4
"""


def invoke(*args):
    out = CliRunner().invoke(main, list(args))
    assert out.exit_code == 0, out.output
    return out.output


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    (root / "s.yaml").write_text(SCENARIO)
    invoke("run", "--scenario", str(root / "s.yaml"), "--results", str(root / "results"))
    return root / "results"


def markdown_cells(text):
    """{(table title, model title): cell text} from the Markdown report."""
    cells, title = {}, None
    for line in text.splitlines():
        if line.startswith("#### "):
            title = line[5:]
        m = re.match(r"^\|([^|-][^|]*)\|([^|]+)\|$", line)
        if m and m.group(1) != "model":
            cells[title, m.group(1)] = m.group(2)
    return cells


def test_csv_cells_match_the_markdown_table(results):
    md = markdown_cells(invoke("report", "--platform", "local", "--results", str(results)))
    df = pd.read_csv(io.StringIO(invoke("report", "--platform", "local", "--results", str(results),
                                        "--format", "csv")))
    assert list(df.columns) == list(export.CELL_COLUMNS)
    assert len(df) == 4                                      # the 1-card iteration table is not a second copy
    titles = {"retinanet": "RetinaNet", "faster_rcnn": "Faster R-CNN w/ FPN"}
    for row in df.itertuples():
        cell = md[row.table, titles[row.model]]
        if isinstance(row.na, str):
            assert cell.startswith("NA") and row.na == "not on two devices" and pd.isna(row.throughput)
            continue
        assert re.sub(r"[¹²³⁴⁵⁶⁷⁸⁹]", "", cell) == "%s(%sms)" % (figure(row.throughput), figure(row.iteration_ms))
        assert row.n == 2 and row.failed == 0
        assert row.min <= row.throughput <= row.max and row.ci_low <= row.throughput <= row.ci_high
        assert row.data_share == pytest.approx(row.data_ms / row.iteration_ms)
        assert row.observed == pytest.approx(row.throughput, rel=0.05)
        assert "data-bound" in row.flags.split(";")
    single = df[(df.gpus == 1) & (df.model == "retinanet")].iloc[0]
    times = "%sms(%sms)" % (figure(single.iteration_ms), figure(single.data_ms))
    assert md["local-FP32-1card", "RetinaNet"].startswith(times)


def test_csv_trials_are_the_stored_trials(results):
    df = pd.read_csv(io.StringIO(invoke("report", "--platform", "local", "--results", str(results),
                                        "--format", "csv", "--rows", "trials")))
    db = sqlite3.connect(str(results / "detbench.sqlite"))
    stored = dict(db.execute("SELECT id, throughput FROM trials").fetchall())
    assert len(df) == len(stored) == 6
    for row in df.itertuples():
        assert row.throughput == stored[row.trial_id]          # repr round trip: the exact float
        assert row.status == "done" and row.framework == "calibrate"


def test_json_carries_a_schema_version_and_the_same_numbers(results, tmp_path):
    target = tmp_path / "report.json"
    invoke("report", "--platform", "local", "--results", str(results), "--format", "json", "--out", str(target))
    doc = json.loads(target.read_text())
    assert doc["schema"] == "detbench-report" and doc["schema_version"] == export.SCHEMA_VERSION
    assert len(doc["runs"]) == 1 and doc["runs"][0]["scenario"] == "export-check" and doc["runs"][0]["host"]
    cells = pd.DataFrame(doc["cells"])
    csv = pd.read_csv(io.StringIO(invoke("report", "--platform", "local", "--results", str(results),
                                         "--format", "csv")))
    merged = cells.merge(csv, on=["table", "model", "framework"], suffixes=("_json", "_csv"))
    assert len(merged) == 4
    for col in ("throughput", "iteration_ms", "data_ms", "ci_low", "ci_high", "min", "max", "cv", "observed"):
        pd.testing.assert_series_equal(merged[col + "_json"].astype(float), merged[col + "_csv"].astype(float),
                                       check_names=False)
    assert all(isinstance(f, list) for f in cells["flags"])
    assert len(doc["trials"]) == 6 and {t["status"] for t in doc["trials"]} == {"done"}


def test_published_figures_export_beside_measured_ones(tmp_path):
    out = invoke("report", "--platform", "P2", "--published", "simpledet-benchmark", "--format", "csv",
                 "--results", str(tmp_path / "none"))
    df = pd.read_csv(io.StringIO(out))
    assert set(df.source) == {"published"}
    row = df[(df.table == "P2-FP32") & (df.model == "retinanet") & (df.framework == "simpledet-mxnet")].iloc[0]
    assert (row.throughput, row.iteration_ms) == (55.5, 288)


def test_out_into_a_missing_folder_is_a_user_error(results, tmp_path):
    out = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results), "--format", "json",
                                    "--out", str(tmp_path / "nope" / "r.json")])
    assert out.exit_code == 2 and "no such folder" in out.output
