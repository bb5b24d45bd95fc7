"""The rivals train with their own published code at their pinned versions, byte for byte.

detectron2: every file of the installed package is the pinned commit's archive member it was
built from (the package's .py files, the model-zoo configs setup.py copies into it, the projects
its setup.py maps into detectron2.projects); only the compiled extension is not in the archive.
The training script a trial runs is that archive's tools/train_net.py, the bytes the launcher
reports it ran. mmdetection: every installed file of mmdet and mmengine hashes to its wheel's
RECORD, and the train.py its driver runs is the wheel's own mmdet/.mim/tools/train.py.

Needs each framework's env (`detbench env build NAME`): skipped with a reason without it, failed
under DETBENCH_REQUIRE_SERVICES=1."""
import json
import os
import subprocess

from harness.frameworks import FRAMEWORKS, detectron2
from harness.launch import envs
from harness.plan import trialfiles
from harness.vocab.sources import cached_archive
from tests.support.services import need_env

DRIVERS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "harness", "drivers")

# run in detectron2's env: each installed file of the detectron2 distribution against the archive
# member setup.py made it from; prints {"same": n, "differ": [...], "not_in_archive": [...],
# "not_installed": [...]}
DETECTRON2_FILES = r"""
import ast, importlib.metadata as md, json, sys, tarfile
archive = sys.argv[1]
with tarfile.open(archive) as tar:
    members = {}
    for m in tar:
        if m.isfile():
            parts = m.name.split("/", 1)
            rel = parts[1] if len(parts) == 2 and parts[0].startswith("detectron2-") else m.name
            members[rel] = tar.extractfile(m).read()
setup = ast.parse(members["setup.py"])
projects = next(ast.literal_eval(node.value) for node in ast.walk(setup) if isinstance(node, ast.Assign)
                and any(getattr(t, "id", "") == "PROJECTS" for t in node.targets))
def source(path):
    if path.startswith("detectron2/model_zoo/configs/"):
        return "configs/" + path[len("detectron2/model_zoo/configs/"):]
    for package, folder in projects.items():
        prefix = package.replace(".", "/") + "/"
        if path.startswith(prefix):
            return folder + "/" + path[len(prefix):]
    return path
dist = md.distribution("detectron2")
out = {"version": dist.version, "same": 0, "differ": [], "not_in_archive": [], "not_installed": []}
installed = set()
for f in dist.files:
    path = str(f)
    if not path.startswith("detectron2/") or "/__pycache__/" in path:
        continue
    rel = source(path)
    installed.add(rel)
    if rel not in members:
        out["not_in_archive"].append(path)
    elif f.locate().read_bytes() != members[rel]:
        out["differ"].append(path)
    else:
        out["same"] += 1
out["not_installed"] = sorted(m for m in members if m.startswith("detectron2/") and m.endswith(".py")
                              and m not in installed)
print(json.dumps(out))
"""


def _env_python(framework):
    need_env(framework)
    return envs.python_for(FRAMEWORKS[framework].env)


def _json_of(python, code, *args):
    proc = subprocess.run([python, "-c", code] + list(args), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_installed_detectron2_is_its_pinned_commits_source_byte_for_byte():
    python = _env_python("detectron2")
    archive = cached_archive(detectron2.DETECTRON2)
    assert envs.archive_commit(archive) == detectron2.COMMIT
    got = _json_of(python, DETECTRON2_FILES, str(archive))
    assert got["version"] == detectron2.VERSION
    assert got["differ"] == [] and got["not_installed"] == [], got
    # the one kind of file that is not source: the C++ ops compiled for this CPU
    assert got["not_in_archive"] and all(os.path.basename(p).startswith("_C.") and p.endswith(".so")
                                         for p in got["not_in_archive"]), got["not_in_archive"]
    assert got["same"] > 300         # the package's modules and the model-zoo configs


def test_the_script_a_trial_runs_is_the_archives_train_net(tmp_path):
    python = _env_python("detectron2")
    from harness.frameworks.base import TrialContext
    fw = FRAMEWORKS["detectron2"]
    ctx = TrialContext(framework="detectron2", model="faster_rcnn", precision="fp32", gpus=1, nodes=1,
                       batch_per_gpu=1, input_size=(64, 64), iterations=1, python=python,
                       data={"annotations": str(tmp_path / "a.json"), "images": str(tmp_path)})
    argv = trialfiles.prepare(tmp_path, fw.argv(ctx), fw.trial_files(ctx))
    script = argv[argv.index("--script") + 1]
    import tarfile
    with tarfile.open(cached_archive(detectron2.DETECTRON2)) as tar:
        [member] = [m for m in tar if m.name.endswith("/" + detectron2.SCRIPT) or m.name == detectron2.SCRIPT]
        published = tar.extractfile(member).read()
    with open(script, "rb") as fh:
        assert fh.read() == published
    assert b"class Trainer(DefaultTrainer)" in published and b"def invoke_main()" in published


# run in mmdetection's env: every file of a distribution against the sha256 its RECORD holds
RECORD_HASHES = r"""
import base64, hashlib, importlib.metadata as md, json, sys
out = {}
for name in sys.argv[1:]:
    dist = md.distribution(name)
    same, differ, unhashed = 0, [], []
    for f in dist.files:
        if f.hash is None:
            unhashed.append(str(f))
            continue
        assert f.hash.mode == "sha256", f.hash.mode
        digest = base64.urlsafe_b64encode(hashlib.sha256(f.locate().read_bytes()).digest()).rstrip(b"=").decode()
        if digest == f.hash.value:
            same += 1
        else:
            differ.append(str(f))
    out[name] = {"version": dist.version, "same": same, "differ": differ, "unhashed": unhashed,
                 "train": {str(f): str(f.locate().resolve()) for f in dist.files
                           if str(f).endswith(".mim/tools/train.py")}}
print(json.dumps(out))
"""

TRAIN_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import os, mmdet_driver
print(os.path.realpath(mmdet_driver.train_script()))
"""


def test_mmdetection_runs_its_wheels_own_train_py_and_its_files_match_the_record():
    python = _env_python("mmdetection")
    got = _json_of(python, RECORD_HASHES, "mmdet", "mmengine")
    pins = FRAMEWORKS["mmdetection"].env.pins
    for name in ("mmdet", "mmengine"):
        assert got[name]["version"] == pins[name]
        assert got[name]["differ"] == [], got[name]["differ"][:10]
        assert got[name]["same"] > 100
        # only RECORD itself and the byte-code pip compiled at install time carry no hash
        assert all(p.endswith(("RECORD", ".pyc")) for p in got[name]["unhashed"]), got[name]["unhashed"][:10]
    assert list(got["mmdet"]["train"]) == ["mmdet/.mim/tools/train.py"]
    proc = subprocess.run([python, "-c", TRAIN_SCRIPT, DRIVERS], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the file the driver runs is the one whose RECORD hash matched above
    assert proc.stdout.strip() == got["mmdet"]["train"]["mmdet/.mim/tools/train.py"]
