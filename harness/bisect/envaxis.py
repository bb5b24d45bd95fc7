"""The Python a bisect's trials run in.

A commit runs its own code (its worktree first on PYTHONPATH) in the running detbench's
environment when its pyproject.toml pins the same (or it has none); otherwise in the environment
its own `scripts/env.sh` makes, keyed by a hash of its pyproject.toml and cached under
`<cache>/bisect/venvs/`. An env axis (`--env-axis PACKAGE=V1,V2,...`) is an ordered list of
pinned environments built through `harness.launch.envs` (cached by their pins): the cell's
framework's own pinned env with PACKAGE's pin replaced, or, for a framework that runs in
detbench's environment, an env of that one pin.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import List, Optional, Tuple

from harness.errors import UserError
from harness.launch import envs
from harness.vocab.sources import cache_root
from harness.vocab.pins import EnvSpec

ROOT = Path(__file__).resolve().parents[2]    # this detbench's checkout (runner.py, pyproject.toml)
PACKAGE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]*$")


def revision_python(code_root: Path, label: str) -> str:
    """The python that runs commit `label`'s trials (its checkout at code_root)."""
    theirs, ours = Path(code_root) / "pyproject.toml", ROOT / "pyproject.toml"
    if not theirs.is_file() or (ours.is_file() and theirs.read_bytes() == ours.read_bytes()):
        return sys.executable
    script = Path(code_root) / "scripts" / "env.sh"
    if not script.is_file():
        raise UserError("revision %s pins other packages than this detbench and has no scripts/env.sh "
                        "to build its environment" % label)
    env = dict(os.environ, DETBENCH_CACHE=str(cache_root() / "bisect"))
    proc = subprocess.run(["bash", "-c", 'source scripts/env.sh >&2 && python -c "import sys; print(sys.executable)"'],
                          cwd=str(code_root), env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise UserError("revision %s: its Python environment could not be built: %s" % (label, last))
    return proc.stdout.strip().splitlines()[-1]


def parse_axis(text: str) -> Tuple[str, List[str]]:
    """'torch=2.12.0,2.13.0' -> ('torch', ['2.12.0', '2.13.0']); UserError naming what is wrong."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    versions = [v.strip() for v in rest.split(",")] if sep else []
    if not sep or not PACKAGE.match(name):
        raise UserError("--env-axis %r: give PACKAGE=V1,V2,... (a package name, then its versions "
                        "oldest first)" % text)
    bad = [v for v in versions if not VERSION.match(v)]
    if bad:
        raise UserError("--env-axis %s: %r is not a version" % (name, bad[0]))
    if len(versions) < 2:
        raise UserError("--env-axis %s: needs at least two versions, the good one first and the bad one last"
                        % name)
    if len(set(versions)) != len(versions):
        raise UserError("--env-axis %s: a version is listed twice" % name)
    return name, versions


@dataclass(frozen=True)
class AxisEnv:
    label: str            # "torch==2.13.0"
    spec: EnvSpec


def axis_envs(package: str, versions: List[str], base: Optional[EnvSpec]) -> List[AxisEnv]:
    out = []
    for v in versions:
        if base is not None:
            spec = replace(base, pins=dict(base.pins, **{package: v}))
        else:
            spec = EnvSpec(framework="bisect-%s" % package.lower(), pins={package: v})
        out.append(AxisEnv("%s==%s" % (package, v), spec))
    return out


def build(env: AxisEnv) -> str:
    """The env's python, built (or reused from the cache); UserError in one line naming the pin
    pip could not install, with nothing of the failed build left in the cache."""
    if envs.is_built(env.spec):
        return str(envs.env_python(env.spec))
    with tempfile.TemporaryFile("w+") as log:
        try:
            envs.build(env.spec, log=log)
        except UserError:
            log.seek(0)
            lines = [ln.strip() for ln in log.read().splitlines() if ln.strip()]
            errors = [ln for ln in lines if ln.startswith("ERROR:")]
            raise UserError("--env-axis %s: the environment could not be built: %s"
                            % (env.label, (errors or lines or ["pip failed"])[-1])) from None
        finally:
            target = envs.env_dir(env.spec)
            shutil.rmtree(target.with_name(target.name + ".building"), ignore_errors=True)
    return str(envs.env_python(env.spec))
