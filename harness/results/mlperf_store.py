"""The MLPerf tables of a results store (`MlperfTables(store)`), made the first time one is used.

- `mlperf_runs`, one row per imported run: a system's results of one benchmark in one round
  (round, ruleset, submitter, system, benchmark, division), the platform its system JSON
  describes, the score by the round's rule (minutes; NULL where the rule gives none, with why),
  the review's scaling factor, the folder it came from;
- `mlperf_results`, one row per result file of a run: its name, whether the round's rules pass
  on it (else the checker's first message), and what detbench read of it (`mllog.Result`).

Importing a system's benchmark again replaces its run.
"""

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from harness.measure.mllog import Result
from harness.results.store import Store

TABLES = """
CREATE TABLE IF NOT EXISTS mlperf_runs (
    run_id TEXT PRIMARY KEY, round TEXT NOT NULL, ruleset TEXT NOT NULL, submitter TEXT NOT NULL,
    system TEXT NOT NULL, benchmark TEXT NOT NULL, division TEXT NOT NULL, platform_json TEXT NOT NULL,
    score_minutes REAL, score_note TEXT, scaling_factor REAL NOT NULL, folder TEXT NOT NULL,
    UNIQUE (round, submitter, system, benchmark));
CREATE TABLE IF NOT EXISTS mlperf_results (
    run_id TEXT NOT NULL, result TEXT NOT NULL, compliance TEXT, result_json TEXT NOT NULL,
    PRIMARY KEY (run_id, result));
"""


class MlperfTables:
    def __init__(self, store: Store) -> None:
        self.store = store
        with store.transaction() as db:
            for statement in TABLES.split(";"):
                if statement.strip():
                    db.execute(statement)

    def put_run(self, run: Dict[str, Any], results: Sequence[Result]) -> None:
        """One run and its result files, replacing an earlier import of the same system and benchmark."""
        with self.store.transaction() as db:
            old = db.execute(
                "SELECT run_id FROM mlperf_runs WHERE round=? AND submitter=? AND system=? AND benchmark=?",
                (run["round"], run["submitter"], run["system"], run["benchmark"]),
            ).fetchall()
            for (run_id,) in old:
                db.execute("DELETE FROM mlperf_results WHERE run_id=?", (run_id,))
                db.execute("DELETE FROM mlperf_runs WHERE run_id=?", (run_id,))
            db.execute(
                "INSERT INTO mlperf_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run["run_id"],
                    run["round"],
                    run["ruleset"],
                    run["submitter"],
                    run["system"],
                    run["benchmark"],
                    run["division"],
                    json.dumps(run["platform"], sort_keys=True),
                    run["score_minutes"],
                    run["score_note"],
                    run["scaling_factor"],
                    run["folder"],
                ),
            )
            db.executemany(
                "INSERT INTO mlperf_results VALUES (?, ?, ?, ?)",
                [(run["run_id"], _name(r.path), r.compliance, json.dumps(r.as_dict())) for r in results],
            )

    def runs(self, benchmark: Optional[str] = None) -> List[Dict[str, Any]]:
        """Every imported run (of `benchmark`), each with its `results`: (file name, Result) pairs."""
        sql = "SELECT * FROM mlperf_runs" + (" WHERE benchmark=?" if benchmark else "")
        sql += " ORDER BY benchmark, round, submitter, system"
        rows = [dict(r) for r in self.store.db.execute(sql, (benchmark,) if benchmark else ()).fetchall()]
        for row in rows:
            row["platform"] = json.loads(row.pop("platform_json"))
            found = self.store.db.execute(
                "SELECT result, result_json FROM mlperf_results WHERE run_id=? ORDER BY result", (row["run_id"],)
            ).fetchall()
            row["results"] = [_result(name, text) for name, text in found]
        return rows


def _name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _result(name: str, text: str) -> Tuple[str, Result]:
    return name, Result.from_dict(json.loads(text))
