"""What a pinned environment holds: exact package versions, packages built from their sdist,
build tools. `harness.launch.envs` builds and caches them; adapters declare theirs."""
from dataclasses import dataclass, field
from typing import Dict, Tuple

# runner.py's GPU telemetry imports pynvml in whatever environment a trial runs in: every trial
# environment and image pins it (and detbench itself depends on it), so no GPU figure is lost
# to a missing module; a trial that loses them anyway is flagged (gpu-telemetry-lost)
TELEMETRY = {"nvidia-ml-py": "13.615.71"}


@dataclass(frozen=True)
class SourceBuild:
    """A package installed from a wheel built here from its sdist, or, where it has a `commit`,
    from a git archive of that commit (a project that publishes no sdist of it)."""
    name: str
    version: str
    build_pins: Tuple[str, ...]        # what the build needs in the env first (e.g. torch)
    cxx_std: str = "c++20"             # "": the setup.py's own flags are left as they are
    env: Tuple[Tuple[str, str], ...] = ()
    # the full commit whose `git archive` is the source; "" for an sdist from the index
    commit: str = ""
    # the environment variable naming where that archive is (a tarball, or a git clone holding
    # the commit) when the cache has neither the wheel nor the archive yet
    source_env: str = ""
    unset_env: Tuple[str, ...] = ()    # variables taken out of the build's environment


@dataclass(frozen=True)
class EnvSpec:
    framework: str
    pins: Dict[str, str]                       # exact versions, installed from the index
    source_builds: Tuple[SourceBuild, ...] = ()
    tools: Dict[str, str] = field(default_factory=dict)   # build-time tools (setuptools, wheel)
