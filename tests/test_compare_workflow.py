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

from harness import launch
from harness.spec import scenario, yamlfile
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
    launch.load_scenario(ROOT / "scenarios" / "nightly.yaml")
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
    calib = launch.loads_scenario_text(text)
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


# ------------------------------------------------------------------ a missing baseline fails

FAKE_DETBENCH = """#!/bin/sh
# stands in for detbench: `baseline save ... --out FILE` writes a candidate; the rest succeed
out=""
while [ $# -gt 0 ]; do
  if [ "$1" = "--out" ]; then out="$2"; fi
  shift
done
if [ -n "$out" ]; then echo '{"cells": {}, "host": {"fingerprint": "fp1-x"}}' > "$out"; fi
exit 0
"""


def compare_step(job_name):
    job = workflow()["jobs"][job_name]
    return next(s for s in scripts(job) if "detbench compare" in s)


def run_step(script, tmp_path, bootstrap):
    """Run a workflow step's script with bash in an empty checkout, detbench faked on PATH."""
    need_service(shutil.which("bash"), "bash is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "detbench"
    fake.write_text(FAKE_DETBENCH)
    fake.chmod(0o755)
    work = tmp_path / "checkout"
    work.mkdir()
    summary = tmp_path / "summary.md"
    env = {"PATH": "%s:/usr/bin:/bin" % bin_dir, "GITHUB_STEP_SUMMARY": str(summary),
           "THRESHOLD": "0.05", "BOOTSTRAP": "true" if bootstrap else "false"}
    out = subprocess.run(["bash", "-e", "-c", script], cwd=str(work), env=env, capture_output=True,
                         text=True, timeout=60)
    return out, summary.read_text() if summary.exists() else ""


@pytest.mark.parametrize("job_name", ["gpu-gate", "cpu-nightly"])
def test_a_missing_baseline_fails_the_job(job_name, tmp_path):
    out, summary = run_step(compare_step(job_name), tmp_path, bootstrap=False)
    assert out.returncode == 1
    assert "::error::baselines/nightly" in out.stdout and "bootstrap: true" in out.stdout


@pytest.mark.parametrize("job_name", ["gpu-gate", "cpu-nightly"])
def test_a_bootstrap_run_saves_the_candidate_and_says_so(job_name, tmp_path):
    out, summary = run_step(compare_step(job_name), tmp_path, bootstrap=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "bootstrap: saved report/candidate-baseline" in out.stdout and "bootstrapped" in summary
    assert list((tmp_path / "checkout" / "report").glob("candidate-baseline*.json"))


def test_bootstrap_is_an_explicit_boolean_input_that_defaults_to_off():
    spec = workflow()["on"]["workflow_dispatch"]["inputs"]["bootstrap"]
    assert spec["type"] == "boolean" and spec["default"] is False
    assert "github.event.inputs.bootstrap == 'true'" in workflow()["env"]["BOOTSTRAP"]


def test_the_cpu_nightly_gates_its_scenario_against_the_committed_cpu_baseline():
    from harness.results import baseline

    job = workflow()["jobs"]["cpu-nightly"]
    assert job["runs-on"] == "ubuntu-latest"
    commands = [parse_cli(line) for s in scripts(job) for line in detbench_lines(s)]
    assert [p["scenario_path"] for name, p in commands if name == "run"] == ["scenarios/nightly-cpu.yaml"]
    gates = [p for name, p in commands if name == "compare"]
    assert [(g["baseline_ref"], g["candidate_ref"], g["strict"]) for g in gates] == [
        ("baselines/nightly-cpu.json", "latest", True),     # on the baseline's machine
        ("baselines/nightly-cpu.json", "latest", False)]    # elsewhere: speeds not comparable
    sc = launch.load_scenario(ROOT / "scenarios" / "nightly-cpu.yaml")
    assert sc.repeats >= 5 and "calibrate" in sc.matrix.framework
    committed = baseline.load(ROOT / "baselines" / "nightly-cpu.json")
    runnable = {p.cell.key for p in scenario.plan(sc) if p.excluded is None}
    assert set(committed["cells"]) == runnable
    assert all(len(cell["throughput"]) == sc.repeats and not cell["failed"] for cell in committed["cells"].values())
    assert committed["host"].get("fingerprint")
