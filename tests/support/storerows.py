"""Reading a results store from a test while a run (another process) may still be writing it."""
import sqlite3
from pathlib import Path


def rows(results, sql, *args):
    """The rows of `sql` on the store in `results`; [] while the store or its tables do not exist yet."""
    path = Path(results) / "detbench.sqlite"
    if not path.exists():
        return []
    db = sqlite3.connect(str(path), timeout=30)
    try:
        return db.execute(sql, args).fetchall()
    except sqlite3.OperationalError:   # not created yet
        return []
    finally:
        db.close()


def statuses(results):
    return [s for s, in rows(results, "SELECT status FROM trials ORDER BY seq")]
