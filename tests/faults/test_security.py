"""Security: no shell between scenario text and a process, safe YAML only, escaped HTML, no secrets kept.

Hostile values (`; rm -rf ~`, `$(...)`, backquotes, quotes, newlines) go through every
scenario field that reaches a command line and must arrive as the very same argv items,
for the local backend (real `detbench run`) and in the sbatch script (run under bash with
stand-ins for srun and scontrol). HOME points at a throwaway folder in those runs, so a
shell that did run `rm -rf ~` would show up as a missing folder, not a lost home.
"""
import ast
import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
import uuid
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from tests.support.scenarios import GOOD_SCENARIO
from harness import frameworks
from harness.plan import platforms, scenario as scenario_mod
from harness import launch
from harness import run as run_mod
from harness.cli import main
from harness.errors import UserError
from harness.launch import sbatch, slurm
from harness.launch.local import ROOT, RUNNER, LocalLauncher

pytestmark = pytest.mark.faults
SOURCES = sorted(ROOT.glob("harness/**/*.py")) + [ROOT / "runner.py"]


# ------------------------------------------------------------------------------ the code itself

def calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
            yield node, owner, name


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_no_command_is_a_shell_string(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node, owner, name in calls(tree):
        where = "%s:%d" % (path.relative_to(ROOT), node.lineno)
        for kw in node.keywords:
            assert not (kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False)), \
                "%s: shell=... on a subprocess call" % where
        assert (owner, name) not in {("os", "system"), ("os", "popen"), ("subprocess", "getoutput"),
                                     ("subprocess", "getstatusoutput")}, "%s: %s.%s runs a shell" % (where, owner, name)


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_yaml_is_read_only_through_harness_yamlfile(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imports = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imports |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    if path.name == "yamlfile.py":
        unsafe = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in (
            "load", "load_all", "unsafe_load", "full_load", "Loader", "FullLoader", "UnsafeLoader")]
        assert not unsafe, "yamlfile.py uses an unsafe loader at line %d" % unsafe[0].lineno
    else:
        assert "yaml" not in imports, ("%s imports yaml itself; go through harness.plan.yamlfile"
                                       % path.relative_to(ROOT))


# ------------------------------------------------------------------------------ YAML tags

TAGS = ["!!python/object/apply:os.system [\"touch {canary}\"]",
        "!!python/object/new:os.system [\"touch {canary}\"]",
        "!!python/object:subprocess.Popen {{args: [touch, {canary}]}}",
        "!!python/name:os.system ''",
        "!!python/module:os ''",
        "!!binary dG91Y2g=",
        "!custom {{x: 1}}"]


@pytest.mark.parametrize("tag", TAGS, ids=[t.split()[0] for t in TAGS])
def test_a_python_tag_is_refused_and_never_runs(tmp_path, tag):
    canary = tmp_path / "canary"
    text = GOOD_SCENARIO + "description: %s\n" % tag.format(canary=canary)
    (tmp_path / "s.yaml").write_text(text)
    for args in (["validate", str(tmp_path / "s.yaml")],
                 ["run", "--scenario", str(tmp_path / "s.yaml"), "--results", str(tmp_path / "r")]):
        out = CliRunner().invoke(main, args)
        assert out.exit_code == 2 and "is not allowed (plain data only)" in out.output, out.output
    platform = tmp_path / "lab.yaml"
    platform.write_text("name: lab\ncpu: {model: x}\nmemory_gb: 1\nos: %s\n" % tag.format(canary=canary))
    with pytest.raises(UserError, match="not allowed"):
        platforms.load_file(platform)
    assert not canary.exists() and not (tmp_path / "r").exists()


# ------------------------------------------------------------------------------ argv and environment

def hostile(canary):
    return ["; rm -rf ~", "$(touch %s)" % canary, "`touch %s`" % canary, "a'b\"c", "x && touch %s" % canary,
            "| touch %s" % canary, "new\nline", "${HOME}", "*", "--", "back\\slash", "", " spaced  "]


@pytest.fixture
def home(tmp_path):
    """A throwaway HOME with one file in it: `rm -rf ~` in a shell would take it."""
    path = tmp_path / "home"
    path.mkdir()
    (path / "keep").write_text("still here")
    return path


def hostile_scenario(tmp_path, framework, canary, backend="local"):
    """A scenario whose every free-text field that reaches a trial carries hostile values."""
    data = tmp_path / ("data $(touch %s); x" % canary)
    (data / "images `id`").mkdir(parents=True)
    (data / "ann; rm -rf ~.json").write_text("{}")
    fw = frameworks.FRAMEWORKS[framework]
    model = sorted(fw.models)[0]
    precision = "fp32" if "fp32" in fw.precisions else sorted(fw.precisions)[0]
    opts = {"detbench-trainer": {"train.checkpoint_dir": "$(touch %s.option)" % canary},
            "torchvision": {"norm": "`touch %s.option`" % canary}}.get(framework)
    doc = {"name": "hostile", "backend": backend,
           "matrix": {"framework": [framework], "model": [model], "precision": [precision]},
           "warmup": 0, "measure": 1, "repeats": 1, "timeout_s": 60,
           "data": {"annotations": str(data / "ann; rm -rf ~.json"), "images": str(data / "images `id`")},
           "env": {"HOSTILE_%d" % i: v for i, v in enumerate(hostile(canary))},
           "extra_args": {framework: hostile(canary)}}
    if framework == "calibrate":
        doc["calibrate"] = {"iteration_ms": 1, "data_ms": 0}
    if model == "efficientdet_d0":   # its pyramid (levels 3 to 7) needs sides in multiples of 128
        doc["input_size"] = [384, 384]
    if framework == "tensorpack":    # its FasterRCNN example trains one image per GPU
        doc["batch_per_gpu"] = 1
    if opts:
        doc["options"] = {framework: opts}
    if backend == "slurm":
        doc["slurm"] = {"gpus_per_node": 0}
    path = tmp_path / ("%s.yaml" % framework)
    path.write_text(json.dumps(doc))     # JSON is YAML, and keeps every character exact
    return path, doc


@pytest.mark.parametrize("framework", sorted(frameworks.FRAMEWORKS))
def test_every_adapter_passes_hostile_values_as_whole_argv_items(tmp_path, framework):
    canary = tmp_path / "canary"
    path, doc = hostile_scenario(tmp_path, framework, canary)
    sc = launch.load_scenario(path)
    argv = run_mod.schedule(sc, scenario_mod.plan(sc), "local")[0].argv
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
    assert argv[-len(hostile(canary)):] == hostile(canary), "extra_args must end the command, item for item"
    literal = ([doc["data"]["annotations"], doc["data"]["images"]]
               + list(doc.get("options", {}).get(framework, {}).values()))
    for value in literal:
        for item in argv:
            if value in item:
                assert item == value or item.endswith("=" + value), "%r is embedded in %r" % (value, item)


def test_local_backend_delivers_hostile_values_verbatim(tmp_path, home):
    canary = tmp_path / "canary"
    path, doc = hostile_scenario(tmp_path, "calibrate", canary)
    results = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--scenario", str(path), "--results",
                           str(results)], cwd=str(tmp_path), env=dict(os.environ, HOME=str(home)),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
    assert proc.returncode == 0, proc.stdout
    assert not canary.exists() and (home / "keep").read_text() == "still here"
    trial = next((results / "trials").iterdir())
    record = json.loads((trial / "trial.json").read_text())
    db = sqlite3.connect(str(results / "detbench.sqlite"))
    planned, reason = db.execute("SELECT argv_json, reason FROM trials").fetchone()
    db.close()
    assert record["argv"] == json.loads(planned)
    assert record["argv"][-len(hostile(canary)):] == hostile(canary)
    for key, value in doc["env"].items():
        assert record["env"][key] == value          # the environment arrived byte for byte
    # the workload's own argparse saw the items one by one and names the first stray ones
    log = (trial / "log.txt").read_text()
    assert "calibrate: error: unrecognized arguments: ; rm -rf ~ $(touch %s) `touch %s`" % (canary, canary) in log
    assert reason == "exit code 2: " + log.rstrip("\n").splitlines()[-1]


def fake_slurm_tools(bindir, capture):
    """srun that writes its argv and HOSTILE_* environment to `capture`; scontrol naming one host."""
    bindir.mkdir()
    srun = bindir / "srun"
    srun.write_text("#!%s\nimport json, os, sys\njson.dump({'argv': sys.argv[1:], 'env': {k: v for k, v in "
                    "os.environ.items() if k.startswith('HOSTILE_')}}, open(%r, 'w'))\n"
                    % (sys.executable, str(capture)))
    (bindir / "scontrol").write_text("#!/bin/sh\necho node-a\n")
    for f in bindir.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IEXEC)


def test_sbatch_script_delivers_hostile_values_verbatim(tmp_path, home):
    canary = tmp_path / "canary"
    path, doc = hostile_scenario(tmp_path, "calibrate", canary, backend="slurm")
    sc = launch.load_scenario(path)
    trial = run_mod.schedule(sc, scenario_mod.plan(sc), "slurm")[0]
    trial_dir = tmp_path / "results" / "trials" / "run-0001"
    trial_dir.mkdir(parents=True)
    script = trial_dir / slurm.SCRIPT
    script.write_text(slurm.script_for(sc, trial.cell, trial_dir, trial.argv))
    capture = tmp_path / "srun.json"
    fake_slurm_tools(tmp_path / "bin", capture)
    env = dict(os.environ, HOME=str(home), PATH="%s%s%s" % (tmp_path / "bin", os.pathsep, os.environ["PATH"]),
               SLURM_JOB_NODELIST="node-a", SLURM_JOB_ID="42")
    done = subprocess.run(["bash", str(script)], cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
    assert done.returncode == 0, done.stdout
    assert not canary.exists() and (home / "keep").read_text() == "still here"
    got = json.loads(capture.read_text())
    expected_runner = [slurm.python_for(sc), str(RUNNER), "--timeout", "60"]
    for key in sorted(doc["env"]):
        expected_runner += ["--env-key", key]
    assert got["argv"] == ["--nodes=1", "--ntasks-per-node=1", "--kill-on-bad-exit=1", "bash", "-c",
                           sbatch.NODE_SHIM, "detbench-node", str(trial_dir)] + expected_runner + ["--"] + trial.argv
    assert got["env"] == doc["env"]


# ------------------------------------------------------------------------------ HTML

PAYLOADS = ["<script>alert(1)</script>", "\"><img src=x onerror=alert(2)>", "'><svg onload=alert(3)>",
            "</title><iframe src=javascript:alert(4)></iframe>", "{{ 7*7 }}{% if 1 %}", "&amp;lt;b&amp;gt;"]
HOSTILE_TEXT = " ".join(PAYLOADS)


class Markup(HTMLParser):
    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs, self.text = set(), [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs += attrs

    def handle_data(self, data):
        self.text.append(data)


def html_report(results):
    out = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(results), "--format", "html"])
    assert out.exit_code == 0, out.output
    return out.output


def report_run(tmp_path, text):
    (tmp_path / "s.yaml").write_text(text)
    results = tmp_path / "results"
    out = CliRunner().invoke(main, ["run", "--scenario", str(tmp_path / "s.yaml"), "--results", str(results)])
    assert out.exit_code == 0, out.output
    return results


REPORTED = """\
name: html
description: %(text)s
matrix: {framework: [calibrate], model: [retinanet, faster_rcnn]}
warmup: 1
measure: 2
repeats: 1
timeout_s: 30
calibrate: {iteration_ms: 5, data_ms: 0}
env: {OMP_NUM_THREADS: %(text)s}
exclude:
  - {model: faster_rcnn, reason: %(text)s}
extra_args: {calibrate: [%(arg)s]}
"""


def test_html_escapes_everything_from_scenarios_logs_and_the_store(tmp_path):
    (tmp_path / "benign").mkdir()
    benign = report_run(tmp_path / "benign", REPORTED % {"text": "plain", "arg": "--data-ms, '0'"})
    (tmp_path / "hostile").mkdir()
    quoted = json.dumps(HOSTILE_TEXT)
    hostile_results = report_run(tmp_path / "hostile",
                                 REPORTED % {"text": quoted, "arg": "--iterations, " + quoted})
    db = sqlite3.connect(str(hostile_results / "detbench.sqlite"))
    with db:   # a store can hold anything: text columns and JSON values alike
        host = json.loads(db.execute("SELECT host_json FROM runs").fetchone()[0])
        host["cpu"]["model"] = HOSTILE_TEXT
        host["description"] = HOSTILE_TEXT
        db.execute("UPDATE runs SET scenario = ?, scenario_path = ?, host_json = ?",
                   (HOSTILE_TEXT, HOSTILE_TEXT, json.dumps(host)))
        db.execute("UPDATE trials SET settings_json = ?", (json.dumps({"input_size": HOSTILE_TEXT}),))
    db.close()
    safe, page = Markup(html_report(benign)), Markup(html_report(hostile_results))
    assert page.tags <= safe.tags, "new elements: %s" % (page.tags - safe.tags)
    assert not [a for a, _ in page.attrs if a.lower().startswith("on")]
    assert not [v for _, v in page.attrs if v and v.strip().lower().startswith("javascript:")]
    text = "".join(page.text)
    assert HOSTILE_TEXT in text, "the hostile text should be shown, as text"
    assert text.count(PAYLOADS[0]) >= 3    # exclude reason, failure reason from the log, run facts


# ------------------------------------------------------------------------------ secrets

def test_secrets_in_the_environment_reach_no_record_and_no_report(tmp_path):
    secrets = {name: "s3cr3t-%s" % uuid.uuid4().hex for name in (
        "DETBENCH_TEST_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "SSH_PRIVATE_KEY", "my_api_key",
        "GITHUB_TOKEN")}
    env = dict(os.environ, **secrets)
    (tmp_path / "s.yaml").write_text(GOOD_SCENARIO + "env: {OMP_NUM_THREADS: '1'}\n")
    results = tmp_path / "results"

    def detbench(*args):
        out = subprocess.run([sys.executable, "-m", "harness.cli"] + list(args), cwd=str(tmp_path), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
        assert out.returncode == 0, out.stdout.decode(errors="replace")
        return out.stdout

    said = [detbench("run", "--scenario", "s.yaml", "--results", str(results))]
    for fmt in ("md", "html", "csv", "json"):
        said.append(detbench("report", "--platform", "local", "--results", str(results), "--format", fmt))
    said.append(detbench("run", "--scenario", "s.yaml", "--backend", "slurm", "--dry-run"))
    said.append(detbench("platform", "detect", "--json"))
    written = [p.read_bytes() for p in results.rglob("*") if p.is_file()]
    record = json.loads(next(results.rglob("trial.json")).read_text())
    assert record["env"].get("OMP_NUM_THREADS") == "1"     # the environment is recorded, less its secrets
    for blob in said + written:
        for name, value in secrets.items():
            assert value.encode() not in blob, "%s leaked" % name


def test_a_trial_still_gets_the_secrets_it_needs(tmp_path):
    value = "s3cr3t-%s" % uuid.uuid4().hex
    probe = "import hashlib, os; print(hashlib.sha256(os.environ['HF_TOKEN'].encode()).hexdigest())"
    os.environ["HF_TOKEN"] = value
    try:
        LocalLauncher().run(tmp_path / "trial", [sys.executable, "-c", probe], {}, 30)
    finally:
        del os.environ["HF_TOKEN"]
    assert (tmp_path / "trial" / "log.txt").read_text().strip() == hashlib.sha256(value.encode()).hexdigest()
    assert value not in (tmp_path / "trial" / "trial.json").read_text()
