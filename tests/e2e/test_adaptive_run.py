"""An adaptive run of the calibration workload through the command line: it stops when the medians are
known well enough, or at max, goes on after an interrupt between rounds, and the report says which."""
import pytest
from click.testing import CliRunner

from harness import run as run_mod
from harness.cli import main
from tests.support.storerows import rows

pytestmark = [pytest.mark.e2e, pytest.mark.timing]   # its figures hold on an otherwise idle CPU

SCENARIO = """\
name: adaptive
matrix:
  framework: [calibrate]
  model: [retinanet]
  precision: [fp32]
  platform: [local]
batch_per_gpu: 2
input_size: [320, 320]
warmup: 2
measure: 8
repeats: {{min: 6, max: 7, half_width: {half_width}}}
timeout_s: 60
calibrate:
  iteration_ms: 10
  data_ms: 1
"""


def rounds(results):
    return rows(results, "SELECT repeat, status FROM trials ORDER BY seq")


def report(results):
    out = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results)])
    assert out.exit_code == 0, out.output
    return out.output


def test_a_quiet_cell_stops_after_min_rounds(tmp_path):
    path = tmp_path / "adaptive.yaml"
    path.write_text(SCENARIO.format(half_width=0.5))
    results = tmp_path / "results"
    out = CliRunner().invoke(main, ["run", "--scenario", str(path), "--results", str(results)])
    assert out.exit_code == 0, out.output
    assert rounds(results) == [(r, "done") for r in range(1, 7)]
    assert "round 7" not in out.output
    text = report(results)
    assert "retinanet calibrate 6" in text and "Every cell reached it." in text, text


def test_an_unreached_target_runs_to_max_after_an_interrupt_between_rounds_and_says_so(tmp_path, monkeypatch):
    path = tmp_path / "adaptive.yaml"
    path.write_text(SCENARIO.format(half_width="0.000001"))   # no real cell is known to a millionth
    results = tmp_path / "results"
    extend = run_mod._extend
    calls = []

    def interrupted_between_rounds(store, run_id, sc, out):
        if not store.unfinished_trials(run_id):
            calls.append(run_id)
            if len(calls) == 1:
                raise KeyboardInterrupt("between rounds")
        return extend(store, run_id, sc, out)

    monkeypatch.setattr(run_mod, "_extend", interrupted_between_rounds)
    out = CliRunner().invoke(main, ["run", "--scenario", str(path), "--results", str(results)])
    assert out.exit_code == 130, out.output
    assert rounds(results) == [(r, "done") for r in range(1, 7)]      # min rounds done, nothing more yet
    run_id = rows(results, "SELECT id FROM runs")[0][0]
    out = CliRunner().invoke(main, ["run", "--resume", run_id, "--results", str(results)])
    assert out.exit_code == 0, out.output
    assert "round 7: 1 of 1 cells not yet within" in out.output, out.output
    assert rounds(results) == [(r, "done") for r in range(1, 8)]      # max is 7: no round 8
    again = CliRunner().invoke(main, ["run", "--resume", run_id, "--results", str(results)])
    assert "nothing left to do" in again.output, again.output
    text = report(results)
    assert "retinanet calibrate 7" in text and "Did not reach +-0.0001%: retinanet calibrate (+-" in text, text
