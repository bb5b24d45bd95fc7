"""A scenario's extra_args and options that a framework's own training program would refuse are refused
before anything runs, in one line naming the file, the line, the framework and the option: an option its
program's parser does not take (each framework's declared `flags`, held here to the real parser), and
an override of the bundled trainer's config that it does not take (checked by that config itself)."""
import argparse
import textwrap

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.frameworks import FRAMEWORKS
from harness.frameworks.base import unknown_option

SCENARIO = textwrap.dedent("""\
    name: options
    matrix:
      framework: [calibrate, detbench-trainer]
      model: [retinanet]
      precision: [fp32]
      platform: [local]
    batch_per_gpu: 2
    input_size: [64, 64]
    warmup: 1
    measure: 2
    repeats: 1
    calibrate:
      iteration_ms: 5
    """)


def parser_options(monkeypatch, parse_args):
    """The option strings of the parser a program's parse_args builds (caught as it parses)."""
    caught = {}

    def catch(self, args=None, namespace=None):
        caught["parser"] = self
        raise SystemExit(0)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", catch)
    with pytest.raises(SystemExit):
        parse_args([])
    return frozenset(s for action in caught["parser"]._actions for s in action.option_strings)


def test_the_declared_options_are_the_programs_own(monkeypatch):
    from harness.drivers import mmdet_driver
    from harness.trainer import train
    from harness.workloads import calibrate
    for name, parse_args in (("calibrate", calibrate.parse_args), ("detbench-trainer", train.parse_args),
                             ("mmdetection", mmdet_driver.parse_args)):
        assert FRAMEWORKS[name].flags == parser_options(monkeypatch, parse_args), name


@pytest.mark.parametrize("args, found", [
    (["--iteration-ms", "20"], None),
    (["--iteration-ms=20", "--data-ms", "-1.5"], None),      # a value, even a negative number, is no option
    (["--hold", "20"], None),                               # argparse takes an unambiguous prefix
    (["--iteration", "20"], (0, "--iteration")),            # an ambiguous one it refuses
    (["--images", "2", "--no-such", "1"], (2, "--no-such")),
    (["--no-such=1"], (0, "--no-such")),
    (["-x"], (0, "-x")),
    (["--", "--anything"], None),
])
def test_an_option_is_read_as_argparse_reads_it(args, found):
    assert unknown_option(FRAMEWORKS["calibrate"].flags, args) == found


def validate(tmp_path, text, command="validate"):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    args = [command, str(path)] if command == "validate" else ["run", "--scenario", str(path), "--results",
                                                               str(tmp_path / "results")]
    return path, CliRunner().invoke(main, args)


def one_line(out):
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.exit_code == 2 and len(lines) == 1, out.output
    return lines[0]


def test_an_option_the_program_does_not_take_is_refused_at_its_line_before_anything_runs(tmp_path):
    text = SCENARIO + "extra_args:\n  calibrate: [--data-ms, '1', --no-such-flag]\n"
    path, out = validate(tmp_path, text, command="run")
    line = one_line(out)
    assert line.startswith("detbench: error: %s:15: extra_args.calibrate.2: calibrate: --no-such-flag is not an "
                           "option of its training program" % path), line
    assert not (tmp_path / "results").exists()       # nothing ran, nothing was written


def test_a_trainer_override_its_config_does_not_take_is_refused_at_its_line(tmp_path):
    path, out = validate(tmp_path, SCENARIO + "extra_args:\n  detbench-trainer: [--set, train.lr=0.01, "
                                              "--set, train.no_such_key=1]\n")
    assert one_line(out).startswith("detbench: error: %s:15: extra_args.detbench-trainer.3: detbench-trainer: "
                                    "unknown --set key 'train.no_such_key'; valid keys: " % path)
    path, out = validate(tmp_path, SCENARIO + "extra_args:\n  detbench-trainer: [--set, train.lr=fast]\n")
    assert "extra_args.detbench-trainer.1: detbench-trainer: " in one_line(out)
    path, out = validate(tmp_path, SCENARIO + "options:\n  detbench-trainer: {train.no_such_key: 3}\n")
    assert "options.detbench-trainer: " in one_line(out) and "options.train.no_such_key: unknown --set key" \
        in out.stderr


def test_options_and_overrides_the_programs_take_pass(tmp_path):
    text = SCENARIO + ("extra_args:\n  calibrate: [--data-ms=1, --fail-at, '0']\n"
                       "  detbench-trainer: [--set, train.lr=0.01]\n"
                       "options:\n  detbench-trainer: {train.warmup_iters: 0}\n")
    _, out = validate(tmp_path, text)
    assert out.exit_code == 0, out.output
