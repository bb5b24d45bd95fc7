"""The results store: one SQLite file (WAL) plus a folder per trial.

results/
  detbench.sqlite          runs, planned cells, trials (with their per-trial estimates),
                           iteration records
  trials/<trial-id>/       log.txt, log.times and trial.json as runner.py wrote them

Every change is one transaction, so a crash or a kill leaves the store as it was after
the last finished trial. A file that is not a detbench store is refused, never touched.

Schema 2 added runs.origin ("measured", or "imported" for logs brought in by `detbench
import`) and, per trial, figure_kind (how the framework's logged figure relates to the
one iteration-time definition), window_json (the iterations the figure covers), work_json
(mean work per iteration the framework logged: proposals, sampled RoIs, ...), peak_rss_mb
and peak_device_mb (memory measured one way for every framework). Schema 3 added, per
trial, latency_json: an inference trial's latency mean and percentiles over its measured
batches, and the mean time of each of its phases; per run, limits_json: the machine's measured
compute peak per precision and each cell's counted work per image (harness.measure.compute),
from which reports give achieved TFLOP/s and the fraction of peak. Schema 4 added, per run,
order_json: how the trials of each round were ordered ({"seed": N, "drawn": bool}: shuffled from that
seed, drawn by `detbench run` where the scenario gave none; empty for a run stored before, whose
rounds ran cell by cell in a fixed order). Schema 5 added, per trial, drawn_json: what the trial drew
from its data set as the framework logged it (distinct image views, flips, draws, epochs started,
images per iteration, over the measured window and the whole trial; harness.measure.drawn), empty
where the log has no DETBENCH_DATA lines. Schema 6 added, per trial, breakdown_json: where its step time
went, phase by phase (harness.measure.breakdown). An older store gains the newer columns, empty, the first
time this version opens it.
"""

import json
import sqlite3
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Literal, Mapping, Optional, Sequence, Tuple, Type, Union

if TYPE_CHECKING:
    from harness.measure.result import TrialResult
    from harness.results.accuracy_store import AccuracyTables

from harness.vocab import names
from harness.errors import ResultsWriteError, UserError
from harness.results import records

SCHEMA_VERSION = 6
APPLICATION = "detbench"
DB_NAME = "detbench.sqlite"

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id TEXT PRIMARY KEY, scenario TEXT NOT NULL, scenario_path TEXT, scenario_json TEXT NOT NULL,
    backend TEXT NOT NULL, created REAL NOT NULL, host_json TEXT, origin TEXT, limits_json TEXT,
    order_json TEXT);
CREATE TABLE cells (
    run_id TEXT NOT NULL REFERENCES runs(id), cell_key TEXT NOT NULL,
    framework TEXT NOT NULL, model TEXT NOT NULL, precision TEXT NOT NULL, platform TEXT NOT NULL,
    gpus INTEGER NOT NULL, nodes INTEGER NOT NULL, batch_per_gpu INTEGER NOT NULL,
    images_per_iteration INTEGER NOT NULL, excluded TEXT,
    PRIMARY KEY (run_id, cell_key));
CREATE TABLE trials (
    id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id), seq INTEGER NOT NULL,
    cell_key TEXT NOT NULL, repeat INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    reason TEXT, started REAL, ended REAL, exit_code INTEGER,
    argv_json TEXT, settings_json TEXT,
    throughput REAL, observed REAL, iteration_time_s REAL, data_time_s REAL,
    exact INTEGER, peak_mem_mb REAL, records INTEGER, scrape_errors INTEGER,
    fingerprint TEXT, telemetry_json TEXT,
    figure_kind TEXT, window_json TEXT, work_json TEXT, peak_rss_mb REAL, peak_device_mb REAL,
    latency_json TEXT, drawn_json TEXT, breakdown_json TEXT,
    UNIQUE (run_id, seq));
CREATE INDEX trials_by_cell ON trials (run_id, cell_key);
CREATE TABLE iterations (
    trial_id TEXT NOT NULL, iteration INTEGER NOT NULL, time_s REAL, data_time_s REAL,
    arrived REAL, PRIMARY KEY (trial_id, iteration)) WITHOUT ROWID;
"""


# the columns each schema version added, by the version it brought a store to
UPGRADES = {
    2: (
        ("runs", "origin TEXT"),
        ("trials", "figure_kind TEXT"),
        ("trials", "window_json TEXT"),
        ("trials", "work_json TEXT"),
        ("trials", "peak_rss_mb REAL"),
        ("trials", "peak_device_mb REAL"),
    ),
    3: (("trials", "latency_json TEXT"), ("runs", "limits_json TEXT")),
    4: (("runs", "order_json TEXT"),),
    5: (("trials", "drawn_json TEXT"),),
    6: (("trials", "breakdown_json TEXT"),),
}


# a pending trial as create_run and add_trials take it: (seq, cell key, repeat, argv)
PendingTrial = Tuple[int, str, int, Sequence[str]]


def new_run_id() -> str:
    """A new run's id: its start time and six random hex digits."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


class Store:
    def __init__(self, results_dir: Union[str, Path], create: bool = True) -> None:
        self.root = Path(results_dir).resolve()
        self.path = self.root / DB_NAME
        if not self.path.exists():
            if not create:
                raise UserError("%s: no results store here (run `detbench run` first)" % self.root)
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ResultsWriteError(
                    "%s: cannot create the results folder: %s" % (self.root, exc.strerror)
                ) from None
        self.renamed = False  # set when a row read carried a framework's old name (harness.vocab.names)
        self.db = self._connect()

    # -------------------------------------------------------------- opening
    def _connect(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(str(self.path), timeout=60, isolation_level=None)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA busy_timeout = 60000")
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            raise UserError("%s: not a detbench results store (%s); refusing to touch it" % (self.path, exc)) from None
        if not tables:
            self._create(db, self.path)
        elif "meta" not in tables:
            raise UserError("%s: a SQLite file that is not a detbench results store; refusing to touch it" % self.path)
        try:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            # a damaged page may sit anywhere: look at every page before reading or adding a row
            damage = [r[0] for r in db.execute("PRAGMA quick_check(3)")]
        except sqlite3.DatabaseError as exc:
            raise UserError("%s: damaged results store (%s); refusing to touch it" % (self.path, exc)) from None
        if meta.get("application") != APPLICATION:
            raise UserError("%s: not a detbench results store; refusing to touch it" % self.path)
        if str(meta.get("schema_version")) not in [str(v) for v in range(1, SCHEMA_VERSION + 1)]:
            raise UserError(
                "%s: results store schema %s, this detbench reads %d"
                % (self.path, meta.get("schema_version"), SCHEMA_VERSION)
            )
        if damage != ["ok"]:
            raise UserError(
                "%s: damaged results store (%s); refusing to touch it; "
                "`sqlite3 FILE .recover` may save its rows" % (self.path, " ".join("; ".join(damage).split()))
            )
        if meta.get("schema_version") != str(SCHEMA_VERSION):
            self._upgrade(db, self.path)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.OperationalError as exc:
            raise ResultsWriteError("%s: cannot open the results store for writing: %s" % (self.path, exc)) from None
        return db

    @staticmethod
    def _create(db: sqlite3.Connection, path: Path) -> None:
        with _Transaction(db, path):
            exists = db.execute("SELECT count(*) FROM sqlite_master WHERE name='meta'").fetchone()[0]
            if not exists:  # another process may have created it meanwhile
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.executemany(
                    "INSERT INTO meta VALUES (?, ?)",
                    [("application", APPLICATION), ("schema_version", str(SCHEMA_VERSION))],
                )

    @staticmethod
    def _upgrade(db: sqlite3.Connection, path: Path) -> None:
        """Add the newer schemas' columns to an older store (its rows keep their values)."""
        with _Transaction(db, path):
            version = int(db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
            for step in range(version + 1, SCHEMA_VERSION + 1):  # none: another process upgraded it meanwhile
                for table, column in UPGRADES[step]:
                    db.execute("ALTER TABLE %s ADD COLUMN %s" % (table, column))
            db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    def accuracy(self) -> "AccuracyTables":
        """The accuracy-mode tables (`mode: accuracy` runs), made on first use: harness.results.accuracy_store."""
        from harness.results.accuracy_store import AccuracyTables

        return AccuracyTables(self)

    def close(self) -> None:
        self.db.close()

    def transaction(self) -> "_Transaction":
        """One write transaction: `with store.transaction() as db: ...`."""
        return _Transaction(self.db, self.path)

    def trial_dir(self, trial_id: str) -> Path:
        """The folder of a trial's files (results/trials/<id>)."""
        return self.root / "trials" / trial_id

    # -------------------------------------------------------------- writing
    def create_run(
        self,
        run_id: str,
        scenario_name: str,
        scenario_path: Optional[str],
        scenario_json: str,
        backend: str,
        host: Any,
        cells: Iterable[Mapping[str, Any]],
        trials: Iterable[PendingTrial],
        origin: str = "measured",
        limits: Optional[Mapping[str, Any]] = None,
        order: Optional[Mapping[str, Any]] = None,
    ) -> None:
        """cells: dicts with cell columns; trials: (seq, cell_key, repeat, argv) in run order;
        limits: the machine's peak and the cells' work per image (harness.measure.compute), or None;
        order: how each round's trials were ordered ({"seed": N, "drawn": bool}), or None."""
        with self.transaction() as db:
            db.execute(
                "INSERT INTO runs (id, scenario, scenario_path, scenario_json, backend, created, host_json,"
                " origin, limits_json, order_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    scenario_name,
                    scenario_path,
                    scenario_json,
                    backend,
                    time.time(),
                    json.dumps(host, sort_keys=True),
                    origin,
                    None if limits is None else json.dumps(limits, sort_keys=True),
                    None if order is None else json.dumps(order, sort_keys=True),
                ),
            )
            db.executemany(
                "INSERT INTO cells VALUES (:run_id, :cell_key, :framework, :model, :precision, :platform,"
                " :gpus, :nodes, :batch_per_gpu, :images_per_iteration, :excluded)",
                [dict(c, run_id=run_id) for c in cells],
            )
            db.executemany(
                "INSERT INTO trials (id, run_id, seq, cell_key, repeat, status, argv_json)"
                " VALUES (?, ?, ?, ?, ?, 'pending', ?)",
                [
                    ("%s-%04d" % (run_id, seq), run_id, seq, key, rep, json.dumps(argv))
                    for seq, key, rep, argv in trials
                ],
            )

    def add_trials(self, run_id: str, trials: Iterable[PendingTrial]) -> None:
        """Pending trials appended to a run (an adaptive run's next round): (seq, cell_key, repeat,
        argv) in run order, seq going on from the run's last."""
        with self.transaction() as db:
            db.executemany(
                "INSERT INTO trials (id, run_id, seq, cell_key, repeat, status, argv_json)"
                " VALUES (?, ?, ?, ?, ?, 'pending', ?)",
                [
                    ("%s-%04d" % (run_id, seq), run_id, seq, key, rep, json.dumps(argv))
                    for seq, key, rep, argv in trials
                ],
            )

    def mark_running(self, trial_id: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE trials SET status='running', started=? WHERE id=?", (time.time(), trial_id))

    def mark_pending(self, trial_id: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE trials SET status='pending', started=NULL WHERE id=?", (trial_id,))

    def finish_trial(self, trial_id: str, result: "TrialResult") -> None:
        """Write a trial's TrialResult (harness.measure.result): its row's columns and its iterations."""
        values = result.columns()
        cols = sorted(values)
        with self.transaction() as db:
            db.execute(
                "UPDATE trials SET %s WHERE id=?" % ", ".join("%s=?" % c for c in cols),
                [values[c] for c in cols] + [trial_id],
            )
            db.execute("DELETE FROM iterations WHERE trial_id=?", (trial_id,))
            db.executemany(
                "INSERT OR REPLACE INTO iterations VALUES (?, ?, ?, ?, ?)",
                [(trial_id,) + tuple(it) for it in result.iterations],
            )

    # -------------------------------------------------------------- reading
    def run(self, run_id: str) -> sqlite3.Row:
        """The row of run `run_id` ("latest" for the newest); UserError when there is none."""
        row: Optional[sqlite3.Row]
        if run_id == "latest":
            row = self.db.execute("SELECT * FROM runs ORDER BY created DESC, id DESC LIMIT 1").fetchone()
        else:
            row = self.db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise UserError("no run %r in %s" % (run_id, self.path))
        return row

    def runs(self) -> List[sqlite3.Row]:
        """Every run's row, oldest first."""
        return self.db.execute("SELECT * FROM runs ORDER BY created, id").fetchall()

    def _read(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        """Rows of a cells or trials query, with frameworks stored under an old name renamed."""
        cursor = self.db.cursor()
        cursor.row_factory = self._renaming_row
        return cursor.execute(sql, args)

    def _renaming_row(self, cursor: sqlite3.Cursor, values: Tuple[Any, ...]) -> sqlite3.Row:
        row = sqlite3.Row(cursor, values)
        columns = row.keys()
        fixed = list(values)
        for column, rename in (("framework", names.framework), ("cell_key", names.cell_key)):
            if column in columns:
                i = columns.index(column)
                if isinstance(fixed[i], str):
                    fixed[i] = rename(fixed[i])
        if fixed != list(values):
            self.renamed = True
            return sqlite3.Row(cursor, tuple(fixed))
        return row

    def unfinished_trials(self, run_id: str) -> List[records.StoredTrial]:
        """A run's trials still to run (pending, or running when the run was stopped) in run order,
        as StoredTrials: what running or resuming the run executes."""
        return [
            records.trial_of(r)
            for r in self._read(
                "SELECT * FROM trials WHERE run_id=? AND status IN ('pending', 'running') ORDER BY seq", (run_id,)
            ).fetchall()
        ]

    def trials(self, run_id: str) -> List[sqlite3.Row]:
        """A run's trial rows in run order."""
        return self._read("SELECT * FROM trials WHERE run_id=? ORDER BY seq", (run_id,)).fetchall()

    def cells(self, platform: Optional[str] = None, run_id: Optional[str] = None) -> List[sqlite3.Row]:
        """Planned cells; for each cell key only the newest run that planned it."""
        where: List[str] = []
        args: List[str] = []
        if platform:
            where.append("c.platform = ?")
            args.append(platform)
        if run_id:
            where.append("c.run_id = ?")
            args.append(run_id)
        sql = (
            "SELECT c.*, r.created FROM cells c JOIN runs r ON r.id = c.run_id"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY r.created, r.id"
        )
        newest: Dict[str, sqlite3.Row] = {}
        for row in self._read(sql, args):
            newest[row["cell_key"]] = row
        return list(newest.values())

    def cell_trials(self, run_id: str, cell_key: str) -> List[sqlite3.Row]:
        """The trial rows of one cell of a run (stored under its framework's old name too), in run order."""
        keys = [cell_key] + [
            old + cell_key[len(new) :] for old, new in names.RENAMED.items() if cell_key.startswith(new + "/")
        ]
        return self._read(
            "SELECT * FROM trials WHERE run_id=? AND cell_key IN (%s) ORDER BY seq" % ",".join("?" * len(keys)),
            [run_id] + keys,
        ).fetchall()

    def iterations(self, trial_id: str) -> List[sqlite3.Row]:
        """A trial's iteration rows in iteration order."""
        return self.db.execute(
            "SELECT iteration, time_s, data_time_s, arrived FROM iterations WHERE trial_id=? ORDER BY iteration",
            (trial_id,),
        ).fetchall()

    def integrity(self) -> str:
        """SQLite's integrity check of the store: "ok" where it finds nothing."""
        return str(self.db.execute("PRAGMA integrity_check").fetchone()[0])

    # -------------------------------------------------------------- reading typed records
    # The same rows as the readers above, each decoded once into its record (harness.results.records).
    def read_run(self, run_id: str) -> records.StoredRun:
        """The StoredRun of run `run_id` ("latest" for the newest); UserError when there is none."""
        return records.run_of(self.run(run_id))

    def read_runs(self) -> List[records.StoredRun]:
        """Every run, oldest first, as StoredRuns."""
        return [records.run_of(r) for r in self.runs()]

    def read_cells(self, platform: Optional[str] = None, run_id: Optional[str] = None) -> List[records.StoredCell]:
        """StoredCells as cells() selects them: for each cell key only the newest run that planned it."""
        return [records.cell_of(r) for r in self.cells(platform=platform, run_id=run_id)]

    def read_trials(self, run_id: str, cell_key: Optional[str] = None) -> List[records.StoredTrial]:
        """A run's StoredTrials in run order (only one cell's, given its key)."""
        rows = self.trials(run_id) if cell_key is None else self.cell_trials(run_id, cell_key)
        return [records.trial_of(r) for r in rows]

    def read_iterations(self, trial_id: str) -> Tuple[records.StoredIteration, ...]:
        """A trial's StoredIterations in iteration order."""
        return tuple(records.iteration_of(r) for r in self.iterations(trial_id))


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any error; SQLite's write errors become ResultsWriteError."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.db = db
        self.path = path

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._error(exc) from None
        return self.db

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> Literal[False]:
        if exc_type is None:
            try:
                self.db.execute("COMMIT")
                return False
            except sqlite3.OperationalError as failed:  # e.g. disk full: the commit did not happen
                exc = failed
        try:
            self.db.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite rolled back already
        if isinstance(exc, sqlite3.OperationalError):
            raise self._error(exc) from None
        return False

    def _error(self, exc: sqlite3.Error) -> ResultsWriteError:
        return ResultsWriteError("%s: cannot write the results store: %s" % (self.path, exc))
