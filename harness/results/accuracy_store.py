"""The accuracy-mode tables of a results store (`Store.accuracy()`), made the first time one is used.

- `accuracy_trials`, one row per trial of an accuracy run: cell and seed, status (`pending`,
  `running`, `done`, `failed`), reason, its folder, the training command;
- `accuracy_points`, one row per checkpoint of a trial: iteration, training wall seconds up to
  it (eval excluded), then, once scored, bbox AP and AP50 (segm for Mask R-CNN) and the seconds
  the dump and the scoring took;
- `accuracy_losses`, one row per logged iteration of a trial: its training loss;
- `accuracy_load`, one row per checkpoint interval of a trial (from the previous checkpoint, or
  the start, to this one): its wall seconds, the CPU seconds other processes used and the
  seconds the hypervisor stole meanwhile (harness.plan.machine_load);
- `accuracy_resumes`, one row per checkpoint a trial's training went on from after an
  interruption: the checkpoint's iteration, the first iteration the resumed program logged and
  the seconds from that program's start to it (the time's second start-up lies within them);
- `accuracy_code`, one row per training program a trial ran (its start, and each resume from a
  checkpoint): the iteration it went on from (0 for the start) and the detbench code it ran
  (harness.plan.coderev);
- `accuracy_redos`, one row per time a trial was trained again from the start (`--redo`): when,
  the folder its earlier files were moved to, and that training's last scored checkpoint;
- `accuracy_inputs`, one row per input file or folder of a run (the shared weights, the data's
  splits): its path and the SHA-256 of its content when the run started;
- `accuracy_floor`, one row per model of a run: what its shared initial weights, untrained,
  score on the val split (the noise floor no target may sit at or below).

A checkpoint's row is written when its line arrives, before it is scored, so an interrupted run
knows how much training time the checkpoint it resumes from stands for.
"""

import json
import math
import os
from typing import Any, Dict, List, Optional, Tuple

from harness.frameworks.accuracy import trial_key  # noqa: F401  (the key of a trial, re-exported)
from harness.measure.accuracy import AccuracyPoint, LossPoint

TRIALS_DIR = "accuracy"  # the trials' folders, under the store's
TABLES = """
CREATE TABLE IF NOT EXISTS accuracy_trials (
    run_id TEXT NOT NULL, trial_key TEXT NOT NULL, cell_key TEXT NOT NULL, seed INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    reason TEXT, folder TEXT, argv_json TEXT, PRIMARY KEY (run_id, trial_key));
CREATE TABLE IF NOT EXISTS accuracy_points (
    run_id TEXT NOT NULL, trial_key TEXT NOT NULL, iteration INTEGER NOT NULL, train_seconds REAL NOT NULL,
    checkpoint TEXT, bbox_ap REAL, bbox_ap50 REAL, segm_ap REAL, segm_ap50 REAL, eval_seconds REAL,
    PRIMARY KEY (run_id, trial_key, iteration));
CREATE TABLE IF NOT EXISTS accuracy_losses (
    run_id TEXT NOT NULL, trial_key TEXT NOT NULL, iteration INTEGER NOT NULL, loss REAL NOT NULL,
    PRIMARY KEY (run_id, trial_key, iteration)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS accuracy_load (
    run_id TEXT NOT NULL, trial_key TEXT NOT NULL, start_iteration INTEGER NOT NULL, iteration INTEGER NOT NULL,
    wall_seconds REAL NOT NULL, other_cpu_seconds REAL NOT NULL, steal_seconds REAL NOT NULL,
    PRIMARY KEY (run_id, trial_key, iteration));
CREATE TABLE IF NOT EXISTS accuracy_resumes (
    run_id TEXT NOT NULL, trial_key TEXT NOT NULL, iteration INTEGER NOT NULL, first_iteration INTEGER NOT NULL,
    startup_seconds REAL NOT NULL, PRIMARY KEY (run_id, trial_key, iteration));
CREATE TABLE IF NOT EXISTS accuracy_code (
    run_id TEXT NOT NULL, trial_key TEXT NOT NULL, iteration INTEGER NOT NULL, code_json TEXT NOT NULL,
    PRIMARY KEY (run_id, trial_key, iteration));
CREATE TABLE IF NOT EXISTS accuracy_redos (
    run_id TEXT NOT NULL, trial_key TEXT NOT NULL, redone_at TEXT NOT NULL, kept_folder TEXT,
    previous_json TEXT NOT NULL, PRIMARY KEY (run_id, trial_key, redone_at));
CREATE TABLE IF NOT EXISTS accuracy_inputs (
    run_id TEXT NOT NULL, path TEXT NOT NULL, sha256 TEXT NOT NULL, PRIMARY KEY (run_id, path));
CREATE TABLE IF NOT EXISTS accuracy_floor (
    run_id TEXT NOT NULL, model TEXT NOT NULL, figures_json TEXT NOT NULL, PRIMARY KEY (run_id, model));
CREATE TABLE IF NOT EXISTS accuracy_settings (
    run_id TEXT NOT NULL, trial_key TEXT NOT NULL, settings_json TEXT NOT NULL, implementation_json TEXT NOT NULL,
    PRIMARY KEY (run_id, trial_key));
"""
# the tables that hold what one training of a trial logged (a redo clears them)
PER_TRAINING = (
    "accuracy_points",
    "accuracy_losses",
    "accuracy_load",
    "accuracy_resumes",
    "accuracy_settings",
    "accuracy_code",
)


class AccuracyTables:
    def __init__(self, store: Any) -> None:
        self.store = store
        with store.transaction() as db:
            for statement in TABLES.split(";"):
                if statement.strip():
                    db.execute(statement)

    def folder(self, run_id: str, key: str) -> str:
        """Where trial `key` of run `run_id` keeps its files: its log and checkpoints."""
        return os.path.join(os.path.abspath(str(self.store.root)), TRIALS_DIR, run_id, key.replace("/", "_"))

    def add_trials(self, run_id: str, trials: List[Dict[str, Any]]) -> None:
        """trials: dicts of trial_key, cell_key, seed, folder, argv (the first command)."""
        with self.store.transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO accuracy_trials VALUES (?, ?, ?, ?, 'pending', NULL, ?, ?)",
                [
                    (run_id, t["trial_key"], t["cell_key"], int(t["seed"]), t["folder"], json.dumps(t["argv"]))
                    for t in trials
                ],
            )

    def set_status(self, run_id: str, key: str, status: str, reason: Optional[str] = None) -> None:
        with self.store.transaction() as db:
            db.execute(
                "UPDATE accuracy_trials SET status=?, reason=? WHERE run_id=? AND trial_key=?",
                (status, reason, run_id, key),
            )

    def trials(self, run_id: str) -> List[Dict[str, Any]]:
        rows = self.store.db.execute(
            "SELECT * FROM accuracy_trials WHERE run_id=? ORDER BY trial_key", (run_id,)
        ).fetchall()
        return [dict(r) for r in rows]

    def add_checkpoint(self, run_id: str, key: str, iteration: int, train_seconds: float, path: str) -> None:
        with self.store.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO accuracy_points (run_id, trial_key, iteration, train_seconds, "
                "checkpoint) VALUES (?, ?, ?, ?, ?)",
                (run_id, key, iteration, train_seconds, path),
            )

    def add_score(self, run_id: str, key: str, point: AccuracyPoint) -> None:
        with self.store.transaction() as db:
            db.execute(
                "UPDATE accuracy_points SET bbox_ap=?, bbox_ap50=?, segm_ap=?, segm_ap50=?, eval_seconds=? "
                "WHERE run_id=? AND trial_key=? AND iteration=?",
                (
                    point.bbox_AP,
                    point.bbox_AP50,
                    point.segm_AP,
                    point.segm_AP50,
                    point.eval_seconds,
                    run_id,
                    key,
                    point.iteration,
                ),
            )

    def add_losses(self, run_id: str, key: str, losses: List[Any]) -> None:
        """losses: LossPoints or (iteration, loss) pairs."""
        pairs = [(p.iteration, p.loss) if isinstance(p, LossPoint) else (int(p[0]), float(p[1])) for p in losses]
        pairs = [(it, loss) for it, loss in pairs if math.isfinite(loss)]  # a diverged loss has no point
        with self.store.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO accuracy_losses VALUES (?, ?, ?, ?)",
                [(run_id, key, it, loss) for it, loss in pairs],
            )

    def add_figures(
        self, run_id: str, key: str, iteration: int, train_seconds: float, figures: Dict[str, Any], eval_seconds: float
    ) -> AccuracyPoint:
        """Store the shared COCOeval's output ({"bbox": {"AP", "AP50", ...}, "segm": ...}) for a checkpoint."""
        bbox, segm = figures.get("bbox") or {}, figures.get("segm") or {}
        point = AccuracyPoint(
            iteration,
            train_seconds,
            float(bbox.get("AP") or 0.0),
            float(bbox.get("AP50") or 0.0),
            segm.get("AP"),
            segm.get("AP50"),
            eval_seconds,
        )
        self.add_score(run_id, key, point)
        return point

    def checkpoints(self, run_id: str, key: str) -> List[Dict[str, Any]]:
        """Every checkpoint row of a trial (scored or not), by iteration."""
        rows = self.store.db.execute(
            "SELECT * FROM accuracy_points WHERE run_id=? AND trial_key=? ORDER BY iteration", (run_id, key)
        ).fetchall()
        return [dict(r) for r in rows]

    def curve(self, run_id: str, key: str) -> List[AccuracyPoint]:
        """The scored checkpoints of a trial as AccuracyPoints, by iteration."""
        return [
            AccuracyPoint(
                int(r["iteration"]),
                float(r["train_seconds"]),
                float(r["bbox_ap"]),
                float(r["bbox_ap50"]),
                r["segm_ap"],
                r["segm_ap50"],
                r["eval_seconds"],
            )
            for r in self.checkpoints(run_id, key)
            if r["bbox_ap"] is not None
        ]

    def losses(self, run_id: str, key: str) -> List[LossPoint]:
        rows = self.store.db.execute(
            "SELECT iteration, loss FROM accuracy_losses WHERE run_id=? AND trial_key=? ORDER BY iteration",
            (run_id, key),
        ).fetchall()
        return [LossPoint(int(r[0]), float(r[1])) for r in rows]

    def add_load(self, run_id: str, key: str, start_iteration: int, iteration: int, load: Any) -> None:
        """What else used the machine from `start_iteration` (0: the start) to the checkpoint of
        `iteration`: a harness.plan.machine_load.Load."""
        with self.store.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO accuracy_load VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    key,
                    int(start_iteration),
                    int(iteration),
                    float(load.wall_seconds),
                    float(load.other_cpu_seconds),
                    float(load.steal_seconds),
                ),
            )

    def loads(self, run_id: str) -> Dict[str, List[Tuple[int, int, float, float, float]]]:
        """trial key -> [(start iteration, iteration, wall s, other processes' CPU s, steal s)] by iteration."""
        out: Dict[str, List[Tuple[int, int, float, float, float]]] = {}
        for r in self.store.db.execute(
            "SELECT trial_key, start_iteration, iteration, wall_seconds, other_cpu_seconds, steal_seconds "
            "FROM accuracy_load WHERE run_id=? ORDER BY trial_key, iteration",
            (run_id,),
        ).fetchall():
            out.setdefault(str(r[0]), []).append((int(r[1]), int(r[2]), float(r[3]), float(r[4]), float(r[5])))
        return out

    def add_resume(self, run_id: str, key: str, iteration: int, first_iteration: int, startup_seconds: float) -> None:
        """A trial's training went on from its checkpoint of `iteration`; the resumed program logged
        `first_iteration` first, `startup_seconds` after it started. A later resume from the same
        checkpoint (the earlier one stopped before its next checkpoint) replaces the row."""
        with self.store.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO accuracy_resumes VALUES (?, ?, ?, ?, ?)",
                (run_id, key, int(iteration), int(first_iteration), float(startup_seconds)),
            )

    def resumes(self, run_id: str) -> Dict[str, List[Tuple[int, int, float]]]:
        """trial key -> [(checkpoint iteration, first logged iteration, seconds to it)] of the trials
        that were resumed, by iteration."""
        out: Dict[str, List[Tuple[int, int, float]]] = {}
        for r in self.store.db.execute(
            "SELECT trial_key, iteration, first_iteration, startup_seconds FROM accuracy_resumes WHERE run_id=? "
            "ORDER BY trial_key, iteration",
            (run_id,),
        ).fetchall():
            out.setdefault(str(r[0]), []).append((int(r[1]), int(r[2]), float(r[3])))
        return out

    def add_code(self, run_id: str, key: str, iteration: int, code: Dict[str, Any]) -> None:
        """A training program of the trial started from its checkpoint of `iteration` (0: from the
        start) running detbench code `code`; a later program from the same checkpoint replaces it."""
        with self.store.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO accuracy_code VALUES (?, ?, ?, ?)",
                (run_id, key, int(iteration), json.dumps(code, sort_keys=True)),
            )

    def codes(self, run_id: str) -> Dict[str, List[Tuple[int, Dict[str, Any]]]]:
        """trial key -> [(iteration it went on from, code)] of every training program, by iteration."""
        out: Dict[str, List[Tuple[int, Dict[str, Any]]]] = {}
        for r in self.store.db.execute(
            "SELECT trial_key, iteration, code_json FROM accuracy_code WHERE run_id=? ORDER BY trial_key, iteration",
            (run_id,),
        ).fetchall():
            out.setdefault(str(r[0]), []).append((int(r[1]), json.loads(r[2])))
        return out

    def add_inputs(self, run_id: str, digests: Dict[str, str]) -> None:
        """The content digests ({path: sha256}) of the run's inputs, taken when it started."""
        with self.store.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO accuracy_inputs VALUES (?, ?, ?)",
                [(run_id, path, digest) for path, digest in sorted(digests.items())],
            )

    def inputs(self, run_id: str) -> Dict[str, str]:
        """{path: sha256} of the run's inputs ({} for a run stored before they were recorded)."""
        rows = self.store.db.execute("SELECT path, sha256 FROM accuracy_inputs WHERE run_id=?", (run_id,))
        return {str(r[0]): str(r[1]) for r in rows.fetchall()}

    def add_floor(self, run_id: str, model: str, figures: Dict[str, float]) -> None:
        """What the untrained shared weights of `model` score ({metric: value}), measured at the run's start."""
        with self.store.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO accuracy_floor VALUES (?, ?, ?)",
                (run_id, model, json.dumps(figures, sort_keys=True)),
            )

    def floors(self, run_id: str) -> Dict[str, Dict[str, float]]:
        """{model: {metric: value}} of the run's noise floors ({} for a run stored before they were measured)."""
        rows = self.store.db.execute("SELECT model, figures_json FROM accuracy_floor WHERE run_id=?", (run_id,))
        return {str(r[0]): json.loads(r[1]) for r in rows.fetchall()}

    def add_settings(self, run_id: str, key: str, settings: Dict[str, Any], implementation: Dict[str, str]) -> None:
        """The settings a trial's training program logged (its DETBENCH_SETTINGS line, read from its
        own objects); the first line of a trial is kept, a resume's is not stored over it."""
        with self.store.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO accuracy_settings VALUES (?, ?, ?, ?)",
                (run_id, key, json.dumps(settings, sort_keys=True), json.dumps(implementation, sort_keys=True)),
            )

    def settings(self, run_id: str) -> Dict[str, Tuple[Dict[str, Any], Dict[str, str]]]:
        """trial key -> (settings, implementation) of the trials that logged them."""
        rows = self.store.db.execute(
            "SELECT trial_key, settings_json, implementation_json FROM accuracy_settings WHERE run_id=?", (run_id,)
        ).fetchall()
        return {str(r[0]): (json.loads(r[1]), json.loads(r[2])) for r in rows}

    def redo(self, run_id: str, key: str, redone_at: str, kept_folder: Optional[str]) -> None:
        """Make a trial pending again with nothing of its earlier training in the tables but one
        `accuracy_redos` row: when, where its files went and its last scored checkpoint (or its
        status and reason where none was scored)."""
        curve = self.curve(run_id, key)
        [trial] = [t for t in self.trials(run_id) if t["trial_key"] == key]
        previous: Dict[str, Any] = {"status": trial["status"], "reason": trial["reason"]}
        if curve:
            last = curve[-1]
            previous.update(
                iteration=last.iteration,
                train_seconds=last.train_seconds,
                bbox_AP=last.bbox_AP,
                bbox_AP50=last.bbox_AP50,
                segm_AP=last.segm_AP,
                segm_AP50=last.segm_AP50,
            )
        with self.store.transaction() as db:
            for table in PER_TRAINING:
                db.execute("DELETE FROM %s WHERE run_id=? AND trial_key=?" % table, (run_id, key))
            db.execute(
                "UPDATE accuracy_trials SET status='pending', reason=NULL WHERE run_id=? AND trial_key=?",
                (run_id, key),
            )
            db.execute(
                "INSERT INTO accuracy_redos VALUES (?, ?, ?, ?, ?)",
                (run_id, key, redone_at, kept_folder, json.dumps(previous, sort_keys=True)),
            )

    def redos(self, run_id: str) -> Dict[str, List[Tuple[str, Optional[str], Dict[str, Any]]]]:
        """trial key -> [(when, folder its earlier files went to, that training's last figures)],
        oldest first, of the trials trained again from the start."""
        out: Dict[str, List[Tuple[str, Optional[str], Dict[str, Any]]]] = {}
        for r in self.store.db.execute(
            "SELECT trial_key, redone_at, kept_folder, previous_json FROM accuracy_redos WHERE run_id=? "
            "ORDER BY trial_key, redone_at",
            (run_id,),
        ).fetchall():
            out.setdefault(str(r[0]), []).append((str(r[1]), r[2], json.loads(r[3])))
        return out

    def runs(self) -> List[str]:
        """The ids of the runs with accuracy trials, oldest first."""
        rows = self.store.db.execute(
            "SELECT DISTINCT a.run_id FROM accuracy_trials a JOIN runs r ON r.id = a.run_id ORDER BY r.created"
        ).fetchall()
        return [r[0] for r in rows]
