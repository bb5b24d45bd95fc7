"""Pinned virtual environments for the rival frameworks that run on this host.

`detbench env build FRAMEWORK` makes a fresh venv (never --system-site-packages) under
``${DETBENCH_CACHE:-~/.cache/detbench}/envs/<framework>-<hash>``, where the hash
covers the Python minor version and every pin, so a changed pin gives a new env and
an unchanged one is reused. An env counts as built only once its marker file, written
last and atomically, exists. Packages that must be compiled from source (mmcv: its
sdist with the C++ standard raised to C++20, which torch 2.14 headers need) are built
once into a wheel cached under ``.../wheels/<name>-<hash of its pins>/``.
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

from harness.errors import UserError
from harness.vocab.pins import EnvSpec, SourceBuild

MARKER = "detbench-env.json"
BUILDER_VERSION = 1          # bump when the way envs are built changes


def cache_root():
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "detbench"
    return Path(os.environ.get("DETBENCH_CACHE") or default)


def _pyver():
    return "%d.%d" % sys.version_info[:2]


def spec_hash(spec: EnvSpec, pyver: Optional[str] = None) -> str:
    doc = {"python": pyver or _pyver(), "pins": sorted(spec.pins.items()),
           "tools": sorted(spec.tools.items()), "builder": BUILDER_VERSION,
           "source": [[s.name, s.version, list(s.build_pins), s.cxx_std, list(s.env)]
                      for s in spec.source_builds]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]


def wheel_key(build: SourceBuild, pyver: Optional[str] = None) -> str:
    doc = [build.name, build.version, list(build.build_pins), build.cxx_std, list(build.env),
           pyver or _pyver(), BUILDER_VERSION]
    return "%s-%s-%s" % (build.name, build.version, hashlib.sha256(
        json.dumps(doc).encode()).hexdigest()[:12])


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


def _compile_wheel(build: SourceBuild, python: str, log, out: Path) -> Path:
    work = Path(tempfile.mkdtemp(prefix="detbench-%s-" % build.name))
    try:
        pip = [python, "-m", "pip"]
        _run(pip + ["download", "--no-deps", "--no-binary", build.name, "--no-build-isolation",
                    "-d", str(work / "sdist"), "%s==%s" % (build.name, build.version)], log)
        sdist = next((work / "sdist").glob("*.tar.gz"))
        with tarfile.open(sdist) as tar:
            tar.extractall(work / "src")
        src = next((work / "src").iterdir())
        changed = _raise_cxx_std(src / "setup.py", build.cxx_std)
        log.write("raised %d C++ standard flags to %s\n" % (changed, build.cxx_std))
        env = dict(os.environ, MAX_JOBS=str(os.cpu_count() or 1), **dict(build.env))
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


def build(spec: EnvSpec, log=None, force=False) -> Path:
    """Build (or reuse) the env of ``spec``; return its folder."""
    log = log or sys.stdout
    target = env_dir(spec)
    if is_built(spec) and not force:
        log.write("env %s is up to date: %s\n" % (spec.framework, target))
        return target
    tmp = target.with_name(target.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "venv", str(tmp)], log)
    py = str(tmp / "bin" / "python")
    pin_args = ["%s==%s" % kv for kv in sorted(spec.pins.items())]
    tool_args = ["%s==%s" % kv for kv in sorted(spec.tools.items())]
    _run([py, "-m", "pip", "install", "--quiet"] + tool_args + pin_args, log)
    for sb in spec.source_builds:
        wheel = build_wheel(sb, py, log)
        _run([py, "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)], log)
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
    tmp_marker = target / (MARKER + ".tmp")
    tmp_marker.write_text(json.dumps(marker, indent=1, sort_keys=True))
    os.replace(tmp_marker, target / MARKER)
    return target


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
