"""The nightly workflow: actionlint where installed, and structure checks that always run.

The structure checks parse every `detbench ...` line of the workflow with the real click
CLI (so a renamed option breaks this test, not the nightly), validate the scenarios it runs,
and pin the gate's wiring: a GPU runner, the committed baseline, the job summary, artifacts.
"""
import re
import shlex
import shutil
import subprocess
import warnings
from pathlib import Path

import click
import pytest

from harness import scenario, yamlfile
from harness.cli import main
from tests.conftest import need_service

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
RUNNER_LABELS = "self-hosted-runner:\n  labels: [gpu]\n"


def workflow():
    data, _ = yamlfile.load(WORKFLOW)
    return data


def scripts(job):
    return [step["run"] for step in job["steps"] if "run" in step]


def detbench_lines(script):
    joined = script.replace("\\\n", " ")
    for line in joined.splitlines():
        line = line.strip()
        if line.startswith("detbench "):
            yield re.split(r"\s[|>]", line)[0]


def parse_cli(line):
    """Parse a detbench command line with the real CLI without running it."""
    args = [re.sub(r"\$\{?(\w+)\}?", lambda m: {"THRESHOLD": "0.05"}.get(m.group(1), "runner-temp"), a)
            for a in shlex.split(line)[1:]]
    ctx = main.make_context("detbench", args)
    command = main
    while isinstance(command, click.Group):
        with warnings.catch_warnings():      # click 8.2 deprecates protected_args; 9.0 folds it into args
            warnings.simplefilter("ignore", DeprecationWarning)
            pending = list(getattr(ctx, "protected_args", [])) + list(ctx.args)
        name, command, rest = command.resolve_command(ctx, pending)
        ctx = command.make_context(name, rest, parent=ctx)
    return ctx.command.name, ctx.params


def actionlint_config(tmp_path):
    config = tmp_path / "actionlint.yaml"
    config.write_text(RUNNER_LABELS)
    return str(config)


def test_actionlint_accepts_the_workflow(tmp_path):
    need_service(shutil.which("actionlint"), "actionlint is not installed (bash .ci/provision-actionlint.sh)")
    out = subprocess.run(["actionlint", "-config-file", actionlint_config(tmp_path), str(WORKFLOW)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_actionlint_would_catch_a_broken_workflow(tmp_path):
    need_service(shutil.which("actionlint"), "actionlint is not installed (bash .ci/provision-actionlint.sh)")
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("github.run_id", "githb.run_id"))
    out = subprocess.run(["actionlint", "-config-file", actionlint_config(tmp_path), str(broken)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and 'undefined variable "githb"' in out.stdout


def test_it_runs_nightly_on_a_schedule_and_by_hand():
    on = workflow()["on"]
    crons = [entry["cron"] for entry in on["schedule"]]
    assert crons and all(len(c.split()) == 5 for c in crons)
    assert "workflow_dispatch" in on


def test_the_gpu_job_gates_the_nightly_scenario_against_the_committed_baseline():
    job = workflow()["jobs"]["gpu-gate"]
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    commands = [parse_cli(line) for s in scripts(job) for line in detbench_lines(s)]
    runs = [params for name, params in commands if name == "run"]
    assert [p["scenario_path"] for p in runs] == ["scenarios/nightly.yaml"]
    scenario.load(ROOT / "scenarios" / "nightly.yaml")
    compares = [params for name, params in commands if name == "compare"]
    assert len(compares) == 1
    gate = compares[0]
    assert gate["baseline_ref"] == "baselines/nightly.json" and gate["candidate_ref"] == "latest"
    assert gate["junit_path"] and gate["markdown_path"]
    compare_script = next(s for s in scripts(job) if "detbench compare" in s)
    assert 'cat report/summary.md >> "$GITHUB_STEP_SUMMARY"' in compare_script
    assert 'exit "$rc"' in compare_script          # the compare exit code decides the job


def test_every_job_uploads_results_and_report_even_on_failure():
    for name, job in workflow()["jobs"].items():
        uploads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
        assert len(uploads) == 1, name
        assert uploads[0]["if"] == "always()"
        assert {"results/", "report/"} <= set(uploads[0]["with"]["path"].split())


def test_the_cpu_job_proves_the_gate_on_the_calibration_workload():
    job = workflow()["jobs"]["cpu-gate"]
    assert job["runs-on"] == "ubuntu-latest"
    setup = next(s for s in scripts(job) if "<<'YAML'" in s)
    text = setup.split("<<'YAML'\n", 1)[1].split("\nYAML", 1)[0]
    calib = scenario.loads_text(text)
    assert calib.matrix.framework == ["calibrate"] and calib.repeats >= 5
    factor = re.search(r"s/iteration_ms: (\d+)/iteration_ms: (\d+)/", setup)
    assert factor and int(factor.group(2)) / int(factor.group(1)) == pytest.approx(1.10)
    commands = [parse_cli(line) for s in scripts(job) for line in detbench_lines(s)]
    assert [name for name, _ in commands] == ["run", "save", "run", "compare", "run", "compare"]
    slow_step = next(s for s in scripts(job) if "calib-slow.yaml" in s and "detbench run" in s)
    assert '"$rc" -ne 1' in slow_step             # the slowed run must make compare exit 1


def test_a_mistyped_option_in_a_workflow_line_is_caught():
    with pytest.raises(click.UsageError):
        parse_cli("detbench compare --baseline a.json --candidate latest --treshold 0.05")
