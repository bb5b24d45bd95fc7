"""Throwaway git repositories for `detbench bisect`, built from this project: this checkout's
detbench (its tracked harness, runner.py, platforms and pyproject.toml, so each commit runs its own
`harness.cli`) with a PACE factor on the calibration workload's iteration time and a one-cell
scenario, then commits that edit a file of it (a trainer config, an adapter, the workload) or only
a notes file. And tiny pure-Python wheels, for env axes that pip installs from a local folder
(--no-index --find-links) without the network."""
import base64
import hashlib
import re
import subprocess
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = "scenarios/bisect.yaml"
PACE_LINE = "PACE = 1.0\n"
PROJECT = ("harness", "platforms", "runner.py", "pyproject.toml")
WORKLOAD = "harness/workloads/calibrate.py"
CALIBRATE_ADAPTER = "harness/frameworks/calibrate.py"
# the calibration adapter passes the scenario's iteration time on, at first as it is: in its
# training command, then in its inference command
ITERATION_MS = re.compile(r'repr\((?:([0-9.]+) \* )?float\(opts\.get\("iteration_ms", 50\.0\)\)\)')


def slower_adapter(repo, factor, message="the calibration adapter asks for longer iterations", inference=False):
    """A commit of the calibration adapter alone that multiplies the training (or inference)
    iteration time it asks the workload for by `factor` (the scenario and the workload unchanged)."""
    path = Path(repo) / CALIBRATE_ADAPTER
    text = path.read_text(encoding="utf-8")
    uses = list(ITERATION_MS.finditer(text))
    assert len(uses) == 2, "the calibration adapter changed: update tests/support/bisectrepo.py"
    found = uses[1 if inference else 0]
    now = float(found.group(1) or 1.0) * factor
    text = text[:found.start()] + 'repr(%r * float(opts.get("iteration_ms", 50.0)))' % now + text[found.end():]
    path.write_text(text, encoding="utf-8")
    return commit(repo, message)


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
    """A repository of `commits` commits (oldest first, their shas returned) of this project;
    commit index `slow_at` (0-based, None for none) multiplies the calibration workload's
    iteration time by `slowdown`, the others add a line to a notes file."""
    repo = Path(repo)
    shas = [start_repo(repo, scenario, pace_line)]
    for i in range(1, commits):
        if i == slow_at:
            shas.append(edit(repo, WORKLOAD, PACE_LINE, "PACE = %r\n" % slowdown, "tune the iteration pace"))
        else:
            shas.append(notes(repo, i))
    return shas


def start_repo(repo, scenario=None, pace_line=PACE_LINE):
    """The first commit: this checkout's tracked project files, the paced workload, the scenario."""
    repo = Path(repo)
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--"] + list(PROJECT), check=True,
                             capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, tracked):
        if (ROOT / rel).is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_bytes((ROOT / rel).read_bytes())
    (repo / WORKLOAD).write_text(workload_text(pace_line), encoding="utf-8")
    (repo / SCENARIO).parent.mkdir(parents=True, exist_ok=True)
    (repo / SCENARIO).write_text(scenario if scenario is not None else scenario_text(), encoding="utf-8")
    (repo / "CHANGES").write_text("start\n", encoding="utf-8")
    return commit(repo, "the project")


def edit(repo, rel, old, new, message):
    """A commit replacing `old` (which must be there, once) by `new` in file `rel`."""
    path = Path(repo) / rel
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, "%s: %r is not there once: update tests/support/bisectrepo.py" % (rel, old)
    path.write_text(text.replace(old, new), encoding="utf-8")
    return commit(repo, message)


def notes(repo, i):
    """A commit that changes nothing the trials run: a line of the notes file."""
    with open(Path(repo) / "CHANGES", "a", encoding="utf-8") as f:
        f.write("change %d\n" % i)
    return commit(repo, "change %d of the notes" % i)


TRAINER_CONFIG = "harness/trainer/configs/faster_r50v1_fpn_1x.py"
TRAINER_ADAPTER = "harness/frameworks/detbench_trainer.py"
DECAY_LINE = '    sets["train.decay_norm_bias"] = True\n'


def trainer_scenario_text(input_size=128, measure=3, threads=1):
    """The bundled trainer's Faster R-CNN cell on the CPU: batch 1, a small input, a few iterations."""
    return ("name: bisect-trainer\nmatrix:\n  framework: [detbench-trainer]\n  model: [faster_rcnn]\n"
            "  precision: [fp32]\n  platform: [local]\n  gpus: [1]\nbatch_per_gpu: 1\n"
            "input_size: [%d, %d]\ndata: synthetic\nwarmup: 1\nmeasure: %d\nrepeats: 1\ntimeout_s: 900\n"
            "env:\n  OMP_NUM_THREADS: \"%d\"\n" % (input_size, input_size, measure, threads))


def larger_roi_sample(repo, by="config", size=2048, before=512):
    """A commit that raises the Faster R-CNN RoI sample per image from `before` to `size` through the
    trainer's config file (by="config") or through its adapter's options (by="adapter") alone."""
    if by == "config":
        return edit(repo, TRAINER_CONFIG, "roi_batch_per_image=%d," % before, "roi_batch_per_image=%d," % size,
                    "sample %d RoIs per image in Faster R-CNN" % size)
    return edit(repo, TRAINER_ADAPTER, DECAY_LINE, DECAY_LINE + '    sets["model.roi_batch_per_image"] = %d\n' % size,
                "the trainer adapter samples %d RoIs per image" % size)


def make_trainer_repo(repo, commits=8, slow_at=4, by="config"):
    """`commits` commits of this project, commit `slow_at` raising the RoI sample 512 -> 2048 (by
    its config or its adapter), the others notes."""
    shas = [start_repo(repo)]
    for i in range(1, commits):
        shas.append(larger_roi_sample(repo, by) if i == slow_at else notes(repo, i))
    return shas


def done_trials(results):
    """Finished trials in the revisions' own stores of the bisects kept in the results folder."""
    from harness.bisect import search
    from harness.results.store import Store

    done = 0
    for db in Path(results).glob("%s/*/*/detbench.sqlite" % search.STATE_DIR):
        store = Store(db.parent, create=False)
        try:
            done += sum(1 for r in store.read_runs() for t in store.read_trials(r.id) if t.done)
        finally:
            store.close()
    return done


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
