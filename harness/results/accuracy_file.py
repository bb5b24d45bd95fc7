"""An accuracy run as one JSON file: `detbench accuracy save RUN --out FILE` writes it from a
results store, `detbench accuracy load FILE` puts it into one.

A time-to-accuracy run takes hours on a small machine and lives in one store; the file is what
can be committed beside the code (as `detbench baseline save` does for speed runs), read by a
later `accuracy report` or `compare`, and carried to a fresh results folder on the same machine
to go on with `accuracy run --resume`. It holds the run's row and cells and every accuracy table's
rows of the run: each finished trial's curve, losses, load, resumes, settings and code, and the
digests of the run's inputs and its noise floors (a resume checks the weights and data made again against them). A trial
not finished when saved is written as pending with nothing of its partial training: its
checkpoint files stay behind, so after a load it trains again from the start, in a folder of
the store it was loaded into. Checkpoint and log files are never in the file.

Paths are kept relative to the run's folder, the one that holds its results folder (where
`benchmarks/time_to_accuracy.py` also keeps the data and weights): the file says `{run}/data`
where the store said `/that/folder/data`, and a load puts the folder of the store it fills in its
place, so a run saved on one machine resumes in any folder that has its inputs made again there.
The training commands are not kept (they name this machine's interpreters); each trial's logged
settings are.

A load refuses a file of another format or version, a run the store already holds, and a file
whose trials do not match its tables, each in one line naming the file; the store is changed
in one transaction or not at all.
"""

import json
import os
import sqlite3
from typing import TYPE_CHECKING, Any, Dict, List

if TYPE_CHECKING:
    from harness.results.store import Store

from harness import atomic
from harness.errors import UserError
from harness.results.accuracy_store import PER_TRAINING

FORMAT = "detbench-accuracy-run"
VERSION = 1
# every table of the accuracy tables with rows of a run; the trials first (a load checks the rest against them)
TABLES = ("accuracy_trials",) + PER_TRAINING + ("accuracy_redos", "accuracy_inputs", "accuracy_floor")
PER_RUN = ("accuracy_inputs", "accuracy_floor")  # rows of the run as a whole, of no trial
FINISHED = ("done", "failed")
RUN_FOLDER = "{run}/"  # in a saved file, the folder that held the run's results folder


def _swap(value: Any, old: str, new: str) -> Any:
    """`value` with `old` replaced by `new` in every string it holds (the JSON text of a column too)."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: _swap(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, old, new) for v in value]
    return value


def _run_folder(store: "Store") -> str:
    return os.path.dirname(os.path.abspath(str(store.root))).rstrip(os.sep) + os.sep


def _rows(db: sqlite3.Connection, table: str, run_id: str) -> List[Dict[str, Any]]:
    """The table's rows of the run in its primary key's order (the file reads the same for the same run)."""
    key = [r[1] for r in sorted(db.execute("PRAGMA table_info(%s)" % table), key=lambda r: r[5]) if r[5]]
    return [
        dict(r) for r in db.execute("SELECT * FROM %s WHERE run_id=? ORDER BY %s" % (table, ", ".join(key)), (run_id,))
    ]


def dump(store: "Store", run_id: str) -> Dict[str, Any]:
    """The accuracy run `run_id` of `store` as a JSON-ready dict."""
    tables = store.accuracy()
    ids = tables.runs()
    if run_id == "latest" and not ids:
        raise UserError("%s holds no accuracy run" % store.root)
    run = store.read_run(ids[-1] if run_id == "latest" else run_id)
    if not tables.trials(run.id):
        raise UserError("run %s is not an accuracy run: save a speed run with `detbench baseline save`" % run.id)
    db = store.db
    runs_row = dict(db.execute("SELECT * FROM runs WHERE id=?", (run.id,)).fetchone())
    cells = [dict(r) for r in db.execute("SELECT * FROM cells WHERE run_id=? ORDER BY cell_key", (run.id,))]
    out: Dict[str, Any] = {"format": FORMAT, "version": VERSION, "run": runs_row, "cells": cells, "tables": {}}
    unfinished = {str(t["trial_key"]) for t in tables.trials(run.id) if t["status"] not in FINISHED}
    for table in TABLES:
        rows = _rows(db, table, run.id)
        if table == "accuracy_trials":
            for row in rows:
                if row["trial_key"] in unfinished:
                    row.update(status="pending", reason=None)
        elif table in PER_TRAINING:
            rows = [r for r in rows if r["trial_key"] not in unfinished]
        for row in rows:
            del row["run_id"]
            if table == "accuracy_trials":
                row["argv_json"] = None
        out["tables"][table] = rows
    saved: Dict[str, Any] = _swap(out, _run_folder(store), RUN_FOLDER)
    return saved


def save(store: "Store", run_id: str, path: str) -> Dict[str, int]:
    """Write run `run_id` of `store` to `path` (replaced whole, never half-written); how many
    trials it holds finished and pending."""
    data = dump(store, run_id)
    target = os.path.abspath(path)
    if not os.path.isdir(os.path.dirname(target)):
        raise UserError("--out %s: no such folder" % path)
    atomic.write_json(target, data, indent=1, sort_keys=True)
    trials = data["tables"]["accuracy_trials"]
    return {
        "finished": sum(t["status"] in FINISHED for t in trials),
        "pending": sum(t["status"] not in FINISHED for t in trials),
    }


def read(path: str) -> Dict[str, Any]:
    """The saved run of `path`, checked; a UserError naming the file otherwise."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise UserError("%s: cannot read: %s" % (path, exc.strerror or exc)) from None
    except ValueError as exc:
        raise UserError("%s: not JSON: %s" % (path, exc)) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError("%s: not a saved accuracy run (detbench accuracy save writes those)" % path)
    if data.get("version") != VERSION:
        raise UserError(
            "%s: saved accuracy run of version %r; this detbench reads version %d"
            % (path, data.get("version"), VERSION)
        )
    run, tables = data.get("run"), data.get("tables")
    if (
        not isinstance(run, dict)
        or not run.get("id")
        or not isinstance(tables, dict)
        or not isinstance(data.get("cells"), list)
    ):
        raise UserError("%s: a saved accuracy run needs its run, cells and tables" % path)
    keys = {str(t.get("trial_key")) for t in tables.get("accuracy_trials") or []}
    if not keys:
        raise UserError("%s: run %s has no accuracy trials" % (path, run["id"]))
    for table, rows in tables.items():
        if table not in TABLES:
            raise UserError("%s: tables: %r is not an accuracy table (%s)" % (path, table, ", ".join(TABLES)))
        stray = [] if table in PER_RUN else sorted({str(r.get("trial_key")) for r in rows} - keys)
        if stray:
            raise UserError(
                "%s: tables: %s: rows of trials the run does not have: %s" % (path, table, ", ".join(stray))
            )
    return data


def _insert(db: sqlite3.Connection, table: str, row: Dict[str, Any], path: str) -> None:
    columns = [r[1] for r in db.execute("PRAGMA table_info(%s)" % table)]
    unknown = sorted(set(row) - set(columns))
    if unknown:
        raise UserError("%s: %s: columns this store does not have: %s" % (path, table, ", ".join(unknown)))
    names = sorted(row)
    db.execute(
        "INSERT INTO %s (%s) VALUES (%s)" % (table, ", ".join(names), ", ".join("?" * len(names))),
        [row[n] for n in names],
    )


def load(store: "Store", path: str) -> str:
    """Put the saved accuracy run of `path` into `store`; its id."""
    data = _swap(read(path), RUN_FOLDER, _run_folder(store))
    run_id = str(data["run"]["id"])
    tables = store.accuracy()  # the accuracy tables exist before the transaction writes to them
    if store.db.execute("SELECT 1 FROM runs WHERE id=?", (run_id,)).fetchone():
        raise UserError("%s: run %s is already in %s" % (path, run_id, store.root))
    with store.transaction() as db:
        _insert(db, "runs", data["run"], path)
        for cell in data["cells"]:
            _insert(db, "cells", dict(cell, run_id=run_id), path)
        for table in TABLES:
            for row in data["tables"].get(table) or []:
                row = dict(row, run_id=run_id)
                if table == "accuracy_trials":  # a trial trained from here on keeps its files in this store
                    row["folder"] = tables.folder(run_id, str(row["trial_key"]))
                _insert(db, table, row, path)
    return run_id
