"""Throwaway git repositories for `detbench bisect`: the calibration workload (a copy of this
checkout's, with a PACE factor on its iteration time) and a one-cell scenario, then filler commits,
one of which may make the workload slower. And tiny pure-Python wheels, for env axes that pip
installs from a local folder (--no-index --find-links) without the network."""
import base64
import hashlib
import subprocess
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = "scenarios/bisect.yaml"
PACE_LINE = "PACE = 1.0\n"
COPIED = ("harness/__init__.py", "harness/jsonlog.py", "harness/workloads/__init__.py")


def scenario_text(iteration_ms=4.0, warmup=2, measure=8, name="bisect-calibrate", frameworks=("calibrate",),
                  models=("retinanet",)):
    return ("name: %s\nmatrix:\n  framework: [%s]\n  model: [%s]\n  precision: [fp32]\n"
            "  platform: [local]\n  gpus: [1]\nbatch_per_gpu: 2\ninput_size: [64, 64]\n"
            "warmup: %d\nmeasure: %d\nrepeats: 1\ntimeout_s: 60\n"
            "calibrate:\n  iteration_ms: %g\n  data_ms: 0.5\n"
            % (name, ", ".join(frameworks), ", ".join(models), warmup, measure, iteration_ms))


def workload_text(pace_line=PACE_LINE):
    """This checkout's calibration workload with its period multiplied by PACE (set by pace_line)."""
    text = (ROOT / "harness/workloads/calibrate.py").read_text(encoding="utf-8")
    old = "    period = args.iteration_ms / 1000.0\n"
    assert old in text, "the calibration workload changed: update tests/support/bisectrepo.py"
    text = text.replace(old, "    period = args.iteration_ms * PACE / 1000.0\n")
    anchor = "SPIN_S = "
    return text.replace(anchor, pace_line + anchor, 1)


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo)] + list(args), check=True, capture_output=True,
                          text=True).stdout.strip()


def commit(repo, message):
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-q",
        "--no-gpg-sign", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(repo, commits=16, slow_at=None, slowdown=1.10, scenario=None, pace_line=PACE_LINE):
    """A repository of `commits` commits (oldest first, their shas returned); commit index
    `slow_at` (0-based, None for none) multiplies the workload's iteration time by `slowdown`."""
    repo = Path(repo)
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    for rel in COPIED:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text((ROOT / rel).read_text(encoding="utf-8"), encoding="utf-8")
    (repo / "harness/workloads/calibrate.py").write_text(workload_text(pace_line), encoding="utf-8")
    (repo / SCENARIO).parent.mkdir(parents=True, exist_ok=True)
    (repo / SCENARIO).write_text(scenario if scenario is not None else scenario_text(), encoding="utf-8")
    (repo / "CHANGES").write_text("start\n", encoding="utf-8")
    shas = [commit(repo, "the calibration workload")]
    for i in range(1, commits):
        if i == slow_at:
            path = repo / "harness/workloads/calibrate.py"
            path.write_text(path.read_text(encoding="utf-8").replace(PACE_LINE, "PACE = %r\n" % slowdown),
                            encoding="utf-8")
            shas.append(commit(repo, "tune the iteration pace"))
        else:
            with open(repo / "CHANGES", "a", encoding="utf-8") as f:
                f.write("change %d\n" % i)
            shas.append(commit(repo, "change %d of the notes" % i))
    return shas


def make_wheel(folder, name, version, files):
    """A pure-Python wheel `name-version-py3-none-any.whl` in `folder` holding `files`
    ({path inside site-packages: text}); returns its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    info = "%s-%s.dist-info" % (name, version)
    contents = dict(files)
    contents[info + "/METADATA"] = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
    contents[info + "/WHEEL"] = "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(text.encode())))
    record.append(info + "/RECORD,,")
    contents[info + "/RECORD"] = "\n".join(record) + "\n"
    wheel = folder / ("%s-%s-py3-none-any.whl" % (name, version))
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in contents.items():
            z.writestr(path, text)
    return wheel
