"""The place check: whether a trial's place within its round moved its figure, on runs whose
rounds ran in shuffled orders; the report shows it and flags a run with a place effect.

The stores here are written by the tests themselves: trials in the order the run's seed draws,
their figures each cell's speed times a known place effect and a known scatter."""
import json
import random
import sqlite3

from harness.measure import flags, place
from harness.measure.result import TrialResult
from harness.report import build, markdown, rows
from harness.results import store as store_mod
from harness.results.store import Store
from harness.plan import scenario as scenario_mod

MODELS = ("retinanet", "faster_rcnn", "mask_rcnn")
FRAMEWORKS = ("detbench-trainer", "torchvision")
KEYS = ["%s/%s/fp32/P2/1/1" % (fw, m) for fw in FRAMEWORKS for m in MODELS]


def figures(rounds, first_place_slower, scatter, seed=5, keys=KEYS):
    """(seq, repeat, cell key, images/s) in the order `seed` draws: each cell at its own speed, the
    first trial of every round `first_place_slower` slower, each trial off by up to `scatter`."""
    rng = random.Random(seed)
    speed = {k: 1.0 + i * 0.37 for i, k in enumerate(keys)}
    out = []
    for repeat, order in enumerate(scenario_mod.round_orders(keys, rounds, seed), 1):
        for spot, key in enumerate(order):
            value = speed[key] * (1 + rng.uniform(-scatter, scatter)) * (1 - first_place_slower * (spot == 0))
            out.append((len(out) + 1, repeat, key, value))
    return out


def trial_rows(rows_):
    return [{"seq": s, "repeat": r, "cell_key": k, "status": "done", "throughput": v} for s, r, k, v in rows_]


# ------------------------------------------------------------------ the check on trial rows

def test_a_slow_first_place_is_found_and_its_median_shows_it():
    check = place.check(trial_rows(figures(5, 0.09, 0.01)), seed=5)
    assert check.rounds == 5 and check.places == len(KEYS)
    assert check.flagged
    assert check.span > check.cell_spread and check.p < flags.PLACE_P
    assert check.medians[0] < 0.95 and all(m > 0.98 for m in check.medians[1:])


def test_scatter_alone_is_no_place_effect():
    check = place.check(trial_rows(figures(5, 0.0, 0.01)), seed=5)
    assert not check.flagged
    assert all(abs(m - 1) < 0.02 for m in check.medians)


def test_a_place_effect_smaller_than_the_cells_spread_is_not_flagged():
    check = place.check(trial_rows(figures(5, 0.02, 0.10)), seed=5)
    assert not check.flagged and check.span < check.cell_spread


def test_three_rounds_are_enough_and_two_are_not():
    assert place.check(trial_rows(figures(3, 0.09, 0.005)), seed=5).flagged
    assert place.check(trial_rows(figures(2, 0.09, 0.005)), seed=5) is None


def test_the_check_is_the_same_every_time_it_is_made():
    trials = trial_rows(figures(4, 0.03, 0.02))
    assert place.check(trials, seed=9) == place.check(trials, seed=9)


def test_failed_trials_keep_their_place_and_rounds_of_other_lengths_are_not_checked():
    trials = trial_rows(figures(5, 0.09, 0.01))
    trials[3] = dict(trials[3], status="failed", throughput=None)
    check = place.check(trials, seed=5)
    assert check.places == len(KEYS) and check.flagged
    assert place.check(trials[:-1], seed=5) is None      # an unfinished schedule: the last round is short


# ------------------------------------------------------------------ through the store and the report

def stored_run(root, figures_, seed=5, order=True, run_id="run-1"):
    """A run on P2 whose trials are `figures_`, stored with its order seed (order=False: as a
    run stored before shuffled orders)."""
    store = Store(root)
    cells = [dict(cell_key=k, framework=k.split("/")[0], model=k.split("/")[1], precision="fp32", platform="P2",
                  gpus=1, nodes=1, batch_per_gpu=2, images_per_iteration=2, excluded=None)
             for k in sorted({k for _, _, k, _ in figures_})]
    store.create_run(run_id, "order", "s.yaml", json.dumps({"name": "order", "warmup": 2, "measure": 6}), "local",
                     {}, cells, [(s, k, r, ["true"]) for s, r, k, _ in figures_],
                     order={"seed": seed, "drawn": False} if order else None)
    value = {s: v for s, _, _, v in figures_}
    for t in store.trials(run_id):
        store.finish_trial(t["id"], TrialResult(
            status="done", throughput=value[t["seq"]], observed=value[t["seq"]], iteration_time_s=2 / value[t["seq"]],
            data_time_s=0.0, exact=True, figure_kind="exact", window=(3, 8), records=8, settings={}))
    return store


def report_of(store):
    return build.from_rows(rows.read(store, "P2"), "P2", ci=False)


def place_notes(report):
    table = [t for t in report.measured if t.form == "throughput"][0]
    return table, [n for n in table.notes if n.startswith("Place in the round")]


def test_the_report_flags_every_cell_of_a_run_with_a_place_effect(tmp_path):
    store = stored_run(tmp_path / "r", figures(5, 0.09, 0.01))
    report = report_of(store)
    table, notes = place_notes(report)
    assert all(flags.PLACE_EFFECT in e.flags for e in table.entries.values())
    assert len(notes) == 1
    assert notes[0].startswith("Place in the round, run run-1 (order seed 5, 5 rounds of 6 trials): ")
    assert notes[0].endswith(": a place effect (place-effect).")
    assert flags.text(flags.PLACE_EFFECT) in markdown.render(report)


def test_the_report_shows_the_check_and_no_flag_where_there_is_no_place_effect(tmp_path):
    store = stored_run(tmp_path / "r", figures(5, 0.0, 0.01))
    table, notes = place_notes(report_of(store))
    assert not any(flags.PLACE_EFFECT in e.flags for e in table.entries.values())
    assert len(notes) == 1 and notes[0].endswith(": no place effect.")
    check = place.check(trial_rows(figures(5, 0.0, 0.01)), seed=5)
    assert "median by place 1-6: %s;" % " | ".join("%.3f" % m for m in check.medians) in notes[0]
    assert "and %d of %d reshuffled orders span as wide" % (check.wider, place.DRAWS) in notes[0]


def test_fewer_than_three_rounds_show_no_check(tmp_path):
    store = stored_run(tmp_path / "r", figures(2, 0.09, 0.01))
    table, notes = place_notes(report_of(store))
    assert notes == [] and not any(flags.PLACE_EFFECT in e.flags for e in table.entries.values())


def test_a_run_stored_before_shuffled_orders_says_it_cannot_be_checked(tmp_path):
    store = stored_run(tmp_path / "r", figures(5, 0.09, 0.01), order=False)
    table, notes = place_notes(report_of(store))
    assert not any(flags.PLACE_EFFECT in e.flags for e in table.entries.values())
    assert notes == ["Place in the round, run run-1: not checked; its rounds ran cell by cell in a fixed order "
                     "(stored before shuffled orders), so a place effect is part of each cell's figure."]


# ------------------------------------------------------------------ a store of schema 3

SCHEMA_3_RUNS = """
CREATE TABLE runs (
    id TEXT PRIMARY KEY, scenario TEXT NOT NULL, scenario_path TEXT, scenario_json TEXT NOT NULL,
    backend TEXT NOT NULL, created REAL NOT NULL, host_json TEXT, origin TEXT, limits_json TEXT)"""


def test_a_schema_3_store_opens_gains_the_order_column_and_reports(tmp_path):
    root = tmp_path / "r"
    stored_run(root, figures(3, 0.0, 0.01), order=False).close()
    db = sqlite3.connect(str(root / store_mod.DB_NAME))   # back to schema 3: runs without order_json,
    db.executescript("ALTER TABLE trials DROP COLUMN breakdown_json;"    # trials without breakdown_json
                     "ALTER TABLE runs RENAME TO runs4;" + SCHEMA_3_RUNS + ";"
                     "INSERT INTO runs SELECT id, scenario, scenario_path, scenario_json, backend, created, host_json,"
                     " origin, limits_json FROM runs4; DROP TABLE runs4;"
                     "ALTER TABLE trials DROP COLUMN drawn_json;"   # and trials without schema 5's column
                     "UPDATE meta SET value='3' WHERE key='schema_version';")
    db.close()
    store = Store(root, create=False)
    assert store.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == \
        str(store_mod.SCHEMA_VERSION)
    assert store.run("run-1")["order_json"] is None
    table, notes = place_notes(report_of(store))
    assert len(table.entries) == len(KEYS) and all(e.throughput for e in table.entries.values())
    assert notes and "not checked" in notes[0]
    store.close()
    Store(root, create=False).close()     # and opens again as the current schema
