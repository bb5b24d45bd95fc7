"""runner.py: one file, standard library only, Python >= 3.6, exact about what it saw."""
import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import runner
from tests.support.fsyncs import record_fsyncs

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "runner.py"


def python36():
    """A real Python 3.6 interpreter if this machine has one (pyenv keeps one on ours)."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [str(p) for p in sorted(root.glob("3.6*/bin/python"))]
    candidates += [p for p in ["/usr/bin/python3.6", "/usr/local/bin/python3.6"] if os.path.exists(p)]
    for candidate in candidates:
        out = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                             capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip() == "(3, 6)":
            return candidate
    return None


def vermin_says_36_compatible():
    exe = shutil.which("vermin") or str(Path(sys.executable).with_name("vermin"))
    out = subprocess.run([exe, "--no-tips", "-t=3.6-", "--violations", str(RUNNER)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def run_trial(tmp_path, argv, python=sys.executable, timeout=30, env=None, extra=()):
    trial = tmp_path / "trial"
    cmd = [python, str(RUNNER), "--trial-dir", str(trial), "--timeout", str(timeout), *extra, "--", *argv]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    record = json.loads((trial / "trial.json").read_text())
    return proc, record, trial


def test_imports_only_the_standard_library():
    tree = ast.parse(RUNNER.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module.split(".")[0])
    assert names and names <= set(sys.stdlib_module_names), names - set(sys.stdlib_module_names)


def test_real_trial_under_python_36(tmp_path):
    py36 = python36()
    if py36 is None:
        pytest.importorskip("vermin", reason="neither Python 3.6 nor vermin is installed")
        vermin_says_36_compatible()
        return
    script = "import sys\nfor i in range(3):\n    print('line', i)\nsys.stderr.write('to stderr\\n')\n"
    proc, record, trial = run_trial(tmp_path, [py36, "-c", script], python=py36)
    assert proc.returncode == 0, proc.stderr
    assert record["runner_python"].startswith("3.6")
    assert record["exit_code"] == 0 and record["signal"] is None
    assert (trial / "log.txt").read_text() == "line 0\nline 1\nline 2\nto stderr\n"
    assert len((trial / "log.times").read_text().splitlines()) == 4


def test_vermin_says_36_compatible():
    pytest.importorskip("vermin", reason="vermin is not installed (pip install -e .[dev])")
    vermin_says_36_compatible()


def test_lines_are_timestamped_in_order(tmp_path):
    script = "import time\nfor i in range(5):\n    print(i, flush=True)\n    time.sleep(0.05)\n"
    _, record, trial = run_trial(tmp_path, [sys.executable, "-c", script])
    stamps = [tuple(map(float, l.split("\t"))) for l in (trial / "log.times").read_text().splitlines()]
    monos = [m for m, _ in stamps]
    assert len(monos) == 5 and monos == sorted(monos)
    gaps = [b - a for a, b in zip(monos, monos[1:])]
    assert all(0.04 < g < 0.2 for g in gaps), gaps
    assert record["start_mono"] <= monos[0] <= monos[-1] <= record["end_mono"]
    assert abs(stamps[0][1] - record["start_wall"]) < 5


def test_exit_code_and_unterminated_last_line(tmp_path):
    script = "import sys\nsys.stdout.write('complete\\npartial')\nsys.exit(3)\n"
    proc, record, trial = run_trial(tmp_path, [sys.executable, "-c", script])
    assert proc.returncode == 1
    assert record["exit_code"] == 3
    assert (trial / "log.txt").read_text() == "complete\npartial\n"
    assert record["lines"] == 2


def test_argv_is_never_a_shell_string(tmp_path):
    hostile = "; touch %s/pwned $(id) `id`" % tmp_path
    _, record, trial = run_trial(tmp_path, [sys.executable, "-c", "import sys; print(sys.argv[1])", hostile])
    assert (trial / "log.txt").read_text() == hostile + "\n"
    assert record["argv"][-1] == hostile
    assert not (tmp_path / "pwned").exists()


def test_timeout_kills_the_whole_process_group(tmp_path):
    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "print(child.pid, flush=True)\n"
              "time.sleep(60)\n")
    started = time.monotonic()
    _, record, trial = run_trial(tmp_path, [sys.executable, "-c", script], timeout=1)
    assert time.monotonic() - started < 15
    assert record["timed_out"] is True
    assert record["exit_code"] is None and record["signal"] == signal.SIGTERM
    grandchild = int((trial / "log.txt").read_text().split()[0])
    assert not alive(grandchild)


def alive(pid):
    """True while pid runs (a zombie waiting for its parent to reap it counts as gone)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.05)
    return True


def test_sigterm_is_forwarded_and_recorded(tmp_path):
    trial = tmp_path / "trial"
    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *a: (print('child got SIGTERM', flush=True), sys.exit(7)))\n"
              "print('ready', flush=True)\n"
              "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, str(RUNNER), "--trial-dir", str(trial), "--",
                             sys.executable, "-c", script])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        log = trial / "log.txt"
        if log.exists() and "ready" in log.read_text():
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 1
    record = json.loads((trial / "trial.json").read_text())
    assert record["exit_code"] == 7 and record["interrupted_by"] == signal.SIGTERM
    assert "child got SIGTERM" in (trial / "log.txt").read_text()


def test_secrets_never_reach_the_record(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_TOKEN="hunter2", AWS_SECRET_ACCESS_KEY="x",
               MY_SETTING="kept", DB_PASSWORD="y")
    _, record, _ = run_trial(tmp_path, [sys.executable, "-c", "pass"], env=env,
                             extra=["--env-key", "MY_SETTING", "--env-key", "HF_TOKEN"])
    assert record["env"]["OMP_NUM_THREADS"] == "1" and record["env"]["MY_SETTING"] == "kept"
    assert not {"HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD"} & set(record["env"])


def test_the_record_is_replaced_whole_through_a_temporary_of_its_own_and_the_folder_fsynced(tmp_path, monkeypatch):
    path = tmp_path / "trial.json"
    path.write_text('{"error": "the launcher said so"}\n')
    (tmp_path / "trial.json.tmp").write_text("another writer's half")   # the name a fixed temporary would take
    during = []
    real_dump = json.dump

    def dump(obj, fh, **options):
        during.append(sorted(os.listdir(tmp_path)))
        return real_dump(obj, fh, **options)

    monkeypatch.setattr(json, "dump", dump)
    seen = record_fsyncs(monkeypatch, path)
    runner.write_json_atomic(str(path), {"exit_code": 0, "b": [1]})
    text = path.read_text()
    assert text == '{\n "b": [\n  1\n ],\n "exit_code": 0\n}\n'
    [names] = during
    [temporary] = [n for n in names if n not in ("trial.json", "trial.json.tmp")]
    assert temporary.startswith(".trial.json.%d." % os.getpid()) and temporary.endswith(".tmp")
    assert seen == [("file", '{"error": "the launcher said so"}\n'), ("folder", text)]
    assert sorted(os.listdir(tmp_path)) == ["trial.json", "trial.json.tmp"]
    assert (tmp_path / "trial.json.tmp").read_text() == "another writer's half"


def test_a_record_that_cannot_be_written_leaves_the_old_one_and_no_temporary(tmp_path):
    path = tmp_path / "trial.json"
    path.write_text('{"error": "the launcher said so"}\n')
    with pytest.raises(TypeError):
        runner.write_json_atomic(str(path), {"exit_code": object()})
    assert path.read_text() == '{"error": "the launcher said so"}\n'
    assert os.listdir(tmp_path) == ["trial.json"]


def test_command_that_cannot_start(tmp_path):
    proc, record, _ = run_trial(tmp_path, [str(tmp_path / "no-such-program")])
    assert proc.returncode == 1
    assert record["exit_code"] is None and "cannot start" in record["error"]
