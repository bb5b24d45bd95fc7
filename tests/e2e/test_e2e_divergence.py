"""A real short training at a learning rate that makes it diverge fails its trial with the divergence,
whichever framework it is: the bundled trainer stops itself at a non-finite loss (its error line, exit
3), torchvision's loop stops as its reference does ("Loss is nan, stopping training"), effdet goes on
printing losses that explode (read from its records); each cell is NA in the report with the reason."""
import re
import textwrap

import pytest
from click.testing import CliRunner

from harness.cli import main
from tests.support.services import need_env

SCENARIO = textwrap.dedent("""\
    name: diverging
    matrix:
      framework: [{framework}]
      model: [{model}]
      precision: [fp32]
      platform: [local]
    batch_per_gpu: 2
    input_size: [128, 128]
    warmup: 2
    measure: 3
    repeats: 1
    env:
      OMP_NUM_THREADS: "1"
    options:
      {framework}: {options}
    """)


def run_diverging(tmp_path, framework, model, options):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / ("%s.yaml" % framework)
    path.write_text(SCENARIO.format(framework=framework, model=model, options=options))
    results = tmp_path / "results"
    out = CliRunner().invoke(main, ["run", "--scenario", str(path), "--results", str(results)])
    assert out.exit_code == 0, out.output
    report = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results)])
    assert report.exit_code == 0, report.output
    return out.output, report.output


def failed_line(output, framework):
    [line] = [line for line in output.splitlines() if line.startswith("[1/1] %s/" % framework)]
    return line


def test_the_trainer_at_a_huge_learning_rate_fails_with_its_divergence(tmp_path):
    out, report = run_diverging(tmp_path, "detbench-trainer", "retinanet",
                                "{train.lr: 100000.0, train.warmup_iters: 0}")
    m = re.search(r"FAILED: diverged: loss (nan|inf) at iteration (\d+) \(error: loss is \S+ \(not finite\) "
                  r"at iteration (\d+)", failed_line(out, "detbench-trainer"))
    assert m and m.group(2) == m.group(3) and int(m.group(2)) <= 5, out
    assert "|RetinaNet|NA¹|" in report and "¹ NA: diverged (1 of 1 trials): loss " in report


@pytest.mark.nightly
def test_rivals_that_stop_themselves_or_go_on_fail_alike(tmp_path):
    need_env("torchvision")
    need_env("effdet")
    out, report = run_diverging(tmp_path / "tv", "torchvision", "retinanet", "{lr: 100000.0}")
    assert re.search(r"FAILED: diverged: loss nan after iteration \d+ \(Loss is nan, stopping training; "
                     r"log.txt line \d+\)", failed_line(out, "torchvision")), out
    assert "¹ NA: diverged (1 of 1 trials): " in report
    out, report = run_diverging(tmp_path / "ed", "effdet", "efficientdet_d0", "{lr: 100000.0, workers: 0}")
    assert re.search(r"FAILED: diverged: loss \S+ at iteration \d+ \((not finite|above 100 x )",
                     failed_line(out, "effdet")), out
    assert "¹ NA: diverged (1 of 1 trials): " in report
