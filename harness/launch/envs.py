"""Pinned virtual environments for the rival frameworks that run on this host.

`detbench env build FRAMEWORK` makes a fresh venv (never --system-site-packages) under
``${DETBENCH_CACHE:-~/.cache/detbench}/envs/<framework>-<hash>``, where the hash
covers the Python minor version and every pin, so a changed pin gives a new env and
an unchanged one is reused. An env counts as built only once its marker file, written
last and atomically, exists. Packages that must be compiled from source (mmcv: its
sdist with the C++ standard raised to C++20, which torch 2.14 headers need) are built
once into a wheel cached under ``.../wheels/<name>-<hash of its pins>/``. A package built from a
git commit (detectron2, which publishes no sdist) is compiled from a ``git archive`` of that commit:
the tarball the build's ``source_env`` variable names (or a git clone holding the commit, archived
here), checked to be that commit by the commit ID git writes into the archive's header, and kept
under ``.../sources/<name>-<commit>.tar`` so a later build needs neither again. torchvision's
training recipe, which its package does not ship, is kept the same way from the archive of its
release tag that ``DETBENCH_TORCHVISION_SOURCE`` names (`keep_references`).
"""
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Optional

from harness import atomic
from harness.errors import UserError
from harness.launch import installer
from harness.vocab.pins import EnvSpec, SourceBuild
from harness.vocab.sources import archive_commit, cache_root, cached_archive

MARKER = "detbench-env.json"
BUILDER_VERSION = 1          # bump when the way envs are built changes


def _pyver():
    return "%d.%d" % sys.version_info[:2]


def spec_hash(spec: EnvSpec, pyver: Optional[str] = None) -> str:
    doc = {"python": pyver or _pyver(), "pins": sorted(spec.pins.items()),
           "tools": sorted(spec.tools.items()), "builder": BUILDER_VERSION,
           "source": [[s.name, s.version, list(s.build_pins), s.cxx_std, list(s.env)] + _from_git(s)
                      for s in spec.source_builds]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]


def wheel_key(build: SourceBuild, pyver: Optional[str] = None) -> str:
    doc = [build.name, build.version, list(build.build_pins), build.cxx_std, list(build.env),
           pyver or _pyver(), BUILDER_VERSION] + _from_git(build)
    return "%s-%s-%s" % (build.name, build.version, hashlib.sha256(
        json.dumps(doc).encode()).hexdigest()[:12])


def _from_git(build: SourceBuild) -> list:
    """What a build from a git commit adds to the keys (nothing for an sdist build, whose keys
    stay as they were)."""
    return [["git", build.commit, list(build.unset_env)]] if build.commit else []


def env_dir(spec: EnvSpec) -> Path:
    return cache_root() / "envs" / ("%s-%s" % (spec.framework, spec_hash(spec)))


def env_python(spec: EnvSpec) -> Path:
    return env_dir(spec) / "bin" / "python"


def is_built(spec: EnvSpec) -> bool:
    return (env_dir(spec) / MARKER).is_file() and env_python(spec).exists()


def python_for(spec: EnvSpec, require: bool = True) -> str:
    """The env's python; UserError telling how to build it when it is missing."""
    if require and not is_built(spec):
        raise UserError("framework %s runs in its own pinned env, which is not built here: "
                        "run `detbench env build %s` first" % (spec.framework, spec.framework))
    return str(env_python(spec))


def _run(argv, log, env=None, cwd=None):
    log.write("+ %s\n" % " ".join(argv))
    log.flush()
    proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    if proc.returncode != 0:
        raise UserError("command failed (exit %d): %s; see %s" % (
            proc.returncode, " ".join(argv[:6]), getattr(log, "name", "the build log")))


def _install(python: str, args, log):
    """Install ``args`` into ``python``'s env (uv from the shared cache, or pip: installer.py)."""
    command, env = installer.install_command(python, list(args), cache_root())
    _run(command, log, env=env)


def _raise_cxx_std(setup_py: Path, std: str) -> int:
    """Rewrite every -std=c++14/-std=c++17 flag in a setup.py; return how many were changed."""
    text = setup_py.read_text()
    count = 0
    for old in ("-std=c++14", "-std=c++17"):
        count += text.count(old)
        text = text.replace(old, "-std=" + std)
    setup_py.write_text(text)
    return count


def build_wheel(build: SourceBuild, python: str, log) -> Path:
    """Return the cached wheel for ``build``, compiling it with ``python``'s env if missing.

    An exclusive lock on ``<key>.lock`` lets concurrent provisioning wait for one compile
    instead of starting a second one.
    """
    out = cache_root() / "wheels" / wheel_key(build)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(str(out) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = sorted(out.glob("*.whl")) if out.is_dir() else []
        if found:
            log.write("cached wheel: %s\n" % found[0])
            return found[0]
        log.write("compiling %s %s (cached as %s)\n" % (build.name, build.version, out))
        log.flush()
        return _compile_wheel(build, python, log, out)


NO_DEBUG_INFO = "-g0"


def _compile_wheel(build: SourceBuild, python: str, log, out: Path) -> Path:
    work = Path(tempfile.mkdtemp(prefix="detbench-%s-" % build.name))
    try:
        pip = [python, "-m", "pip"]
        if build.commit:
            src = _unpack(source_archive(build, log), work / "src")
        else:
            _run(pip + ["download", "--no-deps", "--no-binary", build.name, "--no-build-isolation",
                        "-d", str(work / "sdist"), "%s==%s" % (build.name, build.version)], log)
            src = _unpack(next((work / "sdist").glob("*.tar.gz")), work / "src")
        if build.cxx_std:
            changed = _raise_cxx_std(src / "setup.py", build.cxx_std)
            log.write("raised %d C++ standard flags to %s\n" % (changed, build.cxx_std))
        env = {k: v for k, v in os.environ.items() if k not in build.unset_env}
        env.update(MAX_JOBS=str(os.cpu_count() or 1), **dict(build.env))
        # Python's own build flags carry -g: every object would get debug information, which changes no
        # instruction of the built code and takes about half the compile time; -g0 after it turns it off
        env["CFLAGS"] = (env.get("CFLAGS", "") + " " + NO_DEBUG_INFO).strip()
        _run(pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "wheel"), str(src)],
             log, env=env)
        wheel = next((work / "wheel").glob("*.whl"))
        tmp_out = out.with_name(out.name + ".tmp-%d" % os.getpid())
        tmp_out.mkdir(parents=True, exist_ok=True)
        shutil.copy2(wheel, tmp_out / wheel.name)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp_out, out)
        return out / wheel.name
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _unpack(archive: Path, into: Path) -> Path:
    """Extract a source archive (no links out of it, no device files); the folder with setup.py."""
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:                                   # Python before 3.11.4: its members are checked here
            bad = [m.name for m in tar.getmembers()
                   if m.name.startswith("/") or ".." in Path(m.name).parts or not (m.isfile() or m.isdir()
                                                                                 or m.issym())]
            if bad:
                raise UserError("%s: refusing the archive member %s" % (archive, bad[0]))
            tar.extractall(into)
    if (into / "setup.py").is_file():           # `git archive` without a prefix
        return into
    inner = [p for p in into.iterdir() if p.is_dir()]
    if len(inner) == 1 and (inner[0] / "setup.py").is_file():
        return inner[0]
    raise UserError("%s: no setup.py at the top of the archive or of its one folder" % archive)


def source_missing(spec: EnvSpec) -> Optional[str]:
    """Why `spec` cannot be built on this host because a package built from a git commit has
    neither its wheel nor its archive in the cache and nothing names where its source is (the
    package index does not hold it); None when nothing is missing that way."""
    for b in spec.source_builds:
        if not b.commit:
            continue
        wheels = cache_root() / "wheels" / wheel_key(b)
        if wheels.is_dir() and any(wheels.glob("*.whl")):
            continue
        if cached_archive(b).is_file():
            continue
        if b.source_env and os.environ.get(b.source_env):
            continue
        return ("%s %s is built from a git archive of commit %s, which is not on this host and not on the "
                "package index: set %s to that archive or a clone holding it"
                % (b.name, b.version, b.commit, b.source_env or "the source variable"))
    return None


def source_archive(build: SourceBuild, log) -> Path:
    """The `git archive` of build.commit in the cache, taken there from the tarball or git clone
    that build.source_env names when it is not there yet; UserError saying what to give."""
    cached = cached_archive(build)
    if cached.is_file():
        log.write("cached source: %s\n" % cached)
        return cached
    given = os.environ.get(build.source_env, "") if build.source_env else ""
    if not given:
        raise UserError("%s is built from a git archive of commit %s, which is not in %s: set %s to that "
                        "archive (`git archive %s`, or GitHub's archive/%s.tar.gz) or to a git clone that "
                        "holds the commit" % (build.name, build.commit, cached.parent, build.source_env or
                                              "the source variable", build.commit, build.commit))
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(cached.name + ".tmp-%d" % os.getpid())
    source = Path(given)
    try:
        if source.is_dir():
            with open(tmp, "wb") as out:
                proc = subprocess.run(["git", "-C", str(source), "archive", "--format=tar", build.commit],
                                      stdout=out, stderr=subprocess.PIPE)
            if proc.returncode != 0:
                raise UserError("%s=%s: git archive %s failed: %s" % (
                    build.source_env, source, build.commit, proc.stderr.decode(errors="replace").strip()[:200]))
        elif source.is_file():
            shutil.copyfile(source, tmp)
        else:
            raise UserError("%s=%s: no such file or folder" % (build.source_env, source))
        found = archive_commit(tmp)
        if found != build.commit:
            raise UserError("%s=%s: the archive is of commit %s, not the pinned %s" % (
                build.source_env, source, found or "(none recorded)", build.commit))
        os.replace(tmp, cached)
    finally:
        if tmp.exists():
            tmp.unlink()
    log.write("source %s %s from %s, kept as %s\n" % (build.name, build.commit[:12], source, cached))
    return cached


def build(spec: EnvSpec, log=None, force=False) -> Path:
    """Build (or reuse) the env of ``spec``; return its folder."""
    log = log or sys.stdout
    target = env_dir(spec)
    if is_built(spec) and not force:
        log.write("env %s is up to date: %s\n" % (spec.framework, target))
        keep_references(spec, log)
        return target
    tmp = target.with_name(target.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "venv", str(tmp)], log)
    py = str(tmp / "bin" / "python")
    pin_args = ["%s==%s" % kv for kv in sorted(spec.pins.items())]
    tool_args = ["%s==%s" % kv for kv in sorted(spec.tools.items())]
    _install(py, tool_args + pin_args, log)
    for sb in spec.source_builds:
        wheel = build_wheel(sb, py, log)
        _install(py, ["--no-deps", str(wheel)], log)
    _run([py, "-m", "pip", "check"], log)
    freeze = subprocess.run([py, "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    _fix_shebangs(target, tmp, target)   # console scripts named the build folder
    marker = {"framework": spec.framework, "hash": spec_hash(spec), "python": _pyver(),
              "pins": spec.pins, "tools": spec.tools,
              "source_builds": [wheel_key(s) for s in spec.source_builds],
              "freeze": freeze.splitlines()}
    atomic.write_json(target / MARKER, marker, indent=1, sort_keys=True)
    keep_references(spec, log)
    return target


def keep_references(spec: EnvSpec, log) -> Optional[str]:
    """torchvision's recipe scripts (references/detection of the pinned tag): checked and kept under
    the cache's sources/ from the archive that harness.drivers.torchvision_reference.SOURCE_ENV names
    (its trials then run them; without them, detbench's replica). The folder, or None."""
    if spec.framework != "torchvision":
        return None
    from harness.drivers import torchvision_reference as reference

    given = os.environ.get(reference.SOURCE_ENV, "")
    if given:
        try:
            where = reference.install(given, str(cache_root()))
        except ValueError as exc:
            raise UserError("torchvision: %s=%s" % (reference.SOURCE_ENV, exc)) from None
        log.write("torchvision: references/detection of %s kept at %s: its trials run them\n" % (reference.TAG, where))
        return where
    found = reference.find(str(cache_root()))
    if found is None:
        log.write("torchvision: references/detection of %s is not here (set %s to its archive, %s): its trials "
                  "run detbench's replica\n" % (reference.TAG, reference.SOURCE_ENV, reference.URL))
        return None
    return found[0]


def _fix_shebangs(root: Path, old: Path, new: Path):
    """Point the console scripts moved from ``old`` to ``new`` at the new interpreter."""
    old_b, new_b = str(old).encode(), str(new).encode()
    for script in (root / "bin").iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        data = script.read_bytes()
        if data.startswith(b"#!") and old_b in data[:512]:
            script.write_bytes(data.replace(old_b, new_b))


def describe(spec: EnvSpec) -> str:
    state = "built" if is_built(spec) else "not built"
    return "%-24s %-9s %s" % (spec.framework, state, env_dir(spec))
