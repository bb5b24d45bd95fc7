"""Every kind of bad scenario gives one line naming file, line and field; nothing runs."""
import re

import pytest
from click.testing import CliRunner

from harness import launch
from harness.plan import scenario
from harness.cli import main
from harness.errors import UserError
from tests.support.scenarios import GOOD_SCENARIO


def error_of(write_scenario, text):
    path = write_scenario(text)
    with pytest.raises(UserError) as info:
        launch.load_scenario(path)
    message = str(info.value)
    assert "\n" not in message
    return path, message


def replace(old, new, text=GOOD_SCENARIO):
    assert old in text
    return text.replace(old, new)


# (id, scenario text, expected line, expected field, words in the message)
CASES = [
    ("yaml-syntax", replace("model: [retinanet]", "model: [retinanet"), 5, None, "YAML syntax error"),
    ("tab-indent", replace("  model: [retinanet]", "\tmodel: [retinanet]"), 4, None, "tab"),
    ("duplicate-key", GOOD_SCENARIO + "warmup: 3\n", 17, "warmup", "duplicate key (first at line 10)"),
    ("unknown-top-key", GOOD_SCENARIO + "repeatz: 3\n", 17, "repeatz", "unknown key"),
    ("unknown-matrix-key", replace("  gpus: [1]", "  gpus: [1]\n  gpu: [2]"), 8, "matrix.gpu", "unknown key"),
    ("unknown-nested-key", replace("  data_ms: 1", "  data_ms: 1\n  date_ms: 2"), 17, "calibrate.date_ms",
     "unknown key"),
    ("wrong-type", replace("repeats: 2", "repeats: two"), 12, "repeats", "integer"),
    ("string-number", replace("warmup: 2", "warmup: '2'"), 10, "warmup", "integer"),
    ("zero-repeats", replace("repeats: 2", "repeats: 0"), 12, "repeats", "greater than or equal to 1"),
    ("negative-warmup", replace("warmup: 2", "warmup: -1"), 10, "warmup", "greater than or equal to 0"),
    ("zero-measure", replace("measure: 10", "measure: 0"), 11, "measure", "greater than or equal to 1"),
    ("zero-gpus", replace("gpus: [1]", "gpus: [0]"), 7, "matrix.gpus", "at least 1"),
    ("unknown-framework", replace("[calibrate]", "[calibrat]"), 3, "matrix.framework.0", "unknown framework"),
    ("unknown-model", replace("[retinanet]", "[yolo]"), 4, "matrix.model.0", "unknown model"),
    ("unknown-precision", replace("[fp32]", "[fp8]"), 5, "matrix.precision.0", "unknown precision"),
    ("unknown-platform", replace("[local]", "[P9]"), 6, "matrix.platform.0", "unknown platform"),
    ("unknown-backend", GOOD_SCENARIO + "backend: kubernetes\n", 17, "backend", "unknown backend"),
    ("unsupported-precision", replace("framework: [calibrate]", "framework: [detbench-trainer]").replace(
        "[fp32]", "[fp32, fp8]"), 5, "matrix.precision.1", "unknown precision"),
    ("framework-cannot", replace("framework: [calibrate]", "framework: [detbench-trainer]").replace(
        "[retinanet]", "[efficientdet_d0]"), 4, "matrix.model.0", "detbench-trainer cannot run efficientdet_d0"),
    ("empty-matrix", replace("framework: [calibrate]", "framework: []"), 3, "matrix.framework",
     "at least 1 item"),
    ("exclude-matches-nothing", GOOD_SCENARIO + "exclude:\n  - {framework: calibrate, precision: fp16, reason: x}\n",
     18, "exclude.0", "matches no cell"),
    ("everything-excluded", GOOD_SCENARIO + "exclude:\n  - {framework: calibrate, reason: not today}\n",
     2, "matrix", "every cell is excluded"),
    ("exclude-without-reason", GOOD_SCENARIO + "exclude:\n  - {framework: calibrate}\n", 18, "exclude.0.reason",
     "Field required"),
    ("env-not-string", GOOD_SCENARIO + "env:\n  OMP_NUM_THREADS: 1\n", 18, "env.OMP_NUM_THREADS",
     "valid string"),
    ("data-missing", GOOD_SCENARIO + "data:\n  annotations: /nonexistent/ann.json\n  images: /nonexistent\n",
     18, "data.annotations", "no such file"),
    ("data-bad-word", GOOD_SCENARIO + "data: imagenet\n", 17, "data", "synthetic"),
    ("python-tag", GOOD_SCENARIO + "description: !!python/object/apply:os.system ['id']\n", 17,
     "description", "tag tag:yaml.org,2002:python/object/apply:os.system is not allowed"),
    ("python-scalar-tag", GOOD_SCENARIO + "description: !!python/name:os.system ''\n", 17, "description",
     "python/name:os.system is not allowed"),
    ("not-a-mapping", "- just\n- a list\n", 1, None, "a scenario is a mapping"),
    ("empty-file", "", 1, None, "empty"),
    ("bad-name", replace("name: tiny", "name: 'tiny; rm -rf ~'"), 1, "name", "pattern"),
    ("input-too-small", replace("input_size: [320, 320]", "input_size: [8, 8]"), 9, "input_size", "32"),
    ("extra-args-unknown-framework", GOOD_SCENARIO + "extra_args:\n  detectron3: [x]\n", 18,
     "extra_args.detectron3", "unknown framework"),
    ("breakdown-not-bool", GOOD_SCENARIO + "breakdown: sometimes\n", 17, "breakdown", "valid boolean"),
    ("breakdown-in-inference", GOOD_SCENARIO.replace("warmup: 2\nmeasure: 10\n", "warmup: 2\nmeasure: 20\n")
     + "mode: inference\nbatch_sizes: [1]\nbreakdown: true\n", 19, "breakdown", "for training speed runs"),
]


@pytest.mark.parametrize("text,line,field,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_scenario_names_file_line_and_field(write_scenario, text, line, field, words):
    path, message = error_of(write_scenario, text)
    prefix = "%s:%d: " % (path, line)
    assert message.startswith(prefix), message
    if field:
        assert message[len(prefix):].startswith(field + ": "), message
    assert words in message, message


def test_not_utf8(write_scenario):
    path, message = error_of(write_scenario, GOOD_SCENARIO.encode() + b"description: caf\xe9\n")
    assert message.startswith("%s:17: " % path) and "not UTF-8" in message


def test_huge_file(write_scenario):
    path, message = error_of(write_scenario, GOOD_SCENARIO + "#" * (2 << 20) + "\n")
    assert "limit" in message and str(path) in message


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="cannot read"):
        launch.load_scenario(tmp_path / "absent.yaml")


def test_validate_command_exits_2_with_one_line(write_scenario):
    path = write_scenario(replace("repeats: 2", "repeats: -3"))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and re.match(r"detbench: error: .*:12: repeats: ", lines[0])


def test_bad_scenario_writes_nothing(write_scenario, tmp_path):
    path = write_scenario(replace("[calibrate]", "[nope]"))
    results = tmp_path / "results"
    result = CliRunner().invoke(main, ["run", "--scenario", str(path), "--results", str(results)])
    assert result.exit_code == 2
    assert not results.exists()


def test_good_scenario_validates(write_scenario):
    path = write_scenario()
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "ok: 1 cells (0 excluded), 2 trials" in result.output


def test_exclude_becomes_na_with_reason(write_scenario):
    text = replace("framework: [calibrate]", "framework: [calibrate, detbench-trainer]").replace(
        "precision: [fp32]", "precision: [fp32, fp16]")
    text += "exclude:\n  - {framework: detbench-trainer, precision: fp16, reason: needs CUDA}\n"
    sc = launch.load_scenario(write_scenario(text))
    planned = {p.cell.key: p.excluded for p in scenario.plan(sc)}
    assert planned["detbench-trainer/retinanet/fp16/local/1/1"] == "needs CUDA"
    assert planned["calibrate/retinanet/fp16/local/1/1"] is None


def test_breakdown_asks_each_cells_trials_for_their_phases_by_framework_and_model(write_scenario):
    sc = launch.load_scenario(write_scenario(replace("framework: [calibrate]", "framework: [detbench-trainer]")
                                             + "breakdown: true\nenv:\n  OMP_NUM_THREADS: '2'\n"))
    (cell,) = scenario.plan(sc)
    assert scenario.context(sc, cell.cell).env == {"OMP_NUM_THREADS": "2",
                                                   "DETBENCH_BREAKDOWN": "detbench-trainer/retinanet"}
    plain = launch.load_scenario(write_scenario(replace("framework: [calibrate]", "framework: [detbench-trainer]")))
    assert scenario.context(plain, scenario.plan(plain)[0].cell).env == {}
