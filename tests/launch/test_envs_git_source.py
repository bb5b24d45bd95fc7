"""A package built from a git commit (detectron2): its source is a `git archive` of exactly that
commit, taken from a tarball or a clone the build's variable names, checked by the commit ID git
writes into the archive, kept in the cache, and its wheel keyed by the commit."""
import dataclasses
import io
import shutil
import subprocess
import tarfile

import pytest

from harness.errors import UserError
from harness.frameworks import FRAMEWORKS
from harness.launch import envs
from harness.vocab.pins import SourceBuild

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DETBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo)] + list(args), check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A clone with two commits of a tiny project; (folder, first commit, second commit)."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "t")
    (path / "setup.py").write_text("print('one')\n")
    git(path, "add", "setup.py")
    git(path, "commit", "-q", "-m", "one")
    first = git(path, "rev-parse", "HEAD")
    (path / "setup.py").write_text("print('two')\n")
    git(path, "commit", "-q", "-am", "two")
    return path, first, git(path, "rev-parse", "HEAD")


def build(commit, variable="TINY_SOURCE"):
    return SourceBuild(name="tiny", version="1.0", build_pins=(), cxx_std="", commit=commit, source_env=variable)


def test_a_clone_is_archived_at_the_pinned_commit_and_kept_in_the_cache(cache, repo, monkeypatch, tmp_path):
    path, first, _ = repo
    monkeypatch.setenv("TINY_SOURCE", str(path))
    archive = envs.source_archive(build(first), io.StringIO())
    assert archive == cache / "sources" / ("tiny-%s.tar" % first)
    assert envs.archive_commit(archive) == first
    src = envs._unpack(archive, tmp_path / "src")
    assert (src / "setup.py").read_text() == "print('one')\n"      # the pinned commit, not the clone's head
    monkeypatch.delenv("TINY_SOURCE")
    assert envs.source_archive(build(first), io.StringIO()) == archive     # no variable needed again


def test_a_tarball_of_another_commit_is_refused_naming_both(cache, repo, monkeypatch, tmp_path):
    path, first, second = repo
    tarball = tmp_path / "other.tar"
    tarball.write_bytes(subprocess.run(["git", "-C", str(path), "archive", "--format=tar", second],
                                       check=True, capture_output=True).stdout)
    monkeypatch.setenv("TINY_SOURCE", str(tarball))
    with pytest.raises(UserError, match="the archive is of commit %s, not the pinned %s" % (second, first)):
        envs.source_archive(build(first), io.StringIO())
    assert not (cache / "sources" / ("tiny-%s.tar" % first)).exists()


def test_a_tarball_without_a_commit_id_is_refused(cache, monkeypatch, tmp_path):
    plain = tmp_path / "plain.tar"
    with tarfile.open(plain, "w") as tar:
        tar.add(__file__, arcname="setup.py")
    monkeypatch.setenv("TINY_SOURCE", str(plain))
    with pytest.raises(UserError, match=r"the archive is of commit \(none recorded\)"):
        envs.source_archive(build("a" * 40), io.StringIO())


def test_without_a_source_the_build_says_which_variable_to_set(cache, monkeypatch):
    monkeypatch.delenv("TINY_SOURCE", raising=False)
    with pytest.raises(UserError, match="set TINY_SOURCE to that archive"):
        envs.source_archive(build("b" * 40), io.StringIO())


def test_an_archive_with_a_top_folder_unpacks_to_it(tmp_path):
    archive = tmp_path / "prefixed.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(__file__, arcname="proj-123/setup.py")
    assert envs._unpack(archive, tmp_path / "out") == tmp_path / "out" / "proj-123"


def test_the_wheel_key_follows_the_commit_and_an_sdist_builds_key_is_unchanged():
    d2 = FRAMEWORKS["detectron2"].env.source_builds[0]
    assert d2.commit == FRAMEWORKS["detectron2"].pins["detectron2"] and "FORCE_CUDA" in d2.unset_env
    other = dataclasses.replace(d2, commit="c" * 40)
    assert envs.wheel_key(d2) != envs.wheel_key(other) and envs.wheel_key(d2).startswith("detectron2-0.6-")
    # a build without a commit hashes exactly the fields it had before commits existed
    mmcv = FRAMEWORKS["mmdetection"].env.source_builds[0]
    assert envs._from_git(mmcv) == []


def test_a_commit_build_with_no_wheel_no_archive_and_no_source_named_is_said_missing(cache, monkeypatch, repo):
    folder, first, _ = repo
    build = SourceBuild("tiny", "1.0", (), commit=first, source_env="TINY_SOURCE")
    spec = dataclasses.replace(FRAMEWORKS["detectron2"].env, source_builds=(build,))
    monkeypatch.delenv("TINY_SOURCE", raising=False)
    assert "commit %s" % first in envs.source_missing(spec) and "TINY_SOURCE" in envs.source_missing(spec)
    monkeypatch.setenv("TINY_SOURCE", str(folder))
    assert envs.source_missing(spec) is None                 # named: the build can take it from there
    monkeypatch.delenv("TINY_SOURCE")
    archive = cache / "sources" / ("tiny-%s.tar" % first)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"")
    assert envs.source_missing(spec) is None                 # kept in the cache by an earlier build
    archive.unlink()
    wheels = cache / "wheels" / envs.wheel_key(build)
    wheels.mkdir(parents=True)
    (wheels / "tiny-1.0-py3-none-any.whl").write_bytes(b"")
    assert envs.source_missing(spec) is None                 # its wheel is cached: no source needed


def test_a_compiled_wheel_carries_no_debug_information(cache, tmp_path):
    """Python's build flags carry -g; the wheels compiled from source get -g0 after them (the same
    instructions, about half the compile time of mmcv)."""
    import sys
    import zipfile

    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here")
    src = tmp_path / "ext"
    src.mkdir()
    (src / "tiny.c").write_text('#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "tiny"};\n'
                                "PyMODINIT_FUNC PyInit_tiny(void) { return PyModule_Create(&m); }\n")
    (src / "setup.py").write_text("from setuptools import setup, Extension\n"
                                  "setup(name='tiny', version='1.0', ext_modules=[Extension('tiny', ['tiny.c'])])\n")
    archive = tmp_path / "tiny.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(src, arcname="tiny-1.0")
    commit = "0" * 40
    kept = cache / "sources" / ("tiny-%s.tar" % commit)
    kept.parent.mkdir(parents=True)
    shutil.copy(archive, kept)
    with open(tmp_path / "build.log", "w+") as log:
        wheel = envs._compile_wheel(build(commit), sys.executable, log, tmp_path / "out")
    with zipfile.ZipFile(wheel) as whl:
        [so] = [n for n in whl.namelist() if n.endswith(".so")]
        assert b".debug_info" not in whl.read(so), (tmp_path / "build.log").read_text()[-2000:]
