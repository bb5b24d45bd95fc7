"""Bad input through the command line: one line naming file, line and field; exit 2; nothing written.

tests/plan/test_scenario_errors.py pins the message of each kind of bad scenario at the library
level. Here every one of those, and the kinds added below, goes through `detbench run` the
way a user meets it: the exit code is 2, the output is exactly one line, and the results
folder is never created. Platform files (platforms/*.yaml) get the same treatment.
"""
import os
import re

import pytest
from click.testing import CliRunner

from harness.plan import platforms
from harness.cli import main
from harness.errors import UserError
from tests.support.scenarios import GOOD_SCENARIO
from tests.plan.test_scenario_errors import CASES as LIBRARY_CASES

pytestmark = pytest.mark.faults


def replace(old, new, text=GOOD_SCENARIO):
    assert old in text, old
    return text.replace(old, new)


def add(text):
    return GOOD_SCENARIO + text


def deep(levels):
    return "[" * levels + "]" * levels


ALIAS_BOMB = "bomb0: &b0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    "bomb%d: &b%d [%s]\n" % (i, i, ", ".join(["*b%d" % (i - 1)] * 10)) for i in range(1, 7))

# (id, scenario text, line, field or None, words in the message): kinds of bad input that
# tests/plan/test_scenario_errors.py does not list
MORE_CASES = [
    ("nested-too-deep", add("description: " + deep(200) + "\n"), 17, None, "nested more than"),
    ("alias-bomb", add(ALIAS_BOMB), 17, None, "expands to more than"),
    ("control-character", add("description: \"bell\"\x07\n"), 17, None, "not allowed in YAML"),
    ("merge-key", add("base: &b {warmup: 1}\nmore:\n  <<: *b\n"), 19, "more", "merge keys"),
    ("non-string-key", add("7: seven\n"), 17, None, "keys must be strings"),
    ("second-document", add("---\nname: other\n"), 17, None, "YAML syntax error"),
    ("scalar-document", "just words\n", 1, None, "a scenario is a mapping"),
    ("bool-for-count", replace("repeats: 2", "repeats: true"), 12, "repeats", "valid integer"),
    ("float-for-count", replace("gpus: [1]", "gpus: [1.5]"), 7, "matrix.gpus.0", "valid integer"),
    ("null-for-count", replace("warmup: 2", "warmup: ~"), 10, "warmup", "valid integer"),
    ("negative-nodes", replace("  gpus: [1]", "  gpus: [1]\n  nodes: [-2]"), 8, "matrix.nodes", "at least 1"),
    ("negative-timeout", replace("timeout_s: 30", "timeout_s: -5"), 13, "timeout_s", "greater than 0"),
    ("infinite-timeout", replace("timeout_s: 30", "timeout_s: .inf"), 13, "timeout_s", "finite number"),
    ("nan-iteration-time", replace("iteration_ms: 10", "iteration_ms: .nan"), 15, "calibrate.iteration_ms",
     "finite number"),
    ("huge-count", replace("repeats: 2", "repeats: 123456789012345678901234567890"), 12, "repeats",
     "less than or equal to 1000"),
    ("too-many-devices", replace("gpus: [1]", "gpus: [100000]"), 7, "matrix.gpus", "at most 4096"),
    ("too-many-trials", replace("  gpus: [1]", "  gpus: [%s]\n  nodes: [%s]" % (
        ", ".join(map(str, range(1, 101))), ", ".join(map(str, range(1, 101))))).replace(
        "repeats: 2", "repeats: 20"), 13, "repeats", "more than 100000 trials"),
    ("too-many-cells", replace("  gpus: [1]", "  gpus: [%s]\n  nodes: [%s]" % (
        ", ".join(map(str, range(1, 401))), ", ".join(map(str, range(1, 401))))), 2, "matrix",
     "400 x 400 cells is more than 100000"),
    ("input-too-large", replace("input_size: [320, 320]", "input_size: [320, 99999]"), 9, "input_size",
     "between 32 and 32768"),
    ("iterations-over-the-cap", replace("warmup: 2", "warmup: 999999"), 11, "measure", "below 1,000,000"),
    ("data-wait-longer-than-iteration", replace("data_ms: 1", "data_ms: 11"), 16, "calibrate.data_ms",
     "at most iteration_ms"),
    ("duplicate-matrix-value", replace("[retinanet]", "[retinanet, retinanet]"), 4, "matrix.model",
     "lists a value twice"),
    ("unknown-exclude-key", add("exclude:\n  - {framwork: calibrate, reason: x}\n"), 18, "exclude.0.framwork",
     "unknown key"),
    ("unknown-data-key", add("data: {annotations: a.json, images: img, masks: m}\n"), 17, "data.masks",
     "unknown key"),
    ("unknown-slurm-key", add("slurm: {partiton: gpu}\n"), 17, "slurm.partiton", "unknown key"),
    ("env-name-not-a-name", add("env:\n  'A=B': x\n"), 18, "env.A=B", "not an environment variable name"),
    ("env-secret", add("env:\n  HF_TOKEN: hunter2\n"), 18, "env.HF_TOKEN", "looks like a secret"),
    ("env-nul", add("env:\n  OMP_NUM_THREADS: \"1\\0\"\n"), 18, "env.OMP_NUM_THREADS", "NUL"),
    ("argument-nul", add("extra_args:\n  calibrate: [\"--x\\0\"]\n"), 18, "extra_args.calibrate.0", "NUL"),
    ("options-for-calibrate", add("options:\n  calibrate: {iteration_ms: 5}\n"), 18, "options.calibrate",
     "calibrate: section"),
    ("unknown-framework-option", replace("framework: [calibrate]", "framework: [torchvision]") +
     "options:\n  torchvision: {wrokers: 2}\n", 18, "options.torchvision", "unknown options wrokers"),
    ("option-of-wrong-kind", replace("framework: [calibrate]", "framework: [torchvision]") +
     "options:\n  torchvision: {workers: many}\n", 18, "options.torchvision", "invalid literal"),
    ("cell-the-adapter-refuses", replace("framework: [calibrate]", "framework: [torchvision]").replace(
        "gpus: [1]", "gpus: [2]"), 3, "matrix.framework.0", "one device only"),
    ("framework-needs-data", replace("framework: [calibrate]", "framework: [mmdetection]"), 3,
     "matrix.framework.0", "reads COCO files only"),
    ("data-images-missing", "DATA", 19, "data.images", "no such directory"),
]


def detbench_run(path, results):
    return CliRunner().invoke(main, ["run", "--scenario", str(path), "--results", str(results)])


def assert_refused(result, results, path, line, field, words):
    assert result.exit_code == 2, result.output
    lines = result.output.strip("\n").split("\n")
    assert len(lines) == 1, result.output
    prefix = "detbench: error: %s:%d: " % (path, line)
    assert lines[0].startswith(prefix), lines[0]
    if field:
        assert lines[0][len(prefix):].startswith(field + ": "), lines[0]
    assert words in lines[0], lines[0]
    assert not results.exists(), "a refused scenario must write nothing"


@pytest.mark.parametrize("text,line,field,words", [c[1:] for c in LIBRARY_CASES + MORE_CASES],
                         ids=[c[0] for c in LIBRARY_CASES + MORE_CASES])
def test_run_refuses_bad_scenario_with_one_line_and_writes_nothing(write_scenario, tmp_path, text, line, field,
                                                                   words):
    if text == "DATA":   # an annotations file that exists beside an images folder that does not
        (tmp_path / "ann.json").write_text("{}")
        text = add("data:\n  annotations: %s\n  images: %s\n" % (tmp_path / "ann.json", tmp_path / "no-images"))
    path = write_scenario(text)
    assert_refused(detbench_run(path, tmp_path / "results"), tmp_path / "results", path, line, field, words)


def test_not_utf8_through_run(write_scenario, tmp_path):
    path = write_scenario(GOOD_SCENARIO.encode() + b"description: caf\xe9\n")
    assert_refused(detbench_run(path, tmp_path / "r"), tmp_path / "r", path, 17, None, "not UTF-8")


def test_latin1_file_names_its_first_bad_line(write_scenario, tmp_path):
    text = GOOD_SCENARIO.replace("name: tiny", "name: tiny\ndescription: d\xe9j\xe0 vu").encode("latin-1")
    path = write_scenario(text)
    assert_refused(detbench_run(path, tmp_path / "r"), tmp_path / "r", path, 2, None, "byte 0xe9")


@pytest.mark.parametrize("how", ["huge", "endless"])
def test_huge_or_endless_file_is_refused_without_reading_it_all(write_scenario, tmp_path, how):
    if how == "huge":
        path = write_scenario(GOOD_SCENARIO + "# padding\n" * 200000)
    else:
        path = "/dev/zero"   # stat() says 0 bytes; reading it never ends
        if not os.path.exists(path):
            pytest.skip("no /dev/zero here")
    result = detbench_run(path, tmp_path / "r")
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert re.match(r"detbench: error: %s: file is .*limit" % re.escape(str(path)), result.output)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_scenario_path_that_is_no_file(tmp_path, make):
    path = tmp_path / "scenario.yaml"
    if make == "directory":
        path.mkdir()
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert str(path) in result.output and "Traceback" not in result.output


def test_validate_checks_every_file_and_stops_at_the_first_bad_one(write_scenario, tmp_path):
    good = write_scenario(name="good.yaml")
    bad = write_scenario(replace("warmup: 2", "warmup: -2"), name="bad.yaml")
    result = CliRunner().invoke(main, ["validate", str(good), str(bad)])
    assert result.exit_code == 2
    assert result.output.splitlines()[0].startswith("%s: ok" % good)
    assert result.output.splitlines()[1].startswith("detbench: error: %s:10: warmup: " % bad)


# --------------------------------------------------------------------------- platform files

GOOD_PLATFORM = """\
name: lab
cpu:
  model: Some CPU
  sockets: 2
memory_gb: 64
gpus:
  model: Some GPU
  count: 4
"""

PLATFORM_CASES = [
    ("yaml-syntax", GOOD_PLATFORM.replace("count: 4", "count: [4"), 9, None, "YAML syntax error"),
    ("tab-indent", GOOD_PLATFORM.replace("  sockets: 2", "\tsockets: 2"), 4, None, "tab"),
    ("duplicate-key", GOOD_PLATFORM + "memory_gb: 32\n", 9, "memory_gb", "duplicate key (first at line 5)"),
    ("unknown-top-key", GOOD_PLATFORM + "gpu_count: 4\n", 9, "gpu_count", "unknown key"),
    ("unknown-nested-key", GOOD_PLATFORM.replace("  sockets: 2", "  socket: 2"), 4, "cpu.socket", "unknown key"),
    ("wrong-type", GOOD_PLATFORM.replace("memory_gb: 64", "memory_gb: plenty"), 5, "memory_gb", "valid number"),
    ("negative-count", GOOD_PLATFORM.replace("count: 4", "count: -4"), 8, "gpus.count", "greater than or equal"),
    ("zero-memory", GOOD_PLATFORM.replace("memory_gb: 64", "memory_gb: 0"), 5, "memory_gb", "greater than 0"),
    ("missing-field", GOOD_PLATFORM.replace("memory_gb: 64\n", ""), 1, "memory_gb", "Field required"),
    ("python-tag", GOOD_PLATFORM + "os: !!python/object/apply:os.getcwd []\n", 9, "os", "not allowed"),
    ("not-a-mapping", "- lab\n", 1, None, "a platform file holds a mapping"),
]


@pytest.mark.parametrize("text,line,field,words", [c[1:] for c in PLATFORM_CASES],
                         ids=[c[0] for c in PLATFORM_CASES])
def test_bad_platform_file_names_file_line_and_field(tmp_path, text, line, field, words):
    path = tmp_path / "lab.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as info:
        platforms.load_file(path)
    message = str(info.value)
    assert "\n" not in message
    prefix = "%s:%d: " % (path, line)
    assert message.startswith(prefix), message
    if field:
        assert message[len(prefix):].startswith(field + ": "), message
    assert words in message, message


def test_good_platform_file_loads(tmp_path):
    path = tmp_path / "lab.yaml"
    path.write_text(GOOD_PLATFORM, encoding="utf-8")
    assert platforms.load_file(path).gpus.count == 4


def test_each_class_of_bad_scenario_is_tried_once():
    ids = [c[0] for c in LIBRARY_CASES + MORE_CASES]
    assert len(ids) == len(set(ids)) >= 15
