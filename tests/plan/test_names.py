"""The bundled trainer's old name 'simpledet': old stores, baselines and scenarios.

Until schema 2 the bundled PyTorch trainer was stored as framework 'simpledet', the name of
the original MXNet SimpleDet. Old stores and baselines read under the new name with a note;
a scenario that still says 'simpledet' is told the new name.
"""
import json
import sqlite3

import pytest
from click.testing import CliRunner

from harness.results import baseline, compare, store as store_mod
from harness.vocab import names
from harness.cli import main
from harness.errors import UserError
from harness.plan.scenario import load

SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (id TEXT PRIMARY KEY, scenario TEXT NOT NULL, scenario_path TEXT, scenario_json TEXT NOT NULL,
    backend TEXT NOT NULL, created REAL NOT NULL, host_json TEXT);
CREATE TABLE cells (run_id TEXT NOT NULL, cell_key TEXT NOT NULL, framework TEXT NOT NULL, model TEXT NOT NULL,
    precision TEXT NOT NULL, platform TEXT NOT NULL, gpus INTEGER NOT NULL, nodes INTEGER NOT NULL,
    batch_per_gpu INTEGER NOT NULL, images_per_iteration INTEGER NOT NULL, excluded TEXT,
    PRIMARY KEY (run_id, cell_key));
CREATE TABLE trials (id TEXT PRIMARY KEY, run_id TEXT NOT NULL, seq INTEGER NOT NULL, cell_key TEXT NOT NULL,
    repeat INTEGER NOT NULL, status TEXT NOT NULL, reason TEXT, started REAL, ended REAL, exit_code INTEGER,
    argv_json TEXT, settings_json TEXT, throughput REAL, observed REAL, iteration_time_s REAL,
    data_time_s REAL, exact INTEGER, peak_mem_mb REAL, records INTEGER, scrape_errors INTEGER,
    fingerprint TEXT, telemetry_json TEXT, UNIQUE (run_id, seq));
CREATE TABLE iterations (trial_id TEXT NOT NULL, iteration INTEGER NOT NULL, time_s REAL, data_time_s REAL,
    arrived REAL, PRIMARY KEY (trial_id, iteration)) WITHOUT ROWID;
"""
OLD_KEY = "simpledet/retinanet/fp32/local/1/1"
NEW_KEY = "detbench-trainer/retinanet/fp32/local/1/1"


def schema_1_store(results):
    """A store as detbench wrote it before schema 2: one bundled-trainer cell, two done trials."""
    results.mkdir()
    db = sqlite3.connect(str(results / store_mod.DB_NAME))
    db.executescript(SCHEMA_1)
    db.executemany("INSERT INTO meta VALUES (?, ?)", [("application", "detbench"), ("schema_version", "1")])
    scenario = {"name": "old", "warmup": 3, "measure": 20, "repeats": 2}
    db.execute("INSERT INTO runs VALUES ('r1', 'old', 'old.yaml', ?, 'local', 1.0, '{}')", (json.dumps(scenario),))
    db.execute("INSERT INTO cells VALUES ('r1', ?, 'simpledet', 'retinanet', 'fp32', 'local', 1, 1, 2, 2, NULL)",
               (OLD_KEY,))
    for seq, seconds in ((1, 0.50), (2, 0.52)):
        db.execute("INSERT INTO trials (id, run_id, seq, cell_key, repeat, status, throughput, observed,"
                   " iteration_time_s, exact, settings_json) VALUES (?, 'r1', ?, ?, ?, 'done', ?, ?, ?, 1, '{}')",
                   ("r1-%04d" % seq, seq, OLD_KEY, seq, 2 / seconds, 2 / seconds, seconds))
    db.commit()
    db.close()


def test_a_schema_1_store_opens_gains_the_new_columns_and_keeps_its_rows(tmp_path):
    schema_1_store(tmp_path / "results")
    store = store_mod.Store(tmp_path / "results", create=False)
    columns = {r[1] for r in store.db.execute("PRAGMA table_info(trials)")}
    assert {"figure_kind", "window_json", "work_json", "peak_rss_mb", "peak_device_mb"} <= columns
    version = store.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    assert version == str(store_mod.SCHEMA_VERSION)
    assert [t["throughput"] for t in store.trials("r1")] == [4.0, 2 / 0.52]
    store.close()
    store_mod.Store(tmp_path / "results", create=False).close()    # and opens again as schema 2


def test_old_rows_read_under_the_new_name_and_the_report_says_so(tmp_path):
    schema_1_store(tmp_path / "results")
    store = store_mod.Store(tmp_path / "results", create=False)
    assert [(c["framework"], c["cell_key"]) for c in store.cells()] == [("detbench-trainer", NEW_KEY)]
    assert {t["cell_key"] for t in store.trials("r1")} == {NEW_KEY}
    assert len(store.cell_trials("r1", NEW_KEY)) == 2
    assert store.renamed
    store.close()
    out = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(tmp_path / "results")])
    assert out.exit_code == 0, out.output
    assert "|model|detbench-trainer (PyTorch)|" in out.output
    assert "old name 'simpledet'" in out.output
    assert "|simpledet|" not in out.output


def test_a_baseline_written_under_the_old_name_compares_with_a_new_run(tmp_path):
    cell = {"settings": {}, "images_per_iteration": 2, "throughput": [4.0, 4.1, 3.9, 4.0, 4.05],
            "observed": [4.0, 4.1, 3.9, 4.0, 4.05], "failed": 0}
    old = {"schema": baseline.SCHEMA, "schema_version": baseline.SCHEMA_VERSION, "run": {"id": "a"},
           "host": {}, "cells": {OLD_KEY: cell}}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    side = baseline.load(path)
    assert list(side["cells"]) == [NEW_KEY]
    new = dict(old, run={"id": "b"}, cells={NEW_KEY: cell})
    result = compare.compare(side, new)
    assert [c.verdict for c in result.cells] == [compare.UNCHANGED]
    assert any("read as %s" % NEW_KEY in n for n in result.notes)


def test_a_scenario_naming_simpledet_is_told_the_new_name(write_scenario):
    from tests.support.scenarios import GOOD_SCENARIO
    path = write_scenario(GOOD_SCENARIO.replace("framework: [calibrate]", "framework: [simpledet]"))
    with pytest.raises(UserError) as err:
        load(str(path))
    message = str(err.value)
    assert message.startswith("%s:3: matrix.framework.0: unknown framework 'simpledet'" % path)
    assert "now 'detbench-trainer'" in message and "'simpledet-mxnet'" in message


def test_names_map_only_the_old_name():
    assert names.framework("simpledet") == "detbench-trainer"
    assert names.framework("simpledet-mxnet") == "simpledet-mxnet"
    assert names.cell_key("simpledet-mxnet/retinanet/fp32/P2/8/1") == "simpledet-mxnet/retinanet/fp32/P2/8/1"
    assert names.cell_key(OLD_KEY) == NEW_KEY
