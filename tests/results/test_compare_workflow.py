"""The nightly workflow: actionlint where installed, and structure checks that always run.

The structure checks parse every `detbench ...` line of the workflow with the real click
CLI (so a renamed option breaks this test, not the nightly), validate the scenarios it runs,
and pin the gate's wiring: a GPU runner, the committed baseline, the job summary, artifacts.
The compare steps run under bash with detbench faked, to show which baseline judges a night
(the last passing night of the same machine, else the committed file) and when a night is
kept as the next baseline.
"""
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
import shlex
import shutil
import subprocess
import warnings
from pathlib import Path

import click
import pytest

from harness import launch
from harness.plan import scenario, yamlfile
from harness.cli import main
from tests.support.services import need_service

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
RUNNER_LABELS = "self-hosted-runner:\n  labels: [gpu]\n"
SCRIPT = ROOT / ".github" / "scripts" / "nightly_baseline.py"
VARIABLES = {"THRESHOLD": "0.05", "baseline": "PICKED"}     # $baseline: what nightly_baseline.py pick chose


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
    args = [re.sub(r"\$\{?(\w+)\}?", lambda m: VARIABLES.get(m.group(1), "runner-temp"), a)
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


def test_the_gpu_job_gates_the_nightly_scenario_against_this_machines_baseline():
    job = workflow()["jobs"]["gpu-gate"]
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    commands = [parse_cli(line) for s in scripts(job) for line in detbench_lines(s)]
    runs = [params for name, params in commands if name == "run"]
    assert [p["scenario_path"] for p in runs] == ["scenarios/nightly.yaml"]
    launch.load_scenario(ROOT / "scenarios" / "nightly.yaml")
    gates = [params for name, params in commands if name == "compare"]
    assert [(g["baseline_ref"], g["candidate_ref"], g["strict"]) for g in gates] == [
        ("PICKED", "latest", True),      # this machine's last passing night, or the committed file of this machine
        ("PICKED", "latest", False)]     # the committed file of another machine: speeds not comparable
    assert all(g["junit_path"] and g["markdown_path"] for g in gates)
    compare_script = compare_step("gpu-gate")
    assert "baselines/nightly.json previous/candidate-baseline.json" in compare_script
    assert 'cat report/summary.md >> "$GITHUB_STEP_SUMMARY"' in compare_script
    assert 'exit "$rc"' in compare_script          # the compare exit code decides the job


def test_every_job_uploads_results_and_report_even_on_failure():
    for name, job in workflow()["jobs"].items():
        uploads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")
                   and "results/" in s["with"]["path"].split()]
        assert len(uploads) == 1, name
        assert uploads[0]["if"] == "always()"
        assert {"results/", "report/"} <= set(uploads[0]["with"]["path"].split())


@pytest.mark.parametrize("job_name,candidate", [("gpu-gate", "report/candidate-baseline.json"),
                                                ("cpu-nightly", "report/candidate-baseline-cpu.json")])
def test_a_passing_night_on_main_is_kept_as_the_next_baseline_of_its_fingerprint(job_name, candidate):
    steps = workflow()["jobs"][job_name]["steps"]
    by_id = {s["id"]: s for s in steps if "id" in s}
    assert "--out %s" % candidate in by_id["machine"]["run"]
    assert 'echo "artifact=nightly-%s-baseline-$fp"' % job_name.split("-")[0] in by_id["machine"]["run"]
    keep = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@")
                and s["with"]["path"] == candidate)
    assert keep["with"]["name"] == "${{ steps.machine.outputs.artifact }}"
    assert keep["with"]["retention-days"] >= 30 and keep["with"]["if-no-files-found"] == "error"
    for condition in ("steps.compare.outputs.keep == 'true'", "github.ref == 'refs/heads/main'"):
        assert condition in keep["if"]
    fetch = next(s for s in steps if str(s.get("uses", "")).startswith("actions/download-artifact@"))
    assert fetch["with"]["name"] == keep["with"]["name"] and fetch["with"]["run-id"].startswith("${{ steps.previous.")
    # what the next night downloads is what its compare step reads first
    assert "%s/%s" % (fetch["with"]["path"], Path(candidate).name) in compare_step(job_name)
    assert steps.index(keep) > steps.index(by_id["compare"]) > steps.index(fetch)
    assert workflow()["permissions"]["actions"] == "read"


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


# ------------------------------------------------------------------ the compare steps, run with detbench faked

FAKE_DETBENCH = """#!/bin/sh
# stands in for detbench: every call is logged to $FAKE_LOG; `baseline save ... --out FILE` copies
# $FAKE_CANDIDATE there; `compare` prints $FAKE_HEADLINE and exits $FAKE_RC; the rest succeed
echo "$*" >> "$FAKE_LOG"
command="$1"
out=""
while [ $# -gt 0 ]; do
  if [ "$1" = "--out" ]; then out="$2"; fi
  shift
done
if [ -n "$out" ]; then cp "$FAKE_CANDIDATE" "$out"; fi
if [ "$command" = "compare" ]; then echo "$FAKE_HEADLINE"; exit "$FAKE_RC"; fi
exit 0
"""
CANDIDATE = {"gpu-gate": "candidate-baseline.json", "cpu-nightly": "candidate-baseline-cpu.json"}
COMMITTED = {"gpu-gate": "nightly.json", "cpu-nightly": "nightly-cpu.json"}
HERE = "fp2-00000000000000aa"          # the runner's fingerprint in these nights


def step(job_name, step_id):
    return next(s["run"] for s in workflow()["jobs"][job_name]["steps"] if s.get("id") == step_id)


def compare_step(job_name):
    return step(job_name, "compare")


def side_file(path, fingerprint, failed=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": {"detbench-trainer/retinanet/fp32/local/1/1": {"failed": failed}},
                                "host": {"fingerprint": fingerprint}}))


class Night:
    """One night's `machine` and `compare` steps, run with bash in a fresh checkout (detbench faked)."""

    def __init__(self, job_name, tmp_path, bootstrap=False, committed=None, previous=None, failed=0,
                 headline="PASS: 2 unchanged (baseline b, candidate c)", rc=0):
        need_service(shutil.which("bash"), "bash is not installed")
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "detbench").write_text(FAKE_DETBENCH)
        (bin_dir / "detbench").chmod(0o755)
        self.work = tmp_path / "checkout"
        (self.work / ".github" / "scripts").mkdir(parents=True)
        shutil.copy(str(SCRIPT), str(self.work / ".github" / "scripts" / SCRIPT.name))
        if committed is not None:
            if isinstance(committed, Path):
                (self.work / "baselines").mkdir()
                shutil.copy(str(committed), str(self.work / "baselines" / COMMITTED[job_name]))
            else:
                side_file(self.work / "baselines" / COMMITTED[job_name], committed)
        if previous is not None:         # what the download step leaves
            side_file(self.work / "previous" / CANDIDATE[job_name], previous)
        side_file(tmp_path / "tonight.json", HERE, failed)
        self.log, self.summary, self.output = tmp_path / "calls.log", tmp_path / "summary.md", tmp_path / "output"
        self.log.write_text("")
        path = os.pathsep.join([str(bin_dir), os.path.dirname(sys.executable), "/usr/local/bin:/usr/bin:/bin"])
        env = {"PATH": path, "GITHUB_STEP_SUMMARY": str(self.summary),
               "GITHUB_OUTPUT": str(self.output), "THRESHOLD": "0.05", "BOOTSTRAP": "true" if bootstrap else "false",
               "FAKE_LOG": str(self.log), "FAKE_CANDIDATE": str(tmp_path / "tonight.json"),
               "FAKE_HEADLINE": headline, "FAKE_RC": str(rc)}
        for step_id in ("machine", "compare"):
            self.out = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", step(job_name, step_id)],
                                      cwd=str(self.work), env=env, capture_output=True, text=True, timeout=60)
            if step_id == "machine":
                assert self.out.returncode == 0, self.out.stdout + self.out.stderr

    @property
    def outputs(self):
        text = self.output.read_text() if self.output.exists() else ""
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    @property
    def compares(self):
        return [line for line in self.log.read_text().splitlines() if line.startswith("compare ")]


@pytest.mark.parametrize("job_name", ["gpu-gate", "cpu-nightly"])
def test_a_missing_baseline_fails_the_job(job_name, tmp_path):
    night = Night(job_name, tmp_path)
    assert night.out.returncode == 1
    assert "::error::baselines/nightly" in night.out.stdout and "bootstrap: true" in night.out.stdout
    assert night.compares == [] and "keep" not in night.outputs


@pytest.mark.parametrize("job_name", ["gpu-gate", "cpu-nightly"])
def test_a_bootstrap_run_saves_the_candidate_and_says_so(job_name, tmp_path):
    night = Night(job_name, tmp_path, bootstrap=True)
    assert night.out.returncode == 0, night.out.stdout + night.out.stderr
    assert "bootstrap: saved report/candidate-baseline" in night.out.stdout
    assert "bootstrapped" in night.summary.read_text()
    assert (night.work / "report" / CANDIDATE[job_name]).is_file()
    name = "nightly-%s-baseline-%s" % (job_name.split("-")[0], HERE)
    assert night.outputs == {"fingerprint": HERE, "artifact": name, "keep": "true"}


@pytest.mark.parametrize("job_name", ["gpu-gate", "cpu-nightly"])
def test_this_machines_last_passing_night_judges_strictly_before_the_committed_file(job_name, tmp_path):
    night = Night(job_name, tmp_path, committed=HERE, previous=HERE)
    assert night.out.returncode == 0, night.out.stdout + night.out.stderr
    (call,) = night.compares
    assert call.startswith("compare --baseline previous/%s " % CANDIDATE[job_name]) and " --strict" in call
    assert night.outputs["keep"] == "true"


def test_a_saved_night_of_another_machine_is_not_used(tmp_path):
    night = Night("cpu-nightly", tmp_path, committed=HERE, previous="fp2-00000000000000bb")
    (call,) = night.compares
    assert call.startswith("compare --baseline baselines/nightly-cpu.json ") and " --strict" in call
    assert "previous/candidate-baseline-cpu.json records fingerprint fp2-00000000000000bb" in night.out.stderr


def test_the_committed_old_style_cpu_baseline_is_another_machine_and_the_night_starts_this_ones_bar(tmp_path):
    committed = ROOT / "baselines" / "nightly-cpu.json"
    assert json.loads(committed.read_text())["host"]["fingerprint"].startswith("fp1-")
    night = Night("cpu-nightly", tmp_path, committed=committed,
                  headline="PASS: 3 not comparable (baseline b, candidate c)")
    assert night.out.returncode == 0, night.out.stdout + night.out.stderr
    (call,) = night.compares
    assert call.startswith("compare --baseline baselines/nightly-cpu.json ") and "--strict" not in call
    assert "::warning::baselines/nightly-cpu.json was measured on another machine" in night.out.stdout
    assert night.outputs["keep"] == "true"        # this night becomes the bar of this fingerprint


@pytest.mark.parametrize("headline,rc,exit_code", [
    ("PASS: 1 possible regression, 2 unchanged (baseline b, candidate c)", 0, 0),
    ("FAIL: 1 regression, 2 unchanged (baseline b, candidate c)", 1, 1),
])
def test_a_night_that_may_have_slowed_down_is_never_kept(tmp_path, headline, rc, exit_code):
    night = Night("cpu-nightly", tmp_path, committed=HERE, previous=HERE, headline=headline, rc=rc)
    assert night.out.returncode == exit_code
    assert night.outputs.get("keep", "false") == "false"


def test_failed_trials_fail_the_night_before_anything_is_judged(tmp_path):
    night = Night("cpu-nightly", tmp_path, committed=HERE, failed=1)
    assert night.out.returncode == 1
    assert "::error::trials failed or never finished in: detbench-trainer/retinanet/fp32/local/1/1" in night.out.stdout
    assert night.compares == [] and "keep" not in night.outputs


# ------------------------------------------------------------------ finding the last passing night

class Artifacts(BaseHTTPRequestHandler):
    listing = {}
    asked = []

    def do_GET(self):
        type(self).asked.append((self.path, self.headers.get("Authorization")))
        body = json.dumps(self.listing).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def find(api, name="nightly-cpu-baseline-" + HERE):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "GITHUB_API_URL": api, "GITHUB_REPOSITORY": "owner/detbench",
           "GH_TOKEN": "token-of-the-run"}
    return subprocess.run([sys.executable, str(SCRIPT), "find", name], env=env, capture_output=True, text=True,
                          timeout=60)


def artifact(run_id, created, branch="main", expired=False, name="nightly-cpu-baseline-" + HERE):
    return {"name": name, "expired": expired, "created_at": created,
            "workflow_run": {"id": run_id, "head_branch": branch}}


def test_find_names_the_newest_unexpired_night_saved_on_main():
    Artifacts.listing = {"total_count": 5, "artifacts": [
        artifact(11, "2026-03-01T02:40:00Z"), artifact(14, "2026-03-04T02:40:00Z", expired=True),
        artifact(13, "2026-03-03T02:40:00Z"), artifact(15, "2026-03-05T02:40:00Z", branch="a-pull-request"),
        artifact(12, "2026-03-02T02:40:00Z")]}
    Artifacts.asked = []
    server = HTTPServer(("127.0.0.1", 0), Artifacts)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        out = find("http://127.0.0.1:%d" % server.server_port)
        assert out.returncode == 0 and out.stdout.strip() == "13", out.stderr
        Artifacts.listing = {"total_count": 0, "artifacts": []}
        assert find("http://127.0.0.1:%d" % server.server_port).stdout.strip() == ""
    finally:
        server.shutdown()
        server.server_close()
    path, auth = Artifacts.asked[0]
    assert path.startswith("/repos/owner/detbench/actions/artifacts?name=nightly-cpu-baseline-" + HERE)
    assert auth == "Bearer token-of-the-run"


def test_an_api_out_of_reach_means_the_committed_baseline_not_a_failed_night():
    server = HTTPServer(("127.0.0.1", 0), Artifacts)
    port = server.server_port
    server.server_close()                       # nothing listens there any more
    out = find("http://127.0.0.1:%d" % port)
    assert out.returncode == 0 and out.stdout.strip() == ""
    assert "::warning::cannot list the artifacts named nightly-cpu-baseline-%s" % HERE in out.stderr


# ------------------------------------------------------------------ the CPU nightly's scenario and committed file

def test_bootstrap_is_an_explicit_boolean_input_that_defaults_to_off():
    spec = workflow()["on"]["workflow_dispatch"]["inputs"]["bootstrap"]
    assert spec["type"] == "boolean" and spec["default"] is False
    assert "github.event.inputs.bootstrap == 'true'" in workflow()["env"]["BOOTSTRAP"]


def test_the_cpu_nightly_gates_its_scenario_against_this_machines_cpu_baseline():
    from harness.results import baseline

    job = workflow()["jobs"]["cpu-nightly"]
    assert job["runs-on"] == "ubuntu-latest"
    commands = [parse_cli(line) for s in scripts(job) for line in detbench_lines(s)]
    assert [p["scenario_path"] for name, p in commands if name == "run"] == ["scenarios/nightly-cpu.yaml"]
    gates = [p for name, p in commands if name == "compare"]
    assert [(g["baseline_ref"], g["candidate_ref"], g["strict"]) for g in gates] == [
        ("PICKED", "latest", True),      # a baseline of this machine
        ("PICKED", "latest", False)]     # elsewhere: speeds not comparable
    sc = launch.load_scenario(ROOT / "scenarios" / "nightly-cpu.yaml")
    assert sc.repeats >= 5 and "calibrate" in sc.matrix.framework
    committed = baseline.load(ROOT / "baselines" / "nightly-cpu.json")
    runnable = {p.cell.key for p in scenario.plan(sc) if p.excluded is None}
    assert set(committed["cells"]) == runnable
    assert all(len(cell["throughput"]) == sc.repeats and not cell["failed"] for cell in committed["cells"].values())
    assert committed["host"].get("fingerprint")


def test_this_hosts_run_is_judged_leniently_against_the_committed_cpu_baseline(tmp_path):
    """The committed file predates the instruction set in the fingerprint: no runner is its machine."""
    from harness.plan import platforms

    candidate = tmp_path / "candidate.json"
    side_file(candidate, platforms.host_record([platforms.LOCAL])["fingerprint"])
    out = subprocess.run([sys.executable, str(SCRIPT), "pick", str(candidate),
                          str(ROOT / "baselines" / "nightly-cpu.json"), str(tmp_path / "no-previous.json")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == [str(ROOT / "baselines" / "nightly-cpu.json"), "lenient"]
