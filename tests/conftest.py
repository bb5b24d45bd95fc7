import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# the shared helpers live in tests/support; imported here too, where tests found them first
from tests.support.scenarios import GOOD_SCENARIO  # noqa: E402,F401
from tests.support.services import need_service  # noqa: E402,F401


@pytest.fixture
def write_scenario(tmp_path):
    def write(text=GOOD_SCENARIO, name="scenario.yaml"):
        path = tmp_path / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path
    return write


# With pytest-xdist (DETBENCH_TEST_WORKERS=N scripts/test.sh), the files that drive the shared
# Docker engine or Slurm cluster (and may stop and restart them: DETBENCH_DISRUPTIVE_TESTS) are one
# unit of work, run in turn on one worker; every other test is a unit of its own, so the two
# workers end together (a module fixture may then be made once per worker: about 1.5 minutes
# of the suite's 45 worker-minutes are fixtures).
SHARED_SERVICES = re.compile(
    r"need_docker|need_image|engine\.(connect|available)|slurmjobs|DISRUPTIVE|scontrol|sbatch ")
_uses_services = {}


def uses_shared_services(path):
    """Whether the test file at `path` touches the Docker engine or the Slurm cluster."""
    if path not in _uses_services:
        _uses_services[path] = bool(SHARED_SERVICES.search(Path(path).read_text(encoding="utf-8")))
    return _uses_services[path]


def pytest_configure(config):
    # registered here, not in pyproject.toml, whose hash keys the cached Python environment
    config.addinivalue_line(
        "markers", "timing: its figures hold only on an otherwise idle CPU; with workers, "
        "scripts/test.sh runs these after the others, one at a time")
    config.addinivalue_line(
        "markers", "nightly: a slow end-to-end case (real revisions, whole trainings) that the nightly "
        "workflow runs (DETBENCH_NIGHTLY=1); left out of every other run, where a fast case of the same "
        "path stands in for it")


# tryfirst: pytest-xdist's worker reads the xdist_group marks in this same hook, so they must be
# there before it runs
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if os.environ.get("DETBENCH_NIGHTLY") != "1":
        nightly = [item for item in items if item.get_closest_marker("nightly")]
        if nightly:
            config.hook.pytest_deselected(items=nightly)
            items[:] = [item for item in items if not item.get_closest_marker("nightly")]
    for item in items:
        if uses_shared_services(str(item.path)):
            item.add_marker(pytest.mark.xdist_group("shared-services"))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # the shared-services unit is the longest (a quarter of the suite, in turn on one worker):
        # handed out first, it runs beside everything else instead of after it
        items.sort(key=lambda item: not uses_shared_services(str(item.path)))
