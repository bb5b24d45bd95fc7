"""How packages get into a Python environment: uv where it is installed, pip otherwise.

uv keeps one cache of unpacked wheels and hardlinks their files into each env, so a second env
holding torch's closure (5 GB of CUDA libraries) is filled in seconds where pip unpacks it again
for a minute or more; both byte-compile what they install. Both follow pip's own configuration
(``pip config list``: its files and the PIP_* variables): uv does not read it, so the indexes,
find-links, constraints, trusted hosts and certificate found there are handed to uv as options.
``DETBENCH_INSTALLER=pip`` makes every install use pip.

Standard library only: scripts/env.sh runs this file to fill detbench's own venv before any of
detbench's dependencies are installed:

    python harness/launch/installer.py --python VENV/bin/python --cache DIR -- -e '.[trainer,dev]'
"""
import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

# pip's sections that apply to `pip install`, lowest precedence first (the variables win)
SECTIONS = ("global", "install", ":env:")


def pip_config(python: str) -> Dict[str, str]:
    """pip's settings as `python -m pip config list` shows them, the winning value per option (read
    with this interpreter's pip where that env has none)."""
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    for reader in (python, sys.executable):
        proc = subprocess.run([reader, "-m", "pip", "config", "list"], capture_output=True, text=True, env=env)
        if proc.returncode == 0:
            return parse_pip_config(proc.stdout)
    return {}


def parse_pip_config(text: str) -> Dict[str, str]:
    """Lines such as ``global.index-url='https://...'``, later files and sections overriding."""
    found: Dict[Tuple[int, str], str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        section, dot, option = key.rpartition(".")
        if not sep or not dot or section not in SECTIONS:
            continue
        found[(SECTIONS.index(section), option.replace("_", "-"))] = value.strip().strip("'\"")
    settings: Dict[str, str] = {}
    for (_, option), value in sorted(found.items(), key=lambda kv: kv[0][0]):
        settings[option] = value
    return settings


def _usable(location: str) -> bool:
    """pip skips an index or find-links location on this disk that does not exist; uv fails on it."""
    path = location[len("file://"):] if location.startswith("file://") else location
    if "://" in path:
        return True
    return os.path.exists(path)


def uv_options(settings: Dict[str, str]) -> Tuple[List[str], Dict[str, str]]:
    """uv's command-line options and environment for pip's `settings`."""
    argv = ["--index-strategy", "unsafe-best-match"]   # pip takes the best version over all indexes
    env: Dict[str, str] = {}
    if settings.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        argv.append("--no-index")
    if settings.get("index-url") and _usable(settings["index-url"]):
        argv += ["--index-url", settings["index-url"]]
    for option, flag in (("extra-index-url", "--extra-index-url"), ("find-links", "--find-links")):
        for location in settings.get(option, "").split():
            if _usable(location):
                argv += [flag, location]
    for option in ("constraint", "constraints"):
        for path in settings.get(option, "").split():
            argv += ["--constraints", path]
    for host in settings.get("trusted-host", "").split():
        argv += ["--allow-insecure-host", host]
    if settings.get("cert"):
        env["SSL_CERT_FILE"] = settings["cert"]
    timeout = settings.get("timeout") or settings.get("default-timeout")
    if timeout:
        env["UV_HTTP_TIMEOUT"] = timeout
    return argv, env


def find_uv() -> Optional[str]:
    """uv beside this interpreter (detbench's venv), else on PATH; None where pip is asked for."""
    if os.environ.get("DETBENCH_INSTALLER", "").lower() == "pip":
        return None
    here = Path(sys.executable).parent / "uv"
    if here.is_file() and os.access(str(here), os.X_OK):
        return str(here)
    return shutil.which("uv")


def install_command(python: str, args: List[str], cache: Path) -> Tuple[List[str], Dict[str, str]]:
    """The command (and its environment) that installs `args` into `python`'s env, quietly."""
    env = dict(os.environ)
    uv = find_uv()
    if uv is None:
        return [python, "-m", "pip", "install", "--quiet"] + args, env
    options, extra = uv_options(pip_config(python))
    env.update(extra)
    env.setdefault("UV_CACHE_DIR", str(cache / "uv"))   # beside the envs: one filesystem, hardlinks
    # --compile-bytecode: as pip does; where PYTHONDONTWRITEBYTECODE is set, nothing else ever
    # writes the .pyc files and every process would compile torch's modules again on import
    return [uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", python] + options + args, env


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="installer.py", description=__doc__.splitlines()[0])
    p.add_argument("--python", required=True, help="the interpreter of the env to install into")
    p.add_argument("--cache", required=True, help="detbench's cache folder (uv's cache goes under it)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="what to install, after --")
    ns = p.parse_args(argv)
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    command, env = install_command(ns.python, args, Path(ns.cache))
    return subprocess.run(command, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
