"""The store's typed read side: every JSON column decoded once into a frozen record, the
TrialResult that went in coming back out, and stores of older schemas read by column name."""
import dataclasses
import json
import sqlite3

import pytest

from harness import launch
from harness.measure import records as measure_records
from harness.measure.result import TrialResult
from harness.results import records
from harness.results import store as store_mod
from harness.results.store import Store
from harness.plan import scenario as scenario_mod
from tests.plan.test_names import NEW_KEY, schema_1_store

KEY = "calibrate/retinanet/fp32/local/1/1"
ARGV = ["python", "-m", "harness.workloads.calibrate", "--iterations", "12"]
SCENARIO = {"name": "typed", "matrix": {"framework": ["calibrate"], "model": ["retinanet"]},
            "warmup": 2, "measure": 10, "repeats": 2, "env": {"OMP_NUM_THREADS": "2"},
            "extra_args": {"calibrate": ["--quiet"]}}
HOST = {"fingerprint": "fp2-0123", "facts": {"cpu": {"model": "EPYC"}}}
LIMITS = {"peak": {"precisions": {"fp32": {"peak_gflops": 100.0}}}, "work": {KEY: None}}


def finished():
    """A finished trial's result with every structured field filled."""
    return TrialResult(
        status="done", ended=1700000100.5, exit_code=0, records=12, scrape_errors=0, peak_mem_mb=None,
        throughput=199.5, iteration_time_s=0.01003, data_time_s=0.001, exact=True,
        figure_kind=measure_records.EXACT, window=(3, 12), observed=198.0, fingerprint="fp2-0123",
        telemetry={"samples": 4, "cpu_percent": {"max": 97.0}}, peak_rss_mb=120.5, peak_device_mb=None,
        work={"proposals": 1000.0, "sampled_rois": 512.0}, settings={"images_per_device": 2, "source": "declared"},
        latency=None, drawn={"window": {"views": 19.0, "flips": 10.0, "draws": 20.0, "epochs": 1.0},
                             "trial": {"views": 23.0, "flips": 12.0, "draws": 24.0, "epochs": 1.0}},
        iterations=tuple((k, 0.01, 0.001, 100.0 + k / 100) for k in range(1, 13)))


def one_run(root, order=None, result=None):
    order = {"seed": 7, "drawn": False} if order is None else order
    sc = scenario_mod.Scenario.model_validate(SCENARIO)
    store = Store(root)
    cell = dict(cell_key=KEY, framework="calibrate", model="retinanet", precision="fp32", platform="local",
                gpus=1, nodes=1, batch_per_gpu=2, images_per_iteration=2, excluded=None)
    store.create_run("run-1", sc.name, "typed.yaml", sc.model_dump_json(), "local", HOST, [cell],
                     [(1, KEY, 1, ARGV), (2, KEY, 2, ARGV)], limits=LIMITS, order=order)
    if result is not None:
        store.finish_trial("run-1-0001", result)
    return store


def test_a_stored_trial_result_reads_back_as_the_same_trial_result(tmp_path):
    result = finished()
    store = one_run(tmp_path / "r", result=result)
    done, pending = store.read_trials("run-1")
    assert done.result(store.read_iterations(done.id)) == result
    assert done.window == (3, 12) and done.exact is True and done.argv == tuple(ARGV)
    assert done.done and not done.failed and (done.id, done.seq, done.repeat) == ("run-1-0001", 1, 1)
    assert pending.status == "pending" and pending.result() is None and pending.work is None
    assert store.read_iterations(done.id)[2] == records.StoredIteration(3, 0.01, 0.001, 100.03)
    store.close()


def test_a_run_decodes_its_scenario_host_limits_and_order_once(tmp_path):
    store = one_run(tmp_path / "r")
    run = store.read_run("latest")
    assert (run.id, run.scenario_name, run.backend, run.origin, run.imported) == ("run-1", "typed", "local",
                                                                                 "measured", False)
    sc = run.scenario
    assert (sc.name, sc.mode, sc.warmup, sc.measure, sc.repeats) == ("typed", "train", 2, 10, 2)
    assert sc.nominal_window == (3, 12)
    assert sc.env == {"OMP_NUM_THREADS": "2"} and sc.extra_args == {"calibrate": ["--quiet"]}
    assert run.host == HOST and run.fingerprint == "fp2-0123" and run.limits == LIMITS
    assert run.order == records.StoredOrder(seed=7, drawn=False)
    [cell] = store.read_cells(run_id="run-1")
    assert (cell.cell_key, cell.gpus, cell.batch, cell.excluded) == (KEY, 1, 0, None)
    assert cell.created == run.created
    assert [r.id for r in store.read_runs()] == ["run-1"]
    store.close()


def test_the_stored_scenario_validates_again_into_the_scenario_a_resume_runs(tmp_path):
    from pydantic import ValidationError

    store = one_run(tmp_path / "r")
    run = store.read_run("run-1")
    sc = run.scenario.validated(launch.LAUNCHERS)
    # the Scenario as planned, with each backend's section (none here) typed by its launcher
    assert sc.model_dump(exclude={"docker", "slurm"}) == scenario_mod.Scenario.model_validate(SCENARIO).model_dump()
    assert (sc.docker, sc.slurm, sc.repeats, sc.env) == (None, None, 2, {"OMP_NUM_THREADS": "2"})
    with store.transaction() as db:
        db.execute("UPDATE runs SET scenario_json=?", (json.dumps(dict(SCENARIO, repeats="two")),))
    damaged = store.read_run("run-1").scenario
    assert damaged.repeats is None     # read leniently for reports, refused strictly for running
    with pytest.raises(ValidationError, match="repeats"):
        damaged.validated(launch.LAUNCHERS)
    with pytest.raises(ValidationError):
        records.scenario("{not json").validated(launch.LAUNCHERS)
    store.close()


def test_records_are_frozen_and_answer_by_column_as_stored(tmp_path):
    store = one_run(tmp_path / "r", result=finished())
    trial = store.read_trials("run-1", KEY)[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        trial.throughput = 1.0
    assert trial["throughput"] == trial.throughput and json.loads(trial["work_json"]) == trial.work
    assert "latency_json" in trial.keys() and trial.get("no_such_column") is None
    with pytest.raises(KeyError):
        trial["no_such_column"]
    store.close()


def test_a_damaged_json_column_reads_as_empty_and_the_rest_of_the_row_stays(tmp_path):
    store = one_run(tmp_path / "r", result=finished())
    with store.transaction() as db:
        db.execute("UPDATE trials SET work_json='{not json', window_json='[3]', settings_json='[1, 2]',"
                   " telemetry_json='' WHERE seq=1")
        db.execute("UPDATE runs SET scenario_json='{\"warmup\": true, \"measure\": \"ten\"}', order_json='{}'")
    [trial] = store.read_trials("run-1")[:1]
    assert (trial.work, trial.window, trial.settings, trial.telemetry) == (None, None, None, None)
    assert trial.throughput == finished().throughput
    run = store.read_run("run-1")
    assert (run.scenario.warmup, run.scenario.measure, run.scenario.nominal_window, run.order) == (None, None,
                                                                                                  None, None)
    store.close()


SCHEMA_3 = store_mod.SCHEMA.replace(", limits_json TEXT,\n    order_json TEXT);", ", limits_json TEXT);").replace(
    "latency_json TEXT, drawn_json TEXT, breakdown_json TEXT,", "latency_json TEXT,")


def test_a_schema_3_store_opens_and_its_runs_read_without_an_order(tmp_path):
    # the columns schemas 4, 5 and 6 added
    assert "order_json" not in SCHEMA_3 and "drawn_json" not in SCHEMA_3 and "breakdown_json" not in SCHEMA_3
    root = tmp_path / "r"
    root.mkdir()
    db = sqlite3.connect(str(root / store_mod.DB_NAME))
    db.executescript(SCHEMA_3)
    db.executemany("INSERT INTO meta VALUES (?, ?)", [("application", "detbench"), ("schema_version", "3")])
    db.execute("INSERT INTO runs (id, scenario, scenario_json, backend, created, host_json, origin)"
               " VALUES ('old', 'typed', ?, 'local', 5.0, ?, 'measured')", (json.dumps(SCENARIO), json.dumps(HOST)))
    db.execute("INSERT INTO cells VALUES ('old', ?, 'calibrate', 'retinanet', 'fp32', 'local', 1, 1, 2, 2, NULL)",
               (KEY,))
    db.execute("INSERT INTO trials (id, run_id, seq, cell_key, repeat, status, throughput, window_json)"
               " VALUES ('old-0001', 'old', 1, ?, 1, 'done', 200.0, '[3, 12]')", (KEY,))
    db.commit()
    db.close()
    store = Store(root, create=False)
    run = store.read_run("old")
    assert run.order is None and run.limits is None and run.scenario.warmup == 2 and run.host == HOST
    [trial] = store.read_trials("old")
    assert (trial.throughput, trial.window, trial.latency, trial.argv) == (200.0, (3, 12), None, None)
    assert trial.drawn is None     # not observed
    assert trial.breakdown is None
    store.close()


def test_a_row_without_the_newer_columns_reads_them_as_empty():
    row = {"id": "r", "scenario": "s", "scenario_json": json.dumps(SCENARIO), "backend": "local", "created": 1.0}
    run = records.run_of(row)
    assert (run.host, run.origin, run.limits, run.order, run.scenario.measure) == (None, "measured", None, None, 10)
    trial = records.trial_of({"id": "t", "run_id": "r", "seq": 1, "cell_key": KEY, "repeat": 1, "status": "done"})
    assert (trial.latency, trial.window, trial.figure_kind, trial.exact) == (None, None, None, None)


def test_an_old_frameworks_name_reads_as_the_new_one_in_every_record(tmp_path):
    schema_1_store(tmp_path / "results")
    store = Store(tmp_path / "results", create=False)
    [cell] = store.read_cells()
    assert (cell.framework, cell.cell_key, cell["framework"]) == ("detbench-trainer", NEW_KEY, "detbench-trainer")
    assert {t.cell_key for t in store.read_trials("r1")} == {NEW_KEY}
    assert len(store.read_trials("r1", NEW_KEY)) == 2 and store.renamed
    assert store.read_run("r1").origin == "measured"      # stored before origins: a measured run
    store.close()
