"""The local base image, made without a registry: debootstrap, then ``docker import``.

Recipes that take ``ARG BASE_IMAGE`` and say `local_base` build from it unless told
otherwise (``--base-image`` or ``--build-arg BASE_IMAGE=...``). Its root filesystem is
cached as a tarball under the detbench cache, so a machine that lost its images imports it
again in seconds.
"""
import os
import shutil
import subprocess
import sys
import tempfile

from harness.errors import UserError
from harness.launch import engine
from harness.vocab.sources import cache_root
from harness.launch.image_lock import REPOSITORY, digest, record

BASE_SUITE = "bookworm"
# python3 runs runner.py and the venvs; libgl1 and libglib2.0-0 are what opencv-python's wheel links
# against (mmcv and mmengine require opencv-python, not the headless build)
BASE_PACKAGES = ("python3", "python3-venv", "libgl1", "libglib2.0-0")
BASE_MIRROR = "http://deb.debian.org/debian"
BASE_PYTHON = "3.11"          # bookworm's python3: the CPython the served wheels are for
# manylinux tags a wheel may carry to install on bookworm (glibc 2.36), x86_64
BASE_PLATFORMS = tuple("manylinux_2_%d_x86_64" % v for v in range(36, 16, -1)) + ("manylinux2014_x86_64",)


def base_key(suite=BASE_SUITE, packages=BASE_PACKAGES):
    return digest(["debootstrap", "--variant=minbase", suite] + sorted(packages))[:12]


def base_tag():
    return "%sbase:%s-%s" % (REPOSITORY, BASE_SUITE, base_key())


def base_recipe():
    """The command the local base's root filesystem comes from."""
    return "debootstrap --variant=minbase --include=%s %s" % (",".join(BASE_PACKAGES), BASE_SUITE)


def make_base(mirror=BASE_MIRROR, out=sys.stdout, built=None):
    """Make (or reuse) the local base image; record it as "base" among the images built here and
    return its entry."""
    client = engine.connect()
    tag = base_tag()
    tarball = cache_root() / "images" / ("base-%s-%s.tar" % (BASE_SUITE, base_key()))
    image = engine.local_image(client, tag)
    if image is None:
        if not tarball.exists():
            _debootstrap(tarball, mirror, out)
        out.write("importing %s as %s\n" % (tarball.name, tag))
        repo, _, version = tag.partition(":")
        client.api.import_image_from_file(
            str(tarball), repository=repo, tag=version,
            changes=["ENV LANG=C.UTF-8", "LABEL %s.base=%s" % (engine.LABEL, base_key())])
        image = client.images.get(tag)
    entry = {"image": tag, "id": image.id, "recipe": base_recipe()}
    record("base", entry, built)
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
