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
