"""The sbatch scripts detbench writes: stored reference text, safe quoting, strict options.

No Slurm needed: scripts are compared with tests/reference/sbatch_*.sh, and the quoting is
proven by running a rendered script under bash with stand-ins for srun and scontrol.
"""
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import launch
from harness import run as run_mod
from harness.plan import scenario as scenario_mod
from harness.cli import main
from harness.errors import UserError
from harness.launch import sbatch, slurm
from harness.launch.local import ROOT

REFERENCE = Path(__file__).resolve().parents[1] / "reference"
TRIAL_DIR = "/shared/results/trials/20260101-000000-abcdef-0002"

BASE = """\
name: slurm-ref
backend: slurm
matrix:
  framework: [detbench-trainer]
  model: [faster_rcnn]
  precision: [fp16]
  platform: [local]
  gpus: [8]
  nodes: [%(nodes)d]
batch_per_gpu: 2
input_size: [800, 1333]
warmup: 10
measure: 50
repeats: 1
timeout_s: 1200
env: {NCCL_DEBUG: WARN}
slurm:
  partition: gpu
  account: detection
  cpus_per_task: 32
  sbatch_options: [--exclusive, "--constraint=a100&ib"]
%(extra)s"""


def scenario(nodes=1, extra=""):
    return launch.loads_scenario_text(BASE % {"nodes": nodes, "extra": extra})


def render(sc):
    """The script of the scenario's first trial, machine paths replaced by placeholders."""
    trial = run_mod.schedule(sc, scenario_mod.plan(sc), "slurm")[0]
    text = slurm.script_for(sc, trial.cell, TRIAL_DIR, trial.argv)
    return text.replace(sys.executable, "<PYTHON>").replace(str(ROOT), "<ROOT>")


@pytest.mark.parametrize("name, nodes, extra", [
    ("sbatch_one_node.sh", 1, ""),
    ("sbatch_two_nodes.sh", 2, ""),
    ("sbatch_container.sh", 4, "  container_image: nvcr.io#nvidia/pytorch:24.05-py3\n"
                               "  container_mounts: [/datasets/coco:/data/coco:ro]\n"
                               "  time_limit: \"1-00:00\"\n"),
])
def test_rendered_scripts_match_the_stored_reference(name, nodes, extra):
    got = render(scenario(nodes, extra))
    assert got == (REFERENCE / name).read_text(encoding="utf-8"), \
        "rendered script differs from tests/reference/%s:\n%s" % (name, got)


def test_multi_node_trials_meet_on_the_first_host_with_static_ranks():
    text = render(scenario(2))
    assert "--nnodes 2 --rdzv-backend static" in text
    assert 'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)' in text
    assert 'export PET_MASTER_ADDR="$MASTER_ADDR"' in text and 'export PET_MASTER_PORT="$MASTER_PORT"' in text
    assert "PET_NODE_RANK=\"$rank\"" in text and 'rank="${SLURM_NODEID:-0}"' in text
    one = render(scenario(1))
    assert "--standalone" in one and "--rdzv-backend" not in one


def test_the_local_backend_keeps_the_adapters_own_launch():
    sc = scenario(2)
    argv = run_mod.schedule(sc, scenario_mod.plan(sc), "local")[0].argv
    assert "--rdzv-backend" not in argv and "--nnodes" in argv


def test_time_limit_defaults_to_the_trial_timeout_plus_five_minutes():
    assert sbatch.default_time_limit(1200) == "25"
    assert sbatch.default_time_limit(61) == "7"
    assert "#SBATCH --time=25\n" in render(scenario(1))


def test_platform_defaults_fill_partition_and_account(monkeypatch):
    from harness.plan import platforms

    sc = launch.loads_scenario_text((BASE % {"nodes": 1, "extra": ""}).replace(
        "  partition: gpu\n  account: detection\n", ""))
    monkeypatch.setattr(slurm, "_platform_defaults",
                        lambda name: platforms.SlurmDefaults(partition="dgx", account="team"))
    text = render(sc)
    assert "#SBATCH --partition=dgx\n" in text and "#SBATCH --account=team\n" in text
    assert "#SBATCH --partition=gpu\n" in render(scenario(1))   # the scenario's own wins


HOSTILE = ["$(touch {pwned})", "`touch {pwned}`", "a'b\"c", "x; touch {pwned}", "new\nline",
           "${{HOME}}", "--", "*", "back\\slash", ""]


def fake_tools(bindir, capture):
    """srun that records its argv and then runs the node part like Slurm would; scontrol too."""
    bindir.mkdir()
    srun = bindir / "srun"
    srun.write_text("#!%s\nimport json, os, sys\nargs = sys.argv[1:]\njson.dump(args, open(%r, 'w'))\n"
                    "while args[0].startswith('--'):\n    args.pop(0)\n"
                    "os.environ['SLURM_NODEID'] = '0'\nos.execvp(args[0], args)\n" % (sys.executable, str(capture)))
    scontrol = bindir / "scontrol"
    scontrol.write_text("#!/bin/sh\necho node-a\necho node-b\n")
    for f in (srun, scontrol):
        f.chmod(f.stat().st_mode | stat.S_IEXEC)


def test_hostile_values_reach_the_trial_verbatim_and_run_nothing(tmp_path):
    pwned = tmp_path / "pwned"
    hostile = [h.format(pwned=pwned) for h in HOSTILE]
    env_text = json.dumps({"HOSTILE_%d" % i: h for i, h in enumerate(hostile)})
    sc = launch.loads_scenario_text("""\
name: hostile
backend: slurm
matrix: {framework: [calibrate], model: [retinanet], gpus: [1], nodes: [1]}
warmup: 0
measure: 1
repeats: 1
calibrate: {iteration_ms: 1, data_ms: 0}
env: %s
slurm: {gpus_per_node: 0}
""" % env_text)
    trial_dir = tmp_path / "results" / "trials" / "run-0001"
    trial_dir.mkdir(parents=True)
    probe = [sys.executable, "-c", "import json, os, sys; print('ARGV ' + json.dumps(sys.argv[1:])); "
             "print('ENV ' + json.dumps({k: v for k, v in os.environ.items() if k.startswith('HOSTILE_')}))"]
    cell = scenario_mod.plan(sc)[0].cell
    script = trial_dir / "job.sbatch"
    script.write_text(slurm.script_for(sc, cell, trial_dir, probe + hostile))
    capture = tmp_path / "srun-argv.json"
    fake_tools(tmp_path / "bin", capture)
    env = dict(os.environ, PATH="%s%s%s" % (tmp_path / "bin", os.pathsep, os.environ["PATH"]),
               SLURM_JOB_NODELIST="node-[a-b]", SLURM_JOB_ID="77")
    done = subprocess.run(["bash", str(script)], env=env, cwd=str(tmp_path), timeout=60,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    assert done.returncode == 0, done.stdout
    assert not pwned.exists(), "a hostile value was executed by the shell"
    assert json.load(open(str(capture)))[-len(hostile):] == hostile
    record = json.loads((trial_dir / "trial.json").read_text())
    assert record["argv"] == probe + hostile and record["exit_code"] == 0
    log = (trial_dir / "log.txt").read_text()
    argv_line = next(l for l in log.splitlines() if l.startswith("ARGV "))
    assert json.loads(argv_line[5:]) == hostile
    env_line = next(l for l in log.splitlines() if l.startswith("ENV "))
    assert json.loads(env_line[4:]) == json.loads(env_text)
    assert record["env"]["HOSTILE_0"] == hostile[0]     # recorded through --env-key


@pytest.mark.parametrize("yaml_line, field, says", [
    ("  partition: \"gpu\\nrm -rf /\"\n", "slurm.partition", "pattern"),
    ("  account: \"a b\"\n", "slurm.account", "pattern"),
    ("  time_limit: \"10 minutes\"\n", "slurm.time_limit", "not a Slurm time limit"),
    ("  sbatch_options: [\"--qos=high; rm -rf /\"]\n", "slurm.sbatch_options", "no spaces"),
    ("  sbatch_options: [\"--mail-user=$(id)\"]\n", "slurm.sbatch_options", "no spaces"),
    ("  sbatch_options: [\"--nodes=4\"]\n", "slurm.sbatch_options", "set by detbench"),
    ("  sbatch_options: [\"-N 4\"]\n", "slurm.sbatch_options", "--key=value"),
    ("  container_mounts: [\"/a:/b,/etc:/etc\"]\n", "slurm.container_mounts", "SRC:DST"),
    ("  container_image: \"img name\"\n", "slurm.container_image", "pattern"),
    ("  gpus_per_nod: 8\n", "slurm.gpus_per_nod", "unknown key"),
    ("  cpus_per_task: 0\n", "slurm.cpus_per_task", "greater than or equal to 1"),
])
def test_bad_slurm_settings_are_refused_at_their_line(write_scenario, yaml_line, field, says):
    text = "name: s\nbackend: slurm\nmatrix: {framework: [calibrate], model: [retinanet]}\nslurm:\n" + yaml_line
    path = write_scenario(text)
    with pytest.raises(UserError) as err:
        launch.load_scenario(path)
    assert "%s:5: %s:" % (path, field) in str(err.value) and says in str(err.value)


def test_an_unsafe_environment_name_cannot_reach_the_script():
    sc = launch.loads_scenario_text(BASE % {"nodes": 1, "extra": ""}).model_copy(
        update={"env": {"A=1; touch /tmp/x #": "v"}})
    with pytest.raises(UserError, match="environment variable name"):
        render(sc)


def test_results_folder_with_spaces_is_refused_not_mangled():
    sc = scenario(1)
    cell = scenario_mod.plan(sc)[0].cell
    with pytest.raises(UserError, match="unsafe #SBATCH option"):
        slurm.script_for(sc, cell, "/shared/my results/trials/x-0001", ["true"])


def test_dry_run_prints_the_scripts_it_would_submit(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(BASE % {"nodes": 2, "extra": ""})
    out = CliRunner().invoke(main, ["run", "--scenario", str(path), "--backend", "slurm", "--dry-run",
                                    "--results", str(tmp_path / "res")])
    assert out.exit_code == 0, out.output
    assert out.output.count("#!/bin/bash\n") == 1
    assert "#SBATCH --nodes=2\n" in out.output and "#SBATCH --gpus-per-node=8\n" in out.output
    assert "#SBATCH --job-name=detbench-DRYRUN-0001\n" in out.output
    assert not (tmp_path / "res").exists(), "a dry run must not create the results folder"
