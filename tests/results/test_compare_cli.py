"""`detbench baseline save` and `detbench compare` from the command line: exit codes and files."""
import json
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from harness.results import baseline
from harness.cli import main

from tests.results.test_compare_rule import BASE, KEY, scaled, side

CALIBRATE = """\
name: gate-e2e
matrix:
  framework: [calibrate]
  model: [retinanet]
  precision: [fp32]
  platform: [local]
  gpus: [1]
batch_per_gpu: 2
input_size: [320, 320]
warmup: 2
measure: 12
repeats: 5
timeout_s: 60
calibrate:
  iteration_ms: {iteration_ms}
  data_ms: 1
"""


def write_side(tmp_path, name, values, **kw):
    path = tmp_path / name
    baseline.save(side(values, run_id=name, **kw), path)
    return str(path)


def compare(*args):
    return CliRunner().invoke(main, ["compare", *args])


def test_unchanged_exits_0(tmp_path):
    out = compare("--baseline", write_side(tmp_path, "a.json", BASE),
                  "--candidate", write_side(tmp_path, "b.json", list(reversed(BASE))))
    assert out.exit_code == 0, out.output
    assert out.output.startswith("PASS: 1 unchanged")


def test_regression_exits_1_and_writes_junit_and_markdown(tmp_path):
    junit, md = tmp_path / "junit.xml", tmp_path / "summary.md"
    out = compare("--baseline", write_side(tmp_path, "a.json", BASE),
                  "--candidate", write_side(tmp_path, "b.json", scaled(BASE, 0.9)),
                  "--junit", str(junit), "--markdown", str(md))
    assert out.exit_code == 1, out.output
    assert out.output.splitlines()[4].startswith(KEY) and out.output.splitlines()[4].endswith("regression")
    assert ET.parse(str(junit)).getroot().get("failures") == "1"
    assert "❌ regression" in md.read_text()


def test_possible_regression_and_not_comparable_do_not_fail_unless_strict(tmp_path):
    a = write_side(tmp_path, "a.json", BASE)
    b = write_side(tmp_path, "b.json", BASE, settings={"iteration_ms": 99.0, "warmup": 3})
    assert compare("--baseline", a, "--candidate", b).exit_code == 0
    strict = compare("--baseline", a, "--candidate", b, "--strict")
    assert strict.exit_code == 1 and "settings differ: iteration_ms 20.0 -> 99.0" in strict.output
    assert strict.output.startswith("FAIL: 1 not comparable")
    ignored = compare("--baseline", a, "--candidate", b, "--ignore-setting", "iteration_ms", "--strict")
    assert ignored.exit_code == 0, ignored.output


@pytest.mark.parametrize("extra,message", [
    (["--threshold", "7"], "--threshold must lie between 0 and 1"),
    (["--alpha", "-1"], "--alpha must lie between 0 and 1"),
])
def test_bad_rule_exits_2(tmp_path, extra, message):
    a = write_side(tmp_path, "a.json", BASE)
    out = compare("--baseline", a, "--candidate", a, *extra)
    assert out.exit_code == 2 and message in out.output


def test_bad_sides_exit_2_with_one_line(tmp_path):
    a = write_side(tmp_path, "a.json", BASE)
    missing = compare("--baseline", str(tmp_path / "nope.json"), "--candidate", a)
    assert missing.exit_code == 2 and "nope.json: no such baseline file" in missing.output
    (tmp_path / "broken.json").write_text("{")
    broken = compare("--baseline", str(tmp_path / "broken.json"), "--candidate", a)
    assert broken.exit_code == 2 and "not valid JSON" in broken.output
    no_store = compare("--baseline", "20260101-000000-abcdef", "--candidate", a,
                       "--results", str(tmp_path / "empty"))
    assert no_store.exit_code == 2 and "neither a baseline file nor a run" in no_store.output
    assert "Traceback" not in missing.output + broken.output + no_store.output


def test_baseline_save_without_a_store_exits_2(tmp_path):
    out = CliRunner().invoke(main, ["baseline", "save", "latest", "--results", str(tmp_path / "none"),
                                    "--out", str(tmp_path / "b.json")])
    assert out.exit_code == 2 and "no results store here" in out.output


@pytest.mark.timing
@pytest.mark.e2e
def test_a_slowed_calibration_run_fails_the_gate(tmp_path):
    runner = CliRunner()
    results = str(tmp_path / "results")
    for name, ms in (("base.yaml", 10), ("slow.yaml", 13)):
        (tmp_path / name).write_text(CALIBRATE.format(iteration_ms=ms))
    first = runner.invoke(main, ["run", "--scenario", str(tmp_path / "base.yaml"), "--results", results])
    assert first.exit_code == 0, first.output
    saved = runner.invoke(main, ["baseline", "save", "latest", "--results", results,
                                 "--out", str(tmp_path / "baseline.json")])
    assert saved.exit_code == 0, saved.output
    stored = json.loads((tmp_path / "baseline.json").read_text())
    cell = stored["cells"][KEY]
    assert len(cell["throughput"]) == 5 and len(cell["observed"]) == 5
    assert cell["settings"]["iteration_ms"] == 10.0 and cell["settings"]["images_per_iteration"] == 2
    assert stored["host"]["cpu"]["model"]
    # the run in the store and the file saved from it are the same side
    same = runner.invoke(main, ["compare", "--baseline", stored["run"]["id"], "--candidate",
                                str(tmp_path / "baseline.json"), "--results", results])
    assert same.exit_code == 0 and "1.000 (+0.0%)" in same.output and same.output.startswith("PASS: 1 unchanged")

    slow = runner.invoke(main, ["run", "--scenario", str(tmp_path / "slow.yaml"), "--results", results])
    assert slow.exit_code == 0, slow.output
    md = tmp_path / "summary.md"
    gate = runner.invoke(main, ["compare", "--baseline", str(tmp_path / "baseline.json"),
                                "--candidate", "latest", "--results", results,
                                "--ignore-setting", "iteration_ms", "--markdown", str(md)])
    assert gate.exit_code == 1, gate.output
    assert gate.output.startswith("FAIL: 1 regression")
    row = next(line for line in gate.output.splitlines() if line.startswith(KEY))
    assert row.endswith("regression")
    ratio = float(row.split()[3])          # 10 ms -> 13 ms: 1/1.3 = 0.769, give or take the machine's load
    assert 0.74 < ratio < 0.80, row
    assert "iteration_ms 10.0 -> 13.0" in md.read_text()
    assert "sentinel" not in gate.output        # slowed on purpose: no blame on the machine

    # without --ignore-setting the changed workload is refused, not judged
    refused = runner.invoke(main, ["compare", "--baseline", str(tmp_path / "baseline.json"),
                                   "--candidate", "latest", "--results", results])
    assert refused.exit_code == 0 and "not comparable" in refused.output
