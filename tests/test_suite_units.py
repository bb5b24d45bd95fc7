"""How the suite is handed to pytest-xdist workers (tests/conftest.py): the files that drive the
shared Docker engine or Slurm cluster are one unit, run in turn on one worker.

pytest 9.2 gives items structured IDs that pytest-xdist 3.8 cannot add its group suffix to, so
every test ran alone wherever a worker was free (pytest-xdist issue 1386); pyproject.toml keeps
pytest below 9.2 until a release of pytest-xdist handles them, and this test fails if that breaks
again."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ["tests/launch/test_slurm_render.py", "tests/launch/test_slurm_states.py"]
PLAIN = ["tests/scrapers/test_scraper_ranks.py"]


def test_the_files_that_drive_docker_or_slurm_run_in_turn_on_one_worker():
    pytest.importorskip("xdist")
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist",
                          "loadgroup", "-v"] + SHARED + PLAIN, cwd=ROOT, capture_output=True, text=True).stdout
    workers = {}
    for worker, nodeid in re.findall(r"^\[(gw\d+)\] \[\s*\d+%\] (?:PASSED|SKIPPED|FAILED|ERROR) (\S+)", out, re.M):
        workers.setdefault(nodeid.split("::")[0], set()).add(worker)
    assert set(workers) == set(SHARED + PLAIN), out[-3000:]
    assert len(set.union(*(workers[f] for f in SHARED))) == 1, workers
