"""Container images of the frameworks: recipes, the local base image, builds, the lock file.

Each recipe is a folder under dockerfiles/ with a Dockerfile that pins what it builds
from (a test checks it). Recipes that take ``ARG BASE_IMAGE`` can be built from any base:
``detbench image base`` makes one without a registry (debootstrap, then ``docker import``),
and ``--base-image`` or ``--build-arg BASE_IMAGE=...`` names another. A recipe with a
``requirements.txt`` (every line ``name==version``) gets its wheels downloaded on the host,
with the host's own pip settings, into a cache, which is served over HTTP on the Docker
bridge's gateway address while the build runs: the build installs from there with
``--no-index`` (no registry, no proxy, no certificates), and the wheels never become a layer
of the image. Every build is tagged ``detbench/<recipe>:<key>`` (the key hashes the
recipe's files and build arguments) and recorded in ``dockerfiles/images.lock`` with the
image ID the engine gave it, which is what trials record as the image they ran.
"""
import contextlib
import datetime
import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

from harness.launch import engine
from harness.launch.envs import cache_root, wheel_key
from harness.errors import UserError
from runner import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
RECIPES_DIR = ROOT / "dockerfiles"
LOCK_NAME = "images.lock"
REPOSITORY = "detbench/"

BASE_SUITE = "bookworm"
# python3 runs runner.py and the venvs; libgl1 and libglib2.0-0 are what opencv-python's wheel links
# against (mmcv and mmengine require opencv-python, not the headless build)
BASE_PACKAGES = ("python3", "python3-venv", "libgl1", "libglib2.0-0")
BASE_MIRROR = "http://deb.debian.org/debian"
BASE_PYTHON = "3.11"          # bookworm's python3
# manylinux tags a wheel may carry to install on bookworm (glibc 2.36), x86_64
BASE_PLATFORMS = tuple("manylinux_2_%d_x86_64" % v for v in range(36, 16, -1)) + ("manylinux2014_x86_64",)


@dataclass(frozen=True)
class Recipe:
    python: str                    # the interpreter in the image that runs runner.py and the trial
    wheels_python: Optional[str] = None   # CPython X.Y the requirements.txt wheels are fetched for
    local_base: bool = False       # FROM the base `detbench image base` makes, unless told otherwise
    # requirements.txt names whose index offers only an sdist: their wheels are built on the host
    # (pure Python only: a py3-none-any wheel, the same for any CPython 3)
    build_here: Tuple[str, ...] = ()
    # FROM the image of this other recipe as built here (its ID from the lock), unless told otherwise:
    # its layers are shared, and a change of it rebuilds this one (the ID is in the build key)
    base_recipe: Optional[str] = None
    # frameworks whose pinned env compiles packages from source on this host (mmdetection: mmcv):
    # the wheels `detbench env build` cached are served with the downloaded ones, never downloaded
    host_builds: Tuple[str, ...] = ()


VENV = "/opt/env/bin/python"
RECIPES = {
    "calibrate": Recipe(VENV, wheels_python=BASE_PYTHON, local_base=True),
    "detbench-trainer": Recipe(VENV, wheels_python=BASE_PYTHON, local_base=True),
    "torchvision": Recipe(VENV, base_recipe="detbench-trainer"),    # the trainer's closure, line for line
    "mmdetection": Recipe(VENV, wheels_python=BASE_PYTHON, base_recipe="torchvision",
                          host_builds=("mmdetection",)),
    "mmdetection-cuda": Recipe(VENV),
    "detectron2": Recipe(VENV),
    "effdet": Recipe(VENV, wheels_python=BASE_PYTHON, base_recipe="torchvision",
                     build_here=("antlr4-python3-runtime",)),
    "effdet-upstream": Recipe(VENV),
    "mmdetection-v1": Recipe("python3"),
    "maskrcnn-benchmark": Recipe("python3"),
    "simpledet-mxnet": Recipe("python3"),
    "nvidia-efficientdet-tf2": Recipe("python3"),
    "detectron": Recipe("python3"),      # runner.py; the trial itself runs Python 2.7
    "tensorpack": Recipe("python3"),
}

# the recipe a framework's trials run in unless the scenario's docker.images names another
FRAMEWORK_RECIPES = {
    "calibrate": "calibrate",
    "detbench-trainer": "detbench-trainer",
    "torchvision": "torchvision",
    "mmdetection": "mmdetection",
    "detectron2": "detectron2",
    "effdet": "effdet",
    "mmdetection-v1": "mmdetection-v1",
    "maskrcnn-benchmark": "maskrcnn-benchmark",
    "simpledet-mxnet": "simpledet-mxnet",
    "nvidia-efficientdet-tf2": "nvidia-efficientdet-tf2",
    "detectron": "detectron",
    "tensorpack": "tensorpack",
}


def recipe(name):
    if name not in RECIPES:
        raise UserError("unknown image recipe %r (known: %s)" % (name, ", ".join(sorted(RECIPES))))
    return RECIPES[name]


# ------------------------------------------------------------------ the lock file
def lock_path(recipes_dir=RECIPES_DIR):
    return Path(os.environ.get("DETBENCH_IMAGES_LOCK") or Path(recipes_dir) / LOCK_NAME)


def read_lock(path=None):
    path = Path(path or lock_path())
    if not path.exists():
        return {}
    try:
        lock = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError("%s: not a valid lock file (%s)" % (path, exc)) from None
    if not isinstance(lock, dict):
        raise UserError("%s: not a valid lock file (expected an object of images)" % path)
    return lock


def record(name, entry, path=None):
    path = Path(path or lock_path())
    lock = read_lock(path)
    lock[name] = entry
    write_json_atomic(str(path), lock)


# ------------------------------------------------------------------ the base image
def base_key(suite=BASE_SUITE, packages=BASE_PACKAGES):
    return _digest(["debootstrap", "--variant=minbase", suite] + sorted(packages))[:12]


def base_tag():
    return "%sbase:%s-%s" % (REPOSITORY, BASE_SUITE, base_key())


def make_base(mirror=BASE_MIRROR, out=sys.stdout, lock=None):
    """Make (or reuse) the local base image; return its lock entry.

    The root filesystem comes from debootstrap (needs root) and is cached as a tarball
    under the detbench cache, so a machine that lost its images imports it again in seconds.
    """
    client = engine.connect()
    tag = base_tag()
    tarball = cache_root() / "images" / ("base-%s-%s.tar" % (BASE_SUITE, base_key()))
    image = local_image(client, tag)
    if image is None:
        if not tarball.exists():
            _debootstrap(tarball, mirror, out)
        out.write("importing %s as %s\n" % (tarball.name, tag))
        repo, _, version = tag.partition(":")
        client.api.import_image_from_file(
            str(tarball), repository=repo, tag=version,
            changes=["ENV LANG=C.UTF-8", "LABEL %s.base=%s" % (engine.LABEL, base_key())])
        image = client.images.get(tag)
    entry = {"image": tag, "id": image.id, "recipe": "debootstrap --variant=minbase --include=%s %s"
             % (",".join(BASE_PACKAGES), BASE_SUITE)}
    record("base", entry, lock)
    out.write("base image %s %s\n" % (tag, image.id))
    return entry


def _debootstrap(tarball, mirror, out):
    if shutil.which("debootstrap") is None:
        raise UserError("making the base image needs debootstrap (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise UserError("making the base image runs debootstrap, which needs root")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="detbench-base-") as tmp:
        rootfs = os.path.join(tmp, "rootfs")
        out.write("debootstrap %s into a temporary folder (about a minute)\n" % BASE_SUITE)
        argv = ["debootstrap", "--variant=minbase", "--include=" + ",".join(BASE_PACKAGES),
                BASE_SUITE, rootfs, mirror]
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True)
        if proc.returncode != 0:
            tail = proc.stdout.strip().splitlines()[-1:] or ["exit %d" % proc.returncode]
            raise UserError("debootstrap failed: %s" % tail[0])
        partial = str(tarball) + ".partial"
        subprocess.run(["tar", "--numeric-owner", "-C", rootfs, "-cf", partial, "."], check=True)
        os.replace(partial, tarball)


# ------------------------------------------------------------------ builds
def build(name, base_image=None, build_args=None, recipes_dir=RECIPES_DIR, out=sys.stdout, lock=None,
          force=False):
    """Build recipe `name`; record and return its lock entry. UserError names a failing step."""
    spec = recipe(name)
    folder = Path(recipes_dir) / name
    if not (folder / "Dockerfile").exists():
        raise UserError("%s: no Dockerfile for image %r" % (folder, name))
    client = engine.connect(timeout=3600)
    args = dict(build_args or {})
    if base_image:
        args["BASE_IMAGE"] = base_image
    if "BASE_IMAGE" not in args and spec.base_recipe:
        args["BASE_IMAGE"] = resolve(client, spec.base_recipe, lock)[1]
    if "BASE_IMAGE" not in args and spec.local_base:
        base = local_image(client, base_tag())
        if base is None:
            raise UserError("image %s builds from the local base image, which is not here: make it with "
                            "`detbench image base` or pass --base-image" % name)
        args["BASE_IMAGE"] = base.id
    files = _recipe_files(folder)
    host_wheels = host_built_wheels(name, spec)
    tag = _tag(name, args, files, host_wheels)
    image = None if force else local_image(client, tag)
    if image is None:
        with tempfile.TemporaryDirectory(prefix="detbench-build-") as context:
            for rel, data in files:
                Path(context, rel).parent.mkdir(parents=True, exist_ok=True)
                Path(context, rel).write_bytes(data)
            served = dict(args)
            with contextlib.ExitStack() as stack:
                if spec.wheels_python and (folder / "requirements.txt").exists():
                    wheels = _fetch_wheels(folder / "requirements.txt", spec.wheels_python, out,
                                           spec.build_here, skip=[w.name.split("-")[0] for w in host_wheels])
                    if spec.host_builds:
                        wheels = stack.enter_context(_with_host_wheels(wheels, host_wheels))
                    host = _bridge_gateway(client)
                    server = stack.enter_context(WheelServer(wheels, host))
                    served.update(WHEELS_URL=server.url, WHEELS_HOST=host)
                image_id = _stream_build(client, context, tag, served, folder / "Dockerfile", out)
        image = client.images.get(image_id)
    entry = {"image": tag, "id": image.id, "build_args": args,
             "built": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    previous = read_lock(lock).get(name, {})
    if previous.get("id") == image.id:
        entry["built"] = previous.get("built", entry["built"])
    record(name, entry, lock)
    out.write("image %s %s\n" % (tag, image.id))
    return entry


def _tag(name, args, files, host_wheels):
    """detbench/<recipe>:<key>, the key hashing the recipe's files, its build arguments (the base
    image's ID among them) and the host-compiled wheels it installs."""
    key = _digest([name] + ["%s=%s" % kv for kv in sorted(args.items())] +
                  ["%s:%s" % (rel, hashlib.sha256(data).hexdigest()) for rel, data in files] +
                  ["host wheel %s" % w.parent.name for w in host_wheels])[:12]
    return "%s%s:%s" % (REPOSITORY, name, key)


def _stream_build(client, context, tag, args, dockerfile, out):
    step, last, image_id = "", [], None
    for chunk in client.api.build(path=context, tag=tag, buildargs=args, rm=True, forcerm=True,
                                  pull=False, decode=True, labels={engine.LABEL + ".recipe": tag}):
        text = chunk.get("stream", "")
        if text.startswith("Step "):
            step = text.strip()
        if text.strip():
            last = (last + [text.rstrip()])[-5:]
            out.write(text if text.endswith("\n") else text + "\n")
        if "aux" in chunk and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
        if "error" in chunk:
            said = chunk["error"].strip().splitlines()
            number, _, instruction = step[len("Step "):].partition(" : ")
            where = "step %s `%s`" % (number, instruction) if step else "before the first step"
            raise UserError("%s: %s failed: %s" % (dockerfile, where, said[-1][:300] if said else "error"))
    if image_id is None:
        raise UserError("%s: the engine reported no image (last output: %s)"
                        % (dockerfile, " | ".join(last) or "none"))
    return image_id


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def host_built_wheels(recipe_name, spec):
    """The wheels `detbench env build` compiled on this host for the envs of spec.host_builds (for
    the image's CPython); UserError saying how to make one that is not there."""
    from harness.frameworks import FRAMEWORKS
    wheels = []
    for fw in spec.host_builds:
        for build in FRAMEWORKS[fw].env.source_builds:
            folder = cache_root() / "wheels" / wheel_key(build, spec.wheels_python)
            found = sorted(folder.glob("*.whl")) if folder.is_dir() else []
            if not found:
                raise UserError("image %s installs the %s %s wheel compiled on this host, which is not in %s: "
                                "run `detbench env build %s` first (with CPython %s)"
                                % (recipe_name, build.name, build.version, folder, fw, spec.wheels_python))
            wheels.append(found[0])
    return wheels


@contextlib.contextmanager
def _with_host_wheels(downloaded, wheels):
    """A temporary folder linking the downloaded wheels and the host-compiled ones, to serve."""
    with tempfile.TemporaryDirectory(prefix="detbench-wheels-") as tmp:
        for path in list(Path(downloaded).glob("*.whl")) + list(wheels):
            os.symlink(path, os.path.join(tmp, path.name))
        yield Path(tmp)


def _fetch_wheels(requirements, python, out, build_here=(), skip=()):
    """Download the pinned wheels on the host, once (cached by the pins), building those of
    `build_here` from their sdists; return their folder. Pins named in `skip` (wheels compiled
    on the host by `detbench env build`) are left out."""
    pins = [l.strip() for l in requirements.read_text(encoding="utf-8").splitlines()
            if l.strip() and not l.strip().startswith("#")]
    bad = [p for p in pins if not re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.+\-]+", p)]
    if bad:
        raise UserError("%s: every line must pin name==version (%s)" % (requirements, bad[0]))
    skipped = {_canonical(n) for n in skip}
    pins = [p for p in pins if _canonical(p.split("==")[0]) not in skipped]
    here = {_canonical(n) for n in build_here}
    sources = [p for p in pins if _canonical(p.split("==")[0]) in here]
    missing = sorted(here - {_canonical(p.split("==")[0]) for p in sources})
    if missing:
        raise UserError("%s: no pin for %s, which the recipe builds here" % (requirements, ", ".join(missing)))
    binaries = [p for p in pins if p not in sources]
    key = pins + [python] + list(BASE_PLATFORMS) + (["built here:"] + sources if sources else [])
    cache = cache_root() / "wheels" / _digest(key)[:16]
    marker = cache / ".complete"
    if not marker.exists():
        out.write("downloading %d pinned wheels for CPython %s into %s\n" % (len(binaries), python, cache))
        cache.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                "--python-version", python, "--implementation", "cp", "--dest", str(cache)]
        for tag in BASE_PLATFORMS + ("any",):
            argv += ["--platform", tag]
        _pip(argv + binaries, requirements, "download")
        for pin in sources:
            out.write("building the wheel of %s from its sdist\n" % pin)
            with tempfile.TemporaryDirectory(prefix="detbench-wheel-") as tmp:
                _pip([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-binary", pin.split("==")[0],
                      "--wheel-dir", tmp, pin], requirements, "wheel")
                built = sorted(Path(tmp).glob("*.whl"))
                if len(built) != 1 or not built[0].name.endswith("-py3-none-any.whl"):
                    raise UserError("%s: %s did not build one pure-Python wheel (%s); it cannot be built "
                                    "on the host for the image" % (requirements, pin,
                                                                  ", ".join(b.name for b in built) or "none"))
                shutil.copy2(built[0], cache / built[0].name)
        marker.write_text("\n".join(pins) + "\n")
    return cache


def _pip(argv, requirements, what):
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True)
    if proc.returncode != 0:
        said = [l for l in proc.stdout.splitlines() if "ERROR" in l] or proc.stdout.splitlines()[-1:]
        raise UserError("%s: pip %s failed: %s" % (requirements, what, said[0] if said else proc.returncode))


def _bridge_gateway(client):
    """The host's address on Docker's default bridge (what a build's RUN steps can reach)."""
    import ipaddress
    try:
        config = client.networks.get("bridge").attrs["IPAM"]["Config"][0]
        # older engines leave Gateway out: the bridge then takes the subnet's first address
        return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))
    except Exception as exc:
        raise UserError("cannot find the address of Docker's default bridge to serve wheels to the build "
                        "(%s)" % exc) from None


class WheelServer:
    """Serve one folder read-only over HTTP on `host` (a free port) while a build runs."""

    def __init__(self, folder, host):
        handler = functools.partial(_QuietHandler, directory=str(folder))
        self.httpd = http.server.ThreadingHTTPServer((host, 0), handler)
        self.url = "http://%s:%d/" % (host, self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _recipe_files(folder):
    return [(str(p.relative_to(folder)), p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]


# ------------------------------------------------------------------ lookups
def local_image(client, ref):
    import docker
    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None


def resolve(client, name, lock=None):
    """(tag, image id) of recipe `name` as built here; UserError when it is missing or stale."""
    state, why, image = freshness(client, name, lock)
    if state != BUILT:
        raise UserError("image %s is %s (%s); build it with `detbench image build %s`" % (name, state, why, name))
    entry = read_lock(lock)[name]
    if image.id != entry["id"]:
        sys.stderr.write("detbench: note: image %s is %s here, the lock file says %s\n"
                         % (entry["image"], image.id, entry["id"]))
    return entry["image"], image.id


BUILT, STALE, MISSING = "built", "stale", "missing"


def freshness(client, name, lock=None, recipes_dir=RECIPES_DIR):
    """(state, why, image): BUILT when the lock's image is on this engine and a build now would give
    the same tag, STALE when the recipe's files or its base changed since, MISSING when it was never
    built here (or the engine lost it). `why` says what, in a few words; image is the engine's or None."""
    lock_entries = read_lock(lock)
    entry = lock_entries.get(name)
    if not entry:
        return MISSING, "no entry in %s" % (lock or lock_path()), None
    image = local_image(client, entry["image"])
    if image is None:
        return MISSING, "%s is not on this Docker engine" % entry["image"], None
    spec = recipe(name)
    args = dict(entry.get("build_args") or {})
    given = args.get("BASE_IMAGE")
    if spec.base_recipe and given:
        base_state, _, base_image = freshness(client, spec.base_recipe, lock, recipes_dir)
        if base_state != BUILT or base_image.id != given:
            return STALE, "its base image %s changed since" % spec.base_recipe, image
    elif spec.local_base and given:
        base = local_image(client, base_tag())
        if base is not None and base.id != given and lock_entries.get("base", {}).get("id") == base.id:
            return STALE, "the local base image changed since", image
    try:
        wheels = host_built_wheels(name, spec)
    except UserError:
        return BUILT, "", image          # its host wheels are gone: nothing to compare with
    if _tag(name, args, _recipe_files(Path(recipes_dir) / name), wheels) != entry["image"]:
        return STALE, "the recipe changed since", image
    return BUILT, "", image


def status(lock=None):
    """Rows (recipe, image, id in lock, state) for `detbench image list`: built, stale (what changed),
    missing, or "?" when no engine answers."""
    lock_entries = read_lock(lock)
    client = None
    try:
        client = engine.connect(timeout=10)
    except UserError:
        pass
    rows = []
    for name in ["base"] + sorted(RECIPES):
        entry = lock_entries.get(name, {})
        if client is None:
            state = "?"
        elif name == "base":
            image = local_image(client, entry["image"]) if entry else None
            state = BUILT if image is not None and image.id == entry["id"] else MISSING
        else:
            state, why, _ = freshness(client, name, lock)
            state = "%s (%s)" % (state, why) if state == STALE else state
        rows.append((name, entry.get("image", "-"), entry.get("id", "-"), state))
    return rows


def _digest(parts):
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()
