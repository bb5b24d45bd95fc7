"""harness.api on a store written by real calibration runs: the figures the report shows, typed
columns, an older store, and pandas named when it is missing."""
import csv
import io
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import api, launch
from harness.cli import main
from harness.errors import UserError
from harness.measure import stats
from harness.report.digits import figure
from harness.results import store as store_mod
from tests.support.scenarios import GOOD_SCENARIO
from tests.frameworks.test_inference import INFERENCE
from tests.plan.test_names import NEW_KEY, schema_1_store

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e

TRAIN, INFER = launch.loads_scenario_text(GOOD_SCENARIO), launch.loads_scenario_text(INFERENCE)
PERCENTILE_COLUMNS = tuple(("p%g_ms" % p, "float64") for p in sorted({50.0} | set(INFER.percentiles)))
FIGURES = ("throughput", "iteration_ms", "data_ms", "ci_low", "ci_high", "min", "max", "iqr", "cv", "observed")


def invoke(*args):
    out = CliRunner().invoke(main, [str(a) for a in args])
    assert out.exit_code == 0, out.output
    return out.output


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """One training run (GOOD_SCENARIO: a cell, two repeats) and one inference run (two batch sizes)."""
    root = tmp_path_factory.mktemp("api")
    for name, text in (("train.yaml", GOOD_SCENARIO), ("infer.yaml", INFERENCE)):
        (root / name).write_text(text, encoding="utf-8")
        invoke("run", "--scenario", root / name, "--results", root / "results")
    return root / "results"


def csv_rows(results, *extra):
    return list(csv.DictReader(io.StringIO(invoke("report", "--platform", "local", "--results", results,
                                                  "--format", "csv", *extra))))


def number(text):
    return float(text) if text else None


def same(exported, value):
    """An exported figure and a frame's: equal to the last bit, or both missing (empty, NaN)."""
    return exported == value or (exported is None and value != value)


def rounding(value):
    """The same figure reached by another order of operations."""
    return pytest.approx(value, rel=1e-12)


def test_cells_carry_the_figures_the_report_shows(results):
    with api.open(results) as res:
        cells = res.cells()
        runs = res.runs()
    assert list(runs["scenario"]) == [TRAIN.name, INFER.name]
    assert list(runs["trials"]) == [TRAIN.repeats, INFER.repeats * len(INFER.batch_sizes)]
    assert (runs["done"] == runs["trials"]).all() and (runs["failed"] == 0).all()
    exported = csv_rows(results)
    assert len(exported) == len(cells) == 1 + len(INFER.batch_sizes)
    for row in exported:
        [cell] = cells[(cells["run_id"] == row["run_id"]) & (cells["model"] == row["model"])
                       & (cells["batch_per_gpu"] == int(row["batch_per_gpu"]))].itertuples()
        assert cell.n == int(row["n"]) and cell.failed == int(row["failed"])
        for name in FIGURES:     # the CSV writes each float as repr: equal to the last bit
            assert same(number(row[name]), getattr(cell, name)), name
    markdown = invoke("report", "--platform", "local", "--results", results)
    [train] = cells[cells["batch"] == 0].itertuples()
    assert "|RetinaNet|%s(%sms)" % (figure(train.throughput), figure(train.iteration_ms)) in markdown
    assert "|RetinaNet|%sms(%sms)" % (figure(train.iteration_ms), figure(train.data_ms)) in markdown


def test_trials_and_iterations_are_the_stored_ones(results):
    with api.open(results) as res:
        trials = res.trials()
        its = res.iterations()
        runs = res.runs()
    exported = csv_rows(results, "--rows", "trials")
    # the same trials; the export lists them by cell, the API in the order they ran (shuffled per round)
    by_id = {r["trial_id"]: r for r in exported}
    assert sorted(trials["trial_id"]) == sorted(by_id) and len(by_id) == len(exported)
    for trial in trials.itertuples():
        row = by_id[trial.trial_id]
        assert (trial.seq, trial.repeat, trial.status) == (int(row["seq"]), int(row["repeat"]), row["status"])
        for name in ("throughput", "observed", "iteration_time_s", "data_time_s", "peak_rss_mb"):
            assert same(number(row[name]), getattr(trial, name)), name
        assert json.loads(row["window_json"]) == [trial.window_first, trial.window_last]
    per_trial = its.groupby("trial_id")
    assert per_trial.size().to_dict() == dict(zip(trials["trial_id"], trials["records"]))
    # each trial's window holds the `measure` iterations (batches) its run's scenario asked for
    in_window = its.groupby("run_id")["in_window"].sum()
    assert in_window.to_dict() == dict(zip(runs["run_id"], runs["measure"] * runs["trials"]))


def test_latencies_give_the_report_its_inference_figures(results):
    with api.open(results) as res:
        lat = res.latencies()
    assert list(lat.columns[-len(PERCENTILE_COLUMNS) - 5:]) == ["mean_ms"] + [c for c, _ in PERCENTILE_COLUMNS] + [
        "pre_ms", "net_ms", "post_ms", "detections_per_image"]
    assert sorted(lat["batch"]) == sorted(INFER.batch_sizes * INFER.repeats)
    assert set(lat["batches"]) == {INFER.measure}
    exported = [r for r in csv_rows(results) if r["latency_avg_ms"]]
    assert sorted(int(r["batch_per_gpu"]) for r in exported) == sorted(INFER.batch_sizes)
    for row in exported:
        mine = lat[lat["batch"] == int(row["batch_per_gpu"])]
        assert stats.median(list(mine["mean_ms"])) == float(row["latency_avg_ms"])
        # the report takes the median of the seconds and then scales it
        assert stats.median(list(mine["p50_ms"])) == rounding(float(row["latency_p50_ms"]))
        for p, value in json.loads(row["latency_percentiles_ms"]).items():
            assert stats.median(list(mine["p%s_ms" % p])) == rounding(value), p
        assert stats.median(list(mine["post_ms"])) == rounding(float(row["post_ms"]))


def test_every_frame_has_its_declared_column_types_even_when_empty(results):
    with api.open(results) as res:
        training_run = res.runs()["run_id"][0]
        frames = [(res.runs(), api.RUN_COLUMNS), (res.cells(), api.CELL_COLUMNS), (res.trials(), api.TRIAL_COLUMNS),
                  (res.iterations(), api.ITERATION_COLUMNS),
                  (res.latencies(), api.LATENCY_COLUMNS + PERCENTILE_COLUMNS + api.LATENCY_TAIL),
                  (res.latencies(run=training_run), api.LATENCY_COLUMNS + api.LATENCY_TAIL)]
    for frame, columns in frames:
        assert [(c, str(t)) for c, t in frame.dtypes.items()] == list(columns)
    assert frames[-1][0].empty and not frames[-2][0].empty
    runs = frames[0][0]
    assert runs["created"].is_monotonic_increasing and runs["order_seed"].notna().all()


def test_a_schema_3_store_reads_the_same_figures(results, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(str(results), str(old))
    db = sqlite3.connect(str(old / store_mod.DB_NAME))     # back to schema 3: runs without order_json,
    db.executescript(                                       # trials without breakdown_json
        "ALTER TABLE trials DROP COLUMN breakdown_json;"
        "ALTER TABLE runs RENAME TO runs4;"
        "CREATE TABLE runs (id TEXT PRIMARY KEY, scenario TEXT NOT NULL, scenario_path TEXT, scenario_json TEXT"
        " NOT NULL, backend TEXT NOT NULL, created REAL NOT NULL, host_json TEXT, origin TEXT, limits_json TEXT);"
        "INSERT INTO runs SELECT id, scenario, scenario_path, scenario_json, backend, created, host_json, origin,"
        " limits_json FROM runs4; DROP TABLE runs4; ALTER TABLE trials DROP COLUMN drawn_json;"
        " UPDATE meta SET value='3' WHERE key='schema_version';")
    db.close()
    with api.open(old) as res:
        runs, cells = res.runs(), res.cells()
    with api.open(results) as res:
        assert cells.equals(res.cells())
        assert runs.drop(columns="order_seed").equals(res.runs().drop(columns="order_seed"))
    assert runs["order_seed"].isna().all()


def test_an_old_frameworks_name_reads_as_the_new_one(tmp_path):
    schema_1_store(tmp_path / "results")
    with api.open(tmp_path / "results") as res:
        cells, trials = res.cells(), res.trials()
    assert list(cells["cell_key"]) == [NEW_KEY] and list(cells["framework"]) == ["detbench-trainer"]
    assert list(trials["framework"]) == ["detbench-trainer"] * len(trials) and len(trials) == cells["n"][0]
    assert cells["throughput"][0] == stats.median(list(trials["throughput"]))


def test_no_store_or_no_such_run_is_one_clear_error(results, tmp_path):
    with pytest.raises(UserError, match="no results store here"):
        api.open(tmp_path / "none")
    assert not (tmp_path / "none").exists()
    with api.open(results) as res:
        with pytest.raises(UserError, match="no run 'nothing'"):
            res.cells(run="nothing")


def test_without_pandas_the_module_imports_and_a_frame_says_what_is_missing(results):
    code = ("import sys; sys.modules['pandas'] = None\n"
            "from harness import api\n"
            "res = api.open(sys.argv[1])\n"
            "print(len(res.run_records()))\n"
            "try:\n    res.cells()\nexcept ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code, str(results)], cwd=str(ROOT), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "2\n%s\n" % api.PANDAS_MISSING
