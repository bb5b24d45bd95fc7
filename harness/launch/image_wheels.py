"""The wheels a build installs, gathered on the host.

A recipe with a ``requirements.txt`` (every line ``name==version``) gets its wheels downloaded
on the host, with the host's own pip settings, into a cache keyed by the pins; pins whose
index offers only an sdist are built into pure-Python wheels here; and a framework whose pinned
env compiles a package on this host (mmdetection: mmcv) has that wheel, from
``detbench env build``'s cache, served with the others. `wheel_server.py` serves the folder.
"""
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.errors import UserError
from harness.launch.envs import wheel_key
from harness.vocab.sources import cache_root
from harness.launch.image_base import BASE_PLATFORMS, BASE_PYTHON
from harness.launch.image_lock import digest

PIN = re.compile(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.+\-]+")


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def host_built_wheels(recipe, framework):
    """The wheels `detbench env build` compiled on this host for `framework`'s pinned env, for the
    image's CPython, when `recipe` serves them ([] otherwise); UserError saying how to make one that
    is not there."""
    if not recipe.host_wheels:
        return []
    wheels = []
    for build in framework.env.source_builds:
        folder = cache_root() / "wheels" / wheel_key(build, BASE_PYTHON)
        found = sorted(folder.glob("*.whl")) if folder.is_dir() else []
        if not found:
            raise UserError("image %s installs the %s %s wheel compiled on this host, which is not in %s: "
                            "run `detbench env build %s` first (with CPython %s)"
                            % (recipe.name, build.name, build.version, folder, framework.name, BASE_PYTHON))
        wheels.append(found[0])
    return wheels


@contextlib.contextmanager
def with_host_wheels(downloaded, wheels):
    """A temporary folder linking the downloaded wheels and the host-compiled ones, to serve."""
    with tempfile.TemporaryDirectory(prefix="detbench-wheels-") as tmp:
        for path in list(Path(downloaded).glob("*.whl")) + list(wheels):
            os.symlink(path, os.path.join(tmp, path.name))
        yield Path(tmp)


def fetch_wheels(requirements, python, out, build_here=(), skip=()):
    """Download the pinned wheels on the host, once (cached by the pins), building those of
    `build_here` from their sdists; return their folder. Pins named in `skip` (wheels compiled
    on the host by `detbench env build`) are left out."""
    pins = [l.strip() for l in requirements.read_text(encoding="utf-8").splitlines()
            if l.strip() and not l.strip().startswith("#")]
    bad = [p for p in pins if not PIN.fullmatch(p)]
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
    cache = cache_root() / "wheels" / digest(key)[:16]
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
            _build_wheel(pin, requirements, cache)
        marker.write_text("\n".join(pins) + "\n")
    return cache


def _build_wheel(pin, requirements, cache):
    """The pure-Python wheel of `pin`, built here from its sdist, copied into `cache`."""
    with tempfile.TemporaryDirectory(prefix="detbench-wheel-") as tmp:
        _pip([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-binary", pin.split("==")[0],
              "--wheel-dir", tmp, pin], requirements, "wheel")
        built = sorted(Path(tmp).glob("*.whl"))
        if len(built) != 1 or not built[0].name.endswith("-py3-none-any.whl"):
            raise UserError("%s: %s did not build one pure-Python wheel (%s); it cannot be built "
                            "on the host for the image" % (requirements, pin,
                                                          ", ".join(b.name for b in built) or "none"))
        shutil.copy2(built[0], cache / built[0].name)


def _pip(argv, requirements, what):
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True)
    if proc.returncode != 0:
        said = [l for l in proc.stdout.splitlines() if "ERROR" in l] or proc.stdout.splitlines()[-1:]
        raise UserError("%s: pip %s failed: %s" % (requirements, what, said[0] if said else proc.returncode))
