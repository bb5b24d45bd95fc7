import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REQUIRE_SERVICES = os.environ.get("DETBENCH_REQUIRE_SERVICES") == "1"


def need_service(available, reason):
    """Skip with a reason when a service is missing, or fail when CI requires it."""
    if available:
        return
    if REQUIRE_SERVICES:
        pytest.fail("DETBENCH_REQUIRE_SERVICES=1 but %s" % reason)
    pytest.skip(reason)


GOOD_SCENARIO = """\
name: tiny
matrix:
  framework: [calibrate]
  model: [retinanet]
  precision: [fp32]
  platform: [local]
  gpus: [1]
batch_per_gpu: 2
input_size: [320, 320]
warmup: 2
measure: 10
repeats: 2
timeout_s: 30
calibrate:
  iteration_ms: 10
  data_ms: 1
"""


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
